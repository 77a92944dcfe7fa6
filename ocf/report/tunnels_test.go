package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestTunnelsInTheReport: the tunnels' state (version 4) goes through
// the JSON and into the text as `ocf net` words it; a version 3 report,
// which has none, still reads.
func TestTunnelsInTheReport(t *testing.T) {
	r := &Report{Version: Version, Env: Environment{Kernel: "6.1.0", GOARCH: "386"}}
	r.Tunnels = &Tunnels{At: "2026-12-04T12:37:10Z", AfterBoot: "21s", Settled: true, List: []Tunnel{
		{Name: "a-b", Keying: "ikev2", State: "up", IKE: []IKESA{{
			State: "established", Role: "initiator", PeerID: "ike-b.example", Remote: "203.0.113.2:500",
			Proposal: "AES-CBC-128/HMAC-SHA2-256-128/PRF-HMAC-SHA2-256/Curve25519", Established: "2026-12-04T12:37:00Z",
			LastRekey: "2026-12-04T12:37:00Z", Liveness: "last heard 3s ago, liveness check after 30s of silence",
			Children: []ChildSA{{Proposal: "AES-CBC-128/HMAC-SHA2-256-128", Driver: "geode-aes-cbc (hardware)", OutSPI: "0xc595df72", InSPI: "0x1125d170"}},
		}}},
		{Name: "a-c", Keying: "ikev2", State: "down: authentication failed: the peer rejected our pre-shared key"},
		{Name: "a-d", Keying: "manual", State: "up"},
	}}
	j, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	if back.Tunnels == nil || len(back.Tunnels.List) != 3 || back.Tunnels.List[0].IKE[0].Children[0].Driver != "geode-aes-cbc (hardware)" ||
		back.Tunnels.List[0].IKE[0].PeerID != "ike-b.example" || !back.Tunnels.Settled {
		t.Fatalf("tunnels after JSON: %+v", back.Tunnels)
	}
	for _, want := range []string{`"tunnels": {`, `"peer_id": "ike-b.example"`, `"last_rekey": "2026-12-04T12:37:00Z"`, `"driver": "geode-aes-cbc (hardware)"`, `"settled": true`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON lacks %s:\n%s", want, j)
		}
	}
	var text bytes.Buffer
	if err := back.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"tunnels at 2026-12-04T12:37:10Z, 21s after the boot sequence started (every IKEv2 tunnel up):\n",
		"  tunnel a-b (ikev2): up\n",
		"    IKE SA established (initiator) with ike-b.example at 203.0.113.2:500: AES-CBC-128/HMAC-SHA2-256-128/PRF-HMAC-SHA2-256/Curve25519; last rekey 2026-12-04T12:37:00Z; last heard 3s ago",
		"      CHILD SA AES-CBC-128/HMAC-SHA2-256-128, cipher on geode-aes-cbc (hardware), spi out 0xc595df72 in 0x1125d170\n",
		"  tunnel a-c (ikev2): down: authentication failed: the peer rejected our pre-shared key\n",
		"  tunnel a-d (manual): up\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}

	r.Tunnels.Settled = false
	text.Reset()
	r.WriteText(&text)
	if !strings.Contains(text.String(), "(not every IKEv2 tunnel up)") {
		t.Errorf("an unsettled wait is not said:\n%s", text.String())
	}

	old, err := Read(strings.NewReader(`{"version": 3, "boot": 7, "environment": {}, "selftest": [], "speed": [], "policy": {}}`))
	if err != nil || old.Tunnels != nil || old.Boot != 7 {
		t.Errorf("a version 3 report: %+v, %v", old, err)
	}
}
