package router

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/dhcp"
)

// `ocf net` leaves out what the WAN lacks instead of printing empty
// fields ("via , DNS  (dhcp)").
func TestWANLine(t *testing.T) {
	for _, tc := range []struct {
		name             string
		addr, gw, source string
		dns              []string
		want             string
	}{
		{"restricted QEMU lease", "10.0.2.15/24", "", "dhcp", nil, "WAN eth0: 10.0.2.15/24 no gateway, no DNS (dhcp)"},
		{"full lease", "198.51.100.7/24", "198.51.100.1", "dhcp", []string{"9.9.9.9", "1.1.1.1"}, "WAN eth0: 198.51.100.7/24 via 198.51.100.1, DNS 9.9.9.9 1.1.1.1 (dhcp)"},
		{"no address", "", "", "", nil, "WAN eth0: no address yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &Status{Hostname: "gw"}
			st.WAN.Interface, st.WAN.Address, st.WAN.Gateway, st.WAN.DNS, st.WAN.Source = "eth0", tc.addr, tc.gw, tc.dns, tc.source
			var b strings.Builder
			if err := st.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tc.want+"\n") {
				t.Errorf("got\n%s\nwant the line %q", b.String(), tc.want)
			}
		})
	}
}

func TestDHCPClientState(t *testing.T) {
	if got := dhcpClientState("eth0", nil); got != "asking on eth0" {
		t.Errorf("no lease: %q", got)
	}
	l := &dhcp.WANLease{Address: netip.MustParsePrefix("10.0.2.15/24"), LeaseTime: 24 * time.Hour, Acquired: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	got := dhcpClientState("eth0", l)
	if strings.Contains(got, "asking") || !strings.HasPrefix(got, "bound on eth0: 10.0.2.15/24") || !strings.HasSuffix(got, "since 2026-01-02T03:04:05Z") {
		t.Errorf("bound: %q", got)
	}
}
