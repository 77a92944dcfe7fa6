package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/chart"
	"github.com/ocfw/ocfw/internal/ocfcmd"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
)

// withPlanFlags adds --board and --card to one of the shared crypto
// commands: with them the engines of that board's plan are tested (those
// not on this host are reported absent), without them every cipher on
// kernel and Go software.
func withPlanFlags(g *globalFlags, build func(ocfcmd.PlanFunc) *cobra.Command) *cobra.Command {
	var board string
	var cards []string
	pl := func() (*plan.Plan, error) {
		if board == "" {
			if len(cards) > 0 {
				return nil, fmt.Errorf("--card needs --board")
			}
			return nil, nil
		}
		cat, err := g.catalog()
		if err != nil {
			return nil, err
		}
		return cat.Resolve(boards.Request{Board: board, Cards: cards})
	}
	cmd := build(pl)
	cmd.Flags().StringVar(&board, "board", "", "test the engines of this board's plan (default: kernel and Go software for every cipher)")
	cmd.Flags().StringArrayVar(&cards, "card", nil, "a card in the board's slots (repeat)")
	return cmd
}

type reportFlags struct {
	output    string
	reference bool
	quiet     bool
}

func newReportCmd() *cobra.Command {
	f := &reportFlags{}
	cmd := &cobra.Command{
		Use:   "report FILE.json...",
		Short: "Show reports from boards (or ocfw speed -o) and chart their speed against request size",
		Long: `report reads one or more JSON reports — from a board's data partition or from
'ocfw speed -o FILE.json' — prints each as text and draws a chart of throughput
against request size (log scales), one panel per cipher, one line per engine.
With --reference the published results from these boards are drawn dashed beside
them. The chart is SVG.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !strings.HasSuffix(f.output, ".svg") {
				return fmt.Errorf("-o %s: the chart is written as SVG: give a file name ending in .svg", f.output)
			}
			var reps []*report.Report
			var names []string
			for _, a := range args {
				fh, err := os.Open(a)
				if err != nil {
					return err
				}
				r, err := report.Read(fh)
				fh.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", a, err)
				}
				reps = append(reps, r)
				names = append(names, filepath.Base(a))
			}
			if !f.quiet {
				for i, r := range reps {
					if len(reps) > 1 {
						fmt.Fprintf(cmd.OutOrStdout(), "==> %s <==\n", args[i])
					}
					if err := r.WriteText(cmd.OutOrStdout()); err != nil {
						return err
					}
				}
			}
			data, err := chart.Data(reps, names, f.reference)
			if err != nil {
				return err
			}
			var svg bytes.Buffer
			if err := chart.WriteSVG(&svg, data); err != nil {
				return err
			}
			if err := atomicfile.WriteFile(f.output, svg.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "chart written to %s\n", f.output)
			return nil
		},
	}
	cmd.Flags().StringVarP(&f.output, "output", "o", "ocfw-report.svg", "chart file (SVG)")
	cmd.Flags().BoolVar(&f.reference, "reference", false, "overlay the published results from these boards")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "write the chart only, no text")
	return cmd
}
