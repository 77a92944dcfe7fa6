package qemu

import (
	"fmt"
	"os"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// StandIn is a stand-in machine (catalog.StandIn: the facts a plan is
// built from) with what it takes to run it in QEMU.
type StandIn struct {
	catalog.StandIn
	Arch string // key of Arches
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
	// NICModel is the QEMU device of the machine's network cards
	// (PlugNICs).
	NICModel string
}

// RaspiStandIn runs catalog.RaspiStandIn, the ARM stand-in for the
// IXP4xx boards.
var RaspiStandIn = StandIn{
	StandIn:        catalog.RaspiStandIn,
	Arch:           "arm",
	DiskInterface:  "sd",
	DiskPowerOfTwo: true,
	Args:           []string{"-icount", "shift=auto"},
	NICModel:       "usb-net",
}

// PlugNICs makes nics the machine's network cards, in order. The raspi
// machines have no Ethernet that QEMU emulates; each card is a usb-net
// (CDC Ethernet, the kernel's cdc_ether) on a hub in the machine's USB
// port, the first on the hub's port 1, so the kernel finds them in
// order. A card whose MAC is locally administered (every MAC the QEMU
// labs give, 52:54:00:...) is named usb0, usb1... by the kernel, the
// names the stand-in plan gives the board's ports (catalog.StandIn).
func (s StandIn) PlugNICs(c Config, nics []NIC) (Config, error) {
	if len(nics) > 8 {
		return c, fmt.Errorf("qemu: %s: %d network cards, the hub has 8 ports", s.Machine, len(nics))
	}
	c.NICs = nil
	for i, n := range nics {
		if n.Model != "" && n.Model != s.NICModel {
			return c, fmt.Errorf("qemu: %s takes %s cards, not %s", s.Machine, s.NICModel, n.Model)
		}
		n.Model, n.USBPort = s.NICModel, fmt.Sprintf("1.%d", i+1)
		c.NICs = append(c.NICs, n)
	}
	return c, nil
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
