package plan

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the plan for people: board, cards, Go target, console,
// boot and image, kernel and modules, engines, and each cipher's engines
// best first.
func (p *Plan) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "board:\t%s (%s)\n", p.Board, p.Description)
	for _, c := range p.Cards {
		pci := ", PCI " + c.PCI
		if c.PCI == "" {
			pci = "" // the test engine: a module, no device
		}
		fmt.Fprintf(tw, "card:\t%s in %s: %s%s, engine %s\n", c.Name, c.Slot, c.Chip, pci, c.Engine)
	}
	fmt.Fprintf(tw, "go target:\t%s\n", strings.Join(p.Go.Env(), " "))
	fmt.Fprintf(tw, "console:\t%s %d 8N1 (%s)\n", p.Console.Device, p.Console.Baud, p.Console.KernelArg)
	fmt.Fprintf(tw, "boot:\t%s\n", p.Boot)
	switch p.Boot {
	case BootBIOSCF:
		fmt.Fprintf(tw, "image:\t%d MiB: MBR, p1 FAT16 boot %d MiB (kernel, initramfs, SYSLINUX), p2 FAT data %q (reports)\n", p.Image.SizeMB, p.Image.BootMB, p.Image.DataLabel)
	case BootRedBoot:
		var parts []string
		for _, f := range p.Image.Flash {
			parts = append(parts, fmt.Sprintf("%s@0x%x+0x%x", f.Name, f.Offset, f.Size))
		}
		fmt.Fprintf(tw, "image:\t%d MiB flash: %s\n", p.Storage.FlashMB, strings.Join(parts, ", "))
	case BootQEMUARM:
		fmt.Fprintf(tw, "image:\tSD card image with only the data partition %q; kernel, device tree and initramfs beside it\n", p.DataPartitionLabel())
	}
	if p.StandIn != nil {
		fmt.Fprintf(tw, "stand-in:\t%s (qemu -M %s, %d MiB, %s)\n", p.StandIn.Name, p.StandIn.Machine, p.StandIn.MemoryMB, p.StandIn.DTB)
		for _, l := range p.StandIn.Limits {
			fmt.Fprintf(tw, "\tdoes not prove: %s\n", l)
		}
	}
	fmt.Fprintf(tw, "initramfs:\t%s", p.Image.Compression)
	if p.Image.InitramfsBudgetKB > 0 {
		fmt.Fprintf(tw, ", at most %d KiB", p.Image.InitramfsBudgetKB)
	}
	fmt.Fprintln(tw)
	if p.Kernel.Source == KernelDebian {
		fmt.Fprintf(tw, "kernel:\tDebian package %s (%s), %s\n", p.Kernel.Package, p.Kernel.Arch, p.Kernel.Image)
	} else {
		fmt.Fprintf(tw, "kernel:\tuser-supplied %s (given to ocfw build)\n", p.Kernel.Image)
	}
	for _, pt := range p.Ports {
		where := pt.PCI
		if where == "" {
			where = pt.Platform
		}
		line := fmt.Sprintf("port:\t%s = %s, %s (%s), default %s", pt.Name, pt.Interface, pt.Driver, where, pt.Role)
		if pt.Needs != "" {
			line += "; needs " + pt.Needs
		}
		fmt.Fprintln(tw, line)
	}
	var mods []string
	for _, m := range p.Modules {
		n := m.Name
		if m.OutOfTree {
			n += " (out of tree)"
		}
		if m.Optional {
			n += " (optional)"
		}
		mods = append(mods, n)
	}
	fmt.Fprintf(tw, "modules:\t%s\n", strings.Join(mods, ", "))
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nengines:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range p.Engines {
		kind := "software"
		if e.Hardware {
			kind = "hardware"
		}
		mod := e.Module
		if mod == "" {
			mod = "-"
		}
		line := fmt.Sprintf("  %s#%d\t%s\t%s\t%s\tmodule %s", e.ID, e.Instance, e.From, kind, e.API, mod)
		if e.Absent != "" {
			line += "\tabsent: " + e.Absent
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nciphers (engines best first; * = done in hardware):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range p.Ciphers {
		var rs []string
		for _, r := range c.Routes {
			mark := ""
			if r.Hardware {
				mark = "*"
			}
			rs = append(rs, fmt.Sprintf("%s%s", r.Driver, mark))
		}
		fmt.Fprintf(tw, "  %s\t%s\n", c.Cipher, strings.Join(rs, " > "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	return nil
}
