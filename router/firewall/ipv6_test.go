package firewall

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/site"
)

var (
	v6Global = netip.MustParsePrefix("2001:db8:1:10::/64")
	v6ULA    = netip.MustParsePrefix("fd12:3456:789a:10::/64")
)

func buildIPv6(t *testing.T) *Ruleset {
	t.Helper()
	rs, err := Build(baseSite(), "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := AddIPv6(rs, "eth0", "br0", IPv6{LANPrefixes: []netip.Prefix{v6Global, v6ULA}}); err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestIPv6FirewallGolden: the v6 policy added to the closed site, in
// nft's syntax (testdata/closed-ipv6.nft): a change shows as a diff.
func TestIPv6FirewallGolden(t *testing.T) {
	got := buildIPv6(t).String()
	file := filepath.Join("testdata", "closed-ipv6.nft")
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("ruleset differs from %s (run with -update if intended):\n%s", file, got)
	}
}

// TestIPv6FirewallPolicy: properties of the v6 rules apart from the
// golden file, so that an -update cannot bless a hole.
func TestIPv6FirewallPolicy(t *testing.T) {
	rs := buildIPv6(t)
	v4, _ := Build(baseSite(), "eth0", "br0", lanAddr)
	chain := func(rs *Ruleset, name string) Chain {
		for _, c := range rs.Chains {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no chain %s", name)
		return Chain{}
	}
	for _, name := range []string{"input", "forward"} {
		c, c4 := chain(rs, name), chain(v4, name)
		// The v4 rules are all still there, in order, and the chain
		// still ends in its counted drop. (Build's one v6 rule, the
		// LAN's v6 into the router, is narrowed by AddIPv6: below.)
		c4.Rules = slices.DeleteFunc(c4.Rules, func(r Rule) bool { return r.IPv6 && !r.IPv4 })
		j := 0
		for _, r := range c.Rules {
			if j < len(c4.Rules) && r.String() == c4.Rules[j].String() {
				j++
			}
		}
		if j != len(c4.Rules) {
			t.Errorf("%s: the v4 rules changed", name)
		}
		if last := c.Rules[len(c.Rules)-1]; last.Verdict != "drop" || last.Counter == "" || last.IPv6 {
			t.Errorf("%s ends in %s", name, last)
		}
		for _, r := range c.Rules {
			if r.IPv6 && r.Verdict == "accept" && r.IIf == "eth0" && r.OIf != "br0" && r.Proto != "icmpv6" && r.Proto != "udp" {
				t.Errorf("%s: v6 accepted from the WAN beyond ICMPv6 and DHCPv6: %s", name, r)
			}
			if r.IPv6 && r.Proto == "icmpv6" && strings.HasPrefix(r.ICMPType, "nd-") && !r.HopLimit255 {
				t.Errorf("%s: neighbour discovery without the hop limit check: %s", name, r)
			}
			if r.IPv6 && r.Verdict == "accept" && r.SAddr.IsValid() && r.OIf == "eth0" && ula6.Overlaps(r.SAddr) {
				t.Errorf("%s: a ULA source accepted out of the WAN: %s", name, r)
			}
		}
	}
	// The LAN's v6 into the router: from link-local, unspecified and
	// the LAN's prefixes only, the rest dropped and counted before any
	// later rule could take it.
	lanDrop := false
	for _, r := range chain(rs, "input").Rules {
		if r.IIf != "br0" || !r.IPv6 || r.IPv4 || lanDrop {
			continue
		}
		switch {
		case r.Verdict == "drop" && !r.SAddr.IsValid() && r.Counter == CounterSpoofDrop:
			lanDrop = true
		case r.Verdict == "accept" && r.SAddr.IsValid() && (r.SAddr == linkLocal6 || r.SAddr == unspecified6 || (r.SAddr == v6Global || r.SAddr == v6ULA)):
		default:
			t.Errorf("input: the LAN's v6 rule %s", r)
		}
	}
	if !lanDrop {
		t.Error("input: no counted drop for the LAN's v6 from other sources")
	}
	// A ULA destination from the WAN is dropped before any v6 accept
	// from the WAN (the established rule aside, which v4 has first).
	for _, r := range chain(rs, "input").Rules {
		if r.IIf != "eth0" || !r.IPv6 || r.IPv4 {
			continue
		}
		if r.Verdict != "drop" || r.DAddr != ula6 {
			t.Errorf("input: %s comes before the WAN's ULA-destination drop", r)
		}
		break
	}
	s := strings.Join(ruleStrings(chain(rs, "antispoof")), "\n")
	for _, want := range []string{
		`iifname "eth0" meta nfproto ipv6 ip6 saddr 2001:db8:1:10::/64 counter name "spoof_drop" drop`,
		`ip6 saddr fc00::/7 counter name "spoof_drop" drop`,
		`fib saddr . iif oif missing counter name "spoof_drop" drop`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("antispoof lacks %s:\n%s", want, s)
		}
	}
	fwd := strings.Join(ruleStrings(chain(rs, "forward")), "\n")
	// The ULA drops come before the global prefix's accept.
	if strings.Index(fwd, "ip6 saddr fc00::/7") > strings.Index(fwd, "ip6 saddr 2001:db8:1:10::/64") || strings.Contains(fwd, "ip6 saddr fd12:3456:789a:10::/64") {
		t.Errorf("forward:\n%s", fwd)
	}
	// Every rule translates to nftables expressions.
	if err := rs.check(); err != nil {
		t.Error(err)
	}
}

func ruleStrings(c Chain) []string {
	var out []string
	for _, r := range c.Rules {
		out = append(out, r.String())
	}
	return out
}

// TestIPv6FirewallRefuses: bad input to AddIPv6 and v6 matches the
// translation cannot express.
func TestIPv6FirewallRefuses(t *testing.T) {
	rs, _ := Build(baseSite(), "eth0", "br0", lanAddr)
	for _, tc := range []struct {
		v    IPv6
		lan  string
		want string
	}{
		{IPv6{LANPrefixes: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}}, "br0", "want an IPv6 prefix"},
		{IPv6{LANPrefixes: []netip.Prefix{netip.MustParsePrefix("fe80::/64")}}, "br0", "link-local"},
		{IPv6{LANPrefixes: []netip.Prefix{v6Global}}, "", "without a LAN"},
	} {
		if err := AddIPv6(rs, "eth0", tc.lan, tc.v); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.v, err, tc.want)
		}
	}
	for _, r := range []Rule{
		{IPv4: true, SAddr: v6Global, Verdict: "drop"},
		{IPv6: true, SAddr: netip.MustParsePrefix("10.0.0.0/8"), Verdict: "drop"},
		{IPv4: true, HopLimit255: true, Verdict: "drop"},
		{IPv4: true, Proto: "icmpv6", Verdict: "drop"},
		{IPv6: true, Proto: "icmpv6", ICMPType: "nd-redirect", Verdict: "drop"},
	} {
		if _, err := r.exprs(); err == nil {
			t.Errorf("%s translated", r)
		}
	}
}

