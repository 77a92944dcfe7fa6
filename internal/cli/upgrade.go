package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/internal/sshclient"
	"github.com/ocfw/ocfw/internal/upgrade"
)

type upgradeFlags struct {
	ssh    sshFlags
	noWait bool
	wait   time.Duration
}

func newUpgradeCmd() *cobra.Command {
	f := &upgradeFlags{}
	cmd := &cobra.Command{
		Use:   "upgrade IMAGE HOST",
		Short: "Send a new system to a running box over SSH; it boots it once and keeps it only if it proves itself",
		Long: `upgrade reads the system (kernel and initramfs) out of a bios-cf IMAGE, asks the
box at HOST over SSH which board it is, and refuses another board's image before sending anything. The box writes the
system into its inactive slot in place, checks its sha256 against the image's
manifest, arms a one-time boot of it and resets. The new system commits itself as
the default only after its boot passes: a self-test no worse than the old one's,
the WAN up, SSH answering. A kernel panic, init exiting, a failed check or a hang
(the watchdog) make the next reset boot the old system, which reports the upgrade
rolled back and why. The data partition (reports, host keys, leases, site config)
is kept either way.

upgrade waits for that result and prints it (exit 1 when rolled back) unless
--no-wait. A box still booting (SSH answers some 20 s before it takes upgrades)
is waited for.

HOST is host, host:port or user@host[:port]. It logs in as ocfw push does: keys
from -i, else ssh-agent and ~/.ssh/id_*; the box's host key checked against
~/.ssh/known_hosts (--known-hosts), an unknown box refused showing its ed25519
fingerprint (compare it with 'ocf net' on the console) unless --host-key pins it
or --accept-new adds it.`,
		Example: `  ocfw upgrade alix.img 192.168.1.1
  ocfw upgrade --accept-new alix.img root@192.168.1.1:22
  ocfw upgrade --no-wait --identity ~/.ssh/ocfw alix.img router.lan`,
		Args: needArgs(2, 2, "the new image and the box's address", "ocfw upgrade alix.img 192.168.1.1"),
		RunE: func(cmd *cobra.Command, args []string) error {
			so, err := f.ssh.options(args[1])
			if err != nil {
				return err
			}
			remote, err := sshclient.New(so)
			if err != nil {
				return err
			}
			res, err := upgrade.Run(cmd.Context(), upgrade.Options{Image: args[0], Remote: remote, Out: cmd.OutOrStdout(), NoWait: f.noWait, Wait: f.wait})
			if err != nil {
				return hostKeyHint(err)
			}
			if !res.Waited {
				fmt.Fprintf(cmd.OutOrStdout(), "the box is booting %s once; `ocf upgrade status` on it tells the result\n", res.To)
			}
			return nil
		},
	}
	f.ssh.register(cmd, "")
	cmd.Flags().BoolVar(&f.noWait, "no-wait", false, "return once the box has the new system, without waiting for the result")
	cmd.Flags().DurationVar(&f.wait, "wait", 15*time.Minute, "how long to wait for the box to commit or roll back")
	return cmd
}
