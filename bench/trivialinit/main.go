// Command trivialinit is the /init of bench/run's reference boot: it says
// it is running and powers the machine off, so the boot time it gives is
// the kernel's own from power-on.
package main

import (
	"fmt"
	"os"
	"syscall"
)

// Marker is what bench/run waits for on the console.
const Marker = "ocfw-bench: trivial init reached"

func main() {
	fmt.Fprintln(os.Stdout, Marker)
	syscall.Sync()
	if err := syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Fprintln(os.Stderr, "trivialinit: power off:", err)
	}
	select {}
}
