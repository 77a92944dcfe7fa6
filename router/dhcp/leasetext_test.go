package dhcp

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// A lease without router or DNS (QEMU's restricted user network gives
// one) says so, never "invalid IP".
func TestWANLeaseText(t *testing.T) {
	p := netip.MustParsePrefix("10.0.2.15/24")
	for _, tc := range []struct {
		l    *WANLease
		want string
	}{
		{&WANLease{Address: p, LeaseTime: time.Hour}, "10.0.2.15/24 no router no DNS for 1h"},
		{&WANLease{Address: p, Router: netip.MustParseAddr("10.0.2.2"), DNS: []netip.Addr{netip.MustParseAddr("10.0.2.3")}, Server: netip.MustParseAddr("10.0.2.2"), LeaseTime: time.Hour},
			"10.0.2.15/24 router 10.0.2.2 DNS [10.0.2.3] from 10.0.2.2 for 1h"},
		{nil, "no lease"},
	} {
		got := tc.l.String()
		if got != tc.want || strings.Contains(got, "invalid") {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}
