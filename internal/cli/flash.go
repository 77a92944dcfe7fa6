package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/firmware"
)

func newFlashCmd() *cobra.Command {
	var opts firmware.FlashOptions
	var verifyOnly bool
	cmd := &cobra.Command{
		Use:   "flash IMAGE TARGET",
		Short: "Write an image to a CF card (or a file), then read it back and verify it",
		Long: `flash writes the ranges of IMAGE its block map lists (file system metadata and the
clusters in use, from IMAGE.manifest.json), syncs, reads them back from TARGET and
checks them against the manifest's sha256; any difference is an error.

It refuses a mounted device, the disk holding /, and a partition instead of a whole
disk — always — and a non-removable disk or one over 64 GiB unless --force. It asks
before writing unless --yes. TARGET may be a regular file.`,
		Example: `  ocfw flash alix.img /dev/sdc
  ocfw flash --yes alix.img card-copy.img
  ocfw flash --verify-only alix.img /dev/sdc`,
		Args: needArgs(2, 2, "the image and the target card (find the card with lsblk -d -o NAME,SIZE,MODEL,TRAN,RM)",
			"ocfw flash alix.img /dev/sdc"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Progress = cmd.ErrOrStderr()
			opts.Terminal = isTerminal(cmd.ErrOrStderr())
			if verifyOnly {
				if err := firmware.Verify(args[0], args[1], opts); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s matches %s\n", args[1], args[0])
				return nil
			}
			in := bufio.NewReader(cmd.InOrStdin())
			opts.Confirm = func(prompt string) bool {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s [y/N] ", prompt)
				line, _ := in.ReadString('\n')
				a := strings.ToLower(strings.TrimSpace(line))
				return a == "y" || a == "yes"
			}
			if err := firmware.Flash(cmd.Context(), args[0], args[1], opts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s written to %s and verified\n", args[0], args[1])
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.Yes, "yes", false, "do not ask before writing")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "allow a non-removable disk or one over 64 GiB")
	cmd.Flags().BoolVar(&verifyOnly, "verify-only", false, "only read TARGET back and compare it with the image's manifest")
	return cmd
}

// isTerminal reports whether w is a terminal (for a redrawn progress bar).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
