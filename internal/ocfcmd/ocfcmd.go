// Package ocfcmd holds the crypto subcommands — selftest, speed, policy —
// that both the on-board `ocf` command and the host `ocfw` command offer,
// so the board and a host run exactly the same code.
package ocfcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/regfile"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/fault"
	"github.com/ocfw/ocfw/ocf/probe"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
	"github.com/ocfw/ocfw/plan"
)

// PlanFunc returns the plan whose engines to test, or nil for the host
// default: every cipher on kernel software (AF_ALG) and Go software.
type PlanFunc func() (*plan.Plan, error)

// runFlags are the flags selftest and speed share.
type runFlags struct {
	ciphers []string
	inject  []string
	timeout time.Duration
	json    bool
	out     string
	force   bool
	depth   int
}

// checkOut refuses, before the run, an -o that is not a file or that
// exists without --force (atomicfile.CheckTarget).
func (f *runFlags) checkOut() error {
	if f.out == "" {
		return nil
	}
	p, err := atomicfile.CheckTarget(f.out, "-o "+f.out, f.force)
	if errors.Is(err, atomicfile.ErrExists) {
		return fmt.Errorf("%w: add --force to replace it", err)
	}
	if err == nil {
		f.out = p
	}
	return err
}

func (f *runFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.ciphers, "cipher", nil, "only this cipher (repeat; default all in the plan)")
	cmd.Flags().StringArrayVar(&f.inject, "inject", nil, "add a faulty test engine: corrupt:SIZE, fail:SIZE or hang:SIZE (for testing the tests)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Second, "per-request timeout: an engine slower than this has failed")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	cmd.Flags().StringVarP(&f.out, "output", "o", "", "also write the JSON report to this file (atomically; not a device, FIFO or directory)")
	cmd.Flags().BoolVar(&f.force, "force", false, "replace an existing -o file")
	cmd.Flags().IntVar(&f.depth, "depth", 4, "AF_ALG requests in flight per session for batched work")
}

func (f *runFlags) targets(ctx context.Context, pl PlanFunc) ([]probe.Target, error) {
	p, err := pl()
	if err != nil {
		return nil, err
	}
	wants, err := probe.Wants(p, f.ciphers)
	if err != nil {
		return nil, err
	}
	var extra []ocf.Driver
	for _, spec := range f.inject {
		d, err := fault.Parse(ctx, spec)
		if err != nil {
			return nil, err
		}
		extra = append(extra, d)
	}
	return probe.Find(wants, probe.Options{Depth: f.depth, Extra: extra}), nil
}

// NewSelftestCmd builds `selftest`.
func NewSelftestCmd(pl PlanFunc) *cobra.Command {
	f := &runFlags{}
	var full bool
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Prove each engine gives right answers: known-answer tests and a cross-check against Go software",
		Long: `selftest runs, for every engine in the plan and every cipher, the known-answer
tests of the standards (SP 800-38A, RFC 3602, FIPS 81, SP 800-20/67, RFC 2202,
RFC 4231) in both directions, then a cross-check against Go software on random
keys, IVs and data from one block to 64 KiB, unaligned and in place. Each result
is pass, fail (with the first failing case) or absent (in the plan, not on this
system: reported, not a failure). Exit status 1 when anything present failed.
The boot runs one vector of each NIST CAVP file; --full runs all of them
(AES-CBC GFSbox, KeySbox, VarTxt, VarKey, MMT; TDES-CBC KATs and MMT).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.checkOut(); err != nil {
				return err
			}
			targets, err := f.targets(cmd.Context(), pl)
			if err != nil {
				return err
			}
			r := report.Run(targets, report.RunOptions{SelfTest: selftest.Options{Timeout: f.timeout, Full: full}, NoSpeed: true})
			if err := emit(cmd.OutOrStdout(), r, f, func(w io.Writer) error {
				report.WriteSelfTest(w, r.SelfTest)
				return nil
			}); err != nil {
				return err
			}
			return failure(r)
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "every known-answer vector: the NIST CAVP files whole, not the boot's one per file")
	f.register(cmd)
	return cmd
}

// NewSpeedCmd builds `speed`.
func NewSpeedCmd(pl PlanFunc) *cobra.Command {
	f := &runFlags{}
	var seconds float64
	var multi int
	var budget time.Duration
	var sizes []int
	cmd := &cobra.Command{
		Use:   "speed",
		Short: "Measure each engine like `openssl speed -evp CIPHER -elapsed`",
		Long: `speed self-tests the engines first (a wrong engine is not worth timing), then
measures the ones that passed by wall clock at 16 to 16384 bytes and prints the
openssl speed table (thousands of bytes per second) with CPU utilisation per cell,
and the hardware/software policy those numbers give.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seconds < 0 || multi < 0 {
				return fmt.Errorf("--seconds and --multi must not be negative")
			}
			for _, s := range sizes {
				if s <= 0 || s > 1<<20 {
					return fmt.Errorf("--size %d: want 1 to 1048576 bytes", s)
				}
			}
			if err := f.checkOut(); err != nil {
				return err
			}
			targets, err := f.targets(cmd.Context(), pl)
			if err != nil {
				return err
			}
			r := report.Run(targets, report.RunOptions{
				SelfTest:    selftest.Options{Timeout: f.timeout},
				Speed:       speed.Options{Duration: time.Duration(seconds * float64(time.Second)), Multi: multi, Sizes: sizes},
				SpeedBudget: budget,
			})
			if err := emit(cmd.OutOrStdout(), r, f, r.WriteText); err != nil {
				return err
			}
			return failure(r)
		},
	}
	f.register(cmd)
	cmd.Flags().Float64Var(&seconds, "seconds", 0, "seconds per cell (default: --budget spread over the cells)")
	cmd.Flags().IntVar(&multi, "multi", 1, "concurrent workers per cell, like openssl speed -multi")
	cmd.Flags().DurationVar(&budget, "budget", 45*time.Second, "time for the whole table when --seconds is not given")
	cmd.Flags().IntSliceVar(&sizes, "size", nil, "request sizes in bytes (default 16,64,256,1024,8192,16384)")
	return cmd
}

