package worldvm

// For tests only, like qemu's testenv.go: not a _test.go file so that
// other packages' tests (the router's end-to-end test) can use it.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
)

// StartTest starts a world for t. It skips with -short (a boot takes
// 10-30 s), and when QEMU or the cached kernel is missing (failing
// instead with OCFW_REQUIRE_KERNEL=1); it logs QEMU's command line, and
// at the end of the test kills the VM, logging the console's tail if the
// test failed. The watchdog is the test's deadline when there is one.
func StartTest(t testing.TB, cfg Config) *World {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a world VM in QEMU; skipped with -short")
	}
	if cfg.Timeout == 0 {
		if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
			if dl, ok := d.Deadline(); ok {
				cfg.Timeout = time.Until(dl) - 5*time.Second
			}
		}
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	w, err := Start(context.Background(), cfg)
	if Missing(err) {
		labtest.SkipOrFail(t, "world VM not booted: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s (agent and initramfs built in %v)", w.name, strings.Join(w.CommandLine(), " "), w.Build.Round(time.Millisecond))
	t.Cleanup(func() {
		w.Kill()
		if t.Failed() {
			t.Logf("%s: last console lines:\n%s", w.name, qemu.TailLines(w.Console(), 40))
		}
	})
	return w
}

// MustDo runs command in the world for t (see Do) and returns the
// reply; when the command fails it fails t, naming the command.
func (w *World) MustDo(t testing.TB, command string) string {
	t.Helper()
	out, err := w.Do(context.Background(), command)
	if err != nil {
		t.Fatalf("%s: %s: %v", w.name, command, err)
	}
	return out
}

// MustFail runs command in the world for t and returns its error; when
// the command works it fails t, naming the command and the reply.
func (w *World) MustFail(t testing.TB, command string) error {
	t.Helper()
	out, err := w.Do(context.Background(), command)
	if err == nil {
		t.Fatalf("%s: %s: worked (%q), want it to fail", w.name, command, out)
	}
	return err
}
