package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/push"
	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/site"
)

type pushFlags struct {
	ssh       sshFlags
	timeout   time.Duration
	noConfirm bool
}

func newPushCmd(g *globalFlags) *cobra.Command {
	f := &pushFlags{}
	cmd := &cobra.Command{
		Use:   "push SITE.yaml [KEYFILE...] HOST",
		Short: "Change a running router's site config over SSH, rolled back by itself unless it still lets you in",
		Long: `push checks the site config on this PC exactly as 'ocfw validate' does, uploads it
and the tunnel key files given (by their names, which the site's tunnels name)
over SSH into the box's RAM, where the box checks it again, then applies it
without a reboot: only the services whose part changed restart. The change is
provisional: push confirms it over a NEW SSH connection, which proves the new
config still lets you in; if that fails (the firewall closed SSH, the LAN
address moved), the box goes back to its previous config by itself after
--timeout. A confirmed config survives reboots; a power cut at any moment boots
the old config or the new one, whole.

HOST is host, host:port or user@host[:port]; the login is root unless --user
or user@ says otherwise. Keys: -i KEY, else ssh-agent and ~/.ssh/id_*. The
box's host key is checked as OpenSSH does, against ~/.ssh/known_hosts
(--known-hosts): an unknown box is refused, showing its fingerprint, unless
--host-key SHA256:... pins that fingerprint (compare it with 'ocf net' on the
box's console) or --accept-new adds it on first use (as OpenSSH's
StrictHostKeyChecking=accept-new); a changed key is always refused.`,
		Example: `  ocfw push mysite.yaml root@192.168.1.1
  ocfw push --accept-new mysite.yaml 192.168.1.1              # first contact: learn its host key
  ocfw push --host-key SHA256:... mysite.yaml 192.168.1.1     # or pin what ocf net shows
  ocfw push --no-confirm --timeout 5m mysite.yaml 192.168.1.1
  ocfw push site-a.yaml a-b.keys root@203.0.113.2            # with a tunnel's key file`,
		Args: needArgs(2, -1, "a site config, key files, and the router's address", "ocfw push mysite.yaml root@192.168.1.1"),
		RunE: func(cmd *cobra.Command, args []string) error {
			siteFile, keyFiles, host := args[0], args[1:len(args)-1], args[len(args)-1]
			if data, err := readProfileFile(siteFile); err != nil {
				return err
			} else if boards.FileKind(data) != boards.KindSite {
				return fmt.Errorf("%s: not a site config (kind: site)", siteFile)
			}
			// The checks and the words of ocfw validate.
			if err := validateSites(cmd, g, []string{siteFile}, nil, false); err != nil {
				var l boards.ErrorList
				if errors.As(err, &l) {
					for _, e := range l {
						fmt.Fprintln(cmd.ErrOrStderr(), errorLine(e))
					}
					return fmt.Errorf("%d problem(s) in %s: nothing was sent", len(l), siteFile)
				}
				return err
			}
			b, err := pushBundle(g, siteFile, keyFiles)
			if err != nil {
				return err
			}
			so, err := f.ssh.options(host)
			if err != nil {
				return err
			}
			err = push.Push(cmd.Context(), push.Options{Options: so, Within: f.timeout, NoConfirm: f.noConfirm, Out: cmd.OutOrStdout()}, b)
			return hostKeyHint(err)
		},
	}
	f.ssh.register(cmd, "")
	cmd.Flags().DurationVar(&f.timeout, "timeout", config.DefaultWithin, fmt.Sprintf("the box rolls back unless confirmed within this long (%v to %v)", config.MinWithin, config.MaxWithin))
	cmd.Flags().BoolVar(&f.noConfirm, "no-confirm", false, "leave the config provisional: confirm it yourself with the ssh command it prints (ocf config confirm N) before --timeout")
	return cmd
}

// pushBundle is the site config as the box reads it (JSON) and the key
// files given, each one a tunnel of the site names.
func pushBundle(g *globalFlags, siteFile string, keyFiles []string) (push.Bundle, error) {
	cat, err := g.catalog()
	if err != nil {
		return push.Bundle{}, err
	}
	docs, err := cat.ReadSites([]string{siteFile}, readProfileFile)
	if err != nil {
		return push.Bundle{}, err
	}
	s := docs[0].Site
	js, err := s.JSON()
	if err != nil {
		return push.Bundle{}, err
	}
	named := map[string]bool{}
	for _, t := range s.Tunnels {
		if t.Mode() == site.KeyingIKEv2 {
			named[t.PSK] = true
		} else {
			named[t.Keys] = true
		}
	}
	b := push.Bundle{Site: js, Files: map[string][]byte{}}
	for _, k := range keyFiles {
		name := filepath.Base(k)
		if !named[name] {
			return push.Bundle{}, fmt.Errorf("%s: no tunnel of %s names a key file %s", k, siteFile, name)
		}
		data, err := boards.ReadTunnelKeysFile(k)
		if err != nil {
			return push.Bundle{}, err
		}
		b.Files[name] = data
	}
	return b, nil
}
