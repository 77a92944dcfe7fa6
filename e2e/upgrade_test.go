package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bu "github.com/ocfw/ocfw/boot/upgrade"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
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

// receive sends a system to the box by hand, past ocfw upgrade's own
// checks (internal/cli's tests): its header, then kernel and initrd,
// into `ocf upgrade receive` through the host's OpenSSH.
func (b *upgradeBox) receive(t *testing.T, h bu.Header, kernel, initrd []byte) (string, error) {
	t.Helper()
	var stream bytes.Buffer
	must(t, bu.WriteHeader(&stream, h))
	stream.Write(kernel)
	stream.Write(initrd)
	cmd := exec.Command(b.sshPath, "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+b.knownHosts, "-o", "StrictHostKeyChecking=accept-new",
		"-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "-p", strconv.Itoa(b.port), "-i", b.key, "root@127.0.0.1", "ocf upgrade receive")
	cmd.Stdin = &stream
	got, err := cmd.CombinedOutput()
	return string(got), err
}

// The upgrade's whole way, old system to a committed new one through
// `ocfw upgrade` and the host's OpenSSH, is TestRunKeepsCard's
// UpgradeInRun (under `ocfw run`, as docs/run.md tells users to try an
// upgrade); the rollbacks and a system refused before anything is
// written are TestUpgradeRollbacks'; the power cuts TestUpgradePowerCuts'.

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
