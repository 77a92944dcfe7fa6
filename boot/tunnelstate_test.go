package boot

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/store"
)

// settleTunnels waits for the IKEv2 tunnels only: until all are up, or
// its bound; a site without any has nothing to wait for.
func TestSettleTunnels(t *testing.T) {
	up := router.TunnelState{Name: "a-b", Keying: "ikev2", State: "up"}
	connecting := router.TunnelState{Name: "a-b", Keying: "ikev2", State: "connecting"}
	manualDown := router.TunnelState{Name: "a-m", Keying: "manual", State: "down: no key file a-m.keys"}
	for _, tc := range []struct {
		name     string
		readings [][]router.TunnelState // the last one repeats
		bound    time.Duration
		settled  bool
		reads    int // at least
		none     bool
	}{
		{name: "up at once", readings: [][]router.TunnelState{{up, manualDown}}, bound: time.Hour, settled: true, reads: 1},
		{name: "up on the third read", readings: [][]router.TunnelState{{connecting}, {connecting}, {up}}, bound: time.Hour, settled: true, reads: 3},
		{name: "never up", readings: [][]router.TunnelState{{connecting}}, bound: 0, settled: false, reads: 1},
		{name: "no IKEv2 tunnel", readings: [][]router.TunnelState{{manualDown}}, bound: time.Hour, none: true, reads: 1},
		{name: "no tunnels", readings: [][]router.TunnelState{nil}, bound: time.Hour, none: true, reads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			read := func() []router.TunnelState {
				r := tc.readings[min(n, len(tc.readings)-1)]
				n++
				return r
			}
			list, settled := settleTunnels(context.Background(), read, time.Millisecond, tc.bound)
			if tc.none {
				if list != nil {
					t.Errorf("waited for %+v", list)
				}
				return
			}
			if settled != tc.settled || n < tc.reads || len(list) == 0 {
				t.Errorf("settled %v after %d reads (%+v), want %v after %d", settled, n, list, tc.settled, tc.reads)
			}
			if tc.settled && list[0].State != "up" {
				t.Errorf("kept %+v", list)
			}
		})
	}
}

// The report written again with the tunnels replaces the boot's report
// on the card (the other boots' stay) and in RAM, with each IKE SA's
// state, peer, proposal, last rekey, liveness and CHILD SA driver.
func TestTunnelStateReplacesTheBootsReport(t *testing.T) {
	root := t.TempDir()
	data := dataPartition(t)
	f, err := os.OpenFile(data, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	st, err := store.Open(f, fi.Size(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	for b := 1; b <= 2; b++ {
		n, err := st.BeginBoot()
		if err != nil {
			t.Fatal(err)
		}
		r := &report.Report{Version: report.Version, Boot: n, Notes: []string{"first write"}}
		if first, err = r.JSON(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutReport(n, first); err != nil {
			t.Fatal(err)
		}
	}
	list := []router.TunnelState{{Name: "a-b", Keying: "ikev2", State: "up", IKE: []router.IKEState{{
		State: "established", Role: "initiator", PeerID: "ike-b.example", Remote: "203.0.113.2:500",
		Proposal: "AES-CBC-128/HMAC-SHA2-256-128/PRF-HMAC-SHA2-256/Curve25519", LastRekey: "2026-12-04T12:37:00Z",
		Liveness: "last heard 3s ago, liveness check after 30s of silence",
		Children: []router.ChildState{{Proposal: "AES-CBC-128/HMAC-SHA2-256-128", Driver: "cbc(aes-fixed-time)",
			Out: &router.SAState{SPI: "0xc595df72", Packets: 12}, In: &router.SAState{SPI: "0x1125d170", Packets: 12}}},
	}}}, {Name: "a-m", State: "up"}}
	r := &report.Report{Version: report.Version, Boot: 2, Notes: []string{"first write"},
		Tunnels: &report.Tunnels{At: "2026-12-04T12:37:10Z", AfterBoot: "21s", Settled: true, List: reportTunnels(list)}}
	where, err := writeTunnelReport(&Config{Root: root}, st, 2, r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(where, store.Dir+"/report-") {
		t.Errorf("written to %q", where)
	}
	c := loadStore(t, data)
	if len(c.Reports) != 2 || c.Reports[0].Boot != 2 || c.Reports[1].Boot != 1 {
		t.Fatalf("reports on the card: %+v", c.Reports)
	}
	ram, err := os.ReadFile(filepath.Join(root, plan.RunDir, "report.json"))
	if err != nil || !bytes.Equal(ram, c.Reports[0].JSON) {
		t.Errorf("the RAM copy is not the card's: %v", err)
	}
	back, err := report.Read(bytes.NewReader(c.Reports[0].JSON))
	if err != nil {
		t.Fatal(err)
	}
	if back.Tunnels == nil || len(back.Tunnels.List) != 2 {
		t.Fatalf("the card's report has tunnels %+v", back.Tunnels)
	}
	ab, am := back.Tunnels.List[0], back.Tunnels.List[1]
	if ab.Name != "a-b" || ab.State != "up" || len(ab.IKE) != 1 || am.Keying != "manual" {
		t.Fatalf("tunnels %+v", back.Tunnels.List)
	}
	sa := ab.IKE[0]
	if sa.State != "established" || sa.PeerID != "ike-b.example" || sa.Proposal != list[0].IKE[0].Proposal || sa.LastRekey == "" ||
		!strings.HasPrefix(sa.Liveness, "last heard") || len(sa.Children) != 1 || sa.Children[0].Driver != "cbc(aes-fixed-time)" ||
		sa.Children[0].OutSPI != "0xc595df72" || sa.Children[0].InSPI != "0x1125d170" {
		t.Errorf("IKE SA %+v", sa)
	}
	if strings.Contains(string(c.Reports[0].JSON), `"packets"`) {
		t.Error("the report keeps the counters of the moment")
	}
	if old, _ := report.Read(bytes.NewReader(c.Reports[1].JSON)); old == nil || old.Tunnels != nil || old.Boot != 1 {
		t.Errorf("boot 1's report changed: %s", c.Reports[1].JSON)
	}
}
