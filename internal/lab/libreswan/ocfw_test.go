package libreswan

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// traffic checks TCP from ns through the tunnel to ocfw's echo server at
// to, and that pluto in counted it on its one CHILD SA (conn).
func traffic(t *testing.T, w *worldvm.World, in Instance, conn, to string) {
	t.Helper()
	reply, err := w.Do(context.Background(), fmt.Sprintf("tcp %s %s:7 through-ocfw", in.NS, to))
	if err != nil || !strings.Contains(reply, "through-ocfw") {
		t.Fatalf("echo from pluto %s's side through the tunnel to ocfw's %s: %v %q", in.Name, to, err, reply)
	}
	lines := children(t, w, in, conn)
	if len(lines) != 1 {
		t.Fatalf("pluto %s: %d CHILD SAs of %q after traffic, want 1:\n%s", in.Name, len(lines), conn, strings.Join(lines, "\n"))
	}
	m := bytesRe.FindStringSubmatch(lines[0])
	if m == nil || m[1] == "0" || m[2] == "0" {
		t.Fatalf("pluto %s's CHILD SA counted no traffic both ways: %s", in.Name, lines[0])
	}
}

var bytesRe = regexp.MustCompile(`inBytes=(\d+), outBytes=(\d+)`)

// children are pluto's trafficstatus lines for conn: one per CHILD SA.
func children(t *testing.T, w *worldvm.World, in Instance, conn string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(w.MustDo(t, in.WhackCommand("--trafficstatus")), "\n") {
		if strings.Contains(l, `"`+conn+`"`) && strings.Contains(l, "type=ESP") {
			out = append(out, l)
		}
	}
	return out
}

// waitChild waits (30 s at most) until pluto in has a CHILD SA of conn
// and ocfw's endpoint name one established IKE SA with one CHILD SA.
func waitChild(t *testing.T, w *worldvm.World, in Instance, conn, name string) ikeStatus {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		st := status(t, w, name)
		if len(children(t, w, in, conn)) == 1 && oneChild(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CHILD SA of %q in pluto %s and ocfw %s within 30 s: %s\nocfw: %+v\n%s", conn, in.Name, name,
				w.MustDo(t, in.WhackCommand("--trafficstatus")), st.Peers, st.Log)
		}
	}
}

// oneChild: ocfw holds exactly one established IKE SA with exactly one
// CHILD SA.
func oneChild(st ikeStatus) bool {
	return len(st.Peers) == 1 && len(st.Peers[0].SAs) == 1 && st.Peers[0].SAs[0].State == "established" &&
		len(st.Peers[0].SAs[0].Children) == 1
}

