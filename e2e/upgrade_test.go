package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	bu "github.com/ocfw/ocfw/boot/upgrade"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/plan"
)

// upgradeBox is a router VM reachable from the host's OpenSSH: its WAN
// on one restricted user network (QEMU's DHCP gives it an address), its
// LAN on another with 127.0.0.1:port forwarded to 192.168.1.1:22. Resets
// restart it, as the board's own reset does; QEMU's i6300esb watchdog,
// which a trial pets, resets it too.
type upgradeBox struct {
	vm              *qemu.VM
	port            int
	key, knownHosts string
	sshPath         string
	args            []string // extra QEMU arguments for the next boot
}

// newUpgradeBox is a box not booted yet (boot or restart boots it).
func newUpgradeBox(t *testing.T, key string) *upgradeBox {
	return &upgradeBox{port: freePort(t), key: key, knownHosts: filepath.Join(t.TempDir(), "known_hosts"), sshPath: realclient.Need(t, "ssh")}
}

func startUpgradeBox(t *testing.T, img, key string) *upgradeBox {
	b := newUpgradeBox(t, key)
	b.boot(t, img, "upgrade")
	return b
}

// boot starts the box's VM on img; again after a power cut, with the
// same forward and known hosts.
func (b *upgradeBox) boot(t *testing.T, img, name string) {
	b.vm = vmtest.Start(t, img, vmtest.Options{Name: name, Reboot: true, Watchdog: true, Timeout: 60 * time.Minute, TailLines: 120, Args: b.args,
		NICs: []qemu.NIC{
			{RestrictedUser: true, MAC: routerWANMAC},
			{RestrictedUser: true, MAC: routerLANMAC, UserNet: "192.168.1.0/24", UserHost: "192.168.1.254",
				Forwards: []qemu.Forward{{Proto: "tcp", HostPort: b.port, GuestAddr: "192.168.1.1", GuestPort: 22}}},
			{MAC: routerLAN2, Unplugged: true}}})
}

// upgradeFlags log ocfw upgrade in with the key and known_hosts the
// test's own OpenSSH uses: the host key is learnt once (ed25519, by
// either), and must then stay the same.
func (b *upgradeBox) upgradeFlags() []string {
	return []string{"--port", strconv.Itoa(b.port), "--identity", b.key, "--known-hosts", b.knownHosts, "--accept-new"}
}

func (b *upgradeBox) ssh(t *testing.T, command string) string {
	t.Helper()
	out, err := b.trySSH(command)
	if err != nil {
		t.Fatalf("ssh %s: %v\n%s", command, err, out)
	}
	return out
}

// waitUpgradeReady waits until the daemon answers ocf upgrade status
// (it starts serving once the boot sequence is done).
func (b *upgradeBox) waitUpgradeReady(t *testing.T) string {
	t.Helper()
	var out string
	var err error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		if out, err = b.trySSH("ocf upgrade status"); err == nil {
			return out
		}
	}
	t.Fatalf("ocf upgrade status: %v\n%s", err, out)
	return ""
}

func (b *upgradeBox) trySSH(command string) (string, error) {
	out, err := exec.Command(b.sshPath, "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+b.knownHosts, "-o", "StrictHostKeyChecking=accept-new",
		"-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "-p", strconv.Itoa(b.port), "-i", b.key, "root@127.0.0.1", command).CombinedOutput()
	return string(out), err
}

// waitCount waits until text is on the console n times.
func waitCount(t *testing.T, vm *qemu.VM, text string, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); strings.Count(vm.Console(), text) < n; time.Sleep(time.Second) {
		if time.Now().After(deadline) || vm.Exited() {
			t.Fatalf("%q not on the console %d times within %v", text, n, within)
		}
	}
}

// upgradeSite is every upgrade test's start: a fresh folder with the test
// key (its private half in key) and the router's site config naming it.
func upgradeSite(t *testing.T) (dir, key, site string) {
	dir = t.TempDir()
	pub, priv := testKey(t)
	key = filepath.Join(dir, "key")
	must(t, os.WriteFile(key, priv, 0o600))
	site = filepath.Join(dir, "site.yaml")
	must(t, os.WriteFile(site, []byte(routerSite(pub)), 0o644))
	return dir, key, site
}

