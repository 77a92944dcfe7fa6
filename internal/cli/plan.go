package cli

import (
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
			return pl.WriteText(cmd.OutOrStdout())
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
	standIn   bool
}

func (r *planRequest) register(cmd *cobra.Command, requireHW bool) {
	fl := cmd.Flags()
	fl.StringVar(&r.board, "board", "", "board name or alias (required)")
	fl.StringArrayVar(&r.cards, "card", nil, "a card in one of the board's slots (repeat for several)")
	fl.StringArrayVar(&r.ciphers, "cipher", nil, "limit the firmware to this cipher (repeat; default all)")
	if requireHW {
		fl.StringArrayVar(&r.requireHW, "require-hw", nil, "fail unless some selected engine does this cipher in hardware (repeat)")
	}
	fl.BoolVar(&r.standIn, "stand-in", false, "IXP4xx boards: for QEMU's ARM stand-in (raspi1ap with Debian's armel rpi kernel), not for the board: the same userland, the board's engines reported absent")
}

func (r *planRequest) resolve(g *globalFlags) (*plan.Plan, error) {
	return g.resolve(boards.Request{Board: r.board, Cards: r.cards, Ciphers: r.ciphers, RequireHW: r.requireHW, StandIn: r.standIn})
}
