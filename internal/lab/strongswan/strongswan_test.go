package strongswan

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
)

// fetchTest fetches the tree for t: without apt-get (not a Debian host)
// the test skips, or fails under OCFW_REQUIRE_KERNEL=1.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fetchTest(t *testing.T) *Root {
	t.Helper()
	if _, err := exec.LookPath("apt-get"); err != nil {
		labtest.SkipOrFail(t, "fetching strongSwan needs apt-get: %v", err)
	}
	start := time.Now()
	r, err := Fetch(context.Background(), "", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("strongSwan tree %s (%d packages) ready in %v", r.Dir, len(r.Debs), time.Since(start).Round(time.Millisecond))
	return r
}

// TestTwoCharons is the harness's proof: one world VM, two namespaces
// joined by veth, a charon in each with PSK authentication; the west
// one initiates, and TCP between addresses only the tunnel routes
// passes, counted by both SAs and visible as XFRM state.
func TestTwoCharons(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a world VM with strongSwan; skipped with -short")
	}
	root := fetchTest(t)
	for _, d := range root.Debs {
		if strings.HasPrefix(d, "strongswan-charon_") {
			t.Logf("peer: %s", d)
		}
	}
	west, east := Instance{Name: "west", NS: "west"}, Instance{Name: "east", NS: "east"}
	w := StartWorld(t, "swan", root, map[Instance][]byte{west: readTestdata(t, "west.swanctl.conf"), east: readTestdata(t, "east.swanctl.conf")})
	ctx := context.Background()
	for _, c := range []string{
		"ns west", "ns east", "veth west w0 east e0",
		"addr west w0 192.0.2.1/24", "addr east e0 192.0.2.2/24",
		// The tunnel's inner addresses: nothing routes between them
		// but the routes charon installs with its SA.
		"addr west lo 10.1.0.1/32", "addr east lo 10.2.0.1/32",
		"echo-server east 7",
	} {
		w.MustDo(t, c)
	}
	if err := w.MustFail(t, "tcp west 10.2.0.1:7 before"); worldvm.ErrorKind(err) != "no-route" {
		t.Fatalf("before the tunnel, west reached east's inner address or failed otherwise: %v", err)
	}
	for _, in := range []Instance{west, east} {
		if err := in.Start(ctx, w); err != nil {
			t.Fatal(err)
		}
		out := w.MustDo(t, in.SwanctlCommand("--load-all"))
		if !strings.Contains(out, "loaded connection") {
			t.Fatalf("%s: swanctl load-all: %s", in.Name, out)
		}
	}
	start := time.Now()
	out := w.MustDo(t, west.SwanctlCommand("--initiate", "--child", "net", "--timeout", "30"))
	handshake := time.Since(start)
	if !strings.Contains(out, "initiate completed successfully") {
		t.Fatalf("swanctl initiate: %s", out)
	}
	t.Logf("IKE_SA_INIT + IKE_AUTH (MODP-2048) done in %v, seen from the host", handshake.Round(time.Millisecond))

	reply := w.MustDo(t, "tcp west 10.2.0.1:7 through-the-tunnel")
	if !strings.Contains(reply, "from 10.1.0.1:") || !strings.Contains(reply, "through-the-tunnel") {
		t.Fatalf("echo through the tunnel: %q, want it from 10.1.0.1 with the line", reply)
	}

	for _, in := range []Instance{west, east} {
		sas := w.MustDo(t, in.SwanctlCommand("--list-sas"))
		t.Logf("%s: swanctl list-sas:\n%s", in.Name, sas)
		for _, want := range []string{"ESTABLISHED", "IKEv2", "AES_CBC-128/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/MODP_2048",
			"INSTALLED, TUNNEL", "ESP:AES_CBC-128/HMAC_SHA2_256_128"} {
			if !strings.Contains(sas, want) {
				t.Errorf("%s: list-sas lacks %q", in.Name, want)
			}
		}
		bin, bout := saBytes(t, sas)
		if bin == 0 || bout == 0 {
			t.Errorf("%s: the CHILD_SA counted %d bytes in and %d out, want both > 0", in.Name, bin, bout)
		}
	}
	xfrm := w.MustDo(t, "exec west "+IP+" xfrm state")
	for _, want := range []string{"proto esp", "mode tunnel", "auth-trunc hmac(sha256)", "enc cbc(aes)"} {
		if !strings.Contains(xfrm, want) {
			t.Errorf("ip xfrm state in west lacks %q:\n%s", want, xfrm)
		}
	}
	if c := strings.Count(xfrm, "proto esp"); c != 2 {
		t.Errorf("ip xfrm state in west shows %d ESP SAs, want 2 (in and out):\n%s", c, xfrm)
	}
	t.Logf("handshake %v", handshake.Round(time.Millisecond))

	// Manual keys with a Linux peer, on this boot (linuxpeer_test.go).
	t.Run("linux-peer-manual-keys", func(t *testing.T) { testLinuxPeerManualKeys(t, w) })
}

