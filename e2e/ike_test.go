package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/strongswan"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/site"
)

// TestIKEv2AgainstStrongswan boots the firmware built from the example
// site-ike-a.yaml (with the published test PSK on its card) and one
// world VM in which strongSwan 5.9.8's charon stands in site B's place
// with the swanctl.conf docs/tunnels.md shows
// (internal/lab/strongswan/testdata/site-ike-b.swanctl.conf), and checks
// on that one boot: the router initiates and charon shows the IKE SA
// established and the CHILD SA installed; data crosses both ways, the
// router's WAN carrying only ESP and IKE between the two ends (and never
// the data); `ocf net` shows the IKE SA's state, peer id, proposal,
// rekey, liveness and its CHILD SA's driver and counters; charon cut
// off, the router's liveness check finds the peer down and says so;
// then charon with another PSK refuses the router, which says so in
// `ocf net` and its log, without the secret.
//
// Before the wrong PSK, the router's power is cut mid-traffic and the
// same card boots again (ikePowerCut): data both ways within 30 s of
// its boot, charon's CHILD SA replaced, the ESP recorded before and after
// accepted by neither end when sent again, and the tunnels' state kept
// in each boot's report.
func TestIKEv2AgainstStrongswan(t *testing.T) {
	needEndToEnd(t)
	parallel(t, 1) // the router; charon's world VM idles beside it
	if _, err := exec.LookPath("apt-get"); err != nil {
		labtest.SkipOrFail(t, "fetching strongSwan needs apt-get: %v", err)
	}
	root, err := strongswan.Fetch(context.Background(), "", t.Logf)
	must(t, err)
	ctx := context.Background()
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	pub, priv := testKey(t)
	must(t, os.WriteFile(p("a.yaml"), []byte(exampleSite(t, "site-ike-a.yaml", pub)), 0o644))
	testdata := filepath.Join("..", "internal", "lab", "strongswan", "testdata")
	psk, err := os.ReadFile(filepath.Join(testdata, "a-b.psk"))
	must(t, err)
	must(t, os.WriteFile(p("a-b.psk"), psk, 0o600))
	var pf site.TunnelPSK
	must(t, json.Unmarshal(psk, &pf))
	swanConf, err := os.ReadFile(filepath.Join(testdata, "site-ike-b.swanctl.conf"))
	must(t, err)

	t0 := time.Now()
	img := p("a.img")
	// No ESP run (--esp-budget 0s): nothing here reads it, and the tunnel
	// waits for the boot's crypto to settle.
	buildImage(t, img, "--board", "alix2d13", "--cipher", "aes-128-cbc", "--speed-budget", "1s", "--esp-budget", "0s", "--site", p("a.yaml"))
	putOnCard(t, img, map[string]string{"a-b.psk": p("a-b.psk")})
	t.Logf("image built in %v", time.Since(t0).Round(time.Second))

	// The world: eth0 to the router's WAN, in "inet", which routes to
	// charon's namespace b (site B's WAN 203.0.113.2, its LAN's
	// 192.168.2.1 on lo); eth1 to the router's LAN, one host.
	sock := t.TempDir()
	var nics []qemu.NIC
	for i, n := range []string{"wan-a", "lan-a"} {
		nics = append(nics, qemu.NIC{Listen: true, Socket: filepath.Join(sock, n+".sock"), MAC: fmt.Sprintf("52:54:00:0c:01:%02x", i+1)})
	}
	charon := strongswan.Instance{Name: "b", NS: "b"}
	files := charon.Files(swanConf)
	files["/key"] = priv
	w := worldvm.StartTest(t, worldvm.Config{Name: "world", NICs: nics, Files: files, Trees: []string{root.Dir},
		Modules: strongswan.Modules(), MemoryMB: 512})
	pcap := p("wan-a.pcap")
	vm := vmtest.Start(t, img, vmtest.Options{Name: "router A", Timeout: 15 * time.Minute, TailLines: 80,
		Args: []string{"-object", "filter-dump,id=wandump,netdev=net0,file=" + pcap},
		NICs: []qemu.NIC{w.Peer(0, "52:54:00:0d:11:01"), w.Peer(1, "52:54:00:0d:11:02"), {MAC: "52:54:00:0d:11:03", Unplugged: true}}})
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := w.Do(ctx, "output charon-b"); err == nil {
				t.Logf("charon b:\n%s", out)
			}
		}
	})
	if _, err := w.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{
		"ns inet eth0", "addr inet eth0 " + inetA + "/24", "up inet eth0", "sysctl inet net.ipv4.ip_forward 1",
		"ns b", "veth inet i0 b b0", "addr inet i0 " + inetB + "/24", "addr b b0 " + wanB + "/24",
		"route b default " + inetB, "addr b lo 192.168.2.1/32", "echo-server b 7",
		"ns lan-a eth1", "addr lan-a eth1 " + hostA + "/24", "up lan-a eth1", "route lan-a default 192.168.1.1",
		"echo-server lan-a 7",
	} {
		w.MustDo(t, c)
	}
	must(t, charon.Start(ctx, w))
	if out := w.MustDo(t, charon.SwanctlCommand("--load-all")); !strings.Contains(out, "loaded connection 'a-b'") {
		t.Fatalf("swanctl --load-all: %s", out)
	}

	status := func(t *testing.T) (*router.Status, string) {
		t.Helper()
		out := w.MustDo(t, "ssh lan-a 192.168.1.1:22 root /key ocf net --json")
		_, js, ok := strings.Cut(out, "\n")
		if !strings.HasPrefix(out, "exit 0") || !ok {
			t.Fatalf("ocf net --json: %q", out)
		}
		var st router.Status
		if err := json.Unmarshal([]byte(js), &st); err != nil {
			t.Fatalf("ocf net --json: %v\n%s", err, js)
		}
		text := w.MustDo(t, "ssh lan-a 192.168.1.1:22 root /key ocf net")
		return &st, text
	}

	t.Run("initiates", func(t *testing.T) {
		if consoleShows(t, ctx, vm, regexp.MustCompile(`ocfw: ipsec: tunnel a-b up`), 10*time.Minute) == nil {
			t.Fatal("tunnel a-b never came up")
		}
		t.Logf("power-on to tunnel a-b up: %v", vm.Elapsed().Round(100*time.Millisecond))
		sas := w.MustDo(t, charon.SwanctlCommand("--list-sas"))
		for _, want := range []string{"ESTABLISHED", "ike-a.example", "AES_CBC-128/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/CURVE_25519", "INSTALLED, TUNNEL", "local  192.168.2.0/24", "remote 192.168.1.0/24"} {
			if !strings.Contains(sas, want) {
				t.Errorf("charon's list-sas lacks %q:\n%s", want, sas)
			}
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	marker := make([]byte, 8)
	rand.Read(marker)
	mark := "OCFW-IKE-MARKER-" + hex.EncodeToString(marker)
	t.Run("traffic", func(t *testing.T) {
		line := mark + "-a-to-b-" + strings.Repeat("0123456789abcdef", 60)
		if got := w.MustDo(t, "tcp lan-a 192.168.2.1:7 "+line); !strings.HasSuffix(got, "\n"+line) || !strings.HasPrefix(got, "from "+hostA+":") {
			t.Errorf("A's LAN to B's LAN through the tunnel: got %.200q", got)
		}
		line = mark + "-b-to-a"
		if got := w.MustDo(t, "tcp b "+hostA+":7 "+line); !strings.HasSuffix(got, "\n"+line) || !strings.HasPrefix(got, "from 192.168.2.1:") {
			t.Errorf("B's LAN to A's LAN through the tunnel: got %.200q", got)
		}
		sas := w.MustDo(t, charon.SwanctlCommand("--list-sas"))
		in, out := ikeSABytes(sas)
		if in == 0 || out == 0 {
			t.Errorf("charon's CHILD SA counted %d bytes in, %d out, want both > 0:\n%s", in, out, sas)
		}
		capt := readPCAP(t, pcap)
		if bytes.Contains(capt.raw, []byte(mark)) {
			t.Errorf("the data went over the WAN in the clear: the marker is in %s", pcap)
		}
		wans := map[netip.Addr]bool{netip.MustParseAddr(wanA): true, netip.MustParseAddr(wanB): true}
		lan := netip.MustParsePrefix("192.168.0.0/16")
		esp := 0
		for _, pk := range capt.packets {
			if lan.Contains(pk.src) || lan.Contains(pk.dst) {
				t.Errorf("a LAN packet on the WAN in the clear: %v -> %v protocol %d", pk.src, pk.dst, pk.proto)
			}
			if wans[pk.src] && wans[pk.dst] && pk.proto != 50 && pk.proto != 17 {
				t.Errorf("between the two ends, a packet neither ESP nor IKE: %v -> %v protocol %d", pk.src, pk.dst, pk.proto)
			}
			if pk.proto == 50 {
				esp++
			}
		}
		if esp < 4 {
			t.Errorf("%d ESP packets on the WAN, want the echo's at least", esp)
		}
		t.Logf("charon counted %d bytes in, %d out; %d ESP packets on A's WAN", in, out, esp)
	})

	t.Run("ocf-net", func(t *testing.T) {
		st, text := status(t)
		t.Logf("ocf net:\n%s", text)
		tu := tunnel(t, st, "a-b")
		if tu.State != "up" || tu.Keying != "ikev2" || tu.PSK != "a-b.psk" || tu.Cipher != "" || tu.Keys != "" || len(tu.IKE) != 1 {
			t.Fatalf("tunnel a-b: %+v", tu)
		}
		sa := tu.IKE[0]
		if sa.State != "established" || sa.Role != "initiator" || sa.PeerID != "ike-b.example" || !strings.HasPrefix(sa.Remote, wanB+":") ||
			sa.Proposal != "AES-CBC-128/HMAC-SHA2-256-128/PRF-HMAC-SHA2-256/Curve25519" || sa.LastRekey == "" ||
			!strings.Contains(sa.Liveness, "last heard") || !strings.Contains(sa.Liveness, "liveness check after 30s") {
			t.Errorf("IKE SA: %+v", sa)
		}
		if len(sa.Children) != 1 {
			t.Fatalf("CHILD SAs: %+v", sa.Children)
		}
		c := sa.Children[0]
		if !strings.HasPrefix(c.Proposal, "AES-CBC-128/HMAC-SHA2-256-128") || c.Driver == "" || c.Out == nil || c.In == nil ||
			c.Out.Packets == 0 || c.In.Packets == 0 || c.Out.Errors+c.In.Errors != 0 {
			t.Errorf("CHILD SA: %+v out %+v in %+v", c, c.Out, c.In)
		}
		for _, want := range []string{
			"tunnel a-b: up; peer " + wanB + ", 192.168.1.0/24 <-> 192.168.2.0/24, ikev2, psk a-b.psk\n",
			"  IKE SA established (initiator) with ike-b.example at " + wanB + ":",
			"    CHILD SA AES-CBC-128/HMAC-SHA2-256-128",
			", cipher on " + c.Driver,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("ocf net lacks %q", want)
			}
		}
		if strings.Contains(text, pf.Secret) || strings.Contains(strings.Join(st.Events, "\n"), pf.Secret) {
			t.Error("ocf net shows the PSK")
		}
	})

	// charon takes the initiator's part: it deletes the IKE SA and, while
	// the router waits its retry interval (30 s) before starting again,
	// sets up a new one itself. The router answers it as responder: the
	// firewall lets the peer's IKE_SA_INIT in, the new CHILD SA carries
	// the traffic both ways, and the WAN still shows only ESP and IKE.
	t.Run("responder", func(t *testing.T) {
		before := len(readPCAP(t, pcap).packets)
		w.MustDo(t, charon.SwanctlCommand("--terminate", "--ike", "a-b", "--timeout", "20"))
		start := time.Now()
		if out, err := w.Do(ctx, charon.SwanctlCommand("--initiate", "--child", "a-b", "--timeout", "25")); err != nil {
			t.Fatalf("swanctl --initiate: %v\n%s", err, out)
		}
		t.Logf("charon initiated, the router answering, in %v", time.Since(start).Round(100*time.Millisecond))
		sas := w.MustDo(t, charon.SwanctlCommand("--list-sas"))
		// list-sas marks its own SPI with a star: charon's is the
		// initiator's (_i*), one IKE SA only (the old one is gone).
		if !regexp.MustCompile(`a-b: #\d+, ESTABLISHED, IKEv2, [0-9a-f]{16}_i\* [0-9a-f]{16}_r\b`).MatchString(sas) ||
			strings.Count(sas, "ESTABLISHED") != 1 || !strings.Contains(sas, "INSTALLED, TUNNEL") {
			t.Fatalf("charon is not the initiator of one established IKE SA:\n%s", sas)
		}
		line := mark + "-responder-a-to-b"
		if got := w.MustDo(t, "tcp lan-a 192.168.2.1:7 "+line); !strings.HasSuffix(got, "\n"+line) || !strings.HasPrefix(got, "from "+hostA+":") {
			t.Errorf("A's LAN to B's LAN through charon's CHILD SA: got %.200q", got)
		}
		line = mark + "-responder-b-to-a"
		if got := w.MustDo(t, "tcp b "+hostA+":7 "+line); !strings.HasSuffix(got, "\n"+line) || !strings.HasPrefix(got, "from 192.168.2.1:") {
			t.Errorf("B's LAN to A's LAN through charon's CHILD SA: got %.200q", got)
		}
		sas = w.MustDo(t, charon.SwanctlCommand("--list-sas"))
		if in, out := ikeSABytes(sas); in == 0 || out == 0 {
			t.Errorf("charon's new CHILD SA counted %d bytes in, %d out, want both > 0:\n%s", in, out, sas)
		}
		st, text := status(t)
		tu := tunnel(t, st, "a-b")
		if tu.State != "up" || len(tu.IKE) != 1 {
			t.Fatalf("tunnel a-b: state %q, %d IKE SAs, want up with one:\n%s", tu.State, len(tu.IKE), text)
		}
		sa := tu.IKE[0]
		if sa.State != "established" || sa.Role != "responder" || sa.PeerID != "ike-b.example" || len(sa.Children) != 1 {
			t.Fatalf("IKE SA: %+v, want established, responder, one CHILD SA", sa)
		}
		if !strings.Contains(text, "  IKE SA established (responder) with ike-b.example at "+wanB+":") {
			t.Errorf("ocf net does not show the router as responder:\n%s", text)
		}
		c := sa.Children[0]
		if c.Out == nil || c.In == nil || c.Out.Packets == 0 || c.In.Packets == 0 {
			t.Fatalf("CHILD SA: %+v, want packets both ways", c)
		}
		spis := map[uint32]string{spiOfState(t, c.Out): "out", spiOfState(t, c.In): "in"}
		capt := readPCAP(t, pcap)
		if bytes.Contains(capt.raw, []byte(mark+"-responder")) {
			t.Errorf("the data went over the WAN in the clear")
		}
		wans := map[netip.Addr]bool{netip.MustParseAddr(wanA): true, netip.MustParseAddr(wanB): true}
		lan := netip.MustParsePrefix("192.168.0.0/16")
		bySPI := map[string]int{}
		for _, pk := range capt.packets[before:] {
			if lan.Contains(pk.src) || lan.Contains(pk.dst) {
				t.Errorf("a LAN packet on the WAN in the clear: %v -> %v protocol %d", pk.src, pk.dst, pk.proto)
			}
			if wans[pk.src] && wans[pk.dst] && pk.proto != 50 && pk.proto != 17 {
				t.Errorf("between the two ends, a packet neither ESP nor IKE: %v -> %v protocol %d", pk.src, pk.dst, pk.proto)
			}
			if pk.proto == 50 {
				bySPI[spis[pk.spi]]++
			}
		}
		if bySPI["out"] < 2 || bySPI["in"] < 2 {
			t.Errorf("ESP on A's WAN since charon initiated, by the new CHILD SA's direction: %v; want the echoes' both ways", bySPI)
		}
		t.Logf("the router as responder: CHILD SA %s out %d packets, in %d; ESP on the WAN by direction %v", c.Proposal, c.Out.Packets, c.In.Packets, bySPI)
	})

	// The peer goes quiet (its WAN link down): the router's liveness
	// check notices within its interval and the retransmissions, says
	// so, and takes the CHILD SA out of the kernel.
	t.Run("dead-peer", func(t *testing.T) {
		ip := "exec b LD_LIBRARY_PATH=" + strongswan.LibraryPath + " " + strongswan.IP + " link set b0 "
		w.MustDo(t, ip+"down")
		start := time.Now()
		re := regexp.MustCompile(`ipsec: tunnel a-b down: no answer to liveness checks for ([0-9]+) s: peer down\?`)
		m := consoleShows(t, ctx, vm, re, 3*time.Minute)
		if m == nil {
			t.Fatalf("the router never said the peer was down")
		}
		t.Logf("the router said the peer was down %v after its link went: silent for %s s", time.Since(start).Round(time.Second), m[1])
		st, _ := status(t)
		tu := tunnel(t, st, "a-b")
		if !strings.HasPrefix(tu.State, "down: no answer to liveness checks for ") || !strings.HasSuffix(tu.State, " s: peer down?") {
			t.Errorf("tunnel a-b state %q, want the peer down", tu.State)
		}
		for _, sa := range tu.IKE {
			if len(sa.Children) > 0 {
				t.Errorf("a CHILD SA kept for a dead peer: %+v", sa)
			}
		}
		w.MustDo(t, ip+"up")
		w.MustDo(t, "route b default "+inetB)
	})

	// The router loses power mid-traffic and boots again from its card
	// (ike_powercut_test.go); the test goes on with the new boot.
	vm = ikePowerCut(t, ikeRig{ctx: ctx, w: w, vm: vm, img: img, pcap: p("wan-a-after-cut.pcap"), charon: charon, status: status})

	t.Run("wrong-psk", func(t *testing.T) {
		conf := regexp.MustCompile(`secret = "[^"]*"`).ReplaceAllString(string(swanConf), `secret = "another-secret-of-enough-length-0123456789abcdef"`)
		if conf == string(swanConf) {
			t.Fatal("site-ike-b.swanctl.conf has no secret line to replace")
		}
		w.MustDo(t, "write "+charon.SwanctlConf()+" "+worldvm.Quote(conf))
		w.MustDo(t, charon.SwanctlCommand("--load-all"))
		// charon deletes the IKE SA; the router tries again (30 s later)
		// and is refused, or refuses charon's own attempt.
		w.Do(ctx, charon.SwanctlCommand("--terminate", "--ike", "a-b", "--timeout", "10"))
		re := regexp.MustCompile(`ipsec: tunnel a-b down: authentication failed: [^\n]*psk file`)
		if consoleShows(t, ctx, vm, re, 3*time.Minute) == nil {
			t.Fatalf("the router never said the PSK was refused")
		}
		st, text := status(t)
		tu := tunnel(t, st, "a-b")
		t.Logf("ocf net:\n%s", text)
		if !strings.HasPrefix(tu.State, "down: authentication failed: ") || !strings.Contains(tu.State, "psk file") ||
			!(strings.Contains(tu.State, "the peer rejected our pre-shared key") || strings.Contains(tu.State, "the peer's AUTH did not verify")) {
			t.Errorf("tunnel a-b state %q, want the PSK refused", tu.State)
		}
		events := strings.Join(st.Events, "\n")
		if !strings.Contains(events, "authentication failed") {
			t.Errorf("the router's log does not say why:\n%s", events)
		}
		if strings.Contains(text, pf.Secret) || strings.Contains(events, pf.Secret) || strings.Contains(vm.Console(), pf.Secret) ||
			strings.Contains(events, "another-secret") {
			t.Error("a PSK is shown")
		}
		for _, sa := range tu.IKE {
			if len(sa.Children) > 0 {
				t.Errorf("a CHILD SA with the wrong PSK: %+v", sa)
			}
		}
		// charon's side of it (its IKE SA from before the cut may linger
		// until its own liveness check gives up: not this test's).
		if log := w.MustDo(t, "output charon-b"); !strings.Contains(log, "N(AUTH_FAILED)") && !strings.Contains(log, "AUTHENTICATION_FAILED") {
			t.Errorf("charon logged no failed authentication:\n%s", log)
		}
	})
}

// swanBytesRe is a counter line of swanctl's list-sas (as package
// strongswan's tests read it).
var swanBytesRe = regexp.MustCompile(`(?m)^\s+(in|out)\s+[0-9a-f]{8}(?:_i|_o)?(?:\s+[0-9a-f]{8}(?:_i|_o)?)?,\s+(\d+) bytes`)

// ikeSABytes are the bytes charon's list-sas counts in and out.
func ikeSABytes(sas string) (in, out int) {
	for _, m := range swanBytesRe.FindAllStringSubmatch(sas, -1) {
		var n int
		fmt.Sscan(m[2], &n)
		if m[1] == "in" {
			in += n
		} else {
			out += n
		}
	}
	return in, out
}