// NewPolicyCmd builds `policy`: print a stored policy, or the policy
// inside a report.
func NewPolicyCmd(defaultFile string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "policy [FILE]",
		Short: "Print the hardware/software policy (a policy file, or a report's policy)",
		Long: fmt.Sprintf(`policy prints, per cipher, the engine the dispatcher uses and from which request
size, which engines are excluded and why. FILE is a policy or a report in JSON
(default %s).`, defaultFile),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := defaultFile
			if len(args) == 1 {
				file = args[0]
			}
			p, err := LoadPolicy(file)
			if err != nil {
				return err
			}
			if asJSON {
				return p.WriteJSON(cmd.OutOrStdout())
			}
			report.WritePolicy(cmd.OutOrStdout(), p)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// maxPolicyFile bounds a policy or report file: a report is tens of KiB.
const maxPolicyFile = 4 << 20

// LoadPolicy reads a policy file, or the policy of a report file.
func LoadPolicy(file string) (ocf.Policy, error) {
	data, err := regfile.ReadFile(file, maxPolicyFile)
	if err != nil {
		return ocf.Policy{}, err
	}
	var probeDoc struct {
		Version int             `json:"version"`
		Policy  json.RawMessage `json:"policy"`
	}
	if json.Unmarshal(data, &probeDoc) == nil && probeDoc.Version > 0 && probeDoc.Policy != nil {
		r, err := report.Read(strings.NewReader(string(data)))
		if err != nil {
			return ocf.Policy{}, fmt.Errorf("%s: %w", file, err)
		}
		return r.Policy, nil
	}
	p, err := ocf.ReadPolicy(strings.NewReader(string(data)))
	if err != nil {
		return ocf.Policy{}, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

func emit(w io.Writer, r *report.Report, f *runFlags, text func(io.Writer) error) error {
	if f.out != "" {
		if err := WriteReport(f.out, r); err != nil {
			return err
		}
	}
	if f.json {
		j, err := r.JSON()
		if err != nil {
			return err
		}
		_, err = w.Write(j)
		return err
	}
	return text(w)
}

// WriteReport writes r as JSON to path atomically: a temporary file in the
// same directory, synced, then renamed.
func WriteReport(path string, r *report.Report) error {
	j, err := r.JSON()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, j, 0o644)
}

// ErrFailed is returned (after the report is printed) when a present
// engine failed its self-test.
type ErrFailed struct{ N int }

func (e *ErrFailed) Error() string {
	return fmt.Sprintf("self-test failed for %d (engine, cipher) pair(s); those engines are excluded by the policy", e.N)
}

func failure(r *report.Report) error {
	n := 0
	for _, t := range r.SelfTest {
		if t.Status == selftest.Fail {
			n++
		}
	}
	if n > 0 {
		return &ErrFailed{N: n}
	}
	return nil
}
