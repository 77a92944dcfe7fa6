package main

import (
	"encoding/json"

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
inside it), and the firmware's reports on the data partition, latest first. Input
that is not an ocfw image is an error.`,
		Example: `  ocfw inspect alix.img
  ocfw inspect --json nslu2.bin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := firmware.Inspect(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(append(b, '\n'))
				return err
			}
			return info.WriteText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print everything as JSON (reports in full)")
	return cmd
}
