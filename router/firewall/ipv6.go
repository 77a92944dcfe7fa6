package firewall

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/ocfw/ocfw/site"
)

// IPv6 is what the v6 rules need to know: the LAN's prefixes (each /64
// it numbers: of the delegated prefix, the ULA), and which of them are
// global (allowed out of the WAN; a ULA never is).
type IPv6 struct {
	LANPrefixes []netip.Prefix
	// Forwards are the port forwards opened over IPv6 (ipv6_host, from
	// site.Site.IPv6Forwards): each lets new connections from the WAN
	// to a LAN host's interface identifier, proto and port in. They do
	// not depend on LANPrefixes.
	Forwards []site.IPv6Forward
	// Invalidated are /64s the LAN is being told are deprecated (a
	// delegation that changed or ended): a LAN source in one is answered
	// with ICMPv6 destination unreachable, code 5 (source address failed
	// ingress/egress policy, RFC 7084 L-14) instead of a silent drop, so
	// the host's application gives up at once. The router routes them
	// into the LAN meanwhile, or the error would leave by the WAN.
	Invalidated []netip.Prefix
}

// Fwd6Counter is the named counter of the v6 port forward for proto and
// port ("fwd6_tcp_443"): the connections it let in, as dnat_PROTO_PORT
// counts the v4 forward's.
func Fwd6Counter(proto string, port int) string {
	return "fwd6_" + proto + "_" + strconv.Itoa(port)
}

// ula is RFC 4193's fc00::/7; linkLocal6 fe80::/10; unspecified6 ::.
var (
	ula6         = netip.MustParsePrefix("fc00::/7")
	linkLocal6   = netip.MustParsePrefix("fe80::/10")
	unspecified6 = netip.MustParsePrefix("::/128")
)

// impossibleOnWAN6 are IPv6 sources no packet arriving on the WAN can
// honestly carry (RFC 6890's special-purpose space that is never a
// source from the internet): the unspecified and loopback addresses,
// IPv4-mapped addresses, multicast, and unique local addresses, which
// belong to some site, not to the internet. Link-local is not among
// them: the ISP's router speaks from its link-local address (router
// advertisements, DHCPv6 replies).
var impossibleOnWAN6 = []struct {
	net  netip.Prefix
	what string
}{
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{ula6, "unique local (RFC 4193): a site's own, never the internet's"},
}

// RFC 4890 section 4.4: the ICMPv6 errors every IPv6 node must get
// (packet-too-big above all: without it path MTU discovery breaks),
// whether or not conntrack relates them to a connection.
var icmpv6Errors = []string{"destination-unreachable", "packet-too-big", "time-exceeded", "parameter-problem"}