var saBytesRe = regexp.MustCompile(`(?m)^\s+(in|out)\s+[0-9a-f]{8}(?:_i|_o)?(?:\s+[0-9a-f]{8}(?:_i|_o)?)?,\s+(\d+) bytes`)

// saBytes reads the CHILD_SA's byte counters from swanctl's list-sas.
func saBytes(t *testing.T, sas string) (in, out int) {
	t.Helper()
	m := saBytesRe.FindAllStringSubmatch(sas, -1)
	if len(m) != 2 {
		t.Fatalf("list-sas: want one in and one out counter line, found %d", len(m))
	}
	for _, x := range m {
		n, _ := strconv.Atoi(x[2])
		if x[1] == "in" {
			in = n
		} else {
			out = n
		}
	}
	return in, out
}

// TestCheckLibraries: a program whose library is missing from the tree
// is named with the library, before any VM boots.
func TestCheckLibraries(t *testing.T) {
	host, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to play a dynamically linked program")
	}
	b, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	put := func(name string, data []byte) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	put(strings.TrimPrefix(Charon, "/"), b)
	err = CheckLibraries(root)
	if err == nil || !strings.Contains(err.Error(), Charon+" needs libc.so.6") {
		t.Fatalf("CheckLibraries without libc: %v, want charon's need named", err)
	}
	put("lib/i386-linux-gnu/libc.so.6", []byte("stand-in"))
	err = CheckLibraries(root)
	if err == nil || strings.Contains(err.Error(), "needs") || !strings.Contains(err.Error(), Swanctl) {
		t.Fatalf("CheckLibraries with libc, without swanctl: %v, want swanctl named", err)
	}
	for _, p := range []string{Swanctl, IP, "/lib/ld-linux.so.2", "/lib/i386-linux-gnu/libgcc_s.so.1"} {
		put(strings.TrimPrefix(p, "/"), []byte("stand-in"))
	}
	if err := CheckLibraries(root); err != nil {
		t.Fatalf("complete tree: %v", err)
	}
}

// TestSwanctlCommand: the load commands get the instance's file, and
// arguments are quoted for the agent.
func TestSwanctlCommand(t *testing.T) {
	in := Instance{Name: "west", NS: "wan"}
	got := in.SwanctlCommand("--load-all")
	want := "exec wan STRONGSWAN_CONF=/etc/swan/west/strongswan.conf LD_LIBRARY_PATH=" + LibraryPath +
		" /usr/sbin/swanctl --load-all --file /etc/swan/west/swanctl.conf"
	if got != want {
		t.Errorf("load: %q\nwant %q", got, want)
	}
	if got := in.SwanctlCommand("--initiate", "--child", "a b"); !strings.HasSuffix(got, ` --initiate --child "a b"`) || strings.Contains(got, "--file") {
		t.Errorf("initiate: %q", got)
	}
	if !strings.Contains(in.StrongswanConf(), "socket = unix:///etc/swan/west/charon.vici") {
		t.Errorf("strongswan.conf has no per-instance vici socket:\n%s", in.StrongswanConf())
	}
}
