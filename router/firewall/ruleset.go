// Package firewall is the router's NAT and stateful packet filter: Build
// turns the site config into a Ruleset (pure, testable without a
// kernel), Apply programs it into nftables in one atomic batch and
// Counters reads the drop counters for the status page.
//
// Everything lives in one table of family inet, "ocfw". inet rather than
// ip because the input policy must cover IPv6 too: the kernel
// autoconfigures an IPv6 address on the WAN from an ISP's router
// advertisements, and with an ip-only table the router's SSH would be
// open on it. The router does not route IPv6, so IPv6 from the WAN is
// dropped like anything else not asked for. NAT chains in an inet table
// need Linux 5.2 or later.
//
// Apply touches only that table: it deletes and recreates it inside the
// same batch, so the kernel switches from the old ruleset to the new one
// at once, and another program's tables stay as they are.
package firewall

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/ocfw/ocfw/site"
)

// TableName is the nftables table the router owns (family inet).
const TableName = "ocfw"

// Names of the counters Build creates; the status page reads them with
// Counters. Each port forward adds one more, "dnat_PROTO_PORT", counting
// forwarded connections (a NAT chain sees only a connection's first
// packet).
const (
	CounterInputDrop   = "input_drop"
	CounterForwardDrop = "forward_drop"
	// CounterSpoofDrop counts packets that came in on the WAN from a
	// source address that cannot be there (the antispoof chain).
	CounterSpoofDrop = "spoof_drop"
)

// The UDP ports an IKEv2 tunnel's peer reaches the router on: IKE, and
// IKE and ESP in UDP behind a NAT (RFC 7296 2.23, RFC 3948).
const (
	IKEPort    = 500
	IKENATPort = 4500
)

// impossibleOnWAN are source networks no packet arriving on the WAN can
// honestly carry, whatever network the WAN is on: "this network"
// (0/8), loopback, IPv4 link-local, multicast, and the reserved 240/4,
// which holds the limited broadcast 255.255.255.255. RFC 1918 networks
// are not in it: the WAN is often a modem's 192.168.x or 10.x network.
// One that overlaps a static WAN's own network is left out, so that the
// WAN's neighbours are never dropped.
var impossibleOnWAN = []struct {
	net  netip.Prefix
	what string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\" (0/8)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved, and the broadcast 255.255.255.255"},
}

// ICMP echo requests from the WAN are answered at most this often (per
// second, after a burst of PingBurst): answering pings keeps the line
// diagnosable (the ISP's monitoring, a user's own ping from outside), and
// the limit keeps a ping flood from costing a 266 MHz CPU more than a few
// dozen replies a second. Requests over the limit are dropped and counted
// in input_drop.
const (
	PingRate  = 10
	PingBurst = 20
)

// Ruleset is one table: its named counters and chains, in order.
type Ruleset struct {
	Table    string
	Counters []string
	Chains   []Chain
}

// Chain is a base chain attached to a netfilter hook.
type Chain struct {
	Name     string
	Type     string // "filter" or "nat"
	Hook     string // "prerouting", "input", "forward" or "postrouting"
	Priority int    // -300 raw, -100 dstnat, 0 filter, 100 srcnat
	Policy   string // "accept" or "drop"
	Rules    []Rule
}

