package boardvm

import "github.com/ocfw/ocfw/plan"

// stopCommand is what a scripted run types to end the guest. On the ARM
// stand-in, `poweroff` (reboot(2) with POWER_OFF) goes through the rpi
// kernel's BCM2835 watchdog power-off, which in QEMU returns before the
// machine stops; the kernel's reboot call then exits the poweroff
// process with interrupts off and prints "WARNING ... kernel/exit.c
// do_exit" (harmless: QEMU stops a moment later). A restart stops QEMU
// as cleanly (-no-reboot) and waits for the reset, so no warning.
func stopCommand(pl *plan.Plan) string {
	if pl.StandIn != nil {
		return "shutdown reboot\n"
	}
	return "poweroff\n"
}
