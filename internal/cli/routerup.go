package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/plan"
)

// tryPowersOff says whether try powers the guest off after the report:
// always without a site (nothing to reach), when asked, and when nobody
// is at a terminal to stop it; a router someone tries stays up.
func tryPowersOff(site, terminal, asked bool) bool {
	return !site || !terminal || asked
}

// stdinTerminal says whether the command's stdin is a terminal.
func stdinTerminal(cmd *cobra.Command) bool {
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok {
		return false
	}
	fi, err := in.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// routerHint is what to tell the user once a router image's boot is done
// and it stays up: how to log in over the forwarded port and how to stop
// it. The console is in raw mode then, so lines end in CR LF.
func routerHint(sshPort int, interactive bool) string {
	stop := "Ctrl-C stops it"
	if interactive {
		stop = "type 'ocf poweroff' on this console to stop it (it writes the log to the card first) (or Ctrl-A x to pull the plug)"
	}
	login := "SSH is not forwarded (--ssh-port 0)"
	if sshPort != 0 {
		login = fmt.Sprintf("log in with: ssh -p %d root@127.0.0.1", sshPort)
	}
	return fmt.Sprintf("\r\nocfw: the router is running; %s; %s\r\n", login, stop)
}

// routerUpScript, for a run that leaves a router image running, tells
// the user once the boot is done how to reach and stop it; nil for an
// image without a site config, or one on the stand-in (no network).
func routerUpScript(image string, f *runFlags, w io.Writer, interactive bool) func(context.Context, *qemu.VM) error {
	if f.poweroff || f.until != "" || f.net == "none" {
		return nil
	}
	info, err := firmware.Inspect(image)
	if err != nil || info.Manifest == nil || info.Manifest.Plan == nil || info.Manifest.Plan.Boot != plan.BootBIOSCF {
		return nil
	}
	if s, err := firmware.ImageSite(image); err != nil || s == nil {
		return nil
	}
	return func(context.Context, *qemu.VM) error {
		fmt.Fprint(w, routerHint(f.sshPort, interactive))
		return nil
	}
}
