package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/internal/upgrade"
)

type upgradeFlags struct {
	user     string
	port     int
	identity string
	sshOpts  []string
	noWait   bool
	wait     time.Duration
}

func newUpgradeCmd() *cobra.Command {
	f := &upgradeFlags{}
	cmd := &cobra.Command{
		Use:   "upgrade IMAGE HOST",
		Short: "Send a new system to a running box over SSH; it boots it once and keeps it only if it proves itself",
		Long: `upgrade reads the system (kernel and initramfs) out of a bios-cf IMAGE, asks the
box at HOST over SSH (the host's ssh client, keys and known_hosts) which board it
is, and refuses another board's image before sending anything. The box writes the
system into its inactive slot in place, checks its sha256 against the image's
manifest, arms a one-time boot of it and resets. The new system commits itself as
the default only after its boot passes: a self-test no worse than the old one's,
the WAN up, SSH answering. A kernel panic, init exiting, a failed check or a hang
(the watchdog) make the next reset boot the old system, which reports the upgrade
rolled back and why. The data partition (reports, host keys, leases, site config)
is kept either way.

upgrade waits for that result and prints it (exit 1 when rolled back) unless
--no-wait.`,
		Example: `  ocfw upgrade alix.img 192.168.1.1
  ocfw upgrade --no-wait --identity ~/.ssh/ocfw alix.img router.lan`,
		Args: needArgs(2, 2, "the new image and the box's address", "ocfw upgrade alix.img 192.168.1.1"),
		RunE: func(cmd *cobra.Command, args []string) error {
			remote := upgrade.OpenSSH{Host: args[1], User: f.user, Port: f.port, Identity: f.identity, Options: f.sshOpts}
			res, err := upgrade.Run(cmd.Context(), upgrade.Options{Image: args[0], Remote: remote, Out: cmd.OutOrStdout(), NoWait: f.noWait, Wait: f.wait})
			if err != nil {
				return err
			}
			if !res.Waited {
				fmt.Fprintf(cmd.OutOrStdout(), "the box is booting %s once; `ocf upgrade status` on it tells the result\n", res.To)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.user, "user", "root", "the login name on the box")
	cmd.Flags().IntVar(&f.port, "port", 0, "the box's SSH port (0: ssh's default)")
	cmd.Flags().StringVar(&f.identity, "identity", "", "the private key file for ssh (default: ssh's own choice)")
	cmd.Flags().StringArrayVar(&f.sshOpts, "ssh-option", nil, "an ssh -o option (repeatable), e.g. UserKnownHostsFile=FILE")
	cmd.Flags().BoolVar(&f.noWait, "no-wait", false, "return once the box has the new system, without waiting for the result")
	cmd.Flags().DurationVar(&f.wait, "wait", 15*time.Minute, "how long to wait for the box to commit or roll back")
	return cmd
}
