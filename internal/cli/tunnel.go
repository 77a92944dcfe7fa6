package cli

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/ocfw/ocfw/site"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/regfile"
)

func newTunnelCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tunnel",
		Short: "Work with site-to-site IPsec tunnels (manual keys)",
	}
	var sites []string
	var name, out string
	var force bool
	keys := &cobra.Command{
		Use:   "keys --site A.yaml --site B.yaml [--tunnel NAME]",
		Short: "Make the key file both ends of a tunnel share",
		Long: `keys checks that the two site configs are the two ends of the tunnel (each one's
peer is the other's address, the subnets mirrored, the same cipher and auth), then
writes fresh random keys for it: per direction an SPI, an encryption key and an
authentication key of the algorithms' sizes, with extended sequence numbers and a
128-packet anti-replay window. One file serves both ends: each box takes the
direction leaving its own address as outbound.

The file goes where the sites' "keys" field says, beside the site configs (-o
writes it elsewhere), mode 0600; an existing file is kept unless --force. Copy it
to each box's card, into its ocfw folder beside site.json: the firmware reads it
from there at boot and never from the image. The keys do not change by
themselves (no IKE, no rekeying): to roll them, run this again with --force,
install the new file on both boxes and restart both.`,
		Example: `  ocfw tunnel keys --site site-a.yaml --site site-b.yaml --tunnel a-b
  ocfw validate site-a.yaml site-b.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(sites) != 2 {
				return fmt.Errorf("--site: give the two ends' site configs (--site A.yaml --site B.yaml), got %d", len(sites))
			}
			cat, err := g.catalog()
			if err != nil {
				return err
			}
			var docs []*boards.SiteDoc
			var all boards.ErrorList
			for _, f := range sites {
				data, err := readProfileFile(f)
				if err != nil {
					return err
				}
				d, err := cat.ParseSiteDoc(f, data)
				var l boards.ErrorList
				if errors.As(err, &l) {
					all = append(all, l...)
				} else if err != nil {
					return err
				}
				docs = append(docs, d)
			}
			if len(all) > 0 {
				return printErrors(cmd, all, "in the site configs")
			}
			a, b := docs[0], docs[1]
			if a.Site.Hostname == b.Site.Hostname && a.Site.WAN.Address == b.Site.WAN.Address {
				return fmt.Errorf("--site %s and --site %s are the same site: give the two ends", a.File, b.File)
			}
			if name == "" {
				if name, err = sharedTunnel(a, b); err != nil {
					return err
				}
			}
			ai, bi := a.Tunnel(name), b.Tunnel(name)
			for _, e := range []struct {
				d *boards.SiteDoc
				i int
			}{{a, ai}, {b, bi}} {
				if e.i < 0 {
					return fmt.Errorf("%s has no tunnel %q%s", e.d.File, name, tunnelNames(e.d))
				}
			}
			if errs := boards.CheckTunnelPair(a, ai, b, bi); len(errs) > 0 {
				return printErrors(cmd, errs, "between the two ends")
			}
			ta := a.Site.Tunnels[ai]
			addrA, _ := a.Site.TunnelAddrs(ta)
			k, err := site.NewTunnelKeys(rand.Reader, name, ta.Cipher, ta.Auth, addrA.Local, addrA.Peer, time.Now())
			if err != nil {
				return err
			}
			data, err := k.JSON()
			if err != nil {
				return err
			}
			paths := []string{out}
			if out == "" {
				paths = []string{boards.TunnelKeysPath(a.File, ta)}
				if pb := boards.TunnelKeysPath(b.File, b.Site.Tunnels[bi]); pb != paths[0] {
					paths = append(paths, pb)
				}
			}
			// Refuse before writing anything: old keys may be what the
			// boxes run on.
			if !force {
				for _, p := range paths {
					if _, err := os.Lstat(p); err == nil {
						return fmt.Errorf("%s exists: the boxes may be using those keys; give --force to replace them (then install the new file on both ends)", p)
					} else if !errors.Is(err, fs.ErrNotExist) {
						return err
					}
				}
			}
			for _, p := range paths {
				if err := atomicfile.WriteFile(p, data, 0o600); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: tunnel %s, %s <-> %s, %s with %s, SPIs %s and %s\n",
					p, name, k.SAs[0].From, k.SAs[0].To, k.Cipher, k.Auth, k.SAs[0].SPI, k.SAs[1].SPI)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "copy it to both boxes' cards, into the ocfw folder (beside site.json), and keep it secret\n")
			return nil
		},
	}
	keys.Flags().StringArrayVar(&sites, "site", nil, "a site config at one end of the tunnel (give two)")
	keys.Flags().StringVar(&name, "tunnel", "", "the tunnel's name (default: the one tunnel the two sites share)")
	keys.Flags().StringVarP(&out, "output", "o", "", "write the key file here (default: the sites' keys field, beside each site config)")
	keys.Flags().BoolVar(&force, "force", false, "replace an existing key file")
	cmd.AddCommand(keys)
	return cmd
}

// sharedTunnel is the one tunnel name both sites have.
func sharedTunnel(a, b *boards.SiteDoc) (string, error) {
	var shared []string
	for _, t := range a.Site.Tunnels {
		if b.Tunnel(t.Name) >= 0 {
			shared = append(shared, t.Name)
		}
	}
	switch len(shared) {
	case 1:
		return shared[0], nil
	case 0:
		return "", fmt.Errorf("%s and %s have no tunnel of the same name%s", a.File, b.File, tunnelNames(a))
	}
	return "", fmt.Errorf("%s and %s share tunnels %s: say which with --tunnel", a.File, b.File, strings.Join(shared, ", "))
}

func tunnelNames(d *boards.SiteDoc) string {
	var n []string
	for _, t := range d.Site.Tunnels {
		n = append(n, t.Name)
	}
	if len(n) == 0 {
		return " (it has no tunnels: add one under tunnels:)"
	}
	return fmt.Sprintf(" (%s has %s)", d.File, strings.Join(n, ", "))
}

// printErrors prints each problem on its own line and returns the
// summary error.
func printErrors(cmd *cobra.Command, l boards.ErrorList, where string) error {
	for _, e := range l {
		fmt.Fprintln(cmd.ErrOrStderr(), e)
	}
	return fmt.Errorf("%d problem(s) %s", len(l), where)
}

// readTunnelKeys reads a key file the way the other inputs are read:
// regular files only, bounded.
func readTunnelKeys(path string) ([]byte, error) {
	return regfile.ReadFile(path, site.MaxTunnelKeysSize)
}
