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

// The ports' cards become the stand-in's USB cards, in port order.
func TestStandInConfigNICs(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "sd.img")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	pl := &plan.Plan{Board: "avila-gw2348", StandIn: &plan.StandIn{Machine: qemu.RaspiStandIn.Machine}}
	side := firmware.StandInFiles{Kernel: "k", DTB: "d", Initramfs: "i"}
	c, err := standInConfig(pl, side, disk, []qemu.NIC{{RestrictedUser: true, MAC: PortMAC(0)}, {Socket: "/lan", MAC: PortMAC(1)}}, RunOptions{StandInSaid: true})
	if err != nil {
		t.Fatal(err)
	}
	args, err := c.CommandLine()
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	for _, want := range []string{"-device usb-hub,bus=usb-bus.0,port=1 -netdev user,id=net0,restrict=on -device usb-net,netdev=net0,bus=usb-bus.0,port=1.1,mac=" + PortMAC(0),
		"-device usb-net,netdev=net1,bus=usb-bus.0,port=1.2,mac=" + PortMAC(1)} {
		if !strings.Contains(line, want) {
			t.Errorf("command line lacks %q:\n%s", want, line)
		}
	}
	if _, err := standInConfig(pl, side, disk, []qemu.NIC{{Model: "e1000", Socket: "/s"}}, RunOptions{StandInSaid: true}); err == nil {
		t.Error("an e1000 on the stand-in was accepted")
	}
}