// upgradeImages builds the old and the new system into dir, the same
// two in every upgrade test (buildImage builds each once): the old is
// the router test's image (routerArgs), the new differs in its speed
// budget (2s).
func upgradeImages(t *testing.T, dir, site string) (oldImg, newImg string) {
	t.Helper()
	// gw.img as the router test's: the manifest holds the name.
	oldImg, newImg = filepath.Join(dir, "gw.img"), filepath.Join(dir, "new.img")
	buildImage(t, oldImg, append(append([]string{}, routerArgs...), site)...)
	buildImage(t, newImg, append(append([]string{}, routerArgs...), site, "--speed-budget", "2s")...)
	return oldImg, newImg
}

// TestUpgradeEndToEnd builds two systems that differ (the speed budget in
// their boot options), boots the first, upgrades it to the second with
// `ocfw upgrade` through the host's OpenSSH, and checks the new system
// proved itself and committed: the revision changed, the store's reports
// and boot counter carried on, the host key is the one ssh learnt before
// (accept-new refuses a changed key), both file systems are clean.
func TestUpgradeEndToEnd(t *testing.T) {
	needEndToEnd(t)
	parallel(t, 1) // one guest, idle between its boots: it overlaps the others
	dir, key, site := upgradeSite(t)
	oldImg, newImg := upgradeImages(t, dir, site)
	oldSys, err := firmware.OpenSystem(oldImg)
	must(t, err)
	oldSys.Close()
	newSys, err := firmware.OpenSystem(newImg)
	must(t, err)
	newSys.Close()
	oldRev, newRev := oldSys.Manifest.System.Revision, newSys.Manifest.System.Revision
	if oldRev == newRev {
		t.Fatalf("both systems are %s", oldRev)
	}

	b := startUpgradeBox(t, oldImg, key)
	waitCount(t, b.vm, plan.MarkDone, 1, 10*time.Minute)
	if st := b.waitUpgradeReady(t); !strings.Contains(st, "revision "+oldRev) || !strings.Contains(st, "slot a") {
		t.Fatalf("status before: %s", st)
	}
	start := time.Now()
	out, errs, code := ocfw(t, append(append([]string{"upgrade"}, b.upgradeFlags()...), "--wait", "20m", newImg, "127.0.0.1")...)
	t.Logf("ocfw upgrade took %v:\n%s%s", time.Since(start).Round(time.Second), out, errs)
	if code != 0 || !strings.Contains(out, "upgrade to "+newRev+" committed") {
		t.Fatalf("ocfw upgrade: exit %d", code)
	}
	// ssh learnt the host key on the old system (accept-new refuses a changed one): it is the same.
	st := b.ssh(t, "ocf upgrade status")
	if !strings.Contains(st, "revision "+newRev) || !strings.Contains(st, "slot b") {
		t.Errorf("status after: %s", st)
	}
	if n := b.ssh(t, "ocf net"); !strings.Contains(n, "upgrade to "+newRev+" committed") {
		t.Errorf("ocf net does not tell the upgrade:\n%s", n)
	}
	if !regexp.MustCompile(`(?m)upgrade to ` + newRev + ` on trial`).MatchString(b.vm.Console()) {
		t.Errorf("the console never said the new system was on trial")
	}
	// The trial armed QEMU's watchdog and the commit stopped it: the box
	// runs on without it (the rest of this test would see a reset).
	waitCount(t, b.vm, "ocfw: upgrade trial over: watchdog stopped", 1, time.Minute)

	// A new system whose kernel panics (its initramfs is not one: no
	// root) resets by panic=10, and the running system comes back by
	// itself and says so. Sent by hand: ocfw builds no such image.
	sys, err := firmware.OpenSystem(newImg)
	must(t, err)
	kernel, err := io.ReadAll(io.LimitReader(sys.Reader(), sys.Manifest.System.Kernel.Size))
	sys.Close()
	must(t, err)
	junk := bytes.Repeat([]byte("not an initramfs "), 1000)
	bad := bu.Header{Board: "alix2d13", Revision: "0badc0ffee00",
		Kernel: bu.FileSum{Size: int64(len(kernel)), SHA256: fmt.Sprintf("%x", sha256.Sum256(kernel))},
		Initrd: bu.FileSum{Size: int64(len(junk)), SHA256: fmt.Sprintf("%x", sha256.Sum256(junk))}}
	receive := func(h bu.Header) (string, error) {
		var stream bytes.Buffer
		must(t, bu.WriteHeader(&stream, h))
		stream.Write(kernel)
		stream.Write(junk)
		cmd := exec.Command(b.sshPath, "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+b.knownHosts, "-o", "StrictHostKeyChecking=accept-new",
			"-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "-p", strconv.Itoa(b.port), "-i", b.key, "root@127.0.0.1", "ocf upgrade receive")
		cmd.Stdin = &stream
		got, err := cmd.CombinedOutput()
		return string(got), err
	}

	// Another board's system, sent by hand past ocfw upgrade's own check
	// (internal/cli's tests): the box refuses it before writing anything.
	other := bad
	other.Board, other.Revision = "net5501", "0a0b0c0d0e0f"
	if got, err := receive(other); err == nil || !strings.Contains(got, "the image is for board net5501, this is a alix2d13: nothing written") {
		t.Errorf("another board's system: %v\n%s", err, got)
	}
	if st := b.ssh(t, "ocf upgrade status"); strings.Contains(st, "0a0b0c0d0e0f") || !strings.Contains(st, "revision "+newRev) {
		t.Errorf("status after another board's system was refused: %s", st)
	}

	got, err := receive(bad)
	if err != nil || !strings.Contains(got, "upgrade to 0badc0ffee00 pending") {
		t.Fatalf("sending a system that panics: %v\n%s", err, got)
	}
	want := "last upgrade to 0badc0ffee00 rolled back: " + bu.NoStart
	if st := b.waitStatus(t, "upgrade to 0badc0ffee00 rolled back", 10*time.Minute); !strings.Contains(st, want) || !strings.Contains(st, "revision "+newRev) {
		t.Errorf("after the panic: %s\nwant %q", st, want)
	}
	if !strings.Contains(b.vm.Console(), "Kernel panic") {
		t.Errorf("the console shows no kernel panic")
	}

	// Boots that reach the store: the old system, the committed new one,
	// the old one again after the panic (the panicking boot writes
	// nothing). A failed self-test, init exiting, no network and a hang:
	// TestUpgradeRollbacks.
	wantBoots := 3
	vmtest.PowerOff(t, b.vm)

	c := vmtest.Store(t, oldImg)
	var rec bu.Record
	if ok, err := c.State.Value(bu.RecordName, &rec); !ok || err != nil || rec.State != bu.RolledBack || rec.Slots["b"] != newRev {
		t.Errorf("the store's upgrade record: %+v (%v)", rec, err)
	}
	if c.State.Boot < wantBoots || len(c.Reports) < wantBoots {
		t.Errorf("the store after the upgrades: boot %d, %d reports; want every boot's kept (%d)", c.State.Boot, len(c.Reports), wantBoots)
	}
	fsckImage(t, oldImg)
}

// waitStatus polls ocf upgrade status until it contains text.
func (b *upgradeBox) waitStatus(t *testing.T, text string, within time.Duration) string {
	t.Helper()
	var out string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Second) {
		var err error
		if out, err = b.trySSH("ocf upgrade status"); err == nil && strings.Contains(out, text) {
			return out
		}
	}
	t.Fatalf("ocf upgrade status never said %q; last:\n%s", text, out)
	return ""
}

// fsckImage runs fsck.fat -n on both partitions of a CF image.
func fsckImage(t *testing.T, img string) {
	t.Helper()
	info, err := firmware.Inspect(img)
	must(t, err)
	for _, p := range info.Partitions {
		b, err := os.ReadFile(img)
		must(t, err)
		part := filepath.Join(t.TempDir(), "part")
		must(t, os.WriteFile(part, b[p.Offset:p.Offset+p.Size], 0o644))
		out, err := exec.Command("fsck.fat", "-n", part).CombinedOutput()
		if err != nil || bytes.Contains(bytes.ToLower(out), []byte("dirty")) {
			t.Errorf("fsck.fat -n partition at %d: %v\n%s", p.Offset, err, out)
		}
	}
}
