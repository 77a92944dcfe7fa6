package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boot"
	"github.com/ocfw/ocfw/plan"
)

// bootBackstop ends `ocf boot` whatever happens, so that u-root's init
// goes on to start the shell on the console.
const bootBackstop = 10 * time.Minute

// newBootCmd builds `boot`, the firmware's boot sequence (u-root runs it
// as uinit, then the shell).
func newBootCmd() *cobra.Command {
	var root string
	var noMount bool
	cmd := &cobra.Command{
		Use:   "boot",
		Short: "The firmware's boot sequence: load the planned drivers, self-test, measure, keep the report",
		Long: `boot runs once at every boot, before the shell: it mounts proc, sys and devtmpfs,
finds the data partition by its FAT label (` + "`OCFWDATA`" + ` by default) and mounts it on
` + plan.DataMount + `, reads ` + plan.File + ` and ` + plan.OptionsFile + `, loads the plan's kernel
modules, self-tests every engine, measures them within the speed budget, derives
the policy and writes the report to /ocfw/report-NNNN.json and .txt on the data
partition (the last 10 are kept) or, without one, to ` + plan.RunDir + `. Every step is
time-bounded; it always exits 0 so that init starts the shell.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if !noMount {
				if err := boot.ReleaseConsole(); err != nil {
					fmt.Fprintf(out, "ocfw: %v\n", err)
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() {
					if p := recover(); p != nil {
						fmt.Fprintf(out, "ocfw: boot sequence panicked: %v\n%s\n", p, plan.MarkDone)
					}
				}()
				boot.Run(context.Background(), boot.Config{Root: root, Console: out, Mount: !noMount})
			}()
			select {
			case <-done:
			case <-time.After(bootBackstop):
				fmt.Fprintf(out, "ocfw: boot sequence still running after %v: giving up\n%s\n", bootBackstop, plan.MarkDone)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&root, "root", "/", "file system root to work under (testing)")
	cmd.Flags().BoolVar(&noMount, "no-mount", false, "mount nothing (testing)")
	return cmd
}
