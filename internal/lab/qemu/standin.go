package qemu

import (
	"fmt"
	"os"
	"strings"
)

// StandIn is a QEMU machine, and the Debian kernel that boots on it,
// standing in for boards QEMU cannot emulate. QEMU has no IXP4xx machine,
// and Debian's armel marvell kernel (ARMv5) boots on none of QEMU's; the
// armel rpi kernel (ARMv6) boots on the raspi machines with Debian's own
// device tree, and runs a GOARM=5 userland.
type StandIn struct {
	Name          string // what the user is told it is
	Arch          string // key of Arches
	Machine       string // -M
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
	// DiskInterface attaches the data disk: the SD card slot (the kernel
	// has the bcm2835 sdhost and mmc block drivers built in).
	DiskInterface string
	// DiskPowerOfTwo: the machine takes a disk image only in a
	// power-of-2 size (QEMU's SD cards).
	DiskPowerOfTwo bool
	// Args are emulator options the machine needs. The BCM2835's only
	// clock event device is its system timer, which the kernel programs
	// as "counter now + delta": when QEMU's vCPU thread is preempted
	// between the read and the write (a loaded host), the compare value
	// is already behind the counter, the interrupt never comes and the
	// guest sits idle until the 32-bit counter wraps (71 minutes). Seen
	// as boots stalling for minutes after init or between speed rows.
	// With -icount the guest's clock follows its own instructions, so no
	// host preemption falls between the read and the write.
	Args []string
}

// RaspiStandIn is the ARM stand-in for the IXP4xx boards: QEMU's
// raspi1ap (BCM2835, ARM1176, 512 MiB) with Debian armel's
// linux-image-rpi.
var RaspiStandIn = StandIn{
	Name:           "QEMU raspi1ap (Raspberry Pi A+, BCM2835, ARM1176 ARMv6) with Debian armel's linux-image-rpi",
	Arch:           "arm",
	Machine:        "raspi1ap",
	MemoryMB:       512,
	KernelPackage:  "linux-image-rpi",
	DebianArch:     "armel",
	DTB:            "bcm2835-rpi-a-plus.dtb",
	Console:        "ttyAMA0",
	KernelArgs:     []string{"initcall_blacklist=bcm2835_power_driver_init"},
	DiskInterface:  "sd",
	DiskPowerOfTwo: true,
	Args:           []string{"-icount", "shift=auto"},
}

// Cmdline is the kernel command line on the stand-in: its console, what
// its kernel needs, then extra.
func (s StandIn) Cmdline(extra ...string) string {
	words := append([]string{"console=" + s.Console}, s.KernelArgs...)
	return strings.Join(append(words, extra...), " ")
}

// Config is the emulator configuration that boots kernel, dtb and initrd
// on the stand-in, with disk (may be "") in its disk slot.
func (s StandIn) Config(kernel, dtb, initrd, cmdline, disk string) Config {
	c := Config{Arch: s.Arch, Machine: s.Machine, MemoryMB: s.MemoryMB, Kernel: kernel, DTB: dtb, Initrd: initrd, Append: cmdline,
		Args: append([]string(nil), s.Args...)}
	if disk != "" {
		c.Disk, c.DiskInterface = disk, s.DiskInterface
	}
	return c
}

// CheckDisk says whether the machine takes disk image file as it is.
func (s StandIn) CheckDisk(name string) error {
	if !s.DiskPowerOfTwo {
		return nil
	}
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	if n := fi.Size(); n <= 0 || n&(n-1) != 0 {
		return fmt.Errorf("%s is %d bytes: QEMU's %s takes an SD card image only in a power-of-2 size", name, n, s.Machine)
	}
	return nil
}

// String is the emulator's command line for c, for logs: what to type to
// run the same guest by hand.
func (c Config) String() string {
	args, err := c.CommandLine()
	if err != nil {
		return "(" + err.Error() + ")"
	}
	a, _ := c.arch()
	bin := c.Binary
	if bin == "" {
		bin = a.Binary
	}
	quoted := []string{bin}
	for _, w := range args {
		if strings.ContainsAny(w, " \t\"'") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		quoted = append(quoted, w)
	}
	return strings.Join(quoted, " ")
}
