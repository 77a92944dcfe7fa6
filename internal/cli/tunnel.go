package cli

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/router/ipsec"
	"github.com/ocfw/ocfw/site"
)

func newTunnelCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tunnel",
		Short: "Work with site-to-site IPsec tunnels (manual keys)",
	}
	var f tunnelKeysFlags
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
writes it elsewhere), mode 0600; an existing file is kept unless --force, and a
device, FIFO or directory is never written. Copy it
to each box's card, into its ocfw folder beside site.json: the firmware reads it
from there at boot and never from the image. The keys do not change by
themselves (no IKE, no rekeying): to roll them, run this again with --force,
install the new file on both boxes and restart both.

With --peer-commands the second site's end is a Linux box that is not ocfw:
the key file is made (or, when it exists and --force is not given, read) and
the ip xfrm commands that set up that end are printed, exactly the SAs and
policies the ocfw end installs (extended sequence numbers, the 128-packet
window, the same algorithms). They hold the keys: keep the output secret.`,
		Example: `  ocfw tunnel keys --site site-a.yaml --site site-b.yaml --tunnel a-b
  ocfw validate site-a.yaml site-b.yaml
  ocfw tunnel keys --site site-a.yaml --site linux-peer.yaml --peer-commands > peer.sh`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(f.sites) != 2 {
				return fmt.Errorf("--site: give the two ends' site configs (--site A.yaml --site B.yaml), got %d", len(f.sites))
			}
			cat, err := g.catalog()
			if err != nil {
				return err
			}
			pair, err := cat.PairTunnel(f.sites[0], f.sites[1], f.name, readProfileFile)
			var l boards.ErrorList
			var mismatch *boards.PairMismatchError
			switch {
			case errors.As(err, &l):
				return printErrors(cmd, l, "in the site configs")
			case errors.As(err, &mismatch):
				return printErrors(cmd, mismatch.Errs, "between the two ends")
			case err != nil:
				return err
			}
			paths, flag := []string{f.out}, "-o"
			if f.out == "" {
				paths, flag = pair.KeyPaths(), "the sites' keys field:"
			}
			if f.peerCommands && !f.force {
				if data, err := os.ReadFile(paths[0]); err == nil {
					k, errs := site.ReadTunnelKeys(paths[0], data)
					if len(errs) > 0 {
						return errors.Join(errs...)
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "read %s (kept: --force makes new keys)\n", paths[0])
					return printPeerCommands(cmd, pair, k)
				}
			}
			k, err := pair.NewKeys(rand.Reader, time.Now())
			if err != nil {
				return err
			}
			for i, p := range paths {
				// Existing files are refused below unless --force;
				// a device or FIFO always.
				if paths[i], err = checkOut(p, flag, true); err != nil {
					return err
				}
			}
			if err := boards.WriteTunnelKeys(paths, k, f.force); err != nil {
				return err
			}
			for _, p := range paths {
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: tunnel %s, %s <-> %s, %s with %s, SPIs %s and %s\n",
					p, pair.Name, k.SAs[0].From, k.SAs[0].To, k.Cipher, k.Auth, k.SAs[0].SPI, k.SAs[1].SPI)
			}
			if f.peerCommands {
				fmt.Fprintf(cmd.ErrOrStderr(), "copy it to the ocfw box's card, into the ocfw folder (beside site.json), and keep it secret\n")
				return printPeerCommands(cmd, pair, k)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "copy it to both boxes' cards, into the ocfw folder (beside site.json), and keep it secret\n")
			return nil
		},
	}
	keys.Flags().StringArrayVar(&f.sites, "site", nil, "a site config at one end of the tunnel (give two)")
	keys.Flags().StringVar(&f.name, "tunnel", "", "the tunnel's name (default: the one tunnel the two sites share)")
	keys.Flags().StringVarP(&f.out, "output", "o", "", "write the key file here (default: the sites' keys field, beside each site config)")
	keys.Flags().BoolVar(&f.force, "force", false, "replace an existing key file")
	keys.Flags().BoolVar(&f.peerCommands, "peer-commands", false, "print the ip xfrm commands for the second site's end, a Linux box that is not ocfw")
	cmd.AddCommand(keys)
	return cmd
}

// tunnelKeysFlags are tunnel keys' flags.
type tunnelKeysFlags struct {
	sites        []string
	name, out    string
	force        bool
	peerCommands bool
}

// printPeerCommands prints the ip xfrm commands for the pair's second
// end: the mirror of what the first end's box installs.
func printPeerCommands(cmd *cobra.Command, pair *boards.TunnelPair, k *site.TunnelKeys) error {
	x, err := peerTunnel(pair, k)
	if err != nil {
		return err
	}
	lines, err := x.PeerCommands()
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(cmd.OutOrStdout(), l)
	}
	return nil
}

// peerTunnel is the first site's tunnel as its box installs it (the
// router's tunnelFromKeys does the same on the board).
func peerTunnel(pair *boards.TunnelPair, k *site.TunnelKeys) (*ipsec.Tunnel, error) {
	s, errs := pair.A.Site.Tunnels[pair.AI].Setup(pair.A.Site, k)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sa := func(k site.SAKeys) ipsec.SA {
		return ipsec.SA{SPI: k.SPI, Cipher: s.Cipher, Auth: s.Auth, EncKey: k.EncKey, AuthKey: k.AuthKey,
			ReplayWindow: uint32(s.ReplayWindow), ESN: s.ESN}
	}
	return &ipsec.Tunnel{Name: s.Name, Local: s.Local, Remote: s.Peer, LocalNet: s.LocalSubnet, RemoteNet: s.RemoteSubnet,
		Out: sa(s.Out), In: sa(s.In)}, nil
}

// printErrors prints each problem on its own line and returns the
// summary error.
func printErrors(cmd *cobra.Command, l boards.ErrorList, where string) error {
	for _, e := range l {
		fmt.Fprintln(cmd.ErrOrStderr(), errorLine(e))
	}
	return fmt.Errorf("%d problem(s) %s", len(l), where)
}
