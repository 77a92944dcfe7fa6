// Command ocf is the firmware's on-board crypto command: it self-tests the
// engines of the firmware's plan, measures them, prints the policy, and
// (as the boot sequence) keeps the report on the card.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/ocfcmd"
)

// Where the firmware keeps its plan and the policy it derived.
const (
	DefaultPlan   = "/etc/ocfw/plan.json"
	DefaultPolicy = "/run/ocfw/policy.json"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		fmt.Fprintf(stderr, "ocf: %v\n", err)
		return 1
	}
	return 0
}

type rootFlags struct {
	plan string
}

// loadPlan reads the plan the firmware was built with. A missing default
// plan means a host run: test kernel and Go software.
func (f *rootFlags) loadPlan() (*boards.Plan, error) {
	data, err := os.ReadFile(f.plan)
	if errors.Is(err, fs.ErrNotExist) && f.plan == DefaultPlan {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--plan: %w", err)
	}
	var p boards.Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("--plan %s: not a plan written by ocfw: %w", f.plan, err)
	}
	return &p, nil
}

func newRootCmd() *cobra.Command {
	f := &rootFlags{}
	root := &cobra.Command{
		Use:   "ocf",
		Short: "Self-test, measure and choose the crypto engines of this board",
		Long: `ocf runs on the board. It reads the firmware's plan (` + DefaultPlan + `), finds
the engines it names, proves each gives right answers, measures it against Go
software and decides from which request size hardware is worth using.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&f.plan, "plan", DefaultPlan, "the firmware plan (JSON from ocfw plan --json)")
	root.AddCommand(
		ocfcmd.NewSelftestCmd(f.loadPlan),
		ocfcmd.NewSpeedCmd(f.loadPlan),
		ocfcmd.NewPolicyCmd(DefaultPolicy),
		newBootCmd(),
	)
	return root
}
