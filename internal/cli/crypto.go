package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/firmware"
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
		return g.resolve(boards.Request{Board: board, Cards: cards})
	}
	cmd := build(pl)
	cmd.Flags().StringVar(&board, "board", "", "test the engines of this board's plan (default: kernel and Go software for every cipher)")
	cmd.Flags().StringArrayVar(&cards, "card", nil, "a card in the board's slots (repeat)")
	return cmd
}

type reportFlags struct {
	output    string
	reference string
	quiet     bool
	list      bool
	all       bool
	boots     []int
	export    string
	force     bool // replace existing -o and --export files
}

// reportSource is one report and where it came from.
type reportSource struct {
	from   string
	report *report.Report
}

func newReportCmd() *cobra.Command {
	f := &reportFlags{}
	cmd := &cobra.Command{
		Use:   "report SOURCE...",
		Short: "List, print, export and chart the reports a board kept (from an image, a card, or JSON files)",
		Long: `report reads the crypto reports a board kept, from any of:

  an image file           ocfw build's image after 'ocfw run --persist', or one read off a card
  a card in a reader      the block device (/dev/sdc) or its data partition (/dev/sdc2); read only
  a card mounted on a PC  its root folder or its ocfw folder
  a report JSON file      from 'ocfw speed -o FILE.json' or exported with --export

For an image or card it lists the kept reports, newest first (--list stops there),
then uses the newest one, or those given with --boot N (repeat) or --all. It prints
each as text (-q: not), writes them as JSON files into --export DIR, and, only
when asked with -o FILE.svg, draws the chart of throughput against request size,
one panel per cipher, one line per engine and report, hardware engines drawn
thicker. --reference picks the published results from these boards drawn dashed
beside them: auto (the same class of board and the engines the reports name; the
default), all, none, or words matched against the published platforms and
engines, e.g. --reference glxsb,IXP425.

-o and --export write whole files or none: an existing file is replaced only with
--force, a device, FIFO or directory never.`,
		Example: `  ocfw report out/ocfw-alix2d13.img --list
  ocfw report /dev/sdc --all -o alix.svg
  ocfw report /media/me/OCFWDATA --boot 7 --export reports/
  ocfw report host.json alix.json --reference none`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("report needs at least one SOURCE: an image, a card device, a card folder or a report JSON file (e.g. ocfw report out/ocfw-alix2d13.img)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.output != "" && !strings.HasSuffix(f.output, ".svg") {
				return fmt.Errorf("-o %s: the chart is written as SVG: give a file name ending in .svg", f.output)
			}
			if f.all && len(f.boots) > 0 {
				return fmt.Errorf("--all and --boot: give one or the other")
			}
			if f.output != "" {
				var err error
				if f.output, err = checkOut(f.output, "-o", f.force); err != nil {
					return err
				}
			}
			if f.export != "" {
				if fi, err := os.Stat(f.export); err == nil && !fi.IsDir() {
					return fmt.Errorf("--export %s: not a folder: give a folder for the JSON files", f.export)
				}
			}
			w := cmd.OutOrStdout()
			var srcs []reportSource
			for _, a := range args {
				got, err := f.read(w, a)
				if err != nil {
					return err
				}
				srcs = append(srcs, got...)
			}
			if f.list {
				return nil
			}
			if f.export != "" {
				if err := os.MkdirAll(f.export, 0o755); err != nil {
					return err
				}
				// Every file is checked before any is written, and
				// all are committed together.
				var set atomicfile.Set
				defer set.Cleanup()
				var names []string
				for _, s := range srcs {
					name, err := checkOut(filepath.Join(f.export, s.report.ExportName()), "--export", f.force)
					if err != nil {
						return err
					}
					j, err := s.report.JSON()
					if err != nil {
						return err
					}
					if err := set.WriteFile(name, j); err != nil {
						return err
					}
					names = append(names, name)
				}
				if err := set.Commit(0o644); err != nil {
					return err
				}
				for _, name := range names {
					fmt.Fprintf(cmd.ErrOrStderr(), "exported %s\n", name)
				}
			}
			if !f.quiet {
				for _, s := range srcs {
					if len(srcs) > 1 {
						fmt.Fprintf(w, "==> %s <==\n", s.from)
					}
					if err := s.report.WriteText(w); err != nil {
						return err
					}
				}
			}
			var chartSrc []chart.Source
			for _, s := range srcs {
				chartSrc = append(chartSrc, chart.Source{Report: s.report, Label: chart.Label(s.report, strings.TrimSuffix(filepath.Base(s.from), ".json"))})
			}
			data, err := chart.Data(chartSrc, f.reference)
			if err != nil {
				return err
			}
			if f.output == "" {
				return nil // the chart only when asked for (-o FILE.svg)
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
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "", "draw the chart into this SVG file (default: no chart)")
	fl.StringVar(&f.reference, "reference", chart.RefAuto, "published results to overlay: auto, all, none, or words matching platforms/engines")
	fl.Lookup("reference").NoOptDefVal = chart.RefAuto
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "do not print the reports as text")
	fl.BoolVar(&f.list, "list", false, "only list the reports an image or card keeps")
	fl.BoolVar(&f.all, "all", false, "use every kept report of an image or card (default: the newest)")
	fl.IntSliceVar(&f.boots, "boot", nil, "use the report of this boot number (repeat)")
	fl.StringVar(&f.export, "export", "", "write the chosen reports as JSON files into this folder")
	fl.BoolVar(&f.force, "force", false, "replace existing -o and --export files (a device, FIFO or directory never)")
	return cmd
}

// read gets the chosen reports from one source, listing an image's or a
// card's reports on w.
func (f *reportFlags) read(w io.Writer, src string) ([]reportSource, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if fi.Mode().IsRegular() && strings.HasSuffix(strings.ToLower(src), ".json") {
		fh, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r, err := report.Read(io.LimitReader(fh, 16<<20))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		return []reportSource{{from: src, report: r}}, nil
	}
	src = reportsFrom(w, src)
	reps, st, err := firmware.Reports(src)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "%s: %d boots, %d reports kept, newest first:\n", src, st.Boot, len(reps))
	for _, r := range reps {
		fmt.Fprintf(w, "  boot %-4d %s\n", r.Boot, summaryLine(r))
	}
	for _, n := range st.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	for _, p := range st.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
	kept := make([]*report.Report, len(reps))
	for i, r := range reps {
		kept[i] = r.Report
	}
	chosen, missing := report.Choose(kept, f.all, f.boots)
	if len(missing) > 0 {
		b := missing[0]
		return nil, fmt.Errorf("--boot %d: %s keeps no readable report of boot %d (see the list above)", b, src, b)
	}
	var out []reportSource
	for _, r := range chosen {
		out = append(out, reportSource{from: fmt.Sprintf("%s boot %d", src, r.Boot), report: r})
	}
	if len(out) == 0 && !f.list {
		return nil, fmt.Errorf("%s: no readable report", src)
	}
	return out, nil
}

func summaryLine(r firmware.ReportInfo) string {
	if r.Report == nil {
		return "unreadable: " + r.Error
	}
	return r.Report.Summary()
}
