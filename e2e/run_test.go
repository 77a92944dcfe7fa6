package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bu "github.com/ocfw/ocfw/boot/upgrade"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/cli"
	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/plan"
)

// syncBuffer is a bytes.Buffer the run writes to while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bgRun is `ocfw run` running in the background, as a user leaves it
// in a terminal of their own.
type bgRun struct {
	out, errs syncBuffer
	code      int
	done      chan struct{}
	cancel    context.CancelFunc
}

func startRun(t *testing.T, args ...string) *bgRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &bgRun{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(r.done)
		r.code = cli.Run(ctx, append([]string{"run"}, args...), &r.out, &r.errs)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		if t.Failed() {
			t.Logf("ocfw run %v: exit %d\nstderr:\n%s\nconsole (last lines):\n%s", args, r.code, r.errs.String(), tailOf(r.out.String(), 80))
			for _, b := range beforeEach(r.out.String(), plan.MarkDaemonDied, 60) {
				t.Logf("the console before a dead daemon's report (its own last words are here):\n%s", b)
			}
		}
	})
	return r
}

func (r *bgRun) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitConsole waits until the run's console shows text n times; the run
// ending first is a failure.
func (r *bgRun) waitConsole(t *testing.T, text string, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); strings.Count(r.out.String(), text) < n; time.Sleep(time.Second) {
		if r.ended() {
			t.Fatalf("ocfw run ended (exit %d) before the console showed %q %d times", r.code, text, n)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q not on the console %d times within %v", text, n, within)
		}
	}
}

// sshGone runs a command that takes the box down with the connection
// (ocf reboot, ocf poweroff): its exit status says nothing, and a
// connection the reset cuts without a FIN must not hang the test, so ssh
// gives up on a silent server and the whole call on a bound.
func (b *upgradeBox) sshGone(t *testing.T, command string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, b.sshPath, "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+b.knownHosts, "-o", "StrictHostKeyChecking=accept-new",
		"-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3",
		"-p", strconv.Itoa(b.port), "-i", b.key, "root@127.0.0.1", command).CombinedOutput()
	if err != nil {
		t.Logf("ssh %s (the box goes down with it): %v %s", command, err, out)
	}
}

// beforeEach is, for each line of s holding mark, that line and the n
// lines before it: a later boot's lines push a crash's out of the tail.
func beforeEach(s, mark string, n int) []string {
	lines := strings.Split(strings.ReplaceAll(s, "\r", ""), "\n")
	var out []string
	for i, l := range lines {
		if strings.Contains(l, mark) {
			out = append(out, strings.Join(lines[max(0, i-n):i+1], "\n"))
		}
	}
	return out
}

