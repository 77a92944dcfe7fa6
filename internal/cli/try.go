package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/plan"
)

type tryFlags struct {
	build    buildFlags
	timeout  time.Duration
	keepCopy string
	run      runFlags // the network flags and --poweroff-after-report
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
matching its manifest, for 'ocfw flash' or another 'ocfw run'.

QEMU has no IXP4xx machine. For the IXP4xx boards (nslu2, avila-gw2348) try
builds the same firmware — the board's plan, its ARMv5 (GOARM=5) Go userland —
for an ARM stand-in (as 'ocfw build --stand-in'): QEMU's raspi1ap with Debian
armel's linux-image-rpi kernel and its modules, the data partition on the
machine's SD card. It says first what that does not prove: the IXP4xx crypto
engine and Ethernet are absent (no NPE, no ixp4xx_crypto, no ixp4xx_eth), the
CPU is an ARMv6 ARM1176, not the XScale, and the kernel is not one that boots
the board.

With --site the image is a router, and try leaves it running after the report,
as 'ocfw run' does: its WAN on QEMU's restricted user network, 127.0.0.1:2222 on
this host forwarded to its SSH (--ssh-port), the console here. It says how to
log in (ssh -p 2222 root@127.0.0.1) and how to stop it ('ocf poweroff' on the
console, or Ctrl-A x). --poweroff-after-report, or stdin that is not a
terminal, powers it off after the report instead. The board's data partition
(SSH host key, leases, reports) is kept in IMAGE.state between runs, as with
'ocfw run'.`,
		Example: `  ocfw try --board alix2d13 --card vpn1411
  ocfw try --board nslu2        # on QEMU's ARM stand-in: see what it does not prove`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pl, err := f.build.resolve(g)
			if err != nil {
				return err
			}
			if pl.Boot == plan.BootRedBoot {
				// QEMU has no IXP4xx machine: try the firmware on the
				// ARM stand-in, and say so before anything else.
				f.build.standIn = true
				if pl, err = f.build.resolve(g); err != nil {
					return err
				}
			}
			if pl.StandIn != nil {
				standInBanner(cmd.ErrOrStderr(), pl)
			}
			if err := f.build.loadSite(g, pl); err != nil {
				return err
			}
			if f.build.output == "" {
				f.build.output = defaultImage(pl)
			}
			// Refused outputs before the fetch and the build, not after.
			if _, err := checkImageOut(f.build.output, f.build.force); err != nil {
				return err
			}
			if f.keepCopy != "" {
				if _, err := checkOut(f.keepCopy, "--keep-copy", f.build.force); err != nil {
					return err
				}
			}
			if pl.Kernel.Source == plan.KernelDebian {
				fmt.Fprintf(cmd.ErrOrStderr(), "ocfw: fetching %s (%s) unless cached\n", pl.Kernel.Package, pl.Kernel.Arch)
				if _, err := fetchKernel(cmd, "", false, pl.Kernel.Package, pl.Kernel.Arch); err != nil {
					return err
				}
			}
			if err := os.MkdirAll(filepath.Dir(f.build.output), 0o755); err != nil {
				return err
			}
			if err := runBuild(cmd, pl, &f.build); err != nil {
				return err
			}
			rf := f.run
			rf.timeout, rf.timeoutSet, rf.keepCopy, rf.force = f.timeout, cmd.Flags().Changed("timeout"), f.keepCopy, f.build.force
			rf.standInSaid = pl.StandIn != nil // the banner above listed it
			rf.poweroff = tryPowersOff(f.build.siteCfg != nil, stdinTerminal(cmd), f.run.poweroff)
			if f.build.siteCfg != nil && rf.poweroff && !f.run.poweroff {
				fmt.Fprintf(cmd.ErrOrStderr(), "ocfw try: stdin is not a terminal: powering the router off after the report ('ocfw run %s' keeps it up)\n", f.build.output)
			}
			return runImage(cmd, f.build.output, &rf)
		},
	}
	fl := cmd.Flags()
	f.build.register(cmd, false)
	fl.StringVarP(&f.build.output, "output", "o", "", "image file (default out/ocfw-BOARD.img)")
	fl.BoolVar(&f.build.force, "force", false, forceImageHelp+"; also an existing --keep-copy file")
	fl.StringVar(&f.build.budget, "speed-budget", "", "time the firmware's boot-time speed run may take (default: the firmware's)")
	fl.StringVar(&f.build.site, "site", "", "the router's site config (YAML, kind: site)")
	registerPlaceholderFlag(cmd, &f.build)
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "watchdog for the QEMU boot; 0 = none")
	fl.BoolVar(&f.build.noCache, "no-cache", false, noCacheHelp)
	fl.StringVar(&f.keepCopy, "keep-copy", "", "keep the copy of the image QEMU booted (with its report) in this file")
	fl.BoolVar(&f.run.poweroff, "poweroff-after-report", false, "power off once the boot sequence is done, also with --site (the default without one, or when stdin is not a terminal)")
	registerNetFlags(cmd, &f.run)
	return cmd
}

// standInBanner tells the user, before the build, that the firmware will
// run on a stand-in and what that does not prove.
func standInBanner(w io.Writer, pl *plan.Plan) {
	fmt.Fprintf(w, "ocfw: QEMU has no IXP4xx machine: %s's firmware runs on a STAND-IN, %s.\n", pl.Board, pl.StandIn.Name)
	fmt.Fprintf(w, "ocfw: the stand-in runs the board's userland, boot sequence, self-test, speed table and report for real, on a real ARM kernel; it does NOT prove:\n")
	for _, l := range pl.StandIn.Limits {
		fmt.Fprintf(w, "ocfw:   - %s\n", l)
	}
}