// TestLibreswanAgainstOCFW runs ocfw's IKEv2 endpoint (router/ike, in the
// world agent) against unmodified Libreswan 4.10 with its default
// proposals, in one world VM: ocfw initiating to a pluto responder with
// each kind of identity, a wrong PSK, CHILD and IKE SA rekeys started by
// each side several times in a row under traffic, and a pluto initiating
// to ocfw. Each step checks both ends (exactly one IKE SA and one CHILD
// SA pair) and traffic through the tunnel.
func TestLibreswanAgainstOCFW(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a world VM with Libreswan; skipped with -short")
	}
	tree := fetchTest(t)
	east, eastm, easti := Instance{Name: "east", NS: "east"}, Instance{Name: "eastm", NS: "eastm"}, Instance{Name: "easti", NS: "easti"}
	west := Instance{Name: "west", NS: "west"} // replaced by each restart
	econf, wconf, secrets := readTestdata(t, "east.ipsec.conf"), readTestdata(t, "west.ipsec.conf"), readTestdata(t, "ipsec.secrets")
	w := startWorld(t, "lswike", tree, map[Instance][2][]byte{
		east: {econf, secrets}, eastm: {econf, secrets}, easti: {econf, secrets}, west: {wconf, secrets}})
	ctx := context.Background()
	// Each pluto responder with an ocfw namespace of its own (o-NAME),
	// all with the same addresses; west (pluto initiator) with oe.
	var setup []string
	for _, p := range []string{"east", "eastm", "easti"} {
		o := "o" + p
		setup = append(setup, "ns "+o, "ns "+p, "veth "+o+" o0 "+p+" e0",
			"addr "+o+" o0 192.0.2.1/24", "addr "+p+" e0 192.0.2.2/24",
			"addr "+o+" lo 10.1.0.1/32", "addr "+p+" lo 10.2.0.1/32", "echo-server "+o+" 7",
			"route "+o+" 10.2.0.0/24 192.0.2.2",
			// What pluto's updown script would add: the remote subnet's
			// route, from its own inner address.
			"route "+p+" 10.1.0.0/24 192.0.2.1 10.2.0.1")
	}
	setup = append(setup, "ns west", "ns oe", "veth west w0 oe o0",
		"addr west w0 192.0.2.1/24", "addr oe o0 192.0.2.2/24",
		"addr west lo 10.1.0.1/32", "addr oe lo 10.2.0.1/32", "echo-server oe 7",
		"route oe 10.1.0.0/24 192.0.2.1", "route west 10.2.0.0/24 192.0.2.2 10.1.0.1")
	for _, c := range setup {
		w.MustDo(t, c)
	}
	for in, conns := range map[Instance][]string{east: {"fqdn"}, eastm: {"email"}, easti: {"ip"}, west: {"east", "east-ic", "east-reauth"}} {
		if err := in.Start(ctx, w); err != nil {
			t.Fatal(err)
		}
		for _, c := range conns {
			if out, err := w.Do(ctx, in.AddconnCommand(c)); err != nil {
				t.Fatalf("pluto %s: addconn %s: %v\n%s", in.Name, c, err, out)
			}
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range []string{"ocfw-east", "ocfw-eastm", "ocfw-easti", "ocfw-oe"} {
			if out, err := w.Do(ctx, "ike-status "+n); err == nil {
				t.Logf("%s: %s", n, out)
			}
		}
	})
	base := map[string]any{"name": "east", "local": "192.0.2.1", "remote": "192.0.2.2", "psk": testPSK,
		"ike": "aes128-sha256-modp2048", "esp": "aes128-sha256-modp2048", "local_ts": "10.1.0.0/24", "remote_ts": "10.2.0.0/24",
		"install": true, "initiate": true}
	// ESP with the IKE SA's group: the firmware's default (pfs: true)
	// and Libreswan's (pfs=yes).
	with := func(kv ...string) string {
		c := map[string]any{}
		for k, v := range base {
			c[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			c[kv[i]] = kv[i+1]
		}
		return mustJSON(t, c)
	}

	for _, c := range []struct {
		in                      Instance
		conn, localID, remoteID string
	}{
		{east, "fqdn", "west.example", "east.example"},
		{eastm, "email", "gw@west.example", "gw@east.example"},
		{easti, "ip", "192.0.2.1", "192.0.2.2"},
	} {
		t.Run("ocfw-initiates-id-"+c.conn, func(t *testing.T) {
			name := "ocfw-" + c.in.Name
			w.MustDo(t, "ike o"+c.in.NS+" "+name+" "+worldvm.Quote(with("local_id", c.localID, "remote_id", c.remoteID)))
			st := waitChild(t, w, c.in, c.conn, name)
			sa := st.Peers[0].SAs[0]
			if !sa.Initiator {
				t.Errorf("ocfw's IKE SA: initiator false, want true")
			}
			traffic(t, w, c.in, c.conn, "10.1.0.1")
			t.Logf("ocfw: %s; pluto: %s", sa, children(t, w, c.in, c.conn)[0])
		})
	}

	t.Run("wrong-psk", func(t *testing.T) {
		w.MustDo(t, "ike-stop ocfw-easti")
		w.MustDo(t, easti.WhackCommand("--name", "ip", "--terminate"))
		for deadline := time.Now().Add(15 * time.Second); len(children(t, w, easti, "ip")) > 0; time.Sleep(300 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("pluto easti keeps its CHILD SA after --terminate")
			}
		}
		w.MustDo(t, "ike oeasti ocfw-bad "+worldvm.Quote(with("local_id", "192.0.2.1", "remote_id", "192.0.2.2", "psk", "a wrong psk, not a secret either: 0000")))
		defer w.MustDo(t, "ike-stop ocfw-bad")
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			st := status(t, w, "ocfw-bad")
			if len(st.Peers) == 1 && strings.Contains(st.Peers[0].LastError, "AUTHENTICATION_FAILED") {
				t.Logf("ocfw: %s", st.Peers[0].LastError)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ocfw with a wrong PSK: no AUTHENTICATION_FAILED within 30 s: %+v\n%s", st.Peers, st.Log)
			}
		}
		if l := children(t, w, easti, "ip"); len(l) != 0 {
			t.Errorf("pluto installed a CHILD SA for a wrong PSK: %v", l)
		}
		if log := w.MustDo(t, "output pluto-easti"); !strings.Contains(log, "AUTHENTICATION_FAILED") {
			t.Errorf("pluto's log says nothing of the failed authentication:\n%s", lastLines(log, 20))
		}
	})

	// Rekeys several times in a row, each side starting them, traffic
	// after each; the old SPIs must be gone and exactly one pair left.
	// in's conn is the pluto end of ocfw's endpoint name.
	rekeyOn := func(t *testing.T, in Instance, conn, name string, start func(), what string) {
		t.Helper()
		for i := range 3 {
			before := status(t, w, name)
			if !oneChild(before) {
				t.Fatalf("%s rekey %d: before it ocfw holds %+v", what, i+1, before.Peers)
			}
			oldSA := before.Peers[0].SAs[0]
			oldChild := oldSA.Children[0]
			start()
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
				st := status(t, w, name)
				if oneChild(st) {
					sa := st.Peers[0].SAs[0]
					moved := sa.Children[0].InSPI != oldChild.InSPI
					if what == "ike" {
						moved = sa.SPIi != oldSA.SPIi || sa.SPIr != oldSA.SPIr
					}
					if moved && len(children(t, w, in, conn)) == 1 {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s rekey %d: not one new %s SA within 30 s: %+v\npluto: %s\n%s", what, i+1, what, st.Peers,
						w.MustDo(t, in.WhackCommand("--showstates")), st.Log)
				}
			}
			traffic(t, w, in, conn, map[bool]string{true: "10.1.0.1", false: "10.2.0.1"}[in.NS != "west"])
		}
		t.Logf("after 3 %s rekeys: %s", what, w.MustDo(t, in.WhackCommand("--trafficstatus")))
	}
	rekey := func(t *testing.T, start func(), what string) {
		t.Helper()
		rekeyOn(t, east, "fqdn", "ocfw-east", start, what)
	}
	t.Run("ocfw-rekeys-child", func(t *testing.T) { rekey(t, func() { w.MustDo(t, "ike-rekey ocfw-east child") }, "child") })
	t.Run("pluto-rekeys-child", func(t *testing.T) {
		rekey(t, func() { w.MustDo(t, east.WhackCommand("--asynchronous", "--name", "fqdn", "--rekey-ipsec")) }, "child")
	})
	t.Run("ocfw-rekeys-ike", func(t *testing.T) { rekey(t, func() { w.MustDo(t, "ike-rekey ocfw-east ike") }, "ike") })
	t.Run("pluto-rekeys-ike", func(t *testing.T) {
		rekey(t, func() { w.MustDo(t, east.WhackCommand("--asynchronous", "--name", "fqdn", "--rekey-ike")) }, "ike")
	})

	t.Run("pluto-initiates", func(t *testing.T) {
		cfg := map[string]any{}
		for k, v := range base {
			cfg[k] = v
		}
		cfg["initiate"] = false
		cfg["local"], cfg["remote"], cfg["local_id"], cfg["remote_id"] = "192.0.2.2", "192.0.2.1", "east.example", "west.example"
		cfg["local_ts"], cfg["remote_ts"] = "10.2.0.0/24", "10.1.0.0/24"
		w.MustDo(t, "ike oe ocfw-oe "+worldvm.Quote(mustJSON(t, cfg)))
		if out, err := w.Do(ctx, west.WhackCommand("--name", "east", "--initiate")); err != nil {
			t.Fatalf("whack --initiate: %v\n%s", err, out)
		}
		st := waitChild(t, w, west, "east", "ocfw-oe")
		if st.Peers[0].SAs[0].Initiator {
			t.Errorf("ocfw's IKE SA says initiator, want responder")
		}
		traffic(t, w, west, "east", "10.2.0.1")
	})

	// pluto killed as by a power cut (its kernel's SAs and policies
	// flushed with it) and started again, initiating with conn: ocfw
	// must end with exactly the new IKE SA and its one CHILD SA, and
	// carry traffic at once.
	restart := func(t *testing.T, conn string) {
		old := status(t, w, "ocfw-oe")
		if !oneChild(old) {
			t.Fatalf("before the restart: %+v", old.Peers)
		}
		w.MustDo(t, "stop pluto-west kill")
		w.MustDo(t, "exec west "+worldvm.Quote(IP)+" xfrm state flush")
		w.MustDo(t, "exec west "+worldvm.Quote(IP)+" xfrm policy flush")
		var err error
		if west, err = west.Restart(ctx, w); err != nil {
			t.Fatal(err)
		}
		if out, err := w.Do(ctx, west.AddconnCommand(conn)); err != nil {
			t.Fatalf("addconn %s: %v\n%s", conn, err, out)
		}
		start := time.Now()
		if out, err := w.Do(ctx, west.WhackCommand("--name", conn, "--initiate")); err != nil {
			t.Fatalf("whack --initiate: %v\n%s", err, out)
		}
		traffic(t, w, west, conn, "10.2.0.1")
		oldSA := old.Peers[0].SAs[0]
		for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			st := status(t, w, "ocfw-oe")
			if oneChild(st) && st.Peers[0].SAs[0].SPIi != oldSA.SPIi {
				t.Logf("ocfw holds only the new IKE SA %v after pluto initiated: %s", time.Since(start).Round(time.Millisecond), st.Peers[0].SAs[0])
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("45 s after the restarted pluto initiated, ocfw does not hold exactly its new IKE SA and one CHILD SA: %+v\n%s", st.Peers, st.Log)
			}
		}
		traffic(t, w, west, conn, "10.2.0.1")
	}
	t.Run("pluto-restarts-with-initial-contact", func(t *testing.T) { restart(t, "east-ic") })
	t.Run("pluto-restarts-without-initial-contact", func(t *testing.T) { restart(t, "east") })

	// A fresh start of both ends on the west side: pluto restarted with
	// only conn added, ocfw-oe started anew with the responder's
	// configuration changed by kv, and pluto initiating.
	fresh := func(t *testing.T, conn string, kv ...any) {
		t.Helper()
		w.MustDo(t, "ike-stop ocfw-oe")
		w.MustDo(t, "stop pluto-west kill")
		w.MustDo(t, "exec west "+worldvm.Quote(IP)+" xfrm state flush")
		w.MustDo(t, "exec west "+worldvm.Quote(IP)+" xfrm policy flush")
		var err error
		if west, err = west.Restart(ctx, w); err != nil {
			t.Fatal(err)
		}
		if out, err := w.Do(ctx, west.AddconnCommand(conn)); err != nil {
			t.Fatalf("addconn %s: %v\n%s", conn, err, out)
		}
		cfg := map[string]any{}
		for k, v := range base {
			cfg[k] = v
		}
		cfg["initiate"] = false
		cfg["local"], cfg["remote"], cfg["local_id"], cfg["remote_id"] = "192.0.2.2", "192.0.2.1", "east.example", "west.example"
		cfg["local_ts"], cfg["remote_ts"] = "10.2.0.0/24", "10.1.0.0/24"
		for i := 0; i+1 < len(kv); i += 2 {
			cfg[kv[i].(string)] = kv[i+1]
		}
		w.MustDo(t, "ike oe ocfw-oe "+worldvm.Quote(mustJSON(t, cfg)))
		if out, err := w.Do(ctx, west.WhackCommand("--name", conn, "--initiate")); err != nil {
			t.Fatalf("whack --initiate %s: %v\n%s", conn, err, out)
		}
		waitChild(t, w, west, conn, "ocfw-oe")
		traffic(t, w, west, conn, "10.2.0.1")
	}

	// pluto's reauthentication (reauth=yes, RFC 7296 2.8.3): when its
	// IKE SA's short lifetime is up pluto makes a new IKE SA from
	// IKE_SA_INIT, childless, moves the CHILD SA to it and deletes the
	// old one; ocfw must end with only the new IKE SA and one CHILD SA,
	// traffic flowing (issue 28 point 2).
	t.Run("pluto-reauthenticates", func(t *testing.T) {
		start := time.Now()
		fresh(t, "east-reauth")
		// A reauthentication starts from IKE_SA_INIT; a rekey of the IKE
		// SA (CREATE_CHILD_SA) would not.
		inits := func() int { return strings.Count(w.MustDo(t, "output pluto-west"), "sent IKE_SA_INIT request") }
		// Each costs pluto's IKE lifetime, 30 s: measured, pluto
		// reauthenticates when it ends, not at the margin; one is
		// enough for the suite (two in a row passed too).
		const reauths = 1
		for i := range reauths {
			old := status(t, w, "ocfw-oe").Peers[0].SAs[0]
			before := inits()
			for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
				st := status(t, w, "ocfw-oe")
				if oneChild(st) && st.Peers[0].SAs[0].SPIi != old.SPIi && len(children(t, w, west, "east-reauth")) == 1 && inits() > before {
					t.Logf("reauthentication %d %v after the first IKE SA: ocfw %s", i+1, time.Since(start).Round(time.Second), st.Peers[0].SAs[0])
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("reauthentication %d: ocfw does not hold exactly pluto's new IKE SA and one CHILD SA within 90 s: %+v\npluto: %s\n%s",
						i+1, st.Peers, w.MustDo(t, west.WhackCommand("--showstates")), st.Log)
				}
			}
			traffic(t, w, west, "east-reauth", "10.2.0.1")
		}
	})

	// PFS on one end only: each side's CHILD rekeys must still succeed,
	// three in a row, with exactly one CHILD SA pair left. pluto with
	// pfs=no against ocfw's PFS, and pluto's default pfs=yes against
	// ocfw without PFS.
	for _, c := range []struct {
		name, conn, esp string
		pfs             bool // the CHILD SA after ocfw's rekeys must have PFS (MODP-2048)
	}{
		{"pfs-pluto-no-ocfw-yes", "east-nopfs", "aes128-sha256-modp2048", false},
		// ocfw's rekey without KE is refused by pluto (pfs=yes) with
		// NO_PROPOSAL_CHOSEN; ocfw redoes it with a KE in the IKE SA's
		// group (issue 28 point 1). pluto's rekeys carry KE, which ocfw
		// takes though its esp names no group.
		{"pfs-pluto-yes-ocfw-no", "east", "aes128-sha256", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fresh(t, c.conn, "esp", c.esp)
			t.Run("ocfw-rekeys", func(t *testing.T) {
				rekeyOn(t, west, c.conn, "ocfw-oe", func() { w.MustDo(t, "ike-rekey ocfw-oe child") }, "child")
				st := status(t, w, "ocfw-oe")
				if got := st.Peers[0].SAs[0].Children[0].Proposal; c.pfs && !strings.Contains(got, "MODP-2048") {
					t.Errorf("ocfw's CHILD SA after its rekeys: %s, want PFS in the IKE SA's MODP-2048", got)
				}
				t.Logf("ocfw's CHILD SA after its rekeys: %s", st.Peers[0].SAs[0].Children[0].Proposal)
			})
			t.Run("pluto-rekeys", func(t *testing.T) {
				rekeyOn(t, west, c.conn, "ocfw-oe", func() {
					w.MustDo(t, west.WhackCommand("--asynchronous", "--name", c.conn, "--rekey-ipsec"))
				}, "child")
			})
		})
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
