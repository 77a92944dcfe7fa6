package boards

import (
	"fmt"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/plan"
)

// standInCrypto are the stand-in kernel's ARM assembler implementations,
// modules in Debian's rpi kernel: loaded, they are the kernel software
// the firmware tests and measures, as on an IXP4xx kernel that has them.
var standInCrypto = []plan.Module{
	{Name: "aes_arm", For: "kernel software AES in ARM assembler (aes-arm)"},
	{Name: "sha1_arm", For: "kernel software SHA-1 in ARM assembler (sha1-asm)"},
	{Name: "sha256_arm", For: "kernel software SHA-256 in ARM assembler (sha256-asm)"},
}

// standIn turns the plan for an IXP4xx board into the plan for the same
// firmware on QEMU's ARM stand-in (catalog.RaspiStandIn): the same Go
// userland, cipher set, storage stack and router modules, the stand-in
// kernel's package and console, its ARM crypto modules, and every
// hardware engine reported absent with the reason (the stand-in has no
// IXP4xx and no bus for cards). Limits says what a boot there does not
// prove about the board.
func standIn(p *plan.Plan, b *Board) error {
	if b.CPU.Arch != ArchARMv5TE {
		return &RequestError{Field: "stand-in", Msg: fmt.Sprintf("%s is an x86 board, which QEMU runs as it is (ocfw run): the stand-in is for the IXP4xx boards QEMU has no machine for", b.Name)}
	}
	s := catalog.RaspiStandIn
	absent := map[string]bool{} // modules the stand-in kernel does not have
	for i := range p.Engines {
		e := &p.Engines[i]
		if !e.Hardware {
			continue
		}
		if e.From == "on-chip" {
			e.Absent = fmt.Sprintf("the QEMU stand-in has no %s engine and its kernel (Debian's %s) no %s driver: this engine is tested only on the %s itself",
				e.ID, s.KernelPackage, e.Module, b.Name)
		} else {
			e.Absent = fmt.Sprintf("the QEMU stand-in has no slot or bus for the card (%s): this engine is tested only on the %s itself", e.From, b.Name)
		}
		absent[e.Module] = true
	}
	// The board's ports become the machine's USB network cards, in
	// order: the plan names what the stand-in really runs.
	for i := range p.Ports {
		pt := &p.Ports[i]
		absent[pt.Driver] = true
		pt.Driver, pt.PCI, pt.Platform, pt.Needs = s.NICDriver, "", "", ""
		pt.Interface = fmt.Sprintf(s.NICInterface, i)
	}
	var mods []plan.Module
	for _, m := range p.Modules {
		if !absent[m.Name] && !m.OutOfTree {
			mods = append(mods, m)
		}
	}
	p.Modules = append(mods, standInCrypto...)
	if len(p.Ports) > 0 {
		p.Modules = append(p.Modules, plan.Module{Name: s.NICDriver, For: "the network ports on the QEMU stand-in: USB Ethernet cards (CDC Ethernet)"})
	}

	p.Boot = plan.BootQEMUARM
	p.Image.DataLabel = plan.DataLabel
	p.Image.Flash = nil
	p.Console = plan.Console{Device: s.Console, Baud: 115200, KernelArg: "console=" + s.Console}
	p.Kernel = plan.Kernel{Source: plan.KernelDebian, Package: s.KernelPackage, Arch: s.DebianArch, Image: "zImage",
		Note: "the QEMU stand-in's kernel, not one for the board: ocfw kernel check says what " + b.Name + "'s needs"}
	p.StandIn = &plan.StandIn{Name: s.Name, Machine: s.Machine, MemoryMB: s.MemoryMB, DTB: s.DTB,
		Cmdline: s.Cmdline("rdinit=/init", "panic=10"),
		Limits: []string{
			fmt.Sprintf("the CPU: the stand-in is an emulated ARM1176 (ARMv6), the %s an %s (ARMv5TE) at %d MHz; the userland is built for ARMv5 (GOARM=5) as for the board, but speeds are QEMU's, not the board's", b.Name, b.CPU.Model, b.CPU.MHz),
			"the crypto engine: no IXP4xx NPE-C, no ixp4xx_crypto driver and no NPE microcode, so the engine is reported absent; only kernel software and Go are tested",
			fmt.Sprintf("the Ethernet: no NPE-B/NPE-C, no ixp4xx_eth and no NPE microcode; the board's ports are QEMU USB Ethernet cards (%s), in port order, named %s: the router is tested on them, not the board's NIC driver", s.NICDriver, portNames(p.Ports)),
			fmt.Sprintf("the kernel: the board needs a little-endian IXP4xx kernel with ixp4xx_crypto, ixp4xx_eth and the NPE microcode (ocfw kernel check for %s says what else); the stand-in's is Debian's %s (little-endian, as the firmware needs), which does not boot the board", b.Name, s.KernelPackage),
			"the boot path: RedBoot, the flash layout and the big-to-little-endian switch are not exercised; QEMU loads kernel and initramfs itself",
			fmt.Sprintf("the memory: the machine has %d MiB, the board %d MiB", s.MemoryMB, b.RAMMB),
		},
	}
	notes := []string{
		fmt.Sprintf("stand-in: built for %s, not for the %s: flash the board with an image built for the board, not its stand-in", s.Name, b.Name),
		"stand-in: the data partition is the machine's SD card",
	}
	for _, n := range p.Notes {
		if !strings.HasPrefix(n, "kernel: ") { // the board's kernel, not this one
			notes = append(notes, n)
		}
	}
	p.Notes = notes
	return nil
}

// portNames says which interface each port is: "wan usb0, lan usb1".
func portNames(ports []plan.Port) string {
	var w []string
	for _, pt := range ports {
		w = append(w, pt.Name+" "+pt.Interface)
	}
	if len(w) == 0 {
		return "(no ports)"
	}
	return strings.Join(w, ", ")
}
