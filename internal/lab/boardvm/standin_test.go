package boardvm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/plan"
)

// What the stand-in does not prove is said once: by Run, unless the
// caller (try, before its build) already said it.
func TestStandInLimitsSaidOnce(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "sd.img")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	pl := &plan.Plan{Board: "nslu2", StandIn: &plan.StandIn{Name: "QEMU raspi1ap", Machine: qemu.RaspiStandIn.Machine, Limits: []string{"no NPE"}}}
	for _, said := range []bool{false, true} {
		var lines []string
		opt := RunOptions{StandInSaid: said, Log: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }}
		if _, err := standInConfig(pl, firmware.StandInFiles{Kernel: "k", DTB: "d", Initramfs: "i"}, disk, nil, opt); err != nil {
			t.Fatal(err)
		}
		all := strings.Join(lines, "\n")
		if n := strings.Count(all, "no NPE"); (said && n != 0) || (!said && n != 1) {
			t.Errorf("StandInSaid %v: the limits are logged %d times:\n%s", said, n, all)
		}
		if !strings.Contains(all, qemu.RaspiStandIn.Machine) {
			t.Errorf("StandInSaid %v: no QEMU command line:\n%s", said, all)
		}
	}
}

// A scripted run ends the stand-in with a restart, which QEMU turns into
// an exit without the kernel's do_exit warning that poweroff gives there.
func TestStopCommand(t *testing.T) {
	if got := stopCommand(&plan.Plan{Board: "alix2d13"}); got != "poweroff\n" {
		t.Errorf("board: %q", got)
	}
	if got := stopCommand(&plan.Plan{Board: "nslu2", StandIn: &plan.StandIn{}}); got != "shutdown reboot\n" {
		t.Errorf("stand-in: %q", got)
	}
}
