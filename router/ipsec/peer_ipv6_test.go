package ipsec

import (
	"net/netip"
	"strings"
	"testing"
)

// A Linux peer's commands for a tunnel carrying IPv6 networks: over IPv4
// WAN addresses its SAs get flag af-unspec (Install's
// XFRM_STATE_AF_UNSPEC: without it the peer's kernel would not match
// the inner packets to them) and the route comment names no gateway;
// between IPv6 WAN addresses neither is needed.
func TestPeerCommandsIPv6(t *testing.T) {
	for _, tc := range []struct {
		name            string
		local, remote   string
		wantAFUnspec    bool
		wantRouteMarker string
	}{
		{"IPv6 nets over IPv4", "198.51.100.1", "198.51.100.2", true, "dev WAN-INTERFACE"},
		{"IPv6 nets over IPv6", "2001:db8:a::2", "2001:db8:b::2", false, "via GATEWAY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := testTunnel("aes-128-cbc", "hmac-sha256", true)
			tn.Local, tn.Remote = netip.MustParseAddr(tc.local), netip.MustParseAddr(tc.remote)
			tn.LocalNet, tn.RemoteNet = netip.MustParsePrefix("fd00:1::/64"), netip.MustParsePrefix("fd00:2::/64")
			lines, err := tn.PeerCommands()
			if err != nil {
				t.Fatal(err)
			}
			states, policies := 0, 0
			for _, l := range lines {
				switch {
				case strings.HasPrefix(l, "ip xfrm state add src "+tc.remote+" dst "+tc.local), strings.HasPrefix(l, "ip xfrm state add src "+tc.local+" dst "+tc.remote):
					states++
					if strings.Contains(l, "flag af-unspec") != tc.wantAFUnspec {
						t.Errorf("state line, af-unspec want %v: %s", tc.wantAFUnspec, l)
					}
				case strings.HasPrefix(l, "ip xfrm policy add src fd00:"):
					policies++
				}
			}
			all := strings.Join(lines, "\n")
			if states != 2 || policies != 3 || !strings.Contains(all, "ip route add fd00:1::/64 "+tc.wantRouteMarker) {
				t.Errorf("%d states, %d v6 policies, want 2 and 3, and a route %s:\n%s", states, policies, tc.wantRouteMarker, all)
			}
		})
	}
}
