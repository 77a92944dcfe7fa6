package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
)

type boardsFlags struct {
	json bool
}

func newBoardsCmd(g *globalFlags) *cobra.Command {
	f := &boardsFlags{}
	cmd := &cobra.Command{
		Use:   "boards",
		Short: "List every board and card ocfw knows, one line each",
		Example: `  ocfw boards
  ocfw boards --json
  ocfw boards --profiles ./profiles   # with your own profiles added`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cat, err := g.catalog()
			if err != nil {
				return err
			}
			return listBoards(cmd.OutOrStdout(), cat, f)
		},
	}
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON instead of a table")
	return cmd
}

// boardsJSON is what boards --json prints.
type boardsJSON struct {
	Version int         `json:"version"`
	Boards  []boardLine `json:"boards"`
	Cards   []cardLine  `json:"cards"`
}

type boardLine struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Description string   `json:"description"`
	Aliases     []string `json:"aliases"`
	Engine      string   `json:"engine"` // "" when the board has no on-chip engine
	File        string   `json:"file"`
}

type cardLine struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Description string `json:"description"`
	Form        string `json:"form"`
	PCI         string `json:"pci"`
	Engine      string `json:"engine"`
	File        string `json:"file"`
}

func listBoards(w io.Writer, cat *boards.Catalog, f *boardsFlags) error {
	out := boardsJSON{Version: JSONVersion, Boards: []boardLine{}, Cards: []cardLine{}}
	for _, b := range cat.Boards() {
		out.Boards = append(out.Boards, boardLine{Name: b.Name, Kind: boards.KindBoard, Description: b.Description, Aliases: b.Aliases, Engine: b.Engine, File: b.File()})
	}
	for _, c := range cat.Cards() {
		out.Cards = append(out.Cards, cardLine{Name: c.Name, Kind: boards.KindCard, Description: c.Description, Form: c.Form, PCI: c.PCI, Engine: c.Engine, File: c.File()})
	}
	if f.json {
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BOARD\tDESCRIPTION")
	for _, l := range out.Boards {
		desc := l.Description
		if len(l.Aliases) > 0 {
			desc += " (also: " + strings.Join(l.Aliases, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\n", l.Name, desc)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "CARD\tDESCRIPTION")
	for _, l := range out.Cards {
		fmt.Fprintf(tw, "%s\t%s\n", l.Name, l.Description)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(out, '\n'))
	return err
}