func tailOf(s string, n int) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r", ""), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestRunKeepsCard is issue 29 point 8 on one `ocfw run` of a router
// image and a second run of it, sharing their boots:
//   - TestRebootInRun: `ocf reboot` on the box restarts the same QEMU
//     (the run goes on) and the router comes back;
//   - TestUpgradeInRun: `ocfw upgrade` into the router under `ocfw run`
//     commits: the new revision runs after the upgrade's reset, in the
//     same run, and `ocf upgrade status` says committed;
//   - then the run is powered off and started again: the second run
//     boots the card the first one left (the new system, from slot b),
//     while the image's bytes never changed and ocfw inspect passes.
//
// Its site keeps the RSA host key on (the other router tests' is off):
// the first boot makes it, OpenSSH's ssh-keyscan gets it, and the kept
// card's later boots (the reboot, the new system, the second run) serve
// the same key and never make another.
//
// Before: QEMU ran with -no-reboot (the reboot and the upgrade's reset
// ended the run) and IMAGE.state kept the data partition only (the slot
// was lost: the second run booted slot a and reported a rollback).
func TestRunKeepsCard(t *testing.T) {
	needEndToEnd(t)
	parallel(t, 1) // one guest, idle between its boots
	dir, key, site := upgradeSite(t)
	pub, _ := testKey(t)
	must(t, os.WriteFile(site, []byte(strings.Replace(routerSite(pub), "  rsa_host_key: false\n", "", 1)), 0o644))
	img, newImg := filepath.Join(dir, "old.img"), filepath.Join(dir, "new.img")
	buildImage(t, img, "--board", "alix2d13", "--cipher", "aes-128-cbc", "--speed-budget", "1s", "--esp-budget", "0s", "--site", site)
	buildImage(t, newImg, "--board", "alix2d13", "--cipher", "aes-128-cbc", "--speed-budget", "2s", "--esp-budget", "0s", "--site", site)
	oldSys, err := firmware.OpenSystem(img)
	must(t, err)
	oldSys.Close()
	newSys, err := firmware.OpenSystem(newImg)
	must(t, err)
	newSys.Close()
	oldRev, newRev := oldSys.Manifest.System.Revision, newSys.Manifest.System.Revision
	if oldRev == newRev {
		t.Fatalf("both systems are %s", oldRev)
	}

	b := &upgradeBox{port: freePort(t), key: key, knownHosts: filepath.Join(t.TempDir(), "known_hosts"), sshPath: realclient.Need(t, "ssh")}
	run := startRun(t, "--timeout", "60m", "--ssh-port", strconv.Itoa(b.port), img)
	run.waitConsole(t, plan.MarkDone, 1, 15*time.Minute)
	if st := b.waitStatus(t, "slot", 10*time.Minute); !strings.Contains(st, "revision "+oldRev) || !strings.Contains(st, "slot a") {
		t.Fatalf("status before: %s", st)
	}
	if e := run.errs.String(); !strings.Contains(e, "booting a card written from the image to "+img+".state") {
		t.Errorf("the first run does not say it writes a card:\n%s", e)
	}
	// The RSA host key, made once the boot sequence is done, before the
	// reboot: a reboot before it is saved would make another.
	run.waitConsole(t, rsaServed, 1, 10*time.Minute)
	rsaLine := rsaKeyRe.FindString(run.out.String())
	if scan, err := exec.Command(realclient.Need(t, "ssh-keyscan"), "-t", "rsa", "-p", strconv.Itoa(b.port), "127.0.0.1").Output(); err != nil || !strings.Contains(string(scan), "ssh-rsa ") {
		t.Errorf("ssh-keyscan -t rsa: %v\n%s", err, scan)
	}

	t.Run("RebootInRun", func(t *testing.T) {
		b.sshGone(t, "ocf reboot")
		run.waitConsole(t, plan.MarkDone, 2, 15*time.Minute)
		if st := b.waitStatus(t, "slot", 10*time.Minute); !strings.Contains(st, "revision "+oldRev) {
			t.Errorf("status after the reboot: %s", st)
		}
		if run.ended() {
			t.Fatalf("the run ended at the reboot (exit %d)", run.code)
		}
	})

	t.Run("UpgradeInRun", func(t *testing.T) {
		out, errs, code := ocfw(t, append(append([]string{"upgrade"}, b.upgradeFlags()...), "--wait", "20m", newImg, "127.0.0.1")...)
		if code != 0 || !strings.Contains(out, "upgrade to "+newRev+" committed") {
			t.Fatalf("ocfw upgrade: exit %d\n%s%s", code, out, errs)
		}
		st := b.ssh(t, "ocf upgrade status")
		if !strings.Contains(st, "revision "+newRev) || !strings.Contains(st, "slot b") || !strings.Contains(st, "committed") {
			t.Errorf("status after the upgrade: %s", st)
		}
		if !strings.Contains(run.out.String(), "ocfw: system "+newRev+" from slot b") {
			t.Errorf("the run's console never showed the new system booting from slot b")
		}
		if n := b.ssh(t, "ocf net"); !strings.Contains(n, "upgrade to "+newRev+" committed") {
			t.Errorf("ocf net does not tell the upgrade:\n%s", n)
		}
		if !strings.Contains(run.out.String(), "upgrade to "+newRev+" on trial") {
			t.Errorf("the console never said the new system was on trial")
		}
		// The trial armed QEMU's watchdog and the commit stopped it: the
		// box runs on without it (the rest of this test would see a reset).
		run.waitConsole(t, "ocfw: upgrade trial over: watchdog stopped", 1, time.Minute)
		if run.ended() {
			t.Fatalf("the run ended at the upgrade's reset (exit %d)", run.code)
		}
	})

	// Power off: the run ends, the image is as built.
	b.sshGone(t, "ocf poweroff")
	select {
	case <-run.done:
	case <-time.After(10 * time.Minute):
		t.Fatal("ocfw run still running 10 minutes after ocf poweroff")
	}
	if run.code != 0 {
		t.Errorf("ocfw run after ocf poweroff: exit %d", run.code)
	}
	if n := strings.Count(run.out.String(), rsaMade); n != 1 || strings.Count(run.out.String(), rsaLine) < 3 {
		t.Errorf("the first run made %d RSA host keys (want 1) and served %q %d times (want one a boot, 3)", n, rsaLine, strings.Count(run.out.String(), rsaLine))
	}
	unchanged(t, img)
	// The kept card: the record committed, every boot's report kept (the
	// old system's two, the new one's), both file systems clean.
	card := img + ".state"
	c := cardStore(t, card)
	var rec bu.Record
	if ok, err := c.State.Value(bu.RecordName, &rec); !ok || err != nil || rec.State != bu.Committed || rec.Slots["b"] != newRev {
		t.Errorf("the kept card's upgrade record: %+v (%v)", rec, err)
	}
	if c.State.Boot < 3 || len(c.Reports) < 3 {
		t.Errorf("the kept card after the upgrade: boot %d, %d reports; want every boot's kept (3)", c.State.Boot, len(c.Reports))
	}
	fsckImage(t, card)
	if _, errs, code := ocfw(t, "inspect", img); code != 0 {
		t.Errorf("ocfw inspect on the image after the runs: exit %d\n%s", code, errs)
	}

	// The second run boots the card the first one left: the new system.
	out, errs, code := ocfw(t, "run", "--poweroff-after-report", "--timeout", "30m", "--ssh-port", "0", img)
	if code != 0 {
		t.Errorf("the second run: exit %d\n%s", code, errs)
	}
	if !strings.Contains(errs, "booting the card kept in "+img+".state") {
		t.Errorf("the second run does not say it boots the kept card:\n%s", errs)
	}
	if !strings.Contains(out, "ocfw: system "+newRev+" from slot b") || strings.Contains(out, "rolled back") {
		t.Errorf("the second run did not boot the committed system from slot b:\n%s", tailOf(out, 80))
	}
	if strings.Contains(out, rsaMade) || !strings.Contains(out, rsaLine) {
		t.Errorf("the second run did not serve the kept RSA host key %q", rsaLine)
	}
	unchanged(t, img)
}

