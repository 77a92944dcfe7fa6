// Package cli is the ocfw command line: cobra commands built by functions
// (NewRootCmd and friends) with their flags in structs, wording what the
// library packages return for the flags a user typed. cmd/ocfw only calls
// Main; tests drive the whole CLI in-process through Run.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/ocfcmd"
	"github.com/ocfw/ocfw/plan"
)

// Main is ocfw's main: it runs the CLI with signal handling: SIGINT or SIGTERM cancels the
// command's context, so a build stops its children (the userland's go
// build among them) and removes its temporary files, and a QEMU run kills
// the guest and gives the terminal back. The exit status is then 128 +
// the signal (130 for SIGINT). A second signal ends ocfw at once.
func Main(args []string, stdout, stderr io.Writer) int {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	defer stop()
	// Which signal it was, for the exit status.
	got := make(chan os.Signal, 1)
	signal.Notify(got, sigs...)
	caught := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-got:
			caught <- s
			fmt.Fprintf(stderr, "\nocfw: %v: stopping and removing temporary files (again to quit at once)\n", s)
			// From here on a signal has its default effect.
			stop()
			signal.Stop(got)
		case <-done:
		}
	}()
	code := Run(ctx, args, stdout, stderr)
	close(done)
	signal.Stop(got)
	select {
	case s := <-caught:
		if n, ok := s.(syscall.Signal); ok {
			return 128 + int(n)
		}
		return 1
	default:
		return code
	}
}

// run executes the CLI with args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return Run(context.Background(), args, stdout, stderr)
}

// Run executes the CLI with args under ctx and returns the exit status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "ocfw: stopped (%v): %s\n", context.Cause(ctx), flagWords(err))
		} else {
			fmt.Fprintf(stderr, "ocfw: %s\n", flagWords(err))
		}
		return 1
	}
	return 0
}

// globalFlags are the flags every command takes.
type globalFlags struct {
	profiles string
}

// catalog loads the embedded profiles plus the --profiles directory.
func (g *globalFlags) catalog() (*boards.Catalog, error) {
	c, err := boards.Embedded()
	if err != nil {
		return nil, fmt.Errorf("embedded profiles: %w", err)
	}
	if g.profiles != "" {
		if err := c.Overlay(g.profiles); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// errNoBoard is what every command that needs a board says without one.
var errNoBoard = fmt.Errorf("--board is required (see 'ocfw boards' for the boards ocfw knows)")

// resolve is the one way a command turns a board and cards into a plan:
// the catalog (embedded plus --profiles), then boards.Resolve.
func (g *globalFlags) resolve(req boards.Request) (*plan.Plan, error) {
	if req.Board == "" {
		return nil, errNoBoard
	}
	cat, err := g.catalog()
	if err != nil {
		return nil, err
	}
	return cat.Resolve(req)
}

// withExample gives a command shared with the board's ocf (package
// ocfcmd) the examples of ocfw's: the same flags, another name.
func withExample(cmd *cobra.Command, example string) *cobra.Command {
	cmd.Example = example
	return cmd
}

// NewRootCmd builds the ocfw command tree.
func NewRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "ocfw",
		Short: "Build firmware for small routers with crypto engines, and see what it will contain",
		Long: `ocfw builds firmware images for PC Engines ALIX, Soekris net5501 and Intel IXP4xx
boards and their Hifn and SafeNet crypto cards. The firmware's userland is Go; at
every boot it self-tests every crypto engine, measures it against software and
keeps the report on the card.

Start with 'ocfw boards' to see the hardware ocfw knows, and 'ocfw plan --board B
--card C' to see which engines, kernel modules and ciphers a firmware would hold.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.profiles, "profiles", "", "directory of extra board/card profiles (*.yaml); they add to or replace the built-in ones by name")
	root.AddCommand(
		newBoardsCmd(g),
		newBoardCmd(g),
		newPlanCmd(g),
		newValidateCmd(g),
		newPushCmd(g),
		newSiteCmd(g),
		newTunnelCmd(g),
		withExample(withPlanFlags(g, ocfcmd.NewSelftestCmd), `  ocfw selftest                                  # this host's kernel and Go software
  ocfw selftest --board alix2d13 --card vpn1411  # the engines of that firmware's plan
  ocfw selftest --cipher aes-128-cbc --json -o report.json`),
		withExample(withPlanFlags(g, ocfcmd.NewSpeedCmd), `  ocfw speed --cipher aes-128-cbc --seconds 1
  ocfw speed --board alix2d13 --budget 2m -o report.json`),
		withExample(ocfcmd.NewPolicyCmd("policy.json"), `  ocfw policy report.json         # the policy inside a report
  ocfw policy --json policy.json`),
		newReportCmd(),
		newKernelCmd(g),
		newRunCmd(),
		newTryCmd(g),
		newBuildCmd(g),
		newInspectCmd(),
		newFlashCmd(),
		newUpgradeCmd(),
		newVersionCmd(),
	)
	registerCompletions(root, g)
	return root
}
