// Package push sends a site config to a running router over SSH (ocfw
// push): it stages a bundle with `ocf config stage`, applies it with `ocf
// config apply`, and confirms it over a new connection, which proves the
// new config still lets the admin in; without that confirm the box rolls
// back by itself (router/config).
package push

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ocfw/ocfw/router/config"
)

// Options say where and how to push.
type Options struct {
	Host string // host, host:port, user@host[:port]
	User string // "" means root (or the user in Host)
	// Identities are private key files; with none, the agent
	// (SSH_AUTH_SOCK) and then ~/.ssh/id_ed25519, id_rsa, id_ecdsa.
	Identities []string
	// KnownHosts is the OpenSSH known_hosts file the host key is checked
	// against; "" means ~/.ssh/known_hosts.
	KnownHosts string
	// HostKey pins the host key by fingerprint (SHA256:...) instead.
	HostKey string
	// AcceptNew adds an unknown host's key to KnownHosts (OpenSSH's
	// StrictHostKeyChecking=accept-new); a changed key is still refused.
	AcceptNew bool
	// Within is the confirm timeout the box gets.
	Within time.Duration
	// NoConfirm leaves the config provisional.
	NoConfirm bool
	// Out gets progress lines.
	Out io.Writer
	// DialTimeout bounds one connection attempt; 0 means 10 s.
	DialTimeout time.Duration
}

// Bundle is what is pushed.
type Bundle struct {
	Site  []byte            // site.json
	Files map[string][]byte // key files by name
}

// ErrNoReconnect says the confirm could not be sent: the box rolls back.
var ErrNoReconnect = errors.New("could not reconnect over SSH to confirm")

// Push stages, applies and (unless NoConfirm) confirms b on the box.
func Push(ctx context.Context, o Options, b Bundle) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Within == 0 {
		o.Within = config.DefaultWithin
	}
	addr, user := target(o.Host, o.User)
	cc, err := clientConfig(o, user, addr)
	if err != nil {
		return err
	}
	var bundle bytes.Buffer
	if err := config.WriteBundle(&bundle, b.Site, b.Files); err != nil {
		return err
	}
	c, err := dial(ctx, addr, cc, o.DialTimeout)
	if err != nil {
		return err
	}
	out, err := run(c, "ocf config stage", bundle.Bytes())
	if err != nil {
		c.Close()
		return fmt.Errorf("staging on %s: %w", addr, err)
	}
	fmt.Fprint(o.Out, out)
	start := time.Now()
	out, err = run(c, fmt.Sprintf("ocf config apply --confirm-within %s", o.Within), nil)
	c.Close()
	if err != nil {
		return fmt.Errorf("applying on %s: %w", addr, err)
	}
	fmt.Fprint(o.Out, out)
	if strings.Contains(out, "nothing changed") {
		return nil
	}
	gen, ok := config.AppliedGen(out)
	if !ok {
		return fmt.Errorf("applying on %s: the box's answer names no pushed config number, so push cannot confirm it (ocf config status on the box says what waits): %q", addr, out)
	}
	deadline := start.Add(o.Within)
	if o.NoConfirm {
		fmt.Fprintf(o.Out, "left provisional, as asked: confirm with `%s` before %s, or the box rolls back by itself\n",
			confirmCommand(addr, user, gen), deadline.Format(time.TimeOnly))
		return nil
	}
	// A new connection: the one that applied proves nothing about the
	// new config. Tried until shortly before the box gives up.
	var last error
	for try := 0; ; try++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(confirmPause(try)):
		}
		if time.Until(deadline) < 2*time.Second {
			break
		}
		c, err := dial(ctx, addr, cc, min(dialTimeout(o), time.Until(deadline)))
		if err != nil {
			last = err
			continue
		}
		out, err := run(c, fmt.Sprintf("ocf config confirm %d", gen), nil)
		c.Close()
		if err != nil {
			return fmt.Errorf("confirming pushed config %d on %s: %w", gen, addr, err)
		}
		fmt.Fprint(o.Out, out)
		return nil
	}
	return fmt.Errorf("%w (%v): the box rolls back to its previous config by itself at about %s", ErrNoReconnect, last, deadline.Format(time.TimeOnly))
}

// confirmCommand is the OpenSSH command that confirms generation gen on
// the box at addr: ssh takes the port as -p, not as host:port.
func confirmCommand(addr, user string, gen int) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "22"
	}
	p := ""
	if port != "22" {
		p = "-p " + port + " "
	}
	return fmt.Sprintf("ssh %s%s@%s ocf config confirm %d", p, user, host, gen)
}

// confirmPause waits for the box to have applied (it waits
// config.ApplyDelay, then restarts what changed) before the first try.
func confirmPause(try int) time.Duration {
	if try == 0 {
		return 2 * config.ApplyDelay
	}
	return 2 * time.Second
}

// target splits [user@]host[:port].
func target(host, user string) (addr, u string) {
	if at := strings.LastIndex(host, "@"); at >= 0 {
		if user == "" {
			user = host[:at]
		}
		host = host[at+1:]
	}
	if user == "" {
		user = "root"
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "22")
	}
	return host, user
}

func dialTimeout(o Options) time.Duration {
	if o.DialTimeout > 0 {
		return o.DialTimeout
	}
	return 10 * time.Second
}

