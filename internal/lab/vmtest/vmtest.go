// Package vmtest is the harness of the tests that boot board images in
// QEMU: Start boots an image with the board defaults and cleans up after
// the test, PowerOff ends a guest from its shell, Store reads the card's
// store back. Tests only: it imports testing, so no command links it
// (internal/layers checks that).
package vmtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/store"
)

// Options change how Start boots an image; the zero value boots it as an
// x86 board: qemu's i386 defaults (machine pc, a Pentium II without SSE2
// like the Geode, 256 MiB), no network, the image as the first IDE disk.
type Options struct {
	// Name is the guest's name in the test's log; "" means the image's
	// base name.
	Name string
	// Timeout is the watchdog; 0 means 10 minutes.
	Timeout time.Duration
	// NICs are the network cards, in port order (none: no network).
	NICs []qemu.NIC
	// Args are extra emulator arguments (the stand-in engines' devices,
	// a capture filter).
	Args []string
	// Echo, when set, gets a live copy of the console (a file, while
	// debugging).
	Echo io.Writer
	// Reboot lets the guest's resets restart it instead of ending QEMU.
	Reboot bool
	// Watchdog adds QEMU's i6300esb watchdog (qemu.Config.Watchdog).
	Watchdog bool
	// TailLines is how much of the console the test's log gets if it
	// fails; 0 means 60.
	TailLines int
}

// DefaultTimeout is the watchdog when Options.Timeout is 0: a boot with
// the full self-test and speed table under TCG on a loaded host.
const DefaultTimeout = 10 * time.Minute

// Start boots image for t and returns the running guest. It skips with
// -short and when QEMU is missing (failing instead under
// OCFW_REQUIRE_KERNEL=1); when t ends it kills the guest and, if t
// failed, logs the console's last lines.
func Start(t testing.TB, image string, o Options) *qemu.VM {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a board image in QEMU; skipped with -short")
	}
	if err := qemu.Installed("i386"); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	if o.Name == "" {
		o.Name = filepath.Base(image)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.TailLines == 0 {
		o.TailLines = 60
	}
	echo, closeLog := consoleLog(t, o)
	vm, err := qemu.Start(context.Background(), qemu.Config{Disk: image, NICs: o.NICs, Args: o.Args, Timeout: o.Timeout, Echo: echo, Reboot: o.Reboot, Watchdog: o.Watchdog})
	if err != nil {
		closeLog()
		t.Fatalf("%s: %v", o.Name, err)
	}
	t.Cleanup(func() {
		vm.Kill()
		closeLog()
		if t.Failed() {
			t.Logf("%s: last console lines:\n%s", o.Name, qemu.FailureText(vm.Console(), o.TailLines))
		}
	})
	return vm
}

// ConsoleDirEnv names a directory where Start writes each guest's
// console, every line prefixed with the seconds since QEMU started:
// where a boot spends its time, measured on a whole suite run without
// changing it (docs/testing.md). Unset: no files.
const ConsoleDirEnv = "OCFW_VMTEST_CONSOLE_DIR"

// consoleLog is the writer Start gives QEMU as its echo: o.Echo, and
// with ConsoleDirEnv set a timestamped file named for the test and the
// guest as well.
func consoleLog(t testing.TB, o Options) (io.Writer, func()) {
	dir := os.Getenv(ConsoleDirEnv)
	if dir == "" {
		return o.Echo, func() {}
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name() + "." + o.Name)
	f, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Logf("%s: no console log: %v", ConsoleDirEnv, err)
		return o.Echo, func() {}
	}
	fmt.Fprintf(f, "=== %s: %s started %s\n", t.Name(), o.Name, time.Now().UTC().Format(time.RFC3339))
	w := &stampWriter{w: f, start: time.Now(), bol: true}
	var echo io.Writer = w
	if o.Echo != nil {
		echo = io.MultiWriter(o.Echo, w)
	}
	return echo, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		f.Close()
	}
}

// stampWriter prefixes each line with the seconds since start.
type stampWriter struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	bol   bool // the next byte begins a line
}

func (s *stampWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b []byte
	for _, c := range p {
		if s.bol {
			b = fmt.Appendf(b, "%8.2f ", time.Since(s.start).Seconds())
			s.bol = false
		}
		if c == '\r' {
			continue
		}
		b = append(b, c)
		s.bol = c == '\n'
	}
	s.w.Write(b) // a closed file after the test: the console's tail is lost, not the test
	return len(p), nil
}

// PowerOff types poweroff at the guest's shell and waits for QEMU to
// end, failing t (with the console's tail) if it does not within two
// minutes.
func PowerOff(t testing.TB, vm *qemu.VM) {
	t.Helper()
	if err := vm.Send("\nocf poweroff\n"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- vm.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the guest did not power off:\n%s", vm.Tail(40))
	}
	vm.Kill()
}

// Store reads the firmware's store (package store) on the image's data
// partition (partition 2) through go-diskfs, a FAT reader independent of
// ocfw's own. A store with damaged or torn records still reads: they are
// in the result's Problems, for the test to judge.
func Store(t testing.TB, image string) *store.Contents {
	t.Helper()
	c, err := ReadStore(image)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ReadStore is Store's reader, returning its error.
func ReadStore(image string) (*store.Contents, error) {
	d, err := diskfs.Open(image, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", image, err)
	}
	defer d.Close()
	fsys, err := d.GetFilesystem(2)
	if err != nil {
		return nil, fmt.Errorf("data partition of %s: %w", image, err)
	}
	return store.Load(func(name string) ([]byte, error) {
		p := store.Dir + "/" + name
		f, err := fsys.OpenFile(p, os.O_RDONLY)
		if err != nil {
			return nil, fmt.Errorf("%s on the data partition of %s: %w", p, image, err)
		}
		return io.ReadAll(f)
	})
}

// CutCopy writes to dst what a power cut now would leave of image, the
// disk vm runs on, and lets vm run on (qemu.VM.Frozen): one of several
// cut moments of a single boot, where a kill would end the boot at the
// first. dst is removed when the test ends. It returns the console as
// the guest had printed it at the cut: on a loaded host the cut comes
// later than the console line a test waited for, and the guest may have
// gone on to its next step.
func CutCopy(t testing.TB, vm *qemu.VM, image, dst string) string {
	t.Helper()
	var console string
	err := vm.Frozen(func() error {
		console = settledConsole(vm)
		src, err := os.Open(image)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	t.Cleanup(func() { os.Remove(dst) })
	if err != nil {
		t.Fatalf("the card at a cut moment: %v", err)
	}
	return console
}

// settledConsole is vm's console once it has stopped growing for 50 ms
// (at most a second): with the emulator stopped, what it wrote before
// is still on its way through the pipe.
func settledConsole(vm *qemu.VM) string {
	c := vm.Console()
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
		n := vm.Console()
		if len(n) == len(c) {
			break
		}
		c = n
	}
	return c
}