// Rule is a list of matches, all of which must hold, an optional rate
// limit and counter, and what to do. Matches are evaluated in the order of
// the fields.
type Rule struct {
	IIf, OIf string       // interface names; "" matches any
	IPv4     bool         // meta nfproto ipv4: needed before IPv4 header matches and NAT to an IPv4 address
	IPv6     bool         // meta nfproto ipv6
	SAddr    netip.Prefix // source network: IPv4 (needs IPv4) or IPv6 (needs IPv6)
	DAddr    netip.Prefix // destination network, as SAddr
	// DAddrID matches an IPv6 destination's interface identifier, its
	// low 64 bits (::10), whatever its prefix (nft's "ip6 daddr &
	// ::ffff:ffff:ffff:ffff == ::10"): a LAN host's address that
	// follows the delegated prefix without the rule changing. Needs
	// IPv6.
	DAddrID netip.Addr
	// HopLimit255 matches IPv6 packets with hop limit 255: neighbour
	// discovery that was sent on this link, never routed (RFC 4861).
	HopLimit255 bool
	// FibNoRoute matches packets whose source the router would not route
	// back out of the interface they came in on (nft's "fib saddr . iif
	// oif missing"): IPv6's reverse-path filter, which has no sysctl.
	FibNoRoute bool
	// IPsec matches packets the kernel decrypted (meta ipsec exists):
	// inbound ESP in tunnel mode comes back in on the WAN with the inner
	// addresses, and this is what tells it from the same addresses sent
	// in the clear.
	IPsec bool
	// NoIPsec matches packets that did not come out of an SA (meta
	// ipsec missing): a tunnel's addresses in the clear.
	NoIPsec bool
	// NoIPsecRoute matches packets whose route is not through an SA (rt
	// ipsec missing: no out policy with its SAs for them): what would
	// leave a tunnel's LAN in the clear while the tunnel is down.
	NoIPsecRoute bool
	Proto        string   // "tcp", "udp", "icmp" (needs IPv4), "icmpv6" (needs IPv6) or "esp"
	SPort        uint16   // transport source port (tcp or udp)
	DPort        uint16   // transport destination port (tcp or udp)
	ICMPType     string   // "echo-request" (icmp); for icmpv6 one of icmpv6Types' names
	CTState      []string // any of "established", "related", "new", "invalid"
	CTStatus     string   // "dnat": the connection was destination-NATed
	Limit        *Limit
	Counter      string // named counter of the table
	Verdict      string // "accept", "drop", "dnat", "masquerade" or VerdictPolicyFail
	DNAT         netip.AddrPort
	Comment      string // why the rule is there; stored in the kernel as nft shows comments
}

// VerdictPolicyFail rejects an IPv6 packet with ICMPv6 destination
// unreachable code 5, "source address failed ingress/egress policy"
// (RFC 4443 3.1); the rule needs IPv6 and not IPv4. The kernel rate
// limits the errors (net.ipv6.icmp.ratelimit).
const VerdictPolicyFail = "reject with icmpv6 policy-fail"

// Limit is a packet rate limit: the rule matches while packets come no
// faster than Rate a second (after a Burst), or with Over, once they come
// faster.
type Limit struct {
	Rate  uint64
	Burst uint32
	Over  bool
}

// Counter is one named counter's value since the last Apply.
type Counter struct {
	Name    string
	Packets uint64
	Bytes   uint64
}

// Build turns the site config into the router's ruleset. wan and lan are
// the kernel interface names (the LAN's bridge when it has more than one
// port); lanAddr is the router's LAN address with its prefix. It does its
// own checks rather than trust that the site was validated: a ruleset
// that cannot be built is better than one that opens something.
//
// Policy. antispoof (prerouting, before conntrack): packets on the WAN
// from the LAN's addresses, the router's static WAN address, a tunnel's
// remote network in the clear, or an impossible source (impossibleOnWAN)
// are counted in spoof_drop and dropped; they never create connection
// state. input: loopback and everything from the LAN's addresses on the
// LAN interface (DHCP, DNS, SSH for management) are accepted, so are
// DHCP requests from clients without an address, replies on the WAN to
// the router's own connections, DHCP replies for the WAN's client, pings
// up to PingRate and SSH from the WAN when site.Firewall.WANServices has
// "ssh"; the rest is counted in input_drop and dropped. forward: replies
// from the WAN to the LAN, LAN to WAN from LAN addresses and the port
// forwards' connections are accepted; the rest is counted in
// forward_drop and dropped. Every accept names the interfaces, so that
// connection state alone never lets a packet in on the wrong side.
// prerouting: one DNAT rule per port forward on the WAN. postrouting:
// masquerade out of the WAN, so the LAN leaves with the WAN address,
// static or from DHCP.
//
// Each tunnel adds: ESP on the WAN from its peer's address only (input),
// and for an IKEv2 tunnel UDP to ports 500 and 4500 from that address;
// its remote subnet in the clear dropped (antispoof); decrypted packets
// from its remote subnet to its local subnet (forward); and no masquerade
// for packets to its remote subnet (postrouting), which must enter the
// tunnel with their LAN source addresses for its policy to match. LAN to
// remote subnet needs no rule of its own: routing sends it out of the
// WAN, where the LAN's rule accepts it and XFRM encrypts it. A tunnel's
// rules take its addresses' family: an IPv6 peer's ESP and IKE are
// matched as IPv6; a tunnel with IPv6 networks gets its LAN-to-remote
// accept (v6 has no LAN rule here, and AddIPv6 keeps ULAs in the site),
// an accept of its decrypted packets in antispoof ahead of AddIPv6's
// ULA and reverse-path drops, and no NAT rule (v6 is never translated).
func Build(cfg *site.Site, wan, lan string, lanAddr netip.Prefix) (*Ruleset, error) {
	s := &spec{cfg: cfg, wan: wan, lan: lan, lanAddr: lanAddr}
	for _, step := range []func() error{s.checkInterfaces, s.tunnelAddrs, s.wanServices, s.portForwards} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	rs := &Ruleset{Table: TableName, Counters: []string{CounterInputDrop, CounterForwardDrop, CounterSpoofDrop}}
	spoof, input, forward := s.antispoofChain(), s.inputChain(), s.forwardChain()
	if s.noLAN {
		rs.Chains = []Chain{spoof, input, forward}
		return rs, rs.check()
	}
	pre, post := s.natChains(rs)
	rs.Chains = []Chain{spoof, pre, input, forward, post}
	return rs, rs.check()
}

