package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/drivers"
	"github.com/ocfw/ocfw/plan"
)

type boardShowFlags struct {
	json bool
}

func newBoardCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "board",
		Short: "Show board and card profiles",
	}
	f := &boardShowFlags{}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show one board (or card) profile in full, with its engine and Go target resolved",
		Args: needArgs(1, 1, "one board or card name (see 'ocfw boards')",
			"ocfw board show alix2d13"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cat, err := g.catalog()
			if err != nil {
				return err
			}
			return showProfile(cmd.OutOrStdout(), cat, args[0], f)
		},
	}
	show.Flags().BoolVar(&f.json, "json", false, "print JSON")
	cmd.AddCommand(show)
	return cmd
}

// JSONVersion is the version of the layout of the JSON that boards,
// board show and plan print (plan's is plan.Version).
const JSONVersion = 1

// boardView is a board with what it implies filled in.
type boardView struct {
	Version int             `json:"version"`
	Kind    string          `json:"kind"`
	File    string          `json:"file"`
	Board   *boards.Board   `json:"board,omitempty"`
	Card    *boards.Card    `json:"card,omitempty"`
	Go      *plan.GoTarget  `json:"go,omitempty"`
	Engine  *drivers.Engine `json:"engine_detail,omitempty"`
}

func showProfile(w io.Writer, cat *boards.Catalog, name string, f *boardShowFlags) error {
	v := boardView{}
	if b, err := cat.Board(name); err == nil {
		pl, err := cat.Resolve(boards.Request{Board: b.Name})
		if err != nil {
			return err
		}
		v = boardView{Kind: boards.KindBoard, File: b.File(), Board: b, Go: &pl.Go}
		if b.Engine != "" {
			v.Engine, _ = drivers.LookupEngine(b.Engine)
		}
	} else if c, cerr := cat.Card(name); cerr == nil {
		v = boardView{Kind: boards.KindCard, File: c.File(), Card: c}
		v.Engine, _ = drivers.LookupEngine(c.Engine)
	} else {
		return fmt.Errorf("%v (cards: %s)", err, strings.Join(cat.CardNames(), ", "))
	}
	if f.json {
		v.Version = JSONVersion
		if v.Engine != nil {
			e := *v.Engine // the catalog's own is shared: fill in a copy
			if e.Quirks == nil {
				e.Quirks = []string{}
			}
			if e.Match.PCI == nil {
				e.Match.PCI = []drivers.PCIID{}
			}
			v.Engine = &e
		}
		return writeJSON(w, v)
	}
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
		// The profile's kernel.source ("debian" or "user"), then what it means.
		kernel := b.Kernel.Source + ": "
		if b.Kernel.Package != "" {
			kernel += fmt.Sprintf("Debian package %s (%s), %s", b.Kernel.Package, b.Kernel.Arch, b.Kernel.Image)
		} else {
			kernel += fmt.Sprintf("%s supplied with --kernel", b.Kernel.Image)
		}
		p("kernel", kernel)
		if b.Kernel.Note != "" {
			p("kernel note", b.Kernel.Note)
		}
		switch b.Boot {
		case plan.BootBIOSCF:
			p("image", fmt.Sprintf("%d MiB: FAT16 boot %d MiB + FAT data %q, initramfs %s", b.Image.SizeMB, b.Image.BootMB, b.Image.DataLabel, b.Image.Compression))
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
		p("form", c.Form)
		p("chip", fmt.Sprintf("%s (PCI %s)", c.Chip, c.PCI))
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
			if c, ok := drivers.LookupCipher(cs.Cipher); ok && e.Hardware && (c.Kind == drivers.KindMAC || hwKey(cs.HWKeyBits, c.KeyBits())) {
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
