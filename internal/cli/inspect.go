package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/firmware"
)

func newInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect IMAGE",
		Short: "Show what is in a firmware image: partitions, files, boot config, manifest, reports",
		Long: `inspect reads a CF image (or a card's contents copied to a file) or a RedBoot flash
image without mounting it: the partition table, each FAT file system and its files,
the SYSLINUX configuration, the manifest (the one beside the image, else the copy
inside it), and the firmware's reports on the data partition, latest first.

Input that is not an ocfw image is an error. So is any problem found in one (a
damaged file system, boot file or manifest, or an image that no longer matches the
manifest beside it): everything is still printed, problems last (with --json, in
"problems"), and the exit status is 1. The firmware's store on the data partition
counts too: both state copies unreadable (the state was lost), the newest or the
older copy damaged, a report whose bytes changed are problems. A torn newest copy is
one as well: a power cut during a write leaves it, but from the card alone it cannot
be told from damage. What a cut leaves and the store puts right (the first record
torn, a report written but not yet named) is a note.`,
		Example: `  ocfw inspect alix.img
  ocfw inspect --json nslu2.bin`,
		Args: needArgs(1, 1, "one image file", "ocfw inspect alix.img"),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := firmware.Inspect(args[0])
			if err != nil {
				return err
			}
			where := "listed above"
			if asJSON {
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return err
				}
				if _, err := cmd.OutOrStdout().Write(append(b, '\n')); err != nil {
					return err
				}
				where = `in "problems"`
			} else if err := info.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if n := len(info.Problems); n > 0 {
				return fmt.Errorf("%s: %d problem(s), %s", args[0], n, where)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print everything as JSON (reports in full)")
	return cmd
}