// spec is Build's input as its steps check and derive it, in order:
// interfaces, tunnels, WAN services, port forwards; then the chains.
type spec struct {
	cfg      *site.Site
	wan, lan string
	lanAddr  netip.Prefix
	// No LAN (lan "" and no address): a one-port box that is a host on
	// someone's network. Only the input chain matters then: nothing is
	// forwarded or translated.
	noLAN      bool
	lanNet     netip.Prefix
	tunnels    []site.TunnelAddrs
	sshFromWAN bool
	sshPort    int
	fwds       []fwd
}

type fwd struct {
	proto   string
	port    uint16
	to      netip.AddrPort
	counter string
}

var established = []string{"established", "related"}

func (s *spec) checkInterfaces() error {
	if err := checkIfName("WAN", s.wan); err != nil {
		return err
	}
	s.noLAN = s.lan == "" && !s.lanAddr.IsValid()
	if s.noLAN && len(s.cfg.Firewall.PortForwards) > 0 {
		return errors.New("firewall: port forwards need a LAN")
	}
	if !s.noLAN {
		if err := checkIfName("LAN", s.lan); err != nil {
			return err
		}
		if s.wan == s.lan {
			return fmt.Errorf("firewall: WAN and LAN are the same interface %q", s.wan)
		}
		if !s.lanAddr.IsValid() || !s.lanAddr.Addr().Is4() || s.lanAddr.Bits() > 30 {
			return fmt.Errorf("firewall: LAN address %v: want the router's IPv4 address with a prefix of /30 or shorter", s.lanAddr)
		}
	}
	s.lanNet = s.lanAddr.Masked()
	return nil
}

func (s *spec) tunnelAddrs() error {
	if s.noLAN && len(s.cfg.Tunnels) > 0 {
		return errors.New("firewall: tunnels need a LAN")
	}
	for _, t := range s.cfg.Tunnels {
		a, err := s.cfg.TunnelAddrs(t)
		if err != nil {
			return fmt.Errorf("firewall: %w", err)
		}
		if a.LocalSubnet.Addr().Is4() != a.RemoteSubnet.Addr().Is4() || a.Local.Is4() != a.Peer.Is4() {
			return fmt.Errorf("firewall: tunnel %s: %s to %s between %s and %s: want one family for the networks and one for the ends", t.Name, a.LocalSubnet, a.RemoteSubnet, a.Local, a.Peer)
		}
		// The LAN's IPv6 prefixes are not known here (a delegated one
		// comes later); the site's checks hold a v6 tunnel's.
		if a.LocalSubnet.Addr().Is4() && (!s.lanNet.Contains(a.LocalSubnet.Addr()) || a.LocalSubnet.Bits() < s.lanNet.Bits() || a.RemoteSubnet.Overlaps(s.lanNet)) {
			return fmt.Errorf("firewall: tunnel %s: %s to %s: want a local subnet inside the LAN %s and a remote one outside it", t.Name, a.LocalSubnet, a.RemoteSubnet, s.lanNet)
		}
		if a.RemoteSubnet.Contains(a.Peer) {
			// The remote subnet in the clear is dropped on the WAN:
			// that would drop the tunnel's own ESP.
			return fmt.Errorf("firewall: tunnel %s: the remote subnet %s holds the peer %s", t.Name, a.RemoteSubnet, a.Peer)
		}
		s.tunnels = append(s.tunnels, a)
	}
	return nil
}

