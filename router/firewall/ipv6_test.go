package firewall

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		// still ends in its counted drop.
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