func dial(ctx context.Context, addr string, cc *ssh.ClientConfig, timeout time.Duration) (*ssh.Client, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	conn, chans, reqs, err := ssh.NewClientConn(nc, addr, cc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return ssh.NewClient(conn, chans, reqs), nil
}

// run execs cmd with stdin, returning its output; a failure carries what
// it wrote to stderr.
func run(c *ssh.Client, cmd string, stdin []byte) (string, error) {
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	var out, errOut bytes.Buffer
	s.Stdout, s.Stderr = &out, &errOut
	if stdin != nil {
		s.Stdin = bytes.NewReader(stdin)
	}
	if err := s.Run(cmd); err != nil {
		msg := strings.TrimSpace(errOut.String() + out.String())
		if msg == "" {
			return "", err
		}
		return "", fmt.Errorf("%s", msg)
	}
	return out.String(), nil
}

// clientConfig is the SSH client: keys, and the host key checked.
func clientConfig(o Options, user, addr string) (*ssh.ClientConfig, error) {
	auth, err := authMethods(o.Identities)
	if err != nil {
		return nil, err
	}
	hk, algos, err := hostKeyCheck(o, addr)
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{User: user, Auth: auth, HostKeyCallback: hk, HostKeyAlgorithms: algos, Timeout: 10 * time.Second}, nil
}

func authMethods(ids []string) ([]ssh.AuthMethod, error) {
	var signers []ssh.Signer
	for _, f := range ids {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("-i %s: %w", f, err)
		}
		k, err := ssh.ParsePrivateKey(b)
		var pp *ssh.PassphraseMissingError
		if errors.As(err, &pp) {
			return nil, fmt.Errorf("-i %s: the key has a passphrase: add it to ssh-agent (ssh-add %s) and leave -i out", f, f)
		}
		if err != nil {
			return nil, fmt.Errorf("-i %s: %w", f, err)
		}
		signers = append(signers, k)
	}
	var methods []ssh.AuthMethod
	if len(signers) > 0 {
		return append(methods, ssh.PublicKeys(signers...)), nil
	}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if c, err := net.Dial("unix", sock); err == nil {
			methods = append(methods, ssh.PublicKeysCallback(agent.NewClient(c).Signers))
		}
	}
	home, _ := os.UserHomeDir()
	for _, n := range []string{"id_ed25519", "id_rsa", "id_ecdsa"} {
		b, err := os.ReadFile(filepath.Join(home, ".ssh", n))
		if err != nil {
			continue
		}
		if k, err := ssh.ParsePrivateKey(b); err == nil {
			signers = append(signers, k)
		}
	}
	if len(signers) > 0 {
		methods = append(methods, ssh.PublicKeys(signers...))
	}
	if len(methods) == 0 {
		return nil, errors.New("no SSH key: give -i KEY, or run ssh-agent with your key (SSH_AUTH_SOCK)")
	}
	return methods, nil
}

// hostKeyCheck checks the host key as OpenSSH does against known_hosts,
// or against a pinned fingerprint.
func hostKeyCheck(o Options, addr string) (ssh.HostKeyCallback, []string, error) {
	if o.HostKey != "" {
		return func(_ string, _ net.Addr, k ssh.PublicKey) error {
			if got := ssh.FingerprintSHA256(k); got != o.HostKey {
				return fmt.Errorf("the host key of %s is %s, not the pinned %s: refusing to log in (someone may be in between)", addr, got, o.HostKey)
			}
			return nil
		}, preferredAlgos, nil
	}
	file := o.KnownHosts
	if file == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, nil, err
		}
		file = filepath.Join(home, ".ssh", "known_hosts")
	}
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) && o.AcceptNew {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			return nil, nil, err
		}
	}
	check, err := knownhosts.New(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	// Ask only for the key types known_hosts has for this host, as
	// OpenSSH does, so the check compares like with like.
	var algos []string
	if check != nil {
		var ke *knownhosts.KeyError
		if errors.As(check(knownhosts.Normalize(addr), &net.TCPAddr{}, probeKey{}), &ke) {
			for _, w := range ke.Want {
				switch t := w.Key.Type(); t {
				case ssh.KeyAlgoRSA:
					algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256)
				default:
					algos = append(algos, t)
				}
			}
		}
	}
	if algos == nil {
		algos = preferredAlgos
	}
	return func(host string, remote net.Addr, k ssh.PublicKey) error {
		var err error
		if check != nil {
			err = check(host, remote, k)
		} else {
			err = &knownhosts.KeyError{}
		}
		var ke *knownhosts.KeyError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ke) && len(ke.Want) > 0:
			return fmt.Errorf("the host key of %s CHANGED (now %s, %s has another): refusing to log in; if the box was reset on purpose, remove its line (ssh-keygen -R %s -f %s)",
				host, ssh.FingerprintSHA256(k), file, knownhosts.Normalize(host), file)
		case errors.As(err, &ke):
			if !o.AcceptNew {
				return &UnknownHostError{Host: host, File: file, Fingerprint: ssh.FingerprintSHA256(k)}
			}
			f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = fmt.Fprintln(f, knownhosts.Line([]string{knownhosts.Normalize(host)}, k))
			return err
		}
		return err
	}, algos, nil
}

// preferredAlgos are the host key types asked of a box known_hosts does
// not know yet, or whose fingerprint is pinned: ed25519 first, the key
// `ocf net` shows and docs/push.md says to compare, and the type OpenSSH
// stores on first contact (golang.org/x/crypto/ssh would pick RSA).
var preferredAlgos = []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}

// UnknownHostError is a box whose host key known_hosts does not have.
type UnknownHostError struct{ Host, File, Fingerprint string }

func (e *UnknownHostError) Error() string {
	return fmt.Sprintf("%s is not in %s (its host key is %s)", e.Host, e.File, e.Fingerprint)
}

// probeKey is a key no known_hosts line has: checking it lists the keys
// the file has for a host.
type probeKey struct{}

func (probeKey) Type() string                        { return "ocfw-probe" }
func (probeKey) Marshal() []byte                     { return []byte("ocfw-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe") }