func (s *spec) wanServices() error {
	for _, w := range s.cfg.Firewall.WANServices {
		if w != "ssh" {
			return fmt.Errorf("firewall: WAN service %q: only ssh can be opened on the WAN", w)
		}
		s.sshFromWAN = true
	}
	s.sshPort = s.cfg.SSH.SSHPort()
	if s.sshPort < 1 || s.sshPort > 65535 {
		return fmt.Errorf("firewall: SSH port %d out of range", s.sshPort)
	}
	return nil
}

func (s *spec) portForwards() error {
	seen := map[string]bool{}
	for i, f := range s.cfg.Firewall.PortForwards {
		if f.Proto != "tcp" && f.Proto != "udp" {
			return fmt.Errorf("firewall: port forward %d: protocol %q: want tcp or udp", i, f.Proto)
		}
		if f.Port < 1 || f.Port > 65535 {
			return fmt.Errorf("firewall: port forward %d: port %d out of range", i, f.Port)
		}
		toPort := f.ToPort
		if toPort == 0 {
			toPort = f.Port
		}
		if toPort < 1 || toPort > 65535 {
			return fmt.Errorf("firewall: port forward %d: to_port %d out of range", i, toPort)
		}
		if f.To == "" && f.IPv6Host != "" {
			// Over IPv6 only (AddIPv6's rule); the port is still
			// this forward's on the WAN.
			seen[f.Proto+"_"+strconv.Itoa(f.Port)] = true
			continue
		}
		to, err := netip.ParseAddr(f.To)
		if err != nil || !site.IsHostAddr(s.lanAddr, to) || to == s.lanAddr.Addr() {
			return fmt.Errorf("firewall: port forward %d: %q: want an address of a host in the LAN %s", i, f.To, s.lanNet)
		}
		key := f.Proto + "_" + strconv.Itoa(f.Port)
		if seen[key] {
			return fmt.Errorf("firewall: port forward %d: %s %d is forwarded twice", i, f.Proto, f.Port)
		}
		if f.Proto == "tcp" && f.Port == s.sshPort && s.sshFromWAN {
			// The DNAT would win over the router's own SSH, silently.
			return fmt.Errorf("firewall: port forward %d: tcp %d is the router's SSH port, open on the WAN too", i, f.Port)
		}
		seen[key] = true
		s.fwds = append(s.fwds, fwd{f.Proto, uint16(f.Port), netip.AddrPortFrom(to, uint16(toPort)), "dnat_" + key})
	}
	return nil
}

// antispoofChain drops what comes in on the WAN from a source that
// cannot be there. It hooks prerouting at raw priority, before conntrack
// and NAT, so a forged packet neither matches nor creates a connection:
// the "established" rules below can then trust a connection's addresses.
// Reverse-path filtering (ReversePathSysctls) drops the same and more
// in the kernel; these rules are the part that is counted, and they hold
// whatever the sysctls say.
func (s *spec) antispoofChain() Chain {
	ch := Chain{Name: "antispoof", Type: "filter", Hook: "prerouting", Priority: -300, Policy: "accept"}
	drop := func(src netip.Prefix, noIPsec bool, why string) {
		ch.Rules = append(ch.Rules, family(Rule{IIf: s.wan, SAddr: src, NoIPsec: noIPsec,
			Counter: CounterSpoofDrop, Verdict: "drop", Comment: why}, src.Addr()))
	}
	if !s.noLAN {
		drop(s.lanNet, false, "the LAN's addresses (the router's own among them) never come from the WAN")
	}
	var wanNet netip.Prefix
	if p, err := s.cfg.WAN.Address.Prefix(); !s.cfg.WAN.Address.IsDHCP() && err == nil && p.Addr().Is4() {
		// A DHCP address is not known here; the kernel drops a packet
		// from one of its own addresses as a martian in any case.
		wanNet = p.Masked()
		drop(netip.PrefixFrom(p.Addr(), 32), false, "the router's own WAN address")
	}
	for i, a := range s.tunnels {
		name := s.cfg.Tunnels[i].Name
		if a.RemoteSubnet.Addr().Is6() {
			// The v6 checks that AddIPv6 appends (a ULA source is
			// impossible on the WAN, the reverse-path fib) would
			// drop a ULA network's decrypted packets: they came out
			// of the tunnel's SA, which the kernel's policy check
			// pins to its networks.
			ch.Rules = append(ch.Rules, Rule{IIf: s.wan, IPv6: true, SAddr: a.RemoteSubnet, IPsec: true, Verdict: "accept",
				Comment: fmt.Sprintf("tunnel %s: decrypted from its remote network, before the v6 source checks", name)})
		}
		// Decrypted packets carry a secpath; the same addresses
		// without one were sent in the clear by someone on the WAN side.
		drop(a.RemoteSubnet, true, fmt.Sprintf("tunnel %s: its remote network only comes out of its SA, never in the clear", name))
	}
	for _, b := range impossibleOnWAN {
		if wanNet.IsValid() && b.net.Overlaps(wanNet) {
			continue
		}
		drop(b.net, false, "impossible source: "+b.what)
	}
	return ch
}

