package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/regfile"
	"github.com/ocfw/ocfw/site"
)

func newValidateCmd(g *globalFlags) *cobra.Command {
	var allowPlaceholder bool
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check user-written board and card profiles and site configs",
		Long: `validate parses each profile or site config file strictly (unknown fields, wrong
types, unknown engines, impossible slot or boot combinations; for a site config
(kind: site) its ports, addresses, DHCP range, port forwards and keys against its
board, and each tunnel's key file, read beside the site config, against the
tunnel; the two ends of a tunnel given together are checked against each other;
the same checks the firmware makes before it uses a site config, so a config
that passes here is one the router applies whole) and reports every problem as FILE:LINE:COLUMN with what would be valid, all in
one run. Names must be unique among the profiles given; a site config may
name a board given alongside. A site config whose only SSH key is the examples'
placeholder is refused as the build refuses it, unless --allow-placeholder-key.
Exit status 1 when anything is wrong.`,
		Example: `  ocfw validate mysite.yaml
  ocfw validate myboard.yaml mysite.yaml
  ocfw validate site-a.yaml site-b.yaml   # both ends of a tunnel, with its key file`,
		Args: needArgs(1, -1, "one or more profile or site config files", "ocfw validate myboard.yaml site.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sites, files []string
			for _, a := range args {
				if data, err := readProfileFile(a); err == nil && boards.FileKind(data) == boards.KindSite {
					sites = append(sites, a)
				} else {
					files = append(files, a)
				}
			}
			var profiles []boards.Profile
			var err error
			if len(files) > 0 {
				profiles, err = boards.LoadFiles(files)
			}
			if err == nil && len(sites) > 0 {
				err = validateSites(cmd, g, sites, profiles, allowPlaceholder)
			}
			if err != nil {
				var l boards.ErrorList
				if errors.As(err, &l) {
					for _, e := range l {
						fmt.Fprintln(cmd.ErrOrStderr(), errorLine(e))
					}
					return fmt.Errorf("%d problem(s) in the profiles given", len(l))
				}
				return err
			}
			for _, p := range profiles {
				kind := boards.KindBoard
				file := ""
				if p.Card != nil {
					kind, file = boards.KindCard, p.Card.File()
				} else {
					file = p.Board.File()
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s %s)\n", file, kind, p.Name())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&allowPlaceholder, placeholderFlag, false, "accept a site config whose only SSH key is the examples' placeholder, as build --allow-placeholder-key does")
	return cmd
}

// readProfileFile reads a site config or profile: a regular file (a FIFO
// or device is refused without blocking) of at most boards.MaxProfileSize.
func readProfileFile(name string) ([]byte, error) {
	return regfile.ReadFile(name, boards.MaxProfileSize)
}

// validateSites checks site configs against the catalog plus the
// profiles given in the same run, printing each one found right. A site
// whose only SSH key is the examples' placeholder is a problem unless
// allowPlaceholder: the same check and words as the build's.
func validateSites(cmd *cobra.Command, g *globalFlags, sites []string, profiles []boards.Profile, allowPlaceholder bool) error {
	cat, err := g.catalog()
	if err != nil {
		return err
	}
	cat.Add(profiles)
	ok, err := cat.CheckSites(sites, readProfileFile)
	placeholder := map[string]bool{}
	if !allowPlaceholder {
		docs, _ := cat.ReadSites(sites, readProfileFile) // what CheckSites read: its errors are in err
		var l boards.ErrorList
		for _, d := range docs {
			if d.Site.OnlyPlaceholderKey() {
				placeholder[d.File] = true
				l = append(l, d.At("ssh.authorized_keys", placeholderKeyProblem()))
			}
		}
		if len(l) > 0 {
			var prev boards.ErrorList
			if err == nil || errors.As(err, &prev) {
				err = append(prev, l...)
			}
		}
	}
	for _, s := range ok {
		if placeholder[s.File] {
			continue
		}
		var ks []string
		for _, t := range s.Tunnels {
			if t.Keying == site.KeyingIKEv2 {
				ks = append(ks, fmt.Sprintf("; tunnel %s to %s, ikev2, psk %s", t.Name, t.Peer, t.Keys))
				continue
			}
			ks = append(ks, fmt.Sprintf("; tunnel %s to %s, keys %s", t.Name, t.Peer, t.Keys))
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (site %s for %s%s)\n", s.File, s.Hostname, s.Board, strings.Join(ks, ""))
	}
	return err
}