// fwd6Site is the closed site with two port forwards, one of them also
// opened over IPv6 to the v6 host nas (::10).
func fwd6Site() *site.Site {
	s := baseSite()
	s.IPv6.Hosts = []site.IPv6Host{{Name: "nas", ID: "::10"}, {Name: "tv", ID: "::a:b:c:d"}}
	s.Firewall.PortForwards = []site.PortForward{
		{Proto: "tcp", Port: 443, To: "192.168.1.10", IPv6Host: "nas"},
		{Proto: "tcp", Port: 8080, To: "192.168.1.11", ToPort: 80},
		{Proto: "udp", Port: 51820, To: "192.168.1.12", IPv6Host: "tv"},
	}
	return s
}

func buildFwd6(t *testing.T, s *site.Site, prefixes ...netip.Prefix) *Ruleset {
	t.Helper()
	rs, err := Build(s, "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	fwds, errs := s.IPv6Forwards()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := AddIPv6(rs, "eth0", "br0", IPv6{LANPrefixes: prefixes, Forwards: fwds}); err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestIPv6PortForwardGolden: the v6 port forwards in nft's syntax
// (testdata/forwards-ipv6.nft).
func TestIPv6PortForwardGolden(t *testing.T) {
	got := buildFwd6(t, fwd6Site(), v6Global, v6ULA).String()
	file := filepath.Join("testdata", "forwards-ipv6.nft")
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("ruleset differs from %s (run with -update if intended):\n%s", file, got)
	}
}

// TestIPv6PortForwardRules: what each site's v6 forwards become, apart
// from the golden file: the accept rules (by interface identifier, WAN
// into the LAN, new connections, their own counter), the ULA drop before
// them, both before the chain's counted drop; the same rules whatever
// the LAN's prefixes (none yet, the first delegation, another one).
func TestIPv6PortForwardRules(t *testing.T) {
	other := netip.MustParsePrefix("2001:db8:2:20::/64")
	for _, tc := range []struct {
		name     string
		site     func() *site.Site
		prefixes []netip.Prefix
		want     []string // the v6 forward rules, in order, after the ULA drop
	}{
		{"no forwards", baseSite, []netip.Prefix{v6Global, v6ULA}, nil},
		{"v4 forward only", func() *site.Site {
			s := fwd6Site()
			for i := range s.Firewall.PortForwards {
				s.Firewall.PortForwards[i].IPv6Host = ""
			}
			return s
		}, []netip.Prefix{v6Global}, nil},
		{"two hosts", fwd6Site, []netip.Prefix{v6Global, v6ULA}, []string{
			`iifname "eth0" oifname "br0" meta nfproto ipv6 ip6 daddr & ::ffff:ffff:ffff:ffff == ::10 tcp dport 443 ct state new counter name "fwd6_tcp_443" accept`,
			`iifname "eth0" oifname "br0" meta nfproto ipv6 ip6 daddr & ::ffff:ffff:ffff:ffff == ::a:b:c:d udp dport 51820 ct state new counter name "fwd6_udp_51820" accept`,
		}},
		{"one over IPv6 only", func() *site.Site {
			s := fwd6Site()
			s.Firewall.PortForwards[0].To = "" // tcp 443 to nas, v6 only
			return s
		}, []netip.Prefix{v6Global, v6ULA}, []string{
			`iifname "eth0" oifname "br0" meta nfproto ipv6 ip6 daddr & ::ffff:ffff:ffff:ffff == ::10 tcp dport 443 ct state new counter name "fwd6_tcp_443" accept`,
			`iifname "eth0" oifname "br0" meta nfproto ipv6 ip6 daddr & ::ffff:ffff:ffff:ffff == ::a:b:c:d udp dport 51820 ct state new counter name "fwd6_udp_51820" accept`,
		}},
		{"before the delegation", fwd6Site, nil, []string{
			`ip6 daddr & ::ffff:ffff:ffff:ffff == ::10 tcp dport 443 ct state new counter name "fwd6_tcp_443" accept`,
			`ip6 daddr & ::ffff:ffff:ffff:ffff == ::a:b:c:d udp dport 51820 ct state new counter name "fwd6_udp_51820" accept`,
		}},
		{"another prefix", fwd6Site, []netip.Prefix{other, v6ULA}, []string{
			`iifname "eth0" oifname "br0" meta nfproto ipv6 ip6 daddr & ::ffff:ffff:ffff:ffff == ::10 tcp dport 443 ct state new counter name "fwd6_tcp_443" accept`,
			`iifname "eth0" oifname "br0" meta nfproto ipv6 ip6 daddr & ::ffff:ffff:ffff:ffff == ::a:b:c:d udp dport 51820 ct state new counter name "fwd6_udp_51820" accept`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := buildFwd6(t, tc.site(), tc.prefixes...)
			var fwd Chain
			for _, c := range rs.Chains {
				if c.Name == "forward" {
					fwd = c
				}
				for _, r := range c.Rules {
					if r.DAddrID.IsValid() && c.Name != "forward" {
						t.Errorf("a v6 forward in chain %s: %s", c.Name, r)
					}
				}
			}
			ulaDrop, last := -1, len(fwd.Rules)-1
			var got []string
			for i, r := range fwd.Rules {
				if r.IIf == "eth0" && r.DAddr == ula6 && r.Verdict == "drop" && r.Counter == CounterForwardDrop {
					ulaDrop = i
				}
				if !r.DAddrID.IsValid() {
					continue
				}
				got = append(got, r.String())
				if ulaDrop < 0 || i > last {
					t.Errorf("rule %d %s: not after the ULA destination drop (%d)", i, r, ulaDrop)
				}
				if r.Verdict != "accept" || r.IIf != "eth0" || r.OIf != "br0" || !r.IPv6 || r.DPort == 0 ||
					len(r.CTState) != 1 || r.CTState[0] != "new" || !slices.Contains(rs.Counters, r.Counter) {
					t.Errorf("v6 forward %s: want WAN into LAN, v6, a port, new connections, a table counter", r)
				}
			}
			// A forward with no v4 address has no DNAT and no v4
			// counter; the others keep theirs.
			for _, f := range tc.site().Firewall.PortForwards {
				c := "dnat_" + f.Proto + "_" + strconv.Itoa(f.Port)
				if has := slices.Contains(rs.Counters, c); has != (f.To != "") {
					t.Errorf("forward %s %d to %q: counter %s in the table %v", f.Proto, f.Port, f.To, c, has)
				}
			}
			if len(tc.want) == 0 && ulaDrop >= 0 {
				t.Errorf("a ULA destination drop without forwards: %s", fwd.Rules[ulaDrop])
			}
			if len(got) != len(tc.want) {
				t.Fatalf("v6 forwards:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("v6 forward %d:\n%s\nwant it to contain\n%s", i, got[i], tc.want[i])
				}
			}
			if l := fwd.Rules[last]; l.Verdict != "drop" || l.Counter != CounterForwardDrop || l.IPv6 {
				t.Errorf("forward ends in %s", l)
			}
			if err := rs.check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestIPv6PortForwardRefuses: forwards AddIPv6 will not turn into rules,
// whoever made them, and the interface identifier match's own checks.
func TestIPv6PortForwardRefuses(t *testing.T) {
	id := netip.MustParseAddr("::10")
	for _, tc := range []struct {
		lan  string
		f    site.IPv6Forward
		want string
	}{
		{"br0", site.IPv6Forward{Proto: "icmp", Port: 1, Host: "nas", ID: id}, `protocol "icmp"`},
		{"br0", site.IPv6Forward{Proto: "tcp", Port: 0, Host: "nas", ID: id}, "port 0 out of range"},
		{"br0", site.IPv6Forward{Proto: "tcp", Port: 70000, Host: "nas", ID: id}, "port 70000 out of range"},
		{"br0", site.IPv6Forward{Proto: "tcp", Port: 443, Host: "nas", ID: netip.MustParseAddr("2001:db8::10")}, "interface identifier"},
		{"br0", site.IPv6Forward{Proto: "tcp", Port: 443, Host: "nas", ID: netip.MustParseAddr("::1")}, "interface identifier"},
		{"br0", site.IPv6Forward{Proto: "tcp", Port: 443, Host: "nas"}, "interface identifier"},
		{"", site.IPv6Forward{Proto: "tcp", Port: 443, Host: "nas", ID: id}, "without a LAN"},
	} {
		rs, _ := Build(baseSite(), "eth0", "br0", lanAddr)
		if err := AddIPv6(rs, "eth0", tc.lan, IPv6{Forwards: []site.IPv6Forward{tc.f}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
	}
	rs, _ := Build(baseSite(), "eth0", "br0", lanAddr)
	twice := []site.IPv6Forward{{Proto: "tcp", Port: 443, Host: "nas", ID: id}, {Index: 1, Proto: "tcp", Port: 443, Host: "tv", ID: netip.MustParseAddr("::11")}}
	if err := AddIPv6(rs, "eth0", "br0", IPv6{Forwards: twice}); err == nil || !strings.Contains(err.Error(), "forwarded twice") {
		t.Errorf("tcp 443 twice: %v", err)
	}
	for _, r := range []Rule{
		{IPv4: true, DAddrID: id, Verdict: "accept"},
		{IPv6: true, DAddrID: netip.MustParseAddr("2001:db8::10"), Verdict: "accept"},
		{IPv6: true, DAddrID: netip.MustParseAddr("::ffff:10.0.0.1"), Verdict: "accept"},
	} {
		if _, err := r.exprs(); err == nil {
			t.Errorf("%s translated", r)
		}
	}
}

// TestIPv6Invalidated: a /64 the LAN is told is deprecated (RFC 7084
// L-14): its sources are refused with ICMPv6 code 5 on the way out of
// the WAN (counted in forward_drop) and still taken into the router
// (their neighbour advertisements); one that overlaps a LAN prefix, or
// is link-local, is refused.
func TestIPv6Invalidated(t *testing.T) {
	old := netip.MustParsePrefix("2001:db8:1:f0::/64")
	rs, err := Build(baseSite(), "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := AddIPv6(rs, "eth0", "br0", IPv6{LANPrefixes: []netip.Prefix{v6Global, v6ULA}, Invalidated: []netip.Prefix{old}}); err != nil {
		t.Fatal(err)
	}
	find := func(chain string, match func(Rule) bool) int {
		for _, c := range rs.Chains {
			if c.Name == chain {
				return slices.IndexFunc(c.Rules, match)
			}
		}
		return -1
	}
	fwd := find("forward", func(r Rule) bool { return r.SAddr == old })
	if fwd < 0 {
		t.Fatal("no forward rule for the invalidated prefix")
	}
	for _, c := range rs.Chains {
		if c.Name != "forward" {
			continue
		}
		r := c.Rules[fwd]
		if r.Verdict != VerdictPolicyFail || r.IIf != "br0" || r.OIf != "eth0" || r.Counter != CounterForwardDrop || !strings.Contains(r.String(), "reject with icmpv6 policy-fail") {
			t.Errorf("forward: %s", r)
		}
		if fwd != len(c.Rules)-2 {
			t.Errorf("forward: the refusal is rule %d of %d, want the last before the counted drop", fwd, len(c.Rules))
		}
	}
	if in := find("input", func(r Rule) bool { return r.SAddr == old && r.IIf == "br0" && r.Verdict == "accept" }); in < 0 {
		t.Error("input: the invalidated prefix's hosts are not taken in")
	}
	if err := rs.check(); err != nil {
		t.Error(err)
	}
	for _, bad := range []IPv6{
		{LANPrefixes: []netip.Prefix{v6Global}, Invalidated: []netip.Prefix{v6Global}},
		{Invalidated: []netip.Prefix{netip.MustParsePrefix("fe80::/64")}},
		{Invalidated: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}},
	} {
		rs, _ := Build(baseSite(), "eth0", "br0", lanAddr)
		if err := AddIPv6(rs, "eth0", "br0", bad); err == nil {
			t.Errorf("%+v taken", bad)
		}
	}
	// The verdict needs the IPv6 match alone.
	if _, err := (Rule{IPv4: true, Verdict: VerdictPolicyFail}).exprs(); err == nil {
		t.Error("reject with icmpv6 built for an IPv4 rule")
	}
}
