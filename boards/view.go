package boards

import (
	"fmt"
	"io"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/plan"
)

// View is a profile with what it implies filled in: the Go target and
// the engine's catalog entry, for `ocfw board show`.
type View struct {
	Version int             `json:"version"`
	Kind    string          `json:"kind"`
	File    string          `json:"file"`
	Board   *Board          `json:"board,omitempty"`
	Card    *Card           `json:"card,omitempty"`
	Go      *plan.GoTarget  `json:"go,omitempty"`
	Engine  *catalog.Engine `json:"engine_detail,omitempty"`
}

// View looks a board or card up and fills in what it implies.
func (c *Catalog) View(name string) (*View, error) {
	v := &View{}
	if b, err := c.Board(name); err == nil {
		pl, err := c.Resolve(Request{Board: b.Name})
		if err != nil {
			return nil, err
		}
		*v = View{Kind: KindBoard, File: b.File(), Board: b, Go: &pl.Go}
		if b.Engine != "" {
			v.Engine = engineCopy(b.Engine)
		}
	} else if cd, cerr := c.Card(name); cerr == nil {
		*v = View{Kind: KindCard, File: cd.File(), Card: cd, Engine: engineCopy(cd.Engine)}
	} else {
		return nil, fmt.Errorf("%v (cards: %s)", err, strings.Join(c.CardNames(), ", "))
	}
	return v, nil
}

// engineCopy is the catalog's engine with empty lists as [] in JSON (the
// catalog's own entry is shared).
func engineCopy(id string) *catalog.Engine {
	e, ok := catalog.LookupEngine(id)
	if !ok {
		return nil
	}
	c := *e
	if c.Quirks == nil {
		c.Quirks = []string{}
	}
	if c.Match.PCI == nil {
		c.Match.PCI = []catalog.PCIID{}
	}
	return &c
}

// WriteText prints the profile for people.
func (v *View) WriteText(w io.Writer) error {
	p := func(k string, val any) { fmt.Fprintf(w, "%-14s %v\n", k+":", val) }
	if b := v.Board; b != nil {
		p("board", b.Name)
		if len(b.Aliases) > 0 {
			p("aliases", strings.Join(b.Aliases, ", "))
		}
		p("description", b.Description)
		p("vendor", b.Vendor)
		p("cpu", fmt.Sprintf("%s, %d MHz, %s, %s-endian", b.CPU.Model, b.CPU.MHz, b.CPU.Arch, b.CPU.Endian))
		p("cpu features", strings.Join(b.CPU.Features, " "))
		p("go target", strings.Join(v.Go.Env(), " "))
		p("ram", fmt.Sprintf("%d MB", b.RAMMB))
		switch b.Storage.Kind {
		case "cf":
			p("storage", fmt.Sprintf("CompactFlash (images for a %d MB card by default)", b.Storage.CardMB))
		default:
			st := fmt.Sprintf("%d MiB flash", b.Storage.FlashMB)
			if b.Storage.CF {
				st += ", CF slot for reports"
			}
			p("storage", st)
		}
		p("console", fmt.Sprintf("%s %d 8N1", b.Console.Device, b.Console.Baud))
		p("boot", b.Boot)
		var slots []string
		for _, s := range b.Slots {
			slots = append(slots, fmt.Sprintf("%d x %s", s.Count, s.Form))
		}
		if len(slots) == 0 {
			slots = []string{"none"}
		}
		p("slots", strings.Join(slots, ", "))
		for _, pt := range b.Ports {
			where := pt.PCI
			if where == "" {
				where = pt.Platform
			}
			line := fmt.Sprintf("%-5s %s, %s (%s), default %s", pt.Name, pt.Interface, pt.Driver, where, pt.Role)
			if pt.Needs != "" {
				line += ", needs " + pt.Needs
			}
			p("port", line)
		}
		// The profile's kernel.source ("debian" or "user"), then what it means.
		kernel := b.Kernel.Source + ": "
		if b.Kernel.Package != "" {
			kernel += fmt.Sprintf("Debian package %s (%s), %s", b.Kernel.Package, b.Kernel.Arch, b.Kernel.Image)
		} else {
			kernel += fmt.Sprintf("%s you supply", b.Kernel.Image)
		}
		p("kernel", kernel)
		if b.Kernel.Note != "" {
			p("kernel note", b.Kernel.Note)
		}
		switch b.Boot {
		case plan.BootBIOSCF:
			p("image", fmt.Sprintf("%d MiB: FAT16 boot %d MiB + FAT data %q, initramfs %s", b.Image.SizeMB, b.Image.BootMB, (&plan.Plan{Image: b.Image}).DataPartitionLabel(), b.Image.Compression))
		default:
			p("image", fmt.Sprintf("initramfs %s", b.Image.Compression))
			for _, fp := range b.Image.Flash {
				p("  flash", fmt.Sprintf("%-14s 0x%07x  0x%07x", fp.Name, fp.Offset, fp.Size))
			}
		}
	}
	if c := v.Card; c != nil {
		p("card", c.Name)
		p("description", c.Description)
		p("vendor", c.Vendor)
		if c.Form == FormQEMU {
			p("form", c.Form+" (a stand-in that exists only in QEMU runs: no real slot, any x86 board takes it)")
		} else {
			p("form", c.Form)
		}
		if c.PCI != "" {
			p("chip", fmt.Sprintf("%s (PCI %s)", c.Chip, c.PCI))
		} else {
			p("chip", c.Chip)
		}
	}
	if e := v.Engine; e != nil {
		p("engine", fmt.Sprintf("%s: %s", e.ID, e.Description))
		mod := e.Module
		if !e.Mainline {
			mod += " (out of tree)"
		}
		p("  module", mod)
		p("  api", e.API)
		if e.Requires != "" {
			p("  requires", e.Requires)
		}
		for _, cs := range e.Ciphers {
			hw := "software fallback"
			if c, ok := catalog.LookupCipher(cs.Cipher); ok && e.Hardware && (c.Kind == catalog.KindMAC || hwKey(cs.HWKeyBits, c.KeyBits())) {
				hw = "hardware"
			}
			if !e.Hardware {
				hw = "software"
			}
			p("  cipher", fmt.Sprintf("%-12s %-20s prio %3d  %s", cs.Cipher, strings.ReplaceAll(cs.Driver, "%d", "N"), cs.Priority, hw))
		}
		for _, q := range e.Quirks {
			p("  quirk", q)
		}
	}
	p("file", v.File)
	return nil
}

func hwKey(bits []int, want int) bool {
	for _, b := range bits {
		if b == want {
			return true
		}
	}
	return false
}
