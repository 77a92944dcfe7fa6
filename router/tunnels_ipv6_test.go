package router

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/site"
)

// An IPv6 remote subnet's route goes out of the WAN without a gateway
// (an IPv6 route cannot have the IPv4 one; the SA's outer route is the
// kernel's own lookup), with the router's LAN v6 address inside the
// local subnet as its source. Over an IPv4 WAN it still needs the WAN to
// hold the tunnel's local address; between IPv6 WAN addresses it does
// not depend on the WAN's IPv4 state.
func TestTunnelRouteIPv6(t *testing.T) {
	sc := siteA()
	sc.IPv6.WAN = site.IPv6WAN{Mode: site.IPv6ModeStatic, Address: "2001:db8:a::2/64", Gateway: "fe80::1"}
	sc.Tunnels = append(sc.Tunnels[:1],
		site.Tunnel{Name: "v6-over-v4", Peer: "203.0.113.2", LocalSubnet: "fd00:a:0:1::/64", RemoteSubnet: "fd00:b::/64", Keying: site.KeyingIKEv2, PSK: "x.psk"},
		site.Tunnel{Name: "v6-over-v6", Peer: "2001:db8:b::2", LocalSubnet: "2001:db8:a:1::/64", RemoteSubnet: "2001:db8:b:1::/64", Keying: site.KeyingIKEv2, PSK: "y.psk"})
	if errs := sc.Validate(nil); len(errs) > 0 {
		for _, e := range errs {
			if strings.Contains(e.Error(), "tunnels[") {
				t.Fatalf("site: %v", e)
			}
		}
	}
	wan := wanState{Addr: netip.MustParsePrefix("198.51.100.2/24"), Gateway: netip.MustParseAddr("198.51.100.1")}
	lan6 := []netip.Prefix{netip.MustParsePrefix("fd00:a:0:1::1/64"), netip.MustParsePrefix("2001:db8:a:1::1/64")}
	for _, tc := range []struct {
		name   string
		tunnel int
		wan    wanState
		lan6   []netip.Prefix
		want   string
	}{
		{"v6 nets over the v4 WAN", 1, wan, lan6, "fd00:b::/64 out of the WAN src fd00:a:0:1::1"},
		{"v6 nets over the v4 WAN, no LAN v6 yet", 1, wan, nil, "fd00:b::/64 out of the WAN"},
		{"v6 nets over the v4 WAN, none yet", 1, wanState{}, lan6, "the WAN has no address yet"},
		{"v6 nets over the v4 WAN, another address", 1, wanState{Addr: netip.MustParsePrefix("198.51.100.77/24")}, lan6, "the WAN's address is 198.51.100.77"},
		{"over the v6 WAN", 2, wan, lan6, "2001:db8:b:1::/64 out of the WAN src 2001:db8:a:1::1"},
		{"over the v6 WAN, no v4 WAN", 2, wanState{}, lan6, "2001:db8:b:1::/64 out of the WAN src 2001:db8:a:1::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := sc.TunnelAddrs(sc.Tunnels[tc.tunnel])
			if err != nil {
				t.Fatal(err)
			}
			rt, err := tunnelRoute(sc, a, tc.wan, tc.lan6)
			got := rt.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.HasPrefix(got, tc.want) || err == nil && rt.Via.IsValid() {
				t.Errorf("got %q (via %v), want %q and no gateway", got, rt.Via, tc.want)
			}
		})
	}
}

// An IKE id of an IPv6 address goes on the wire as ID_IPV6_ADDR, its 16
// octets.
func TestIKEIdentityIPv6(t *testing.T) {
	id := ikeIdentity(site.Identity{Type: site.IDIPv6, Value: "2001:db8:a::2"})
	if id.IDType != 5 || len(id.Data) != 16 || id.String() != "2001:db8:a::2" {
		t.Errorf("%+v (%s), want ID_IPV6_ADDR 2001:db8:a::2", id, id)
	}
	if id := ikeIdentity(site.Identity{Type: site.IDIPv4, Value: "198.51.100.2"}); id.IDType != 1 || len(id.Data) != 4 {
		t.Errorf("v4 id %+v", id)
	}
}

// TestLAN6MovedKicksTunnels: the LAN's v6 addresses arriving or moving
// (a delegation) set the tunnels up again, so that a v6 remote
// subnet's route gets the new LAN address as its source; before, only
// a WAN change did, and a route made before the delegation kept none.
func TestLAN6MovedKicksTunnels(t *testing.T) {
	r := &Router{}
	r.live.Store(&liveConfig{site: &site.Site{}})
	ts := &tunnelSet{kick: make(chan struct{}, 1)}
	r.svc.tunnels = ts
	r.lan6Moved(context.Background(), []netip.Prefix{netip.MustParsePrefix("2001:db8:1:3::1/64")})
	select {
	case <-ts.kick:
	default:
		t.Fatal("the LAN's v6 addresses moved and the tunnels were not set up again")
	}
}
