package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/ocfw/ocfw/kernel"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/plan"
)

// fragmentHeader is the comment at the top of a board's config
// fragment: what it is, how it was made and how to use it.
func fragmentHeader(p *plan.Plan) []string {
	name := p.Board
	args := "--board " + p.Board
	for _, c := range p.Cards {
		args += " --card " + c.Name
		name += " + " + c.Name
	}
	h := []string{
		"Kernel config fragment for " + name + " (" + p.Description + ")",
		"written by `ocfw kernel config " + args + "`; ocfw kernel check judges a kernel by the same list.",
		"",
	}
	h = append(h, kernel.BuildAdvice(p)...)
	return h
}

func newKernelConfigCmd(g *globalFlags) *cobra.Command {
	var board string
	var cards []string
	cmd := &cobra.Command{
		Use:   "config --board BOARD [--card CARD]...",
		Short: "Print the kernel config fragment a board's plan needs (for merge_config.sh)",
		Long: `config prints, as a kernel config fragment for scripts/kconfig/merge_config.sh, every
config option the plan asks of the board's kernel, each with why: the same list
'ocfw kernel check' judges a kernel's config by. For the IXP4xx boards that is the
little-endian CPU, the EABI, the device tree appended for RedBoot (or an old
kernel's board file, named in a comment), the serial console, what the Go runtime
and the router use, the NPEs and their microcode loader, the planned modules (=m)
and, marked optional, the storage for reports. The output is deterministic; the
copies for nslu2 and avila-gw2348 ship in boards/kernel/.`,
		Example: `  ocfw kernel config --board nslu2 > nslu2.config
  ocfw kernel config --board avila-gw2348 --card vpn1411 > avila.config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := g.resolve(boards.Request{Board: board, Cards: cards})
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), kernel.Fragment(p, fragmentHeader(p)))
			return err
		},
	}
	cmd.Flags().StringVar(&board, "board", "", "board name or alias (required)")
	cmd.Flags().StringArrayVar(&cards, "card", nil, "a card in the board's slots (repeat)")
	return cmd
}

// writeNeeds tells what p's kernel needs when there is none to check:
// version, config options by group with why, NPE microcode and how the
// board's boot loader must start it.
func writeNeeds(w io.Writer, p *plan.Plan) {
	args := "--board " + p.Board
	for _, c := range p.Cards {
		args += " --card " + c.Name
	}
	fmt.Fprintf(w, "What a kernel for %s needs (nothing was checked: no kernel given).\n\n", p.Board)
	if l := kernel.VersionAdvice(p); len(l) > 0 {
		fmt.Fprintf(w, "Version and byte order\n")
		for _, s := range l {
			fmt.Fprintf(w, "  %s\n", s)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Config options (`ocfw kernel config %s` writes them as a fragment)\n", args)
	group := ""
	for _, n := range kernel.Needs(p) {
		if n.Group != group {
			group = n.Group
			fmt.Fprintf(w, "  %s\n", group)
		}
		opt := ""
		if n.Optional {
			opt = "optional: "
		}
		fmt.Fprintf(w, "    %s\n      %s%s\n", n.Options(), opt, n.Why)
	}
	if mc := kernel.NPEMicrocode(p); len(mc) > 0 {
		var flags []string
		fmt.Fprintf(w, "\nNPE microcode (Intel's IXP400 software; not in Debian or ocfw), read by the kernel from /lib/firmware\n")
		for _, m := range mc {
			fmt.Fprintf(w, "  %-6s for %s\n", m.File, strings.Join(m.Users, "; "))
			flags = append(flags, "--firmware-file "+m.File)
		}
		fmt.Fprintf(w, "  ocfw build %s puts them in the initramfs's /lib/firmware; without one, what uses it is absent.\n", strings.Join(flags, " "))
	}
	if l := kernel.StartAdvice(p); len(l) > 0 {
		fmt.Fprintf(w, "\nStarting it\n")
		for _, l := range l {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	fmt.Fprintf(w, "\nCheck a kernel: ocfw kernel check %s --kernel zImage:lib/modules/VERSION:config\n", args)
}
