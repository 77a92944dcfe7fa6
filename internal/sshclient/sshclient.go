// Package sshclient is how ocfw logs in to a box over SSH, for ocfw push
// and ocfw upgrade alike: one client (golang.org/x/crypto/ssh), one host
// key check as OpenSSH's against known_hosts or a pinned fingerprint,
// asking an unknown box for its ed25519 key first (the one `ocf net`
// shows), and errors that name the box's host and port.
package sshclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Options say which box and how to log in.
type Options struct {
	Host string // host, host:port, user@host[:port]
	User string // "" means root (or the user in Host)
	Port int    // 0: the port in Host, else 22
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
	// DialTimeout bounds one connection attempt; 0 means 15 s.
	DialTimeout time.Duration
}

// Client logs in to one box.
type Client struct {
	Addr, User string // host:port, login
	config     *ssh.ClientConfig
	timeout    time.Duration
}

// New checks the options (keys readable, known_hosts readable) and
// returns the client; nothing is dialled yet.
func New(o Options) (*Client, error) {
	addr, user := Target(o.Host, o.User)
	if o.Port != 0 {
		host, _, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort(host, strconv.Itoa(o.Port))
	}
	auth, err := authMethods(o.Identities)
	if err != nil {
		return nil, err
	}
	hk, algos, err := hostKeyCheck(o, addr)
	if err != nil {
		return nil, err
	}
	timeout := o.DialTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	return &Client{Addr: addr, User: user, timeout: timeout,
		config: &ssh.ClientConfig{User: user, Auth: auth, HostKeyCallback: hk, HostKeyAlgorithms: algos, Timeout: timeout,
			Config: ssh.Config{Ciphers: Ciphers}}}, nil
}

// Ciphers is the client's preference: ChaCha20-Poly1305 first, as
// OpenSSH's client has it. x/crypto/ssh's own default puts AES-GCM
// first, which the box (a Geode LX or an XScale, no AES instructions)
// runs in Go's generic code: the AEAD at half ChaCha20-Poly1305's
// speed, SSH as a whole 1.19x slower (BenchmarkSSHCiphers with
// GOARCH=386, docs/benchmarks.md); uploads by push and upgrade go at
// the box's speed.
var Ciphers = []string{ssh.CipherChaCha20Poly1305, ssh.CipherAES128GCM, ssh.CipherAES256GCM, ssh.CipherAES128CTR, ssh.CipherAES256CTR}

// Target splits [user@]host[:port] into host:port (port 22 by default)
// and the login (root by default, user when given).
func Target(host, user string) (addr, u string) {
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

// Dial logs in, within timeout (0: the client's).
func (c *Client) Dial(ctx context.Context, timeout time.Duration) (*ssh.Client, error) {
	if timeout <= 0 {
		timeout = c.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	conn, chans, reqs, err := ssh.NewClientConn(nc, c.Addr, c.config)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", c.Addr, err)
	}
	return ssh.NewClient(conn, chans, reqs), nil
}

// Output execs cmd over conn with stdin, returning its output; a
// failure carries what it wrote to stderr.
func Output(conn *ssh.Client, cmd string, stdin []byte) (string, error) {
	var out bytes.Buffer
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	err := exec(context.Background(), conn, cmd, in, &out)
	return out.String(), err
}

// Run logs in, runs command with stdin and stdout, and logs out: the
// upgrade's Remote. A box that stops answering mid-command (a reset)
// is noticed by keepalives within about 30 s; ctx ends it too.
func (c *Client) Run(ctx context.Context, command string, stdin io.Reader, stdout io.Writer) error {
	conn, err := c.Dial(ctx, 0)
	if err != nil {
		return fmt.Errorf("ssh %s@%s %s: %w", c.User, c.Addr, command, err)
	}
	defer conn.Close()
	if err := exec(ctx, conn, command, stdin, stdout); err != nil {
		return fmt.Errorf("ssh %s@%s %s: %w", c.User, c.Addr, command, err)
	}
	return nil
}

// exec runs cmd in a session on conn; its error holds the command's
// stderr (and stdout when stdout is only collected).
func exec(ctx context.Context, conn *ssh.Client, cmd string, stdin io.Reader, stdout io.Writer) error {
	s, err := conn.NewSession()
	if err != nil {
		return err
	}
	defer s.Close()
	var errOut bytes.Buffer
	s.Stdout, s.Stderr, s.Stdin = stdout, &errOut, stdin
	done := make(chan struct{})
	defer close(done)
	go keepalive(ctx, conn, done)
	if err := s.Run(cmd); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if b, ok := stdout.(*bytes.Buffer); ok {
			msg = strings.TrimSpace(msg + "\n" + b.String())
		}
		if msg == "" {
			return err
		}
		return errors.New(msg)
	}
	return nil
}

// keepalive closes conn when ctx ends or the box stops answering
// (OpenSSH's ServerAliveInterval 10, ServerAliveCountMax 3).
func keepalive(ctx context.Context, conn *ssh.Client, done <-chan struct{}) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			conn.Close()
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			_, _, err := conn.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case err := <-reply:
			if err != nil {
				conn.Close()
				return
			}
			missed = 0
		case <-time.After(10 * time.Second):
			if missed++; missed >= 3 {
				conn.Close()
				return
			}
		case <-done:
			return
		}
	}
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
