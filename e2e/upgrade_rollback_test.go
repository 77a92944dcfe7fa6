package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fwboot "github.com/ocfw/ocfw/boot"
	bu "github.com/ocfw/ocfw/boot/upgrade"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
)

// TestUpgradeRollbacks sends one box, in turn, four new systems that are
// broken in the ways issue 22 names, each built with `ocfw build
// --test-inject` (test images only), and checks that each upgrade is
// rolled back by itself: the old system boots again, and `ocfw upgrade`,
// `ocf upgrade status`, `ocf net` and the boot's report all say
// "upgrade to REV rolled back: REASON" with the reason that fits.
//
//  1. init-exit: the initramfs's /init exits, the kernel panics
//     ("Attempted to kill init") and panic=10 resets: the new system
//     never reached its boot sequence.
//  2. corrupt:16: a faulty engine fails the self-test: worse than the
//     old system's, the trial resets itself.
//  3. no-wan: the router leaves the WAN port down: no address within
//     the trial's time ("no network"; two minutes, for this test image
//     boot.TestNoWANWait).
//  4. kernel-hang: once the modules are loaded (and the trial's
//     watchdog armed) the kernel crashes with its panic reset turned
//     off and stops for good: only QEMU's i6300esb, petted by the trial
//     until then, resets it (for this test image after
//     boot.TestHangWatchdogTimeout, not boot.WatchdogTimeout).
//
// Before them, a system for another board, sent by hand, is refused
// with nothing written. One box, one QEMU process: each case is a trial
// boot and the old system's boot after it. The broken images are built
// while the box boots the first time.
func TestUpgradeRollbacks(t *testing.T) {
	needEndToEnd(t)
	parallel(t, 1) // one guest, idle between its boots: it overlaps the others
	dir, key, site := upgradeSite(t)
	// The other upgrade tests' old system (routerArgs), short budgets:
	// the reasons do not depend on how long the speed table and the ESP
	// run take, and every case boots twice.
	common := append(append([]string{}, routerArgs...), site)
	oldImg := filepath.Join(dir, "gw.img") // the name too: the manifest holds it
	buildImage(t, oldImg, common...)
	oldRev := revision(t, oldImg)

	cases := []struct {
		inject string
		reason string // the rolled back message's reason, a prefix
		trial  string // on the console during the trial
	}{
		{plan.TestBreakInitExit, bu.NoStart, "Attempted to kill init"},
		{"corrupt:16", "the new system's self-test is worse than the old one's", "ocfw: the new system failed its trial: the new system's self-test is worse"},
		{plan.TestBreakNoWAN, "no network: the WAN (eth0) has no address", "TEST IMAGE: the WAN port eth0 stays down"},
		{plan.TestBreakHang, bu.Started, "TEST IMAGE: stopping the kernel for good"},
	}
	// The broken images are built while the box boots.
	type built struct {
		img string
		err string
	}
	images := make(chan built, len(cases))
	go func() {
		for _, c := range cases {
			img := filepath.Join(dir, strings.ReplaceAll(c.inject, ":", "-")+".img")
			out, errs, code := ocfw(t, append(append([]string{"build", "-o", img}, common...), "--test-inject", c.inject)...)
			b := built{img: img}
			if code != 0 {
				b.err = out + errs
			}
			images <- b
		}
	}()

	start := time.Now()
	b := startUpgradeBox(t, oldImg, key)
	waitCount(t, b.vm, plan.MarkDone, 1, 10*time.Minute)
	if st := b.waitUpgradeReady(t); !strings.Contains(st, "revision "+oldRev) || !strings.Contains(st, "slot a") {
		t.Fatalf("status before: %s", st)
	}
	t.Logf("the old system %s is up after %v", oldRev, time.Since(start).Round(time.Second))

	// Another board's system, sent by hand past ocfw upgrade's own check
	// (internal/cli's tests): the box refuses it before writing anything,
	// and the status still names the running system only.
	t.Run("another-board", func(t *testing.T) {
		sys, err := firmware.OpenSystem(oldImg)
		must(t, err)
		kernel, err := io.ReadAll(io.LimitReader(sys.Reader(), sys.Manifest.System.Kernel.Size))
		sys.Close()
		must(t, err)
		junk := bytes.Repeat([]byte("not an initramfs "), 1000)
		other := bu.Header{Board: "net5501", Revision: "0a0b0c0d0e0f",
			Kernel: bu.FileSum{Size: int64(len(kernel)), SHA256: fmt.Sprintf("%x", sha256.Sum256(kernel))},
			Initrd: bu.FileSum{Size: int64(len(junk)), SHA256: fmt.Sprintf("%x", sha256.Sum256(junk))}}
		if got, err := b.receive(t, other, kernel, junk); err == nil || !strings.Contains(got, "the image is for board net5501, this is a alix2d13: nothing written") {
			t.Errorf("another board's system: %v\n%s", err, got)
		}
		if st := b.ssh(t, "ocf upgrade status"); strings.Contains(st, "0a0b0c0d0e0f") || !strings.Contains(st, "revision "+oldRev) {
			t.Errorf("status after another board's system was refused: %s", st)
		}
	})

	var messages []string
	for i, c := range cases {
		bi := <-images
		if bi.err != "" {
			t.Fatalf("ocfw build --test-inject %s:\n%s", c.inject, bi.err)
		}
		rev := revision(t, bi.img)
		want := "upgrade to " + rev + " rolled back: " + c.reason
		messages = append(messages, want)
		ok := t.Run(c.inject, func(t *testing.T) {
			start := time.Now()
			con := b.vm.Console()
			dones, armed := strings.Count(con, plan.MarkDone), strings.Count(con, armedLine)
			out, errs, code := ocfw(t, append(append([]string{"upgrade"}, b.upgradeFlags()...), "--wait", "20m", bi.img, "127.0.0.1")...)
			t.Logf("ocfw upgrade to %s (%s) took %v:\n%s%s", rev, c.inject, time.Since(start).Round(time.Second), out, errs)
			if code != 1 || !strings.Contains(out, want) {
				t.Fatalf("ocfw upgrade: exit %d; want 1 and %q", code, want)
			}
			// ocfw upgrade returns once the old system says rolled back:
			// its boot sequence is done.
			st := b.ssh(t, "ocf upgrade status")
			if !strings.Contains(st, "last "+want) || !strings.Contains(st, "revision "+oldRev) || !strings.Contains(st, "slot a") {
				t.Errorf("ocf upgrade status:\n%s\nwant the old system (%s, slot a) and %q", st, oldRev, want)
			}
			if n := b.ssh(t, "ocf net"); !strings.Contains(n, want) {
				t.Errorf("ocf net does not tell the rollback:\n%s", n)
			}
			con = b.vm.Console()
			if !strings.Contains(con, c.trial) {
				t.Errorf("the console never showed %q", c.trial)
			}
			wantArmed := armedLine + fwboot.WatchdogTimeout.String() + ")"
			if c.inject == plan.TestBreakHang {
				wantArmed = armedLine + fwboot.TestHangWatchdogTimeout.String() + ")"
			}
			if c.inject != plan.TestBreakInitExit && !strings.Contains(con, wantArmed) {
				t.Errorf("the trial never showed %q", wantArmed)
			}
			if !strings.Contains(con, "ocfw: "+want) {
				t.Errorf("the old system's console line %q is missing", "ocfw: "+want)
			}
			// Every trial that reaches its boot sequence arms the watchdog.
			if n := strings.Count(con, armedLine); c.inject != plan.TestBreakInitExit && n != armed+1 {
				t.Errorf("%q on the console %d times, %d before the trial", armedLine, n, armed)
			}
			// The trial boot reached the store, or not: either way the
			// old system's boot sequence ran once more.
			if n := strings.Count(con, plan.MarkDone); n <= dones {
				t.Errorf("%d boot sequences done, %d before: the old system did not boot again", n, dones)
			}
			t.Logf("case %d (%s): rolled back, old system answering after %v", i+1, c.inject, time.Since(start).Round(time.Second))
		})
		if !ok {
			break // the box may be anywhere: the next case proves nothing
		}
	}
	t.Logf("all cases: %v since the first boot", time.Since(start).Round(time.Second))
	vmtest.PowerOff(t, b.vm)

	// The reports on the card: each rollback is a note of the old
	// system's boot after it.
	c := cardStore(t, oldImg)
	var notes []string
	for _, r := range c.Reports {
		rep, err := report.Read(bytes.NewReader(r.JSON))
		if err != nil {
			t.Errorf("report of boot %d: %v", r.Boot, err)
			continue
		}
		notes = append(notes, rep.Notes...)
	}
	all := strings.Join(notes, "\n")
	for _, m := range messages {
		if !strings.Contains(all, m) {
			t.Errorf("no report holds the note %q", m)
		}
	}
	var rec bu.Record
	if ok, err := c.State.Value(bu.RecordName, &rec); !ok || err != nil || rec.State != bu.RolledBack || rec.Slots["a"] != oldRev {
		t.Errorf("the store's upgrade record: %+v (%v)", rec, err)
	}
	fsckImage(t, oldImg)
}

// armedLine is what a trial prints when it has armed QEMU's i6300esb
// (boot.WatchdogTimeout; the kernel-hang image's is
// boot.TestHangWatchdogTimeout, so the prefix without the time).
const armedLine = "ocfw: upgrade trial: watchdog armed ("

// revision is the system revision in an image's manifest.
func revision(t *testing.T, img string) string {
	t.Helper()
	sys, err := firmware.OpenSystem(img)
	must(t, err)
	sys.Close()
	return sys.Manifest.System.Revision
}
