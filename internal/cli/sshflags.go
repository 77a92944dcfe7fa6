package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/internal/sshclient"
)

// sshFlags are how push and upgrade log in to a box: the same flags, the
// same client and host key check (package sshclient).
type sshFlags struct {
	user       string
	port       int
	identities []string
	knownHosts string
	hostKey    string
	acceptNew  bool
}

func (f *sshFlags) register(cmd *cobra.Command, userDefault string) {
	cmd.Flags().StringVar(&f.user, "user", userDefault, "login name on the box (default root, or the user in user@HOST)")
	cmd.Flags().IntVar(&f.port, "port", 0, "the box's SSH port (default: the one in HOST:PORT, else 22)")
	cmd.Flags().StringArrayVarP(&f.identities, "identity", "i", nil, "private key file to log in with (repeatable; default: ssh-agent, ~/.ssh/id_*)")
	cmd.Flags().StringVar(&f.knownHosts, "known-hosts", "", "OpenSSH known_hosts file the box's host key is checked against (default ~/.ssh/known_hosts)")
	cmd.Flags().StringVar(&f.hostKey, "host-key", "", "accept only this host key fingerprint (SHA256:..., as ocf net shows it), instead of known_hosts")
	cmd.Flags().BoolVar(&f.acceptNew, "accept-new", false, "add an unknown box's host key to known_hosts on first use (a changed key is still refused)")
}

// options are the flags for the box at host, checked.
func (f *sshFlags) options(host string) (sshclient.Options, error) {
	if f.hostKey != "" && !strings.HasPrefix(f.hostKey, "SHA256:") {
		return sshclient.Options{}, fmt.Errorf("--host-key %q: give the fingerprint as ssh-keygen -lf and ocf net print it (SHA256:...)", f.hostKey)
	}
	if f.port < 0 || f.port > 65535 {
		return sshclient.Options{}, fmt.Errorf("--port %d: want 1 to 65535", f.port)
	}
	return sshclient.Options{Host: host, User: f.user, Port: f.port, Identities: f.identities, KnownHosts: f.knownHosts,
		HostKey: f.hostKey, AcceptNew: f.acceptNew}, nil
}

// hostKeyHint adds to an unknown box's refusal how to go on.
func hostKeyHint(err error) error {
	var unknown *sshclient.UnknownHostError
	if errors.As(err, &unknown) {
		return fmt.Errorf("%w: check that fingerprint on the box's console (ocf net), then run again with --host-key %s, or --accept-new to add it to %s", err, unknown.Fingerprint, unknown.File)
	}
	return err
}
