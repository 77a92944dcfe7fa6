package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
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
		Example: `  ocfw board show alix2d13
  ocfw board show vpn1411 --json
  ocfw board show myboard --profiles ./profiles   # a profile of your own`,
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

func showProfile(w io.Writer, cat *boards.Catalog, name string, f *boardShowFlags) error {
	v, err := cat.View(name)
	if err != nil {
		return err
	}
	if f.json {
		v.Version = JSONVersion
		return writeJSON(w, v)
	}
	return v.WriteText(w)
}
