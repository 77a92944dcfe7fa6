package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/progress"
	"github.com/ocfw/ocfw/plan"
)

type tryFlags struct {
	build    buildFlags
	timeout  time.Duration
	keepCopy string
}

// newTryCmd is the main job in one command: fetch the kernel, build the
// image, boot it in QEMU and show the on-boot report.
func newTryCmd(g *globalFlags) *cobra.Command {
	f := &tryFlags{}
	cmd := &cobra.Command{
		Use:   "try --board BOARD [--card CARD]...",
		Short: "Fetch the kernel, build the image and boot it in QEMU: the whole job, to the on-boot report",
		Long: `try does what a new user wants to see first: it fetches the board's Debian
kernel package (once; later runs use the cache), builds the CF image (as 'ocfw
build'), boots it in QEMU (as 'ocfw run --poweroff-after-report'), shows the
console with the self-test, speed table and policy, and reads the report back
from the data partition. The exit status is the self-test outcome. As with
'ocfw run', QEMU boots a copy of the image: the image in out/ stays as built,
matching its manifest, for 'ocfw flash' or another 'ocfw run'.`,
		Example: `  ocfw try --board alix2d13 --card vpn1411`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pl, err := f.build.resolve(g)
			if err != nil {
				return err
			}
			if err := f.build.loadSite(g, pl); err != nil {
				return err
			}
			if pl.Boot != plan.BootBIOSCF {
				return fmt.Errorf("--board %s: QEMU has no IXP4xx machine, so only the x86 CF boards can be tried; 'ocfw build' makes its image", pl.Board)
			}
			if pl.Kernel.Source == plan.KernelDebian {
				fmt.Fprintf(cmd.ErrOrStderr(), "ocfw: fetching %s (%s) unless cached\n", pl.Kernel.Package, pl.Kernel.Arch)
				stop := progress.Start(progress.Terminal(cmd.ErrOrStderr()), "fetching "+pl.Kernel.Package)
				_, err := debian.FetchKernel(cmd.Context(), pl.Kernel.Package, pl.Kernel.Arch, "")
				stop()
				if err != nil {
					return err
				}
			}
			if f.build.output == "" {
				f.build.output = filepath.Join("out", "ocfw-"+pl.Board+".img")
			}
			if err := os.MkdirAll(filepath.Dir(f.build.output), 0o755); err != nil {
				return err
			}
			if err := runBuild(cmd, pl, &f.build); err != nil {
				return err
			}
			return runImage(cmd, f.build.output, &runFlags{timeout: f.timeout, timeoutSet: cmd.Flags().Changed("timeout"), poweroff: true, keepCopy: f.keepCopy})
		},
	}
	fl := cmd.Flags()
	f.build.register(cmd, false)
	fl.StringVarP(&f.build.output, "output", "o", "", "image file (default out/ocfw-BOARD.img)")
	fl.StringVar(&f.build.budget, "speed-budget", "", "time the firmware's boot-time speed run may take (default: the firmware's)")
	fl.StringVar(&f.build.site, "site", "", "the router's site config (YAML, kind: site)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "watchdog for the QEMU boot; 0 = none")
	fl.StringVar(&f.keepCopy, "keep-copy", "", "keep the copy of the image QEMU booted (with its report) in this file")
	return cmd
}