func (s *spec) inputChain() Chain {
	wan := s.wan
	input := Chain{Name: "input", Type: "filter", Hook: "input", Priority: 0, Policy: "drop"}
	ping := Rule{IIf: wan, IPv4: true, Proto: "icmp", ICMPType: "echo-request"}
	pingFlood := ping
	pingFlood.Limit = &Limit{Rate: PingRate, Burst: PingBurst, Over: true}
	pingFlood.Counter, pingFlood.Verdict = CounterInputDrop, "drop"
	// Conntrack sees a stream of echo requests with one ID as one
	// established connection, so the limit must come before the
	// established rule or a flood would pass it.
	pingFlood.Comment = "pings over the rate limit, before conntrack calls them established"
	ping.Verdict, ping.Comment = "accept", "answer pings (under the limit above)"
	input.Rules = append(input.Rules,
		Rule{IIf: "lo", Verdict: "accept", Comment: "the router's own services talk over loopback"},
		pingFlood,
		Rule{IIf: wan, CTState: established, Verdict: "accept", Comment: "replies on the WAN to the router's own connections, and their ICMP errors"},
	)
	if !s.noLAN {
		// From the LAN's addresses only: a LAN host posing as another
		// network's address would get the router's answer sent out of
		// the WAN, from the router's LAN address (conntrack's reply is
		// not masqueraded). Replies to the router's own connections
		// into the LAN come from LAN addresses too.
		input.Rules = append(input.Rules,
			Rule{IIf: s.lan, IPv4: true, SAddr: s.lanNet, Verdict: "accept", Comment: "the LAN manages the router and uses its DHCP and DNS, from the LAN's addresses only"},
			Rule{IIf: s.lan, IPv4: true, SAddr: netip.MustParsePrefix("0.0.0.0/32"), Proto: "udp", SPort: 68, DPort: 67, Verdict: "accept", Comment: "DHCP from LAN clients that have no address yet"},
			Rule{IIf: s.lan, IPv6: true, Verdict: "accept", Comment: "IPv6 from the LAN: its services on the LAN side (link-local, ULA, delegated addresses); forwarding is the forward chain's"},
		)
	}
	input.Rules = append(input.Rules,
		Rule{IIf: wan, Proto: "udp", SPort: 67, DPort: 68, Verdict: "accept", Comment: "DHCP replies to the WAN's client"},
		ping,
	)
	if s.sshFromWAN {
		input.Rules = append(input.Rules,
			Rule{IIf: wan, Proto: "tcp", DPort: uint16(s.sshPort), Verdict: "accept", Comment: "SSH from the WAN (wan_services: ssh)"})
	}
	for i, a := range s.tunnels {
		t := s.cfg.Tunnels[i]
		peer := netip.PrefixFrom(a.Peer, a.Peer.BitLen())
		input.Rules = append(input.Rules, family(Rule{
			IIf: wan, SAddr: peer, Proto: "esp", Verdict: "accept",
			Comment: fmt.Sprintf("tunnel %s: ESP from its peer only", t.Name)}, a.Peer))
		if t.Mode() == site.KeyingIKEv2 {
			// IKE on 500, and on 4500 IKE and ESP in UDP once either
			// end finds a NAT (RFC 3948): from the peer's address only,
			// from any port, since a NAT picks the source port.
			input.Rules = append(input.Rules,
				family(Rule{IIf: wan, SAddr: peer, Proto: "udp", DPort: IKEPort, Verdict: "accept",
					Comment: fmt.Sprintf("tunnel %s: IKE from its peer only", t.Name)}, a.Peer),
				family(Rule{IIf: wan, SAddr: peer, Proto: "udp", DPort: IKENATPort, Verdict: "accept",
					Comment: fmt.Sprintf("tunnel %s: IKE and ESP in UDP (NAT traversal) from its peer only", t.Name)}, a.Peer))
		}
	}
	input.Rules = append(input.Rules,
		Rule{Counter: CounterInputDrop, Verdict: "drop", Comment: "everything else, counted"})
	return input
}

