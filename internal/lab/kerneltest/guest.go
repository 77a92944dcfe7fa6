// Package kerneltest runs a package's Go tests inside a real Linux kernel
// under QEMU: the host side (Run) cross-compiles the test binary, packs it
// as /init into an initramfs with the kernel modules it needs and boots
// it; the guest side (Main, called from TestMain) mounts the basics,
// loads the modules, runs the tests and powers off with a marker that
// carries the exit code.
//
// Why not u-root's github.com/hugelgupf/vmtest: its govmtest runs the
// tests under u-root's init and collects the results over a 9P share,
// which needs 9P and virtio in the kernel at boot, and Debian's
// linux-image-686 has them only as modules. This harness boots that stock
// kernel from the cached .deb with the modules the test needs, runs the
// test binary itself as /init on QEMU's Pentium II without SSE2 (like the
// Geode LX; GO386=softfloat), and takes the verdict from markers on the
// serial console.
package kerneltest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Protocol between host and guest.
const (
	// EnvInGuest is set to "1" for tests running inside the guest.
	EnvInGuest = "OCFW_IN_GUEST"
	// StartMarker is printed by the guest once modules are loaded,
	// followed by the kernel uptime in seconds.
	StartMarker = "OCFW-KERNELTEST-START"
	// ExitMarker is printed by the guest last, followed by the test
	// binary's exit code.
	ExitMarker = "OCFW-KERNELTEST-EXIT"
	// modulesList holds the absolute paths of the modules to load, in
	// load order, one per line.
	modulesList = "/kerneltest/modules"
	// exitHarness is the exit code for failures of the guest harness
	// itself (mounts, modules), before any test ran.
	exitHarness = 125
)

// InGuest reports whether the caller runs inside a kerneltest guest.
func InGuest() bool { return os.Getenv(EnvInGuest) == "1" }

// Main is the test binary's entry point; use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(kerneltest.Main(m)) }
//
// On the host it just runs the tests. As PID 1 of a kerneltest guest it
// prepares the system, runs the tests in a child process (so a panic, a
// -test.timeout or an os.Exit in a test still ends with the marker and a
// drained console) and powers the guest off. It does not return there.
func Main(m *testing.M) int {
	if os.Getpid() != 1 {
		return m.Run()
	}
	code := guestInit()
	fmt.Printf("\n%s %d\n", ExitMarker, code)
	powerOff()
	return code // only if power-off failed: init exiting panics the kernel, which ends QEMU
}

func guestInit() int {
	if err := mountBasics(); err != nil {
		fmt.Fprintln(os.Stderr, "kerneltest:", err)
		return exitHarness
	}
	if err := loadModules(modulesList); err != nil {
		fmt.Fprintln(os.Stderr, "kerneltest:", err)
		return exitHarness
	}
	fmt.Printf("%s %s\n", StartMarker, uptime())
	self, err := os.Executable()
	if err != nil {
		self = "/init"
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), EnvInGuest+"=1", "TMPDIR=/tmp")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			fmt.Fprintf(os.Stderr, "kerneltest: test binary killed by %v\n", ws.Signal())
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "kerneltest: running the tests:", err)
		return exitHarness
	}
}

func mountBasics() error {
	for _, m := range []struct{ fs, dir string }{
		{"proc", "/proc"}, {"sysfs", "/sys"}, {"devtmpfs", "/dev"}, {"tmpfs", "/tmp"},
	} {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fs, m.dir, m.fs, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fs, m.dir, err)
		}
	}
	return nil
}

// loadModules loads each module listed in file, in order. A module that
// is already loaded is fine; any other failure stops with its name.
func loadModules(file string) error {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		path := strings.TrimSpace(sc.Text())
		if path == "" {
			continue
		}
		if err := loadModule(path); err != nil {
			return err
		}
	}
	return sc.Err()
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("loading module %s: %w", path, err)
	}
	return nil
}

func uptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// powerOff drains the serial console, so the marker reaches the host,
// then powers the machine off.
func powerOff() {
	for _, fd := range []int{1, 2} {
		unix.IoctlSetInt(fd, unix.TCSBRK, 1) // tcdrain
	}
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Fprintln(os.Stderr, "kerneltest: power off:", err)
		time.Sleep(time.Second)
	}
}
