// Command ocf is the firmware's on-board crypto command: it self-tests the
// engines of the firmware's plan, measures them, prints the policy, and
// (as the boot sequence) keeps the report on the card.
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/ocfcmd"
	"github.com/ocfw/ocfw/plan"
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
	planFile string
}

// loadPlan reads the plan the firmware was built with. A missing default
// plan means a host run: test kernel and Go software.
func (f *rootFlags) loadPlan() (*plan.Plan, error) {
	p, err := plan.Read(f.planFile)
	if errors.Is(err, fs.ErrNotExist) && f.planFile == plan.File {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--plan: %w", err)
	}
	return p, nil
}

func newRootCmd() *cobra.Command {
	f := &rootFlags{}
	root := &cobra.Command{
		Use:   "ocf",
		Short: "Self-test, measure and choose the crypto engines of this board",
		Long: `ocf runs on the board. It reads the firmware's plan (` + plan.File + `), finds
the engines it names, proves each gives right answers, measures it against Go
software and decides from which request size hardware is worth using.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&f.planFile, "plan", plan.File, "the firmware plan (JSON from ocfw plan --json)")
	root.AddCommand(
		ocfcmd.NewSelftestCmd(f.loadPlan),
		ocfcmd.NewSpeedCmd(f.loadPlan),
		ocfcmd.NewPolicyCmd(plan.PolicyFile),
		newBootCmd(),
		newDaemonCmd(),
		newNetCmd(),
		newConfigCmd(),
		newEnginesCmd(f),
		newLogCmd(f),
		newClientsCmd(),
		newFirewallCmd(),
		newRebootCmd("reboot", unix.LINUX_REBOOT_CMD_RESTART),
		newRebootCmd("poweroff", unix.LINUX_REBOOT_CMD_POWER_OFF),
		newUpgradeCmd(),
	)
	return root
}