func (s *spec) forwardChain() Chain {
	wan, lan := s.wan, s.lan
	forward := Chain{Name: "forward", Type: "filter", Hook: "forward", Priority: 0, Policy: "drop"}
	if s.noLAN {
		forward.Rules = append(forward.Rules,
			Rule{Counter: CounterForwardDrop, Verdict: "drop", Comment: "no LAN: nothing is forwarded"})
		return forward
	}
	// Replies from the WAN side only into the LAN: a WAN packet whose
	// addresses match a connection but that the antispoof chain let
	// through cannot be turned back out of the WAN. The LAN's side of
	// every connection, replies included, passes the next rule: it
	// comes from LAN addresses.
	forward.Rules = append(forward.Rules,
		Rule{IIf: wan, OIf: lan, CTState: established, Verdict: "accept", Comment: "replies from the WAN to the LAN's connections, the port forwards' further packets, and related ICMP errors"},
	)
	// A tunnel's remote network leaves only through its SAs: while the
	// tunnel is down (the boot before IKE, a dead peer, a wrong PSK)
	// there is no out policy, and the LAN's packets to it would be
	// routed out of the WAN in the clear, with the LAN's addresses.
	for i, a := range s.tunnels {
		forward.Rules = append(forward.Rules, family(Rule{
			IIf: lan, OIf: wan, DAddr: a.RemoteSubnet, NoIPsecRoute: true, Counter: CounterForwardDrop, Verdict: "drop",
			Comment: fmt.Sprintf("tunnel %s: to the peer's network only through its SA, never in the clear while the tunnel is down", s.cfg.Tunnels[i].Name)}, a.RemoteSubnet.Addr()))
		if a.RemoteSubnet.Addr().Is6() {
			// v4's LAN rule below passes the tunnel's packets; v6 has
			// none here, and AddIPv6's keep a ULA inside the site,
			// so the tunnel's own networks are accepted first.
			forward.Rules = append(forward.Rules, Rule{
				IIf: lan, OIf: wan, IPv6: true, SAddr: a.LocalSubnet, DAddr: a.RemoteSubnet, Verdict: "accept",
				Comment: fmt.Sprintf("tunnel %s: from our network to the peer's, into its SA", s.cfg.Tunnels[i].Name)})
		}
	}
	forward.Rules = append(forward.Rules,
		Rule{IIf: lan, OIf: wan, IPv4: true, SAddr: s.lanNet, Verdict: "accept", Comment: "the LAN goes out, from its own addresses only"},
		Rule{IIf: wan, OIf: lan, CTStatus: "dnat", Verdict: "accept", Comment: "connections to the port forwards"},
	)
	// Decrypted packets arrive on the WAN with the inner addresses.
	// The address match alone would also pass the same addresses sent
	// in the clear by anyone on the WAN side; the kernel's forward
	// policy check drops those too once the installer has put in an
	// XFRM fwd policy, but the firewall does not count on it: meta
	// ipsec exists (the secpath) says the packet came out of an SA.
	// google/nftables v0.3.0 has no xfrm expression (nft's "ipsec in
	// reqid"), so the SA itself is not named; the addresses and the
	// kernel's policy check pin it to the tunnel.
	for i, a := range s.tunnels {
		forward.Rules = append(forward.Rules, family(Rule{
			IIf: wan, OIf: lan, SAddr: a.RemoteSubnet, DAddr: a.LocalSubnet, IPsec: true, Verdict: "accept",
			Comment: fmt.Sprintf("tunnel %s: decrypted, from the peer's network to ours", s.cfg.Tunnels[i].Name)}, a.RemoteSubnet.Addr()))
	}
	forward.Rules = append(forward.Rules,
		Rule{Counter: CounterForwardDrop, Verdict: "drop", Comment: "everything else, counted"})
	return forward
}

