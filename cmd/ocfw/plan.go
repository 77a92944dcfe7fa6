package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/plan"
)

type planFlags struct {
	planRequest
	json bool
}

func newPlanCmd(g *globalFlags) *cobra.Command {
	f := &planFlags{}
	cmd := &cobra.Command{
		Use:   "plan --board BOARD [--card CARD]... [--cipher CIPHER]...",
		Short: "Show what a firmware for a board and its cards would contain",
		Long: `plan resolves a board and the cards in its slots into the firmware's plan: the Go
target, console, boot method and image layout, the kernel it expects, the kernel
modules it loads, and for each cipher the engines that can serve it, best first,
ending with software. The same inputs always give the same output.

Cards are placed in the board's free slots of their form factor, in the order
given. Ciphers: des-cbc, des-ede3-cbc, aes-128-cbc, aes-192-cbc, aes-256-cbc,
hmac-md5, hmac-sha1, hmac-sha256, null (default: all).`,
		Example: `  ocfw plan --board alix2d13 --card vpn1411
  ocfw plan --board net5501 --card vpn1401 --card vpn1411 --cipher aes-128-cbc --json
  ocfw plan --board alix2d13 --require-hw aes-256-cbc   # fails: the Geode does 128-bit keys only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pl, err := f.resolve(g)
			if err != nil {
				return err
			}
			if f.json {
				out, err := pl.JSON()
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			return writePlan(cmd.OutOrStdout(), pl)
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&f.json, "json", false, "print the plan as JSON")
	return cmd
}

// planRequest is the flags that choose a plan; plan, build and try share
// them so the three commands resolve a board the same way.
type planRequest struct {
	board     string
	cards     []string
	ciphers   []string
	requireHW []string
}

func (r *planRequest) register(cmd *cobra.Command, requireHW bool) {
	fl := cmd.Flags()
	fl.StringVar(&r.board, "board", "", "board name or alias (required)")
	fl.StringArrayVar(&r.cards, "card", nil, "a card in one of the board's slots (repeat for several)")
	fl.StringArrayVar(&r.ciphers, "cipher", nil, "limit the firmware to this cipher (repeat; default all)")
	if requireHW {
		fl.StringArrayVar(&r.requireHW, "require-hw", nil, "fail unless some selected engine does this cipher in hardware (repeat)")
	}
}

func (r *planRequest) resolve(g *globalFlags) (*plan.Plan, error) {
	if r.board == "" {
		return nil, fmt.Errorf("--board is required (see 'ocfw boards' for the boards ocfw knows)")
	}
	cat, err := g.catalog()
	if err != nil {
		return nil, err
	}
	return cat.Resolve(boards.Request{Board: r.board, Cards: r.cards, Ciphers: r.ciphers, RequireHW: r.requireHW})
}

func writePlan(w io.Writer, p *plan.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "board:\t%s (%s)\n", p.Board, p.Description)
	for _, c := range p.Cards {
		fmt.Fprintf(tw, "card:\t%s in %s: %s, PCI %s, engine %s\n", c.Name, c.Slot, c.Chip, c.PCI, c.Engine)
	}
	fmt.Fprintf(tw, "go target:\t%s\n", strings.Join(p.Go.Env(), " "))
	fmt.Fprintf(tw, "console:\t%s %d 8N1 (%s)\n", p.Console.Device, p.Console.Baud, p.Console.KernelArg)
	fmt.Fprintf(tw, "boot:\t%s\n", p.Boot)
	switch p.Boot {
	case plan.BootBIOSCF:
		fmt.Fprintf(tw, "image:\t%d MiB: MBR, p1 FAT16 boot %d MiB (kernel, initramfs, SYSLINUX), p2 FAT data %q (reports)\n", p.Image.SizeMB, p.Image.BootMB, p.Image.DataLabel)
	case plan.BootRedBoot:
		var parts []string
		for _, f := range p.Image.Flash {
			parts = append(parts, fmt.Sprintf("%s@0x%x+0x%x", f.Name, f.Offset, f.Size))
		}
		fmt.Fprintf(tw, "image:\t%d MiB flash: %s\n", p.Storage.FlashMB, strings.Join(parts, ", "))
	}
	fmt.Fprintf(tw, "initramfs:\t%s", p.Image.Compression)
	if p.Image.InitramfsBudgetKB > 0 {
		fmt.Fprintf(tw, ", at most %d KiB", p.Image.InitramfsBudgetKB)
	}
	fmt.Fprintln(tw)
	if p.Kernel.Source == "debian" {
		fmt.Fprintf(tw, "kernel:\tDebian package %s (%s), %s\n", p.Kernel.Package, p.Kernel.Arch, p.Kernel.Image)
	} else {
		fmt.Fprintf(tw, "kernel:\tuser-supplied %s (--kernel)\n", p.Kernel.Image)
	}
	var mods []string
	for _, m := range p.Modules {
		n := m.Name
		if m.OutOfTree {
			n += " (out of tree)"
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
		fmt.Fprintf(tw, "  %s#%d\t%s\t%s\t%s\tmodule %s\n", e.ID, e.Instance, e.From, kind, e.API, mod)
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