// What the router says of its RSA host key: made (once a card), and
// served (each boot, with its fingerprint).
const (
	rsaMade   = "ocfw: ssh: made an RSA host key"
	rsaServed = "ocfw: ssh: ssh-rsa host key"
)

var rsaKeyRe = regexp.MustCompile(rsaServed + ` SHA256:[A-Za-z0-9+/]{43}`)

func TestBeforeEach(t *testing.T) {
	console := "boot 1\nSIGILL: illegal instruction\nPC=0x1\r\n" + plan.MarkDaemonDied + " (signal: illegal instruction)\nboot 2\nok\n"
	for _, c := range []struct {
		name, s string
		n       int
		want    []string
	}{
		{"none", "boot 1\nok\n", 2, nil},
		{"two before", console, 2, []string{"SIGILL: illegal instruction\nPC=0x1\n" + plan.MarkDaemonDied + " (signal: illegal instruction)"}},
		{"from the start", console, 10, []string{"boot 1\nSIGILL: illegal instruction\nPC=0x1\n" + plan.MarkDaemonDied + " (signal: illegal instruction)"}},
		{"each", plan.MarkDaemonDied + "\nx\n" + plan.MarkDaemonDied, 1, []string{plan.MarkDaemonDied, "x\n" + plan.MarkDaemonDied}},
	} {
		got := beforeEach(c.s, plan.MarkDaemonDied, c.n)
		if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("%s: beforeEach = %q, want %q", c.name, got, c.want)
		}
	}
}