// natChains are prerouting (the port forwards, whose counters join rs's)
// and postrouting (masquerade, except into a tunnel).
func (s *spec) natChains(rs *Ruleset) (pre, post Chain) {
	wan := s.wan
	pre = Chain{Name: "prerouting", Type: "nat", Hook: "prerouting", Priority: -100, Policy: "accept"}
	for _, f := range s.fwds {
		rs.Counters = append(rs.Counters, f.counter)
		pre.Rules = append(pre.Rules, Rule{
			IIf: wan, IPv4: true, Proto: f.proto, DPort: f.port, Counter: f.counter,
			Verdict: "dnat", DNAT: f.to,
			Comment: fmt.Sprintf("port forward %s %d", f.proto, f.port),
		})
	}

	post = Chain{Name: "postrouting", Type: "nat", Hook: "postrouting", Priority: 100, Policy: "accept"}
	for i, a := range s.tunnels {
		if a.RemoteSubnet.Addr().Is6() {
			continue // IPv6 is never masqueraded
		}
		// Accept in a NAT chain: no translation for the connection.
		post.Rules = append(post.Rules, Rule{
			OIf: wan, IPv4: true, DAddr: a.RemoteSubnet, Verdict: "accept",
			Comment: fmt.Sprintf("tunnel %s: into the tunnel with LAN addresses, not masqueraded", s.cfg.Tunnels[i].Name)})
	}
	post.Rules = append(post.Rules,
		Rule{OIf: wan, IPv4: true, Verdict: "masquerade", Comment: "the LAN leaves with the WAN address"})
	return pre, post
}

// family sets r's family match to a's: a tunnel's rules are IPv4 or
// IPv6 by its addresses.
func family(r Rule, a netip.Addr) Rule {
	if a.Is4() {
		r.IPv4 = true
	} else {
		r.IPv6 = true
	}
	return r
}

// checkIfName accepts what the kernel accepts as an interface name.
func checkIfName(what, name string) error {
	if name == "" || len(name) > 15 || strings.ContainsAny(name, "/ \t\n\x00") {
		return fmt.Errorf("firewall: %s interface %q: want a kernel interface name of 1-15 characters", what, name)
	}
	return nil
}

// check makes sure every rule says something the translation to
// nftables can express, so Apply fails before it sends anything.
func (rs *Ruleset) check() error {
	counters := map[string]bool{}
	for _, c := range rs.Counters {
		counters[c] = true
	}
	for _, ch := range rs.Chains {
		if _, ok := hooks[ch.Hook]; !ok {
			return fmt.Errorf("firewall: chain %s: unknown hook %q", ch.Name, ch.Hook)
		}
		if ch.Type != "filter" && ch.Type != "nat" {
			return fmt.Errorf("firewall: chain %s: unknown type %q", ch.Name, ch.Type)
		}
		if ch.Policy != "accept" && ch.Policy != "drop" {
			return fmt.Errorf("firewall: chain %s: unknown policy %q", ch.Name, ch.Policy)
		}
		for i, r := range ch.Rules {
			if (r.IPsec || r.NoIPsec) && ch.Hook == "postrouting" {
				// The kernel refuses the secpath key there.
				return fmt.Errorf("firewall: chain %s rule %d: meta ipsec is only known on prerouting, input and forward", ch.Name, i)
			}
			if _, err := r.exprs(); err != nil {
				return fmt.Errorf("firewall: chain %s rule %d: %w", ch.Name, i, err)
			}
			if r.Counter != "" && !counters[r.Counter] {
				return fmt.Errorf("firewall: chain %s rule %d: counter %q is not in the table", ch.Name, i, r.Counter)
			}
		}
	}
	return nil
}

