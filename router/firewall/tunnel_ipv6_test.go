package firewall

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/site"
)

// tunnelSite6 is tunnelSite with two IPv6 tunnels besides the v4 one:
// a-b carries the LAN's ULA /64 over the IPv4 WAN, a-d the LAN's global
// /64 between the two static IPv6 WAN addresses.
func tunnelSite6() *site.Site {
	s := tunnelSite()
	s.IPv6.WAN = site.IPv6WAN{Mode: site.IPv6ModeStatic, Address: "2001:db8:a::2/64", Gateway: "fe80::1"}
	s.Tunnels = []site.Tunnel{
		{Name: "a-b", Keying: site.KeyingIKEv2, Peer: "203.0.113.2", LocalSubnet: v6ULA.String(), RemoteSubnet: "fd00:b::/64", PSK: "a-b.psk"},
		s.Tunnels[1],
		{Name: "a-d", Keying: site.KeyingIKEv2, Peer: "2001:db8:d::2", LocalSubnet: v6Global.String(), RemoteSubnet: "2001:db8:d:1::/64", PSK: "a-d.psk"},
	}
	return s
}

func buildTunnels6(t *testing.T) *Ruleset {
	t.Helper()
	rs, err := Build(tunnelSite6(), "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := AddIPv6(rs, "eth0", "br0", IPv6{LANPrefixes: []netip.Prefix{v6Global, v6ULA}}); err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestTunnelIPv6Golden: IPv6 tunnels' rules with the v6 policy, in nft's
// syntax (testdata/tunnels-ipv6.nft).
func TestTunnelIPv6Golden(t *testing.T) {
	got := buildTunnels6(t).String()
	file := filepath.Join("testdata", "tunnels-ipv6.nft")
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

// TestTunnelIPv6Policy: what the golden file must hold, apart from it.
// The v6 peer reaches IKE and ESP from its one address over IPv6; the
// v4 peer carrying v6 networks over IPv4; each v6 tunnel's networks
// pass before the v6 policy's ULA and reverse-path drops would take
// them; nothing v6 is masqueraded.
func TestTunnelIPv6Policy(t *testing.T) {
	rs := buildTunnels6(t)
	chains := map[string]Chain{}
	for _, ch := range rs.Chains {
		chains[ch.Name] = ch
	}
	opened := map[string][]string{}
	for _, r := range chains["input"].Rules {
		if r.Verdict != "accept" || r.Proto != "esp" && !(r.Proto == "udp" && (r.DPort == 500 || r.DPort == 4500)) {
			continue
		}
		if r.IIf != "eth0" || !r.SAddr.IsSingleIP() || r.IPv4 != r.SAddr.Addr().Is4() || r.IPv6 != r.SAddr.Addr().Is6() {
			t.Errorf("input: %q: want the WAN, one address, its family", r)
		}
		opened[r.SAddr.Addr().String()] = append(opened[r.SAddr.Addr().String()], r.Proto+"/"+strconv.Itoa(int(r.DPort)))
	}
	want := map[string][]string{"203.0.113.2": {"esp/0", "udp/500", "udp/4500"}, "192.0.2.7": {"esp/0"}, "2001:db8:d::2": {"esp/0", "udp/500", "udp/4500"}}
	if fmt.Sprint(opened) != fmt.Sprint(want) {
		t.Errorf("opened %v, want %v", opened, want)
	}

	// index of the first rule matching f, -1 for none.
	index := func(ch string, f func(Rule) bool) int { return slices.IndexFunc(chains[ch].Rules, f) }
	for _, tc := range []struct{ local, remote string }{{v6ULA.String(), "fd00:b::/64"}, {v6Global.String(), "2001:db8:d:1::/64"}} {
		out := index("forward", func(r Rule) bool {
			return r.IIf == "br0" && r.OIf == "eth0" && r.IPv6 && r.SAddr.String() == tc.local && r.DAddr.String() == tc.remote && r.Verdict == "accept"
		})
		downDrop := index("forward", func(r Rule) bool {
			return r.OIf == "eth0" && r.IPv6 && r.DAddr.String() == tc.remote && r.NoIPsecRoute && r.Verdict == "drop"
		})
		in := index("forward", func(r Rule) bool {
			return r.IIf == "eth0" && r.OIf == "br0" && r.IPv6 && r.IPsec && r.SAddr.String() == tc.remote && r.DAddr.String() == tc.local && r.Verdict == "accept"
		})
		firstV6Drop := index("forward", func(r Rule) bool { return r.IPv6 && r.Verdict == "drop" && !r.NoIPsecRoute })
		if out < 0 || in < 0 || downDrop < 0 || !(downDrop < out) || firstV6Drop < 0 || out > firstV6Drop || in > firstV6Drop {
			t.Errorf("%s<->%s: forward out %d (after the tunnel-down drop %d), in %d, want both before the v6 drops at %d", tc.local, tc.remote, out, downDrop, in, firstV6Drop)
		}
		spoofAccept := index("antispoof", func(r Rule) bool {
			return r.IIf == "eth0" && r.IPv6 && r.IPsec && r.SAddr.String() == tc.remote && r.Verdict == "accept"
		})
		clear := index("antispoof", func(r Rule) bool {
			return r.IPv6 && r.NoIPsec && r.SAddr.String() == tc.remote && r.Verdict == "drop"
		})
		ula := index("antispoof", func(r Rule) bool { return r.IPv6 && r.SAddr.String() == "fc00::/7" && r.Verdict == "drop" })
		fib := index("antispoof", func(r Rule) bool { return r.FibNoRoute })
		if spoofAccept < 0 || clear < 0 || ula < 0 || fib < 0 || spoofAccept > clear || spoofAccept > ula || spoofAccept > fib {
			t.Errorf("%s: antispoof accept of the decrypted %d, clear drop %d, ULA drop %d, fib %d", tc.remote, spoofAccept, clear, ula, fib)
		}
	}
	for _, r := range chains["postrouting"].Rules {
		if r.IPv6 || r.DAddr.Addr().Is6() || !r.IPv4 {
			t.Errorf("postrouting: %q: NAT is for IPv4 only", r)
		}
	}
	if s := rs.String(); !strings.Contains(s, `iifname "eth0" meta nfproto ipv6 ip6 saddr 2001:db8:d::2 udp dport 500 accept`) {
		t.Errorf("no IKE from the v6 peer in nft's syntax:\n%s", s)
	}
}

// Build refuses a tunnel whose networks (or ends) are of two families
// even when the site was not validated.
func TestTunnelIPv6Refuses(t *testing.T) {
	s := tunnelSite6()
	s.Tunnels[0].RemoteSubnet = "192.168.2.0/24"
	if _, err := Build(s, "eth0", "br0", lanAddr); err == nil || !strings.Contains(err.Error(), "tunnel a-b") {
		t.Errorf("mixed families: %v", err)
	}
}
