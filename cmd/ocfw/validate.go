package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
)

func newValidateCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check user-written board and card profiles",
		Long: `validate parses each profile file strictly (unknown fields, wrong types, unknown
engines, impossible slot or boot combinations) and reports every problem as
FILE:LINE:COLUMN with what would be valid. Names must be unique among the files
given. Exit status 1 when anything is wrong.`,
		Args: needArgs(1, -1, "one or more profile files", "ocfw validate myboard.yaml mycard.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			profiles, err := boards.LoadFiles(args)
			if err != nil {
				var l boards.ErrorList
				if errors.As(err, &l) {
					for _, e := range l {
						fmt.Fprintln(cmd.ErrOrStderr(), e)
					}
					return fmt.Errorf("%d problem(s) in the profiles given", len(l))
				}
				return err
			}
			for _, p := range profiles {
				kind := boards.KindBoard
				file := ""
				if p.Card != nil {
					kind, file = boards.KindCard, p.Card.File()
				} else {
					file = p.Board.File()
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s %s)\n", file, kind, p.Name())
			}
			return nil
		},
	}
}
