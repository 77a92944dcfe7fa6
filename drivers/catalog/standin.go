package catalog

import "strings"

// StandIn is a QEMU machine, and the Debian kernel that boots on it,
// standing in for boards QEMU cannot emulate. QEMU has no IXP4xx machine,
// and Debian's armel marvell kernel (ARMv5) boots on none of QEMU's; the
// armel rpi kernel (ARMv6) boots on the raspi machines with Debian's own
// device tree, and runs a GOARM=5 userland. These are the facts a plan
// for the stand-in is built from (boards); how to run the machine
// (emulator options, its disk slot) is the QEMU lab's (internal/lab/qemu).
type StandIn struct {
	Name          string // what the user is told it is
	Machine       string // QEMU's -M
	MemoryMB      int    // the machine's fixed RAM
	KernelPackage string // Debian package of the kernel
	DebianArch    string // its architecture
	DTB           string // device tree file in the package's usr/lib/linux-image-VERSION
	Console       string // the machine's serial console device
	// KernelArgs are what the kernel needs on this machine besides the
	// console. QEMU 7.2's raspi machines lack the power domain registers
	// the kernel's bcm2835 power driver probes: without the blacklist the
	// kernel panics in bcm2835_power_probe.
	KernelArgs []string
	// NICDriver is the module of the network cards the machine gets for
	// the board's ports, and NICInterface the kernel's name for the
	// port at index %d: QEMU's raspi machines emulate no Ethernet, so
	// the cards are USB ones (CDC Ethernet), which the kernel names
	// usb0, usb1... when their MAC is locally administered, as QEMU's are.
	NICDriver    string
	NICInterface string
}

// RaspiStandIn is the ARM stand-in for the IXP4xx boards: QEMU's
// raspi1ap (BCM2835, ARM1176, 512 MiB) with Debian armel's
// linux-image-rpi.
var RaspiStandIn = StandIn{
	Name:          "QEMU raspi1ap (Raspberry Pi A+, BCM2835, ARM1176 ARMv6) with Debian armel's linux-image-rpi",
	Machine:       "raspi1ap",
	MemoryMB:      512,
	KernelPackage: "linux-image-rpi",
	DebianArch:    "armel",
	DTB:           "bcm2835-rpi-a-plus.dtb",
	Console:       "ttyAMA0",
	KernelArgs:    []string{"initcall_blacklist=bcm2835_power_driver_init"},
	NICDriver:     "cdc_ether",
	NICInterface:  "usb%d",
}

// Cmdline is the kernel command line on the stand-in: its console, what
// its kernel needs, then extra.
func (s StandIn) Cmdline(extra ...string) string {
	words := append([]string{"console=" + s.Console}, s.KernelArgs...)
	return strings.Join(append(words, extra...), " ")
}
