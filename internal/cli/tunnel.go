package cli

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/router/ipsec"
	"github.com/ocfw/ocfw/site"
)

func newTunnelCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tunnel",
		Short: "Work with site-to-site IPsec tunnels (IKEv2 PSK files, manual key files)",
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
			pair, err := pairTunnel(cmd, cat, f.sites[0], f.sites[1], f.name, site.KeyingManual)
			if err != nil {
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
	cmd.AddCommand(keys, newTunnelPSKCmd(g))
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

// pskFlags are tunnel psk's flags.
type pskFlags struct {
	sites []string
	name  string
	out   string
	force bool
}

func newTunnelPSKCmd(g *globalFlags) *cobra.Command {
	f := &pskFlags{}
	cmd := &cobra.Command{
		Use:   "psk --site A.yaml [--site B.yaml] [--tunnel NAME]",
		Short: "Make the pre-shared key file both ends of an IKEv2 tunnel share",
		Long: `psk writes a strong pre-shared key for an IKEv2 tunnel (keying: ikev2): 32 random
bytes from the system's random source, as 43 characters of base64url text, so the
same string can be pasted into any peer's PSK field (strongSwan's swanctl.conf,
OpenWrt, pfSense, MikroTik). With two site configs it first checks that they are
the tunnel's two ends (addresses and subnets mirrored, ids, a common proposal, the
same pfs); with one it makes the file for a peer that is not an ocfw box.

The file goes where the sites' "psk" field says, beside the site configs (-o
writes it elsewhere), mode 0600, written atomically; an existing file is kept unless
--force, and a device, FIFO or directory is never written. Copy it to each box's
card, into its ocfw folder beside site.json: the firmware reads it from there and
never from the image. To change the key, run this again with --force and install
the new file on both ends.`,
		Example: `  ocfw tunnel psk --site site-ike-a.yaml --site site-ike-b.yaml --tunnel a-b
  ocfw tunnel psk --site site-ike-a.yaml -o a-b.psk
  ocfw validate site-ike-a.yaml site-ike-b.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runTunnelPSK(cmd, g, f) },
	}
	cmd.Flags().StringArrayVar(&f.sites, "site", nil, "a site config at one end of the tunnel (one, or both ends)")
	cmd.Flags().StringVar(&f.name, "tunnel", "", "the tunnel's name (default: the one IKEv2 tunnel the sites share)")
	cmd.Flags().StringVarP(&f.out, "output", "o", "", "write the PSK file here (default: the sites' psk field, beside each site config)")
	cmd.Flags().BoolVar(&f.force, "force", false, "replace an existing PSK file")
	return cmd
}

func runTunnelPSK(cmd *cobra.Command, g *globalFlags, f *pskFlags) error {
	if len(f.sites) < 1 || len(f.sites) > 2 {
		return fmt.Errorf("--site: give the tunnel's site config, or both ends' (--site A.yaml --site B.yaml), got %d", len(f.sites))
	}
	cat, err := g.catalog()
	if err != nil {
		return err
	}
	var name string
	var paths []string
	if len(f.sites) == 2 {
		pair, err := pairTunnel(cmd, cat, f.sites[0], f.sites[1], f.name, site.KeyingIKEv2)
		if err != nil {
			return err
		}
		name, paths = pair.Name, pair.PSKPaths()
	} else {
		d, i, err := cat.IKETunnel(f.sites[0], f.name, readProfileFile)
		var l boards.ErrorList
		if errors.As(err, &l) {
			return printErrors(cmd, l, "in the site config")
		} else if err != nil {
			return err
		}
		name, paths = d.Site.Tunnels[i].Name, []string{boards.TunnelPSKPath(d.File, d.Site.Tunnels[i])}
	}
	flag := "the sites' psk field:"
	if f.out != "" {
		paths, flag = []string{f.out}, "-o"
	}
	// Every target is checked before anything is written: an existing
	// file may be what the boxes authenticate with.
	for i, p := range paths {
		if paths[i], err = checkOut(p, flag, f.force); err != nil {
			return err
		}
	}
	psk, err := site.NewTunnelPSK(rand.Reader, name, time.Now())
	if err != nil {
		return err
	}
	data, err := psk.JSON()
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := atomicfile.WriteFile(p, data, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: tunnel %s, a %d-byte random pre-shared key\n", p, name, site.PSKGenBytes)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "copy it to both ends (an ocfw box's card: the ocfw folder, beside site.json; another peer: its secret field) and keep it secret\n")
	return nil
}

// pairTunnel reads the two ends of a tunnel (tunnel keys and tunnel psk
// share it), prints their problems, and refuses a tunnel keyed otherwise
// than the command makes keys for.
func pairTunnel(cmd *cobra.Command, cat *boards.Catalog, a, b, name, keying string) (*boards.TunnelPair, error) {
	pair, err := cat.PairTunnel(a, b, name, readProfileFile)
	var l boards.ErrorList
	var mismatch *boards.PairMismatchError
	switch {
	case errors.As(err, &l):
		return nil, printErrors(cmd, l, "in the site configs")
	case errors.As(err, &mismatch):
		return nil, printErrors(cmd, mismatch.Errs, "between the two ends")
	case err != nil:
		return nil, err
	}
	if m := pair.Keying(); m != keying {
		return nil, &boards.KeyingError{File: pair.A.File, Tunnel: pair.Name, Keying: m}
	}
	return pair, nil
}

// printErrors prints each problem on its own line and returns the
// summary error.
func printErrors(cmd *cobra.Command, l boards.ErrorList, where string) error {
	for _, e := range l {
		fmt.Fprintln(cmd.ErrOrStderr(), errorLine(e))
	}
	return fmt.Errorf("%d problem(s) %s", len(l), where)
}
