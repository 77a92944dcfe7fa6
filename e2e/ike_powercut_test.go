package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/strongswan"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/router"
)

// ikeRig is what TestIKEv2AgainstStrongswan's power cut needs of the
// test's one world and the router it boots.
type ikeRig struct {
	ctx    context.Context
	w      *worldvm.World
	vm     *qemu.VM
	img    string
	pcap   string // the restarted router's WAN capture
	charon strongswan.Instance
	status func(t *testing.T) (*router.Status, string)
}

// restartWithin is the bound: traffic both ways again within
// 30 s of the restarted router's boot.
const restartWithin = 30 * time.Second

// replayCount is how many recorded ESP packets are sent again each way.
const replayCount = 8

var (
	reportAgainRe = regexp.MustCompile(`ocfw: report of boot (\d+) written again with the tunnels' state \(([^)]*)\) to (\S+): ([^\n]*)`)
	probeGapRe    = regexp.MustCompile(`gap (\S+) resumed (\S+)`)
	replayedRe    = regexp.MustCompile(`^replayed (\d+): `)
	xfrmStatRe    = regexp.MustCompile(`(?m)^(Xfrm\w+)\s+(\d+)`)
	xfrmBytesRe   = regexp.MustCompile(`(\d+)\(bytes\), (\d+)\(packets\)`)
	xfrmStatsRe   = regexp.MustCompile(`replay-window (\d+) replay (\d+) failed (\d+)`)
)