// String renders the ruleset in nft's syntax, as `nft list table inet
// ocfw` would show it: what the golden tests compare, and what the status
// page can print.
func (rs *Ruleset) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", rs.Table)
	names := append([]string(nil), rs.Counters...)
	sort.Strings(names)
	for _, c := range names {
		fmt.Fprintf(&b, "\tcounter %s {\n\t}\n\n", c)
	}
	for i, ch := range rs.Chains {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "\tchain %s {\n", ch.Name)
		fmt.Fprintf(&b, "\t\ttype %s hook %s priority %s; policy %s;\n", ch.Type, ch.Hook, priorityName(ch.Priority), ch.Policy)
		for _, r := range ch.Rules {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func priorityName(p int) string {
	switch p {
	case -300:
		return "raw"
	case -100:
		return "dstnat"
	case 0:
		return "filter"
	case 100:
		return "srcnat"
	}
	return strconv.Itoa(p)
}

// prefixString writes a prefix as nft lists it: a /32 as the bare
// address.
func prefixString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// String renders one rule in nft's syntax, matches in evaluation order.
func (r Rule) String() string {
	var w []string
	if r.IIf != "" {
		w = append(w, "iifname", strconv.Quote(r.IIf))
	}
	if r.OIf != "" {
		w = append(w, "oifname", strconv.Quote(r.OIf))
	}
	if r.IPv4 {
		w = append(w, "meta nfproto ipv4")
	}
	if r.IPv6 {
		w = append(w, "meta nfproto ipv6")
	}
	ip := "ip"
	if r.IPv6 {
		ip = "ip6"
	}
	if r.SAddr.IsValid() {
		w = append(w, ip+" saddr", prefixString(r.SAddr))
	}
	if r.DAddr.IsValid() {
		w = append(w, ip+" daddr", prefixString(r.DAddr))
	}
	if r.DAddrID.IsValid() {
		w = append(w, "ip6 daddr & ::ffff:ffff:ffff:ffff ==", r.DAddrID.String())
	}
	if r.HopLimit255 {
		w = append(w, "ip6 hoplimit 255")
	}
	if r.FibNoRoute {
		w = append(w, "fib saddr . iif oif missing")
	}
	if r.IPsec {
		w = append(w, "meta ipsec exists")
	}
	if r.NoIPsec {
		w = append(w, "meta ipsec missing")
	}
	if r.NoIPsecRoute {
		w = append(w, "rt ipsec missing")
	}
	switch {
	case r.Proto == "icmp" && r.ICMPType != "":
		w = append(w, "icmp type", r.ICMPType)
	case r.Proto == "icmpv6" && r.ICMPType != "":
		w = append(w, "icmpv6 type", r.ICMPType)
	case r.Proto != "" && r.SPort == 0 && r.DPort == 0:
		w = append(w, "meta l4proto", r.Proto)
	}
	if r.SPort != 0 {
		w = append(w, r.Proto, "sport", strconv.Itoa(int(r.SPort)))
	}
	if r.DPort != 0 {
		w = append(w, r.Proto, "dport", strconv.Itoa(int(r.DPort)))
	}
	if len(r.CTState) > 0 {
		w = append(w, "ct state", strings.Join(r.CTState, ","))
	}
	if r.CTStatus != "" {
		w = append(w, "ct status", r.CTStatus)
	}
	if r.Limit != nil {
		over := ""
		if r.Limit.Over {
			over = "over "
		}
		w = append(w, fmt.Sprintf("limit rate %s%d/second burst %d packets", over, r.Limit.Rate, r.Limit.Burst))
	}
	if r.Counter != "" {
		w = append(w, "counter name", strconv.Quote(r.Counter))
	}
	switch r.Verdict {
	case "dnat":
		w = append(w, "dnat ip to", r.DNAT.String())
	default:
		w = append(w, r.Verdict)
	}
	if r.Comment != "" {
		w = append(w, "comment", strconv.Quote(r.Comment))
	}
	return strings.Join(w, " ")
}

// Sysctl is one kernel setting: its path under /proc/sys and its value.
type Sysctl struct{ Path, Value string }

// ReversePathSysctls turn on strict reverse-path filtering (RFC 3704) for
// IPv4, for all interfaces and by name for ifaces (the WAN and LAN): a
// packet is dropped when the route back to its source does not leave
// through the interface it came in on. The kernel uses the larger of
// "all" and the interface's own value, so "all" alone would do; the
// interfaces' own values say it where one looks, and "default" covers
// interfaces made later (a LAN bridge).
//
// Strict (1), not loose (2), on every interface, the WAN included:
// loose only asks for some route back, and the WAN's default route is a
// route back for every address. IPsec needs no exception: the kernel
// skips the check for packets with a secpath (fib_validate_source,
// "Ignore rp_filter for packets protected by IPsec"), so the decrypted
// packets from a tunnel's remote subnet pass; the ESP itself comes from
// the peer, which the WAN routes to. DHCP is not affected either: the
// WAN's client reads raw frames, and the LAN's clients ask from 0.0.0.0,
// which the check leaves alone.
func ReversePathSysctls(ifaces ...string) []Sysctl {
	out := []Sysctl{{"net/ipv4/conf/all/rp_filter", "1"}, {"net/ipv4/conf/default/rp_filter", "1"}}
	for _, i := range ifaces {
		if i != "" {
			out = append(out, Sysctl{"net/ipv4/conf/" + i + "/rp_filter", "1"})
		}
	}
	return out
}