// AddIPv6 puts the v6 policy into rs, a ruleset Build made with the same
// wan and lan: each chain's rules go before its last (the counted
// catch-all drop), so the v4 rules stay as they are. The policy mirrors
// the v4 one:
//
// antispoof: on the WAN, sources from the LAN's prefixes or impossible
// (impossibleOnWAN6) are dropped and counted, and so is any source the
// router would not route back out of the WAN (fib): the reverse-path
// filter IPv6 has no sysctl for.
//
// input: neighbour discovery (router and neighbour advertisements,
// neighbour solicitations) from the link only (hop limit 255), ICMPv6
// errors, pings under the same limit as v4's, and DHCPv6 replies from
// the ISP's link-local address to the client's port. Established
// replies pass the existing rule; all else is dropped as before.
//
// forward: ICMPv6 errors both ways; from the LAN out of the WAN only its
// global prefixes (a ULA or link-local source, or a ULA destination,
// never leaves: dropped and counted); the WAN's replies pass the
// existing established rule. The port forwards (v.Forwards) are
// accepts, not translations (no NAT66): from the WAN into the LAN, a new
// connection to a host's interface identifier, proto and port, counted
// in fwd6_PROTO_PORT; a ULA destination from the WAN is dropped and
// counted before them.
func AddIPv6(rs *Ruleset, wan, lan string, v IPv6) error {
	if err := checkIfName("WAN", wan); err != nil {
		return err
	}
	for _, p := range v.LANPrefixes {
		if !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() < 1 {
			return fmt.Errorf("firewall: LAN prefix %v: want an IPv6 prefix", p)
		}
		if linkLocal6.Overlaps(p) || p.Addr().IsMulticast() {
			return fmt.Errorf("firewall: LAN prefix %v: link-local or multicast", p)
		}
	}
	for _, p := range v.Invalidated {
		if !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() < 1 || linkLocal6.Overlaps(p) || p.Addr().IsMulticast() {
			return fmt.Errorf("firewall: invalidated prefix %v: want a unicast IPv6 prefix", p)
		}
		if slices.ContainsFunc(v.LANPrefixes, p.Overlaps) {
			return fmt.Errorf("firewall: invalidated prefix %v overlaps a LAN prefix", p)
		}
	}
	if len(v.LANPrefixes)+len(v.Invalidated) > 0 && lan == "" {
		return errors.New("firewall: LAN prefixes without a LAN interface")
	}
	if len(v.Forwards) > 0 && lan == "" {
		return errors.New("firewall: v6 port forwards without a LAN interface")
	}
	seen := map[string]bool{}
	for _, f := range v.Forwards {
		// Checked again here, as Build checks the v4 forwards: a
		// ruleset that cannot be built is better than one that opens
		// something else.
		what := fmt.Sprintf("firewall: v6 port forward %d (%s)", f.Index, f.Host)
		if f.Proto != "tcp" && f.Proto != "udp" {
			return fmt.Errorf("%s: protocol %q: want tcp or udp", what, f.Proto)
		}
		if f.Port < 1 || f.Port > 65535 {
			return fmt.Errorf("%s: port %d out of range", what, f.Port)
		}
		if _, err := site.ParseIPv6ID(f.ID.String()); err != nil || f.ID.Zone() != "" {
			return fmt.Errorf("%s: interface identifier %v: want only the low 64 bits, above ::1", what, f.ID)
		}
		c := Fwd6Counter(f.Proto, f.Port)
		if seen[c] {
			return fmt.Errorf("%s: %s %d is forwarded twice", what, f.Proto, f.Port)
		}
		seen[c] = true
	}
	chains := map[string]*Chain{}
	for i := range rs.Chains {
		chains[rs.Chains[i].Name] = &rs.Chains[i]
	}

	var spoof []Rule
	drop := func(src netip.Prefix, why string) {
		spoof = append(spoof, Rule{IIf: wan, IPv6: true, SAddr: src, Counter: CounterSpoofDrop, Verdict: "drop", Comment: why})
	}
	for _, p := range v.LANPrefixes {
		drop(p.Masked(), "the LAN's prefix never comes from the WAN")
	}
	for _, b := range impossibleOnWAN6 {
		drop(b.net, "impossible source: "+b.what)
	}
	spoof = append(spoof, Rule{IIf: wan, IPv6: true, FibNoRoute: true, Counter: CounterSpoofDrop, Verdict: "drop",
		Comment: "reverse-path filter: no route back to the source out of the WAN"})

	// A ULA destination from the WAN: the router would answer from its
	// ULA address out of the WAN (its own packets pass no forward rule).
	input := []Rule{{IIf: wan, IPv6: true, DAddr: ula6, Counter: CounterInputDrop, Verdict: "drop",
		Comment: "no ULA destination from the WAN: the site's own addresses, never the internet's"}}
	for _, t := range []string{"nd-router-advert", "nd-neighbor-solicit", "nd-neighbor-advert"} {
		input = append(input, Rule{IIf: wan, IPv6: true, HopLimit255: true, Proto: "icmpv6", ICMPType: t, Verdict: "accept",
			Comment: "neighbour discovery on the WAN's link (RFC 4890 4.4.1): hop limit 255, never routed"})
	}
	for _, t := range icmpv6Errors {
		input = append(input, Rule{IIf: wan, IPv6: true, Proto: "icmpv6", ICMPType: t, Verdict: "accept",
			Comment: "ICMPv6 errors (RFC 4890 4.4.1): path MTU discovery and failures must get through"})
	}
	ping := Rule{IIf: wan, IPv6: true, Proto: "icmpv6", ICMPType: "echo-request"}
	flood := ping
	flood.Limit = &Limit{Rate: PingRate, Burst: PingBurst, Over: true}
	flood.Counter, flood.Verdict, flood.Comment = CounterInputDrop, "drop", "v6 pings over the rate limit"
	ping.Verdict, ping.Comment = "accept", "answer v6 pings (under the limit above)"
	input = append(input, flood, ping,
		Rule{IIf: wan, IPv6: true, SAddr: linkLocal6, Proto: "udp", SPort: 547, DPort: 546, Verdict: "accept",
			Comment: "DHCPv6 replies to the WAN's client, from the ISP's link-local address"})

	// The LAN's v6 into the router from the LAN's own sources only, as
	// v4's: Build accepts any, and AddIPv6, knowing the prefixes, narrows
	// it. Otherwise a LAN host posing as a WAN address gets the router's
	// answer sent out of the WAN.
	if lan != "" {
		ch := chains["input"]
		if ch == nil {
			return errors.New("firewall: the ruleset has no input chain")
		}
		lanIn := []Rule{
			{IIf: lan, IPv6: true, SAddr: linkLocal6, Verdict: "accept",
				Comment: "IPv6 from the LAN's link-local addresses: neighbour discovery, router solicitations, DHCPv6, the router's link-local services"},
			{IIf: lan, IPv6: true, SAddr: unspecified6, Verdict: "accept",
				Comment: "from the unspecified address: duplicate address detection and MLD before a host has an address"},
		}
		for _, p := range v.LANPrefixes {
			lanIn = append(lanIn, Rule{IIf: lan, IPv6: true, SAddr: p.Masked(), Verdict: "accept",
				Comment: "the LAN uses the router's services over v6, from the LAN's prefixes only"})
		}
		for _, p := range v.Invalidated {
			// Routed into the LAN while deprecated, so answers stay
			// there; the hosts' neighbour advertisements for their old
			// addresses must come in for the ICMPv6 errors to go out.
			lanIn = append(lanIn, Rule{IIf: lan, IPv6: true, SAddr: p.Masked(), Verdict: "accept",
				Comment: "a prefix the LAN is told is deprecated: its hosts still hold addresses in it"})
		}
		lanIn = append(lanIn, Rule{IIf: lan, IPv6: true, Counter: CounterSpoofDrop, Verdict: "drop",
			Comment: "IPv6 from the LAN with a source outside its prefixes: spoofed, never answered"})
		i := slices.IndexFunc(ch.Rules, func(r Rule) bool {
			return r.IIf == lan && r.IPv6 && !r.IPv4 && !r.SAddr.IsValid() && r.Proto == "" && r.Verdict == "accept"
		})
		if i < 0 {
			return errors.New("firewall: the input chain has no rule for the LAN's IPv6 to narrow")
		}
		ch.Rules = slices.Replace(ch.Rules, i, i+1, lanIn...)
	}

	var forward []Rule
	if lan != "" {
		for _, t := range icmpv6Errors {
			forward = append(forward,
				Rule{IIf: wan, OIf: lan, IPv6: true, Proto: "icmpv6", ICMPType: t, Verdict: "accept", Comment: "ICMPv6 errors into the LAN (RFC 4890 4.3.1)"},
				Rule{IIf: lan, OIf: wan, IPv6: true, Proto: "icmpv6", ICMPType: t, Verdict: "accept", Comment: "ICMPv6 errors out of the LAN (RFC 4890 4.3.1)"})
		}
		for _, f := range []struct {
			src, dst netip.Prefix
			why      string
		}{
			{ula6, netip.Prefix{}, "a ULA source never leaves the site"},
			{linkLocal6, netip.Prefix{}, "a link-local source never leaves its link"},
			{netip.Prefix{}, ula6, "no ULA destination out of the WAN"},
		} {
			forward = append(forward, Rule{IIf: lan, OIf: wan, IPv6: true, SAddr: f.src, DAddr: f.dst,
				Counter: CounterForwardDrop, Verdict: "drop", Comment: f.why})
		}
		for _, p := range v.LANPrefixes {
			if ula6.Overlaps(p) {
				continue
			}
			forward = append(forward, Rule{IIf: lan, OIf: wan, IPv6: true, SAddr: p.Masked(), Verdict: "accept",
				Comment: "the LAN goes out over v6, from its global prefix only"})
		}
		for _, p := range v.Invalidated {
			forward = append(forward, Rule{IIf: lan, OIf: wan, IPv6: true, SAddr: p.Masked(), Counter: CounterForwardDrop, Verdict: VerdictPolicyFail,
				Comment: "a prefix the LAN was told is deprecated: refused with ICMPv6 code 5 (RFC 7084 L-14)"})
		}
		if len(v.Forwards) > 0 {
			// The forwards below match the host by its interface
			// identifier in any prefix routed into the LAN; the ULA's
			// /64 is one, and it is the site's own, never the WAN's
			// to reach.
			forward = append(forward, Rule{IIf: wan, OIf: lan, IPv6: true, DAddr: ula6, Counter: CounterForwardDrop, Verdict: "drop",
				Comment: "no ULA destination from the WAN: the v6 port forwards open the global prefix only"})
		}
		for _, f := range v.Forwards {
			// No NAT66: the host's own address and port, accepted. By
			// interface identifier, not by address: the rule stays the
			// same when the ISP delegates another prefix (the
			// oifname and the route into the LAN say which prefixes
			// can match). New connections only, so the counter counts
			// connections, as dnat_PROTO_PORT does; their further
			// packets pass the established rule.
			c := Fwd6Counter(f.Proto, f.Port)
			rs.Counters = append(rs.Counters, c)
			forward = append(forward, Rule{IIf: wan, OIf: lan, IPv6: true, DAddrID: f.ID, Proto: f.Proto, DPort: uint16(f.Port),
				CTState: []string{"new"}, Counter: c, Verdict: "accept",
				Comment: fmt.Sprintf("v6 port forward %s %d to %s (ipv6.hosts id %s; no NAT66)", f.Proto, f.Port, f.Host, f.ID)})
		}
	}

	for _, add := range []struct {
		chain string
		rules []Rule
	}{{"antispoof", spoof}, {"input", input}, {"forward", forward}} {
		ch := chains[add.chain]
		if ch == nil {
			return fmt.Errorf("firewall: the ruleset has no %s chain", add.chain)
		}
		if len(add.rules) == 0 {
			continue
		}
		if add.chain == "antispoof" {
			// Its policy is accept: the drops go at the end.
			ch.Rules = append(ch.Rules, add.rules...)
			continue
		}
		last := len(ch.Rules) - 1
		if last < 0 || ch.Rules[last].Verdict != "drop" || ch.Rules[last].Counter == "" {
			return fmt.Errorf("firewall: chain %s does not end in its counted drop", add.chain)
		}
		rules := append(append(append([]Rule(nil), ch.Rules[:last]...), add.rules...), ch.Rules[last])
		ch.Rules = rules
	}
	return rs.check()
}