// ikePowerCut cuts the router's power while data crosses the tunnel both
// ways (QEMU killed), boots the same card again and checks: data both
// ways within restartWithin of the new boot's kernel start; charon's
// CHILD SA replaced (new SPIs, the old gone from its kernel); the ESP
// recorded on the WAN before the cut, and after it, sent again toward
// both ends, accepted by neither kernel (no SA counts it; the old SPIs
// are no state, the new ones replays); the report on the card keeps the
// tunnels' state from before the cut, the new boot's from after. It
// returns the restarted router, which the test goes on with.
func ikePowerCut(t *testing.T, g ikeRig) *qemu.VM {
	w, ctx := g.w, g.ctx
	both := func() error {
		if got, err := w.Do(ctx, "tcp lan-a 192.168.2.1:7 ping-a-to-b"); err != nil || !strings.HasSuffix(got, "\nping-a-to-b") {
			return fmt.Errorf("A to B: %q %v", got, err)
		}
		if got, err := w.Do(ctx, "tcp b "+hostA+":7 ping-b-to-a"); err != nil || !strings.HasSuffix(got, "\nping-b-to-a") {
			return fmt.Errorf("B to A: %q %v", got, err)
		}
		return nil
	}
	child := func(t *testing.T) router.ChildState {
		t.Helper()
		st, text := g.status(t)
		for _, sa := range tunnel(t, st, "a-b").IKE {
			if sa.State == "established" && len(sa.Children) > 0 && sa.Children[0].Out != nil && sa.Children[0].In != nil {
				return sa.Children[0]
			}
		}
		t.Fatalf("no established CHILD SA in ocf net:\n%s", text)
		return router.ChildState{}
	}
	var (
		old              router.ChildState
		bootBefore       int
		startA, startB   time.Time
		cutAt            time.Time
		ok               bool
		echoes, captured bool
	)
	t.Run("power-cut", func(t *testing.T) {
		// Whatever came before, the tunnel is up (the router tries again
		// 30 s after a failure) with data crossing it both ways.
		deadline := time.Now().Add(4 * time.Minute)
		for err := both(); err != nil; err = both() {
			if time.Now().After(deadline) {
				t.Fatalf("no traffic through the tunnel before the cut: %v", err)
			}
			time.Sleep(2 * time.Second)
		}
		// The report of this boot was written again once the tunnel was up.
		m := consoleShows(t, ctx, g.vm, reportAgainRe, time.Minute)
		if m == nil {
			t.Fatal("the boot's report was never written again with the tunnels' state")
		}
		t.Logf("%s", m[0])
		old = child(t)
		w.MustDo(t, "udp-echo lan-a 9")
		w.MustDo(t, "udp-echo b 192.168.2.1:9")
		echoes = true
		w.MustDo(t, "capture inet eth0")
		w.MustDo(t, "probe pa lan-a 192.168.2.1:9 100ms")
		startA = time.Now()
		w.MustDo(t, "probe pb b "+hostA+":9 100ms")
		startB = time.Now()
		time.Sleep(3 * time.Second)
		flows := w.MustDo(t, "capture-end inet eth0")
		captured = true
		for _, want := range []string{"esp " + wanA + " > " + wanB, "esp " + wanB + " > " + wanA} {
			if !strings.Contains(flows, want) {
				t.Errorf("the WAN capture before the cut lacks %q:\n%s", want, flows)
			}
		}
		g.vm.Kill()
		cutAt = time.Now()
		t.Logf("power cut with the probes running; CHILD SA out %s in %s", old.Out.SPI, old.In.SPI)

		// The card, as the cut left it: the boot's report carries the
		// tunnel's state as ocf net showed it.
		c := cardStore(t, g.img)
		if len(c.Reports) == 0 {
			t.Fatal("no report on the card")
		}
		bootBefore = c.Reports[0].Boot
		r, err := report.Read(bytes.NewReader(c.Reports[0].JSON))
		if err != nil {
			t.Fatal(err)
		}
		// Written when the tunnel first came up: the dead peer's part
		// made the CHILD SA again since, so its SPIs are older.
		checkTunnelReport(t, "the card's report of boot "+strconv.Itoa(bootBefore), r, old, false)
		ok = !t.Failed()
	})
	if !ok {
		if echoes && !captured {
			w.Do(ctx, "capture-end inet eth0")
		}
		t.FailNow()
	}

	vm := vmtest.Start(t, g.img, vmtest.Options{Name: "router A after the power cut", Timeout: 15 * time.Minute, TailLines: 80,
		Args: []string{"-object", "filter-dump,id=wandump,netdev=net0,file=" + g.pcap},
		NICs: []qemu.NIC{w.Peer(0, "52:54:00:0d:11:01"), w.Peer(1, "52:54:00:0d:11:02"), {MAC: "52:54:00:0d:11:03", Unplugged: true}}})
	poweredOn := time.Now()

	t.Run("after-power-cut", func(t *testing.T) {
		if consoleShows(t, ctx, vm, regexp.MustCompile(`ocfw: boot sequence starting`), 10*time.Minute) == nil {
			t.Fatal("the restarted router's boot sequence never started")
		}
		sequence := time.Now() // within the poll's 200 ms after the line
		if consoleShows(t, ctx, vm, regexp.MustCompile(`ocfw: ipsec: tunnel a-b up`), 10*time.Minute) == nil {
			t.Fatal("the tunnel never came back after the power cut")
		}
		time.Sleep(3 * time.Second) // the probes' answers through the new SAs
		resumed := func(name string, start time.Time) (time.Time, string) {
			res := w.MustDo(t, "probe-end "+name)
			m := probeGapRe.FindStringSubmatch(res)
			if m == nil {
				t.Fatalf("probe-end %s: %q", name, res)
			}
			at, err := time.ParseDuration(m[2])
			if err != nil || at == 0 {
				t.Fatalf("probe %s never got an answer after the cut: %s", name, res)
			}
			return start.Add(at), res
		}
		backA, resA := resumed("pa", startA)
		backB, resB := resumed("pb", startB)
		back := backA
		if backB.After(back) {
			back = backB
		}
		// The restarted kernel's start, from its uptime read after the
		// fact (an upper bound on the interval below: the uptime is read
		// after `before`).
		before := time.Now()
		out := w.MustDo(t, "ssh lan-a 192.168.1.1:22 root /key cat /proc/uptime")
		_, up, _ := strings.Cut(out, "\n")
		var upSec float64
		if _, err := fmt.Sscan(up, &upSec); err != nil || !strings.HasPrefix(out, "exit 0") {
			t.Fatalf("uptime: %q", out)
		}
		kernelStart := before.Add(-time.Duration(upSec * float64(time.Second)))
		took := back.Sub(sequence)
		t.Logf("data both ways again %.1f s after the restarted router's boot sequence started (%.1f s after its kernel started, %.1f s after QEMU powered it on, %.1f s after the cut)\n  A->B->A: %s\n  B->A->B: %s",
			took.Seconds(), back.Sub(kernelStart).Seconds(), back.Sub(poweredOn).Seconds(), back.Sub(cutAt).Seconds(), resA, resB)
		// The bound counts from the firmware's boot sequence (`ocf boot`):
		// the emulated kernel's own start before it is QEMU's, and took 18 s
		// of the 31 under a load of 20 on 2 cores.
		if took > restartWithin {
			t.Errorf("data both ways again %.1f s after the restarted router's boot sequence started, want within %v", took.Seconds(), restartWithin)
		}
		if err := both(); err != nil {
			t.Errorf("after the restart: %v", err)
		}

		// charon's CHILD SA is a new one: the router's new SPIs, the old
		// ones gone from its kernel.
		now := child(t)
		if now.Out.SPI == old.Out.SPI || now.In.SPI == old.In.SPI {
			t.Errorf("the CHILD SA after the restart has the old SPIs: out %s in %s", now.Out.SPI, now.In.SPI)
		}
		xs := w.MustDo(t, "exec b LD_LIBRARY_PATH="+strongswan.LibraryPath+" "+strongswan.IP+" -s xfrm state")
		for _, spi := range []string{old.Out.SPI, old.In.SPI} {
			if strings.Contains(xs, "spi "+spi+"(") {
				t.Errorf("charon's kernel still holds the SA %s from before the cut:\n%s", spi, xs)
			}
		}
		for _, spi := range []string{now.Out.SPI, now.In.SPI} {
			if !strings.Contains(xs, "spi "+spi+"(") {
				t.Errorf("charon's kernel lacks the new SA %s:\n%s", spi, xs)
			}
		}
		how := "its liveness check"
		if log, err := w.Do(ctx, "output charon-b"); err == nil && strings.Contains(log, "INITIAL_CONTACT") {
			how = "INITIAL_CONTACT"
		}
		t.Logf("charon replaced the CHILD SA (%s): out %s in %s -> out %s in %s", how, old.Out.SPI, old.In.SPI, now.Out.SPI, now.In.SPI)

		// The restarted router's WAN: only ESP and IKE between the ends,
		// never the LAN in the clear, while it booted.
		capt := readPCAP(t, g.pcap)
		lan := netip.MustParsePrefix("192.168.0.0/16")
		clear := 0
		for _, pk := range capt.packets {
			if lan.Contains(pk.src) || lan.Contains(pk.dst) {
				if clear++; clear <= 5 {
					t.Errorf("after the restart, a LAN packet on the WAN in the clear: %v -> %v protocol %d", pk.src, pk.dst, pk.proto)
				}
			}
		}
		if clear > 5 {
			t.Errorf("... %d LAN packets in the clear in all", clear)
		}

		// Replay: ESP recorded before the cut (old SAs) and now (the new
		// ones), sent again toward both ends.
		w.MustDo(t, "capture inet i0")
		err := both()
		w.MustDo(t, "capture-end inet i0")
		if err != nil {
			t.Fatal(err)
		}
		fwBefore, swBefore := g.xfrmCounters(t, now)
		sent := map[string]int{}
		for _, r := range []struct{ name, capture, src, dst string }{
			{"old-to-router", "inet/eth0", wanB, wanA},
			{"old-to-charon", "inet/eth0", wanA, wanB},
			{"new-to-router", "inet/i0", wanB, wanA},
			{"new-to-charon", "inet/i0", wanA, wanB},
		} {
			res := w.MustDo(t, fmt.Sprintf("replay inet %s %s %s %d", r.capture, r.src, r.dst, replayCount))
			m := replayedRe.FindStringSubmatch(res)
			if m == nil {
				t.Fatalf("replay %s: %q", r.name, res)
			}
			sent[r.name], _ = strconv.Atoi(m[1])
			t.Logf("%s: %s", r.name, res)
		}
		time.Sleep(time.Second)
		fwAfter, swAfter := g.xfrmCounters(t, now)
		t.Logf("router before %+v after %+v\ncharon before %+v after %+v", fwBefore, fwAfter, swBefore, swAfter)
		for _, c := range []struct {
			who           string
			before, after xfrmCount
			old, new      int
		}{
			{"the router", fwBefore, fwAfter, sent["old-to-router"], sent["new-to-router"]},
			{"charon", swBefore, swAfter, sent["old-to-charon"], sent["new-to-charon"]},
		} {
			if c.after.inPackets != c.before.inPackets || c.after.inBytes != c.before.inBytes {
				t.Errorf("%s's inbound SA accepted replayed ESP: %d packets %d bytes before, %d %d after", c.who,
					c.before.inPackets, c.before.inBytes, c.after.inPackets, c.after.inBytes)
			}
			if d := c.after.replays - c.before.replays; d != uint64(c.new) {
				t.Errorf("%s's inbound SA refused %d replayed packets, want the %d sent", c.who, d, c.new)
			}
			if d := c.after.noState - c.before.noState; d != uint64(c.old) {
				t.Errorf("%s's kernel counted %d packets for no SA (XfrmInNoStates), want the %d of the old SAs sent", c.who, d, c.old)
			}
			if d := c.after.seqErrors - c.before.seqErrors; d != uint64(c.new) {
				t.Errorf("%s's kernel counted %d sequence errors (XfrmInStateSeqError), want the %d replayed", c.who, d, c.new)
			}
		}

		// The new boot's report, in RAM on the router (the card's is the
		// same), carries the new CHILD SA.
		m := consoleShows(t, ctx, vm, reportAgainRe, 2*time.Minute)
		if m == nil {
			t.Fatal("the restarted boot's report was never written again with the tunnels' state")
		}
		if m[1] != strconv.Itoa(bootBefore+1) {
			t.Errorf("the restarted boot is boot %s, want %d", m[1], bootBefore+1)
		}
		out = w.MustDo(t, "ssh lan-a 192.168.1.1:22 root /key cat /run/ocfw/report.json")
		_, js, _ := strings.Cut(out, "\n")
		r, err := report.Read(strings.NewReader(js))
		if err != nil {
			t.Fatalf("the restarted router's report: %v\n%.300s", err, out)
		}
		checkTunnelReport(t, "the restarted router's report", r, now, true)
	})
	return vm
}

