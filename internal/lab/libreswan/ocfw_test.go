package libreswan

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/strongswan"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
	"github.com/ocfw/ocfw/router/ike"
)

// ikeStatus is the world agent's ike-status answer.
type ikeStatus struct {
	Peers              []ike.PeerStatus
	Installed, Deleted []string
	Log                string
}

// The PSK of testdata's ipsec.secrets.
const testPSK = "test-only psk, not a secret: 6c1b9e0f2a"

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startWorld boots a world VM with the tree and the instances' files,
// and logs each pluto's output should the test fail.
func startWorld(t *testing.T, name string, tree *worldvm.Tree, files map[Instance][2][]byte) *worldvm.World {
	t.Helper()
	all := map[string][]byte{}
	for in, f := range files {
		for k, v := range in.Files(f[0], f[1]) {
			all[k] = v
		}
	}
	w := worldvm.StartTest(t, worldvm.Config{Name: name, Modules: strongswan.Modules(), Files: all,
		Trees: []string{tree.Dir}, MemoryMB: 512})
	ctx := context.Background()
	boot, err := w.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("world ready %v after QEMU started (initramfs built in %v)", boot.Round(time.Millisecond), w.Build.Round(time.Millisecond))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for in := range files {
			if out, err := w.Do(ctx, "output pluto-"+in.Name); err == nil {
				t.Logf("pluto %s:\n%s", in.Name, out)
			}
		}
	})
	return w
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func status(t *testing.T, w *worldvm.World, name string) ikeStatus {
	t.Helper()
	var st ikeStatus
	out := w.MustDo(t, "ike-status "+name)
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("ike-status %s: %v: %s", name, err, out)
	}
	return st
}

// TestLibreswanAgainstOCFW runs ocfw's IKEv2 endpoint (router/ike, in the
// world agent) against unmodified Libreswan 4.10 with its default
// proposals, in one world VM.
func TestLibreswanAgainstOCFW(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a world VM with Libreswan; skipped with -short")
	}
	tree := fetchTest(t)
	east := Instance{Name: "east", NS: "east"}
	w := startWorld(t, "lswike", tree, map[Instance][2][]byte{
		east: {readTestdata(t, "east.ipsec.conf"), readTestdata(t, "ipsec.secrets")}})
	ctx := context.Background()
	for _, c := range []string{
		"ns ow", "ns east", "veth ow o0 east e0",
		"addr ow o0 192.0.2.1/24", "addr east e0 192.0.2.2/24",
		"addr ow lo 10.1.0.1/32", "addr east lo 10.2.0.1/32", "echo-server ow 7",
		"route ow 10.2.0.0/24 192.0.2.2",
		// What pluto's updown script would add: the remote subnet's
		// route, from its own inner address.
		"route east 10.1.0.0/24 192.0.2.1 10.2.0.1",
	} {
		w.MustDo(t, c)
	}
	if err := east.Start(ctx, w); err != nil {
		t.Fatal(err)
	}
	if out, err := w.Do(ctx, east.AddconnCommand("west")); err != nil {
		t.Fatalf("addconn west: %v\n%s", err, out)
	}
	cfg := map[string]any{"name": "east", "local": "192.0.2.1", "remote": "192.0.2.2",
		"local_id": "west.example", "remote_id": "east.example", "psk": testPSK,
		"ike": "aes128-sha256-modp2048", "esp": "aes128-sha256", "local_ts": "10.1.0.0/24", "remote_ts": "10.2.0.0/24",
		"install": true, "initiate": true}
	w.MustDo(t, "ike ow ocfw-w "+worldvm.Quote(mustJSON(t, cfg)))
	var traffic string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		traffic = w.MustDo(t, east.WhackCommand("--trafficstatus"))
		if strings.Contains(traffic, "#") {
			break
		}
		if time.Now().After(deadline) {
			st := status(t, w, "ocfw-w")
			t.Fatalf("no CHILD SA in pluto within 30 s: %q\nocfw: %+v\n%s", traffic, st.Peers, st.Log)
		}
	}
	t.Logf("pluto: %s", traffic)
	reply, err := w.Do(ctx, fmt.Sprintf("tcp %s %s:7 through-ocfw", east.NS, "10.1.0.1"))
	if err != nil || !strings.Contains(reply, "through-ocfw") {
		t.Fatalf("echo from pluto's side through the tunnel: %v %q", err, reply)
	}
	t.Logf("states: %s", w.MustDo(t, east.WhackCommand("--showstates")))
}
