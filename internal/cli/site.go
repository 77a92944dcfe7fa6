package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/internal/atomicfile"
)

func newSiteCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "site",
		Short: "Work with site configs (what the router does)",
	}
	var out string
	var force bool
	js := &cobra.Command{
		Use:   "json SITE.yaml",
		Short: "Check a site config and write it as the JSON the board reads (site.json for a card's ocfw folder)",
		Long: `json checks a site config as ocfw validate does and writes it as JSON, the form
the firmware reads. Put the result in the data partition's ocfw folder as
site.json (on a PC): at the next boot it wins over the config built into the
image, so settings change without rebuilding. The board checks it again and
falls back to the built-in config, saying why, when it is not valid.

-o writes a file, whole or not at all: an existing one (site.json already on the
card) is replaced only with --force, and a device, FIFO or directory never.`,
		Example: `  ocfw site json mysite.yaml -o /media/me/OCFWDATA/ocfw/site.json`,
		Args:    needArgs(1, 1, "one site config file", "ocfw site json mysite.yaml -o site.json"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out != "" && out != "-" {
				var err error
				if out, err = checkOut(out, "-o", force); err != nil {
					return err
				}
			}
			data, err := readProfileFile(args[0])
			if err != nil {
				return err
			}
			cat, err := g.catalog()
			if err != nil {
				return err
			}
			s, _, err := cat.ParseSite(args[0], data)
			if err != nil {
				return err
			}
			j, err := s.JSON()
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(j)
				return err
			}
			if err := atomicfile.WriteFile(out, j, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: put it in the card's ocfw folder as site.json\n", out)
			return nil
		},
	}
	js.Flags().StringVarP(&out, "output", "o", "", "write this file (default: standard output); not a device, FIFO or directory")
	js.Flags().BoolVar(&force, "force", false, "replace an existing file (a site.json already on the card)")
	cmd.AddCommand(js)
	return cmd
}