// checkTunnelReport asserts that a report carries tunnel a-b up, with
// the IKE SA ocf net shows and a CHILD SA with c's driver (and, with
// spis, c itself).
func checkTunnelReport(t *testing.T, what string, r *report.Report, c router.ChildState, spis bool) {
	t.Helper()
	if r.Tunnels == nil || len(r.Tunnels.List) != 1 {
		t.Fatalf("%s has no tunnels' state: %+v", what, r.Tunnels)
	}
	tu := r.Tunnels.List[0]
	if !r.Tunnels.Settled || tu.Name != "a-b" || tu.Keying != "ikev2" || tu.State != "up" || len(tu.IKE) == 0 {
		t.Fatalf("%s: tunnels %+v", what, r.Tunnels)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	for _, sa := range tu.IKE {
		if sa.State != "established" || len(sa.Children) == 0 {
			continue
		}
		k := sa.Children[0]
		if sa.PeerID != "ike-b.example" || !strings.HasPrefix(sa.Remote, wanB+":") || sa.Role != "initiator" ||
			sa.Proposal != "AES-CBC-128/HMAC-SHA2-256-128/PRF-HMAC-SHA2-256/Curve25519" || sa.LastRekey == "" ||
			!strings.Contains(sa.Liveness, "last heard") || !strings.HasPrefix(k.Proposal, "AES-CBC-128/HMAC-SHA2-256-128") ||
			k.Driver == "" || k.Driver != c.Driver || !strings.HasPrefix(k.OutSPI, "0x") || !strings.HasPrefix(k.InSPI, "0x") ||
			(spis && (k.OutSPI != c.Out.SPI || k.InSPI != c.In.SPI)) {
			t.Errorf("%s: IKE SA %+v, CHILD SA %+v; ocf net's CHILD SA %+v out %s in %s", what, sa, k, c, c.Out.SPI, c.In.SPI)
		}
		if !strings.Contains(text.String(), "  tunnel a-b (ikev2): up\n") || !strings.Contains(text.String(), "cipher on "+c.Driver) {
			t.Errorf("%s in text lacks the tunnel:\n%s", what, text.String())
		}
		return
	}
	t.Errorf("%s: no established IKE SA with a CHILD SA: %+v", what, tu)
}

// xfrmCount is one end's kernel counters for the replay check: its
// inbound SA's packets and bytes and refused replays, and its XFRM
// statistics' packets for no SA and sequence errors.
type xfrmCount struct {
	inPackets, inBytes, replays uint64
	noState, seqErrors          uint64
}

// xfrmCounters reads the router's (ocf net and /proc/net/xfrm_stat over
// SSH) and charon's (ip -s xfrm state and xfrm_stat in its namespace),
// for the CHILD SA c (the router's view: charon's inbound SA is c's out).
func (g ikeRig) xfrmCounters(t *testing.T, c router.ChildState) (fw, sw xfrmCount) {
	t.Helper()
	st, _ := g.status(t)
	found := false
	for _, sa := range tunnel(t, st, "a-b").IKE {
		for _, k := range sa.Children {
			if k.In != nil && k.In.SPI == c.In.SPI {
				fw.inPackets, fw.inBytes, fw.replays = k.In.Packets, k.In.Bytes, uint64(k.In.ReplayDrops)+uint64(k.In.WindowDrops)
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("ocf net no longer shows the CHILD SA in %s", c.In.SPI)
	}
	out := g.w.MustDo(t, "ssh lan-a 192.168.1.1:22 root /key cat /proc/net/xfrm_stat")
	if !strings.HasPrefix(out, "exit 0") {
		t.Fatalf("the router's /proc/net/xfrm_stat: %q", out)
	}
	fw.noState, fw.seqErrors = xfrmStat(t, out)
	xs := g.w.MustDo(t, "exec b LD_LIBRARY_PATH="+strongswan.LibraryPath+" "+strongswan.IP+" -s xfrm state")
	block := ""
	for _, b := range strings.Split("\n"+xs, "\nsrc ") {
		if strings.Contains(b, "spi "+c.Out.SPI+"(") { // ip prints "spi 0x...(decimal)"
			block = b
		}
	}
	m, n := xfrmBytesRe.FindStringSubmatch(block), xfrmStatsRe.FindStringSubmatch(block)
	if m == nil || n == nil {
		t.Fatalf("charon's SA %s in ip -s xfrm state:\n%s", c.Out.SPI, xs)
	}
	sw.inBytes, _ = strconv.ParseUint(m[1], 10, 64)
	sw.inPackets, _ = strconv.ParseUint(m[2], 10, 64)
	win, _ := strconv.ParseUint(n[1], 10, 64)
	rep, _ := strconv.ParseUint(n[2], 10, 64)
	sw.replays = win + rep
	sw.noState, sw.seqErrors = xfrmStat(t, g.w.MustDo(t, "xfrm-stat b"))
	return fw, sw
}

// xfrmStat reads XfrmInNoStates and XfrmInStateSeqError.
func xfrmStat(t *testing.T, s string) (noState, seqErrors uint64) {
	t.Helper()
	got := map[string]uint64{}
	for _, m := range xfrmStatRe.FindAllStringSubmatch(s, -1) {
		got[m[1]], _ = strconv.ParseUint(m[2], 10, 64)
	}
	if _, ok := got["XfrmInNoStates"]; !ok {
		t.Fatalf("no XfrmInNoStates in %q", s)
	}
	return got["XfrmInNoStates"], got["XfrmInStateSeqError"]
}
