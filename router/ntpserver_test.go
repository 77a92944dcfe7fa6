package router

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/ntp"
)

// TestNTPSyncedReachesLANServer: a setting of the clock from upstream
// reaches the LAN's SNTP server (which then serves stratum upstream+1)
// and the status line.
func TestNTPSyncedReachesLANServer(t *testing.T) {
	r := &Router{}
	r.ntpSynced(ntp.Result{Stratum: 2}) // no LAN server: nothing to tell
	if st := r.svc.state["ntp-server"]; st != "" {
		t.Errorf("state %q without a LAN server", st)
	}
	r.svc.ntpLAN = ntp.NewServer(ntp.ServerConfig{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	r.ntpSynced(ntp.Result{Time: time.Now(), Addr: netip.MustParseAddr("192.0.2.123"), Stratum: 2})
	if st := r.svc.state["ntp-server"]; st != "serving stratum 3 on the LAN" {
		t.Errorf("state %q, want serving stratum 3", st)
	}
}
