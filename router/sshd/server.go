package sshd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// Defaults for Config fields left zero.
const (
	// DefaultShell is the board's shell (cmd/ocfsh), run as
	// `ocfsh -c CMD` for exec and plain `ocfsh` for a shell.
	DefaultShell = "/bbin/ocfsh"
	// DefaultMaxConns bounds logged-in connections: each costs buffers
	// and goroutines, and the NSLU2 has 32 MB. Connections still
	// logging in have their own bounds, below, and never take these
	// places.
	DefaultMaxConns = 4
	// DefaultMaxStartups bounds connections that have not logged in
	// (OpenSSH's MaxStartups). When all are taken, the stalest is
	// closed for a new one (gate.go): a new one is never refused.
	DefaultMaxStartups = 16
	// DefaultPerSourceStartups bounds the connections not logged in
	// from one IPv4 address or IPv6 /64 (PerSourceMaxStartups); a new
	// one from there closes that source's stalest.
	DefaultPerSourceStartups = 4
	// DefaultMaxSessions bounds the sessions (so processes) of one
	// connection.
	DefaultMaxSessions = 4
	// DefaultMaxAuthTries is x/crypto/ssh's MaxAuthTries: failed
	// attempts before the connection is dropped. Key queries have their
	// own budget of the same size, so a client offering a few keys
	// before the right one still gets in.
	DefaultMaxAuthTries = 3
	// DefaultLoginGrace is how long a connection may take to log in;
	// it frees a slot held by a client that never does.
	DefaultLoginGrace = 20 * time.Second
	// DefaultIdentGrace is how long a new connection may take to send
	// its identification line, which every SSH client sends at once.
	DefaultIdentGrace = 5 * time.Second
	// DefaultUser is the login name when Config names none.
	DefaultUser = "root"
	// DefaultIdleTimeout closes a connection after this long with no
	// traffic either way (output of a running command counts).
	DefaultIdleTimeout = 15 * time.Minute
)

// DefaultEnv is a session's whole environment (TERM is added with a
// pty): nothing of the router process's own, nothing the client sends.
var DefaultEnv = []string{
	"PATH=/bbin:/bin:/ubin:/sbin:/usr/sbin:/usr/bin",
	"HOME=/",
	"USER=root",
	"LOGNAME=root",
}

// The algorithms offered: those current OpenSSH (9.x, 10.x) offers by
// default that x/crypto/ssh implements, minus every one with SHA-1, CBC
// or the NIST curves (which ssh-audit fails), and the MACs only in
// encrypt-then-MAC form. Any OpenSSH since 7.4 (2016) and PuTTY since
// 0.68 (chacha20-poly1305, curve25519, ed25519) find a match in each.
// x/crypto/ssh adds the strict-kex marker (kex-strict-s-v00@openssh.com,
// against Terrapin) and curve25519-sha256@libssh.org by itself.
var (
	KeyExchanges = []string{
		ssh.KeyExchangeMLKEM768X25519, // post-quantum hybrid; OpenSSH 10 prefers it
		ssh.KeyExchangeCurve25519,
		ssh.KeyExchangeDH16SHA512,
		ssh.KeyExchangeDH14SHA256,
	}
	Ciphers = []string{
		ssh.CipherChaCha20Poly1305,
		ssh.CipherAES128CTR, ssh.CipherAES192CTR, ssh.CipherAES256CTR,
		ssh.CipherAES128GCM, ssh.CipherAES256GCM,
	}
	MACs = []string{ssh.HMACSHA256ETM, ssh.HMACSHA512ETM}
	// RSAHostKeyAlgorithms are the signatures an RSA host key makes:
	// SHA-2 only, never ssh-rsa (SHA-1).
	RSAHostKeyAlgorithms = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
)

// Config is what the router decides; zero fields take the defaults.
type Config struct {
	// HostKey is from LoadHostKey (LoadHostKeys' first): the key whose
	// fingerprint is shown.
	HostKey ssh.Signer
	// OtherHostKeys are offered beside HostKey, for clients that
	// cannot use it (LoadHostKeys' RSA key). RSA keys sign with
	// RSAHostKeyAlgorithms only.
	OtherHostKeys []ssh.Signer
	// AuthorizedKeys are the only way in (see ParseAuthorizedKeys), as
	// User; every session runs as the router's own user (root).
	AuthorizedKeys []AuthorizedKey
	// User is the one login name accepted; "" means DefaultUser. Any
	// other is refused at authentication, whatever the key.
	User string
	// View is the sftp subsystem's read-only tree, asked afresh for
	// each request; nil shows nothing but the staging area.
	View func() []ViewFile
	// StagingDir backs the sftp tree's writable /staging/: a RAM
	// directory (made when missing); "" means no staging area.
	StagingDir string
	// StagingMax, StagingFileMax and StagingFiles bound it: bytes in
	// all, bytes in one file, files (see the Default values).
	StagingMax     int64
	StagingFileMax int64
	StagingFiles   int
	// Shell runs sessions: Shell for a shell, Shell -c CMD for exec.
	Shell string
	// Env is the sessions' environment; nil means DefaultEnv.
	Env []string
	// MaxConns bounds logged-in connections; the Startups fields bound
	// those still logging in (see DefaultMaxStartups and below).
	MaxConns          int
	MaxStartups       int
	PerSourceStartups int
	MaxSessions       int
	MaxAuthTries      int
	IdentGrace        time.Duration
	LoginGrace        time.Duration
	IdleTimeout       time.Duration
	// Logf gets logins, failed logins, refusals and session errors.
	Logf func(format string, args ...any)
}

// Server is an SSH server; one Server may serve several listeners, which
// share its connection limits.
type Server struct {
	cfg  Config
	ssh  atomic.Pointer[ssh.ServerConfig] // replaced whole by AddHostKey
	hkMu sync.Mutex
	hks  []ssh.Signer // the host keys ssh offers, as AddHostKey adds them
	gate *gate
	// logins is who may log in, replaced whole by SetLogins while
	// connections are served.
	logins atomic.Pointer[logins]
	logf   func(string, ...any)
	// staging keeps the sftp staging area's account, shared by every
	// session.
	staging *staging
	tries   sync.Mutex
	failed  map[string]*attempts // remote address -> failed methods, while logging in
}

// logins are the login name and the keys (marshalled key -> "SHA256:...
// (comment)") a new connection may log in with.
type logins struct {
	user string
	keys map[string]string
}

type attempts struct {
	user    string
	methods map[string]int
}

// New checks cfg and makes a Server. It refuses a config with no
// authorized keys: a server nobody can log in to only offers a target.
func New(cfg Config) (*Server, error) {
	if cfg.HostKey == nil {
		return nil, errors.New("sshd: no host key")
	}
	if len(cfg.AuthorizedKeys) == 0 {
		return nil, errors.New("sshd: no authorized keys: nobody could log in")
	}
	if cfg.Shell == "" {
		cfg.Shell = DefaultShell
	}
	if cfg.Env == nil {
		cfg.Env = DefaultEnv
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxStartups <= 0 {
		cfg.MaxStartups = DefaultMaxStartups
	}
	if cfg.PerSourceStartups <= 0 {
		cfg.PerSourceStartups = DefaultPerSourceStartups
	}
	if cfg.IdentGrace <= 0 {
		cfg.IdentGrace = DefaultIdentGrace
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxAuthTries <= 0 {
		cfg.MaxAuthTries = DefaultMaxAuthTries
	}
	if cfg.LoginGrace <= 0 {
		cfg.LoginGrace = DefaultLoginGrace
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.User == "" {
		cfg.User = DefaultUser
	}
	if cfg.StagingMax <= 0 {
		cfg.StagingMax = DefaultStagingMax
	}
	if cfg.StagingFileMax <= 0 {
		cfg.StagingFileMax = DefaultStagingFileMax
	}
	if cfg.StagingFiles <= 0 {
		cfg.StagingFiles = DefaultStagingFiles
	}
	s := &Server{
		cfg:    cfg,
		logf:   cfg.Logf,
		failed: map[string]*attempts{},
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	if cfg.StagingDir != "" {
		cleanUploads(cfg.StagingDir)
	}
	s.staging = &staging{dir: cfg.StagingDir, max: cfg.StagingMax, fileMax: cfg.StagingFileMax, maxFiles: int64(cfg.StagingFiles)}
	s.gate = newGate(cfg.MaxStartups, cfg.PerSourceStartups, cfg.MaxConns, s.logf)
	s.SetLogins(cfg.User, cfg.AuthorizedKeys)
	for _, k := range append([]ssh.Signer{cfg.HostKey}, cfg.OtherHostKeys...) {
		if err := s.AddHostKey(k); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SetLogins replaces the login name ("" means DefaultUser) and the
// authorized keys for the connections that log in from now on; those
// logged in keep their sessions, as OpenSSH's do when authorized_keys
// changes. No keys is refused: nobody could log in any more.
func (s *Server) SetLogins(user string, keys []AuthorizedKey) error {
	if len(keys) == 0 {
		return errors.New("sshd: no authorized keys: nobody could log in")
	}
	if user == "" {
		user = DefaultUser
	}
	l := &logins{user: user, keys: map[string]string{}}
	for _, k := range keys {
		who := Fingerprint(k.Key)
		if k.Comment != "" {
			who += " (" + k.Comment + ")"
		}
		l.keys[string(k.Key.Marshal())] = who
	}
	s.logins.Store(l)
	return nil
}

// AddHostKey offers k beside the host keys the server has: to the
// connections that start from now on (those under way keep theirs).
func (s *Server) AddHostKey(k ssh.Signer) error {
	if k.PublicKey().Type() == ssh.KeyAlgoRSA {
		as, ok := k.(ssh.AlgorithmSigner)
		if !ok {
			return errors.New("sshd: an RSA host key that cannot choose its signature algorithm")
		}
		var err error
		if k, err = ssh.NewSignerWithAlgorithms(as, RSAHostKeyAlgorithms); err != nil {
			return fmt.Errorf("sshd: %w", err)
		}
	}
	s.hkMu.Lock()
	defer s.hkMu.Unlock()
	s.hks = append(s.hks[:len(s.hks):len(s.hks)], k)
	s.ssh.Store(s.sshConfig(s.hks))
	return nil
}

// sshConfig is x/crypto/ssh's config with the given host keys. Only
// PublicKeyCallback is set: x/crypto/ssh then offers the client
// "publickey" and nothing else, so a password or keyboard-interactive
// attempt fails before any secret is sent.
func (s *Server) sshConfig(hostKeys []ssh.Signer) *ssh.ServerConfig {
	c := &ssh.ServerConfig{
		Config: ssh.Config{KeyExchanges: KeyExchanges, Ciphers: Ciphers, MACs: MACs},
		// Client keys: all but ssh-rsa (SHA-1 signatures), as
		// OpenSSH since 8.8.
		PublicKeyAuthAlgorithms: ssh.SupportedAlgorithms().PublicKeyAuths,
		MaxAuthTries:            s.cfg.MaxAuthTries,
		PublicKeyCallback: func(m ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			l := s.logins.Load()
			if m.User() != l.user {
				// Refused before the key is looked at: the client
				// learns nothing about which keys would do.
				return nil, fmt.Errorf("user %q is not the login name", m.User())
			}
			who, ok := l.keys[string(key.Marshal())]
			if !ok {
				return nil, errors.New("key not authorized")
			}
			return &ssh.Permissions{Extensions: map[string]string{"key": who}}, nil
		},
		AuthLogCallback: s.authLog,
		ServerVersion:   "SSH-2.0-ocfw",
	}
	for _, k := range hostKeys {
		c.AddHostKey(k)
	}
	return c
}

// Fingerprint is the server's host key fingerprint.
func (s *Server) Fingerprint() string { return Fingerprint(s.cfg.HostKey.PublicKey()) }

// ListenAndServe listens on each of addrs (host:port, TCP) and serves
// them until ctx is done. All are opened before any is served, so a bad
// address fails the whole call and nothing is left listening.
func (s *Server) ListenAndServe(ctx context.Context, addrs []string) error {
	var lns []net.Listener
	var lc net.ListenConfig
	for _, a := range addrs {
		ln, err := lc.Listen(ctx, "tcp", a)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("sshd: %w", err)
		}
		lns = append(lns, ln)
	}
	errs := make([]error, len(lns))
	var wg sync.WaitGroup
	for i, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Serve(ctx, ln)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Serve accepts connections on ln until ctx is done, then closes ln and
// every connection it accepted and returns nil; it returns an error if
// ln fails otherwise. Processes that ignore the hang-up they get then
// are left running (and reaped when they end).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer s.gate.stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of descriptors: wait for connections to end
				// rather than spin.
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				time.Sleep(pause)
				continue
			}
			ln.Close()
			return fmt.Errorf("sshd: %w", err)
		}
		pause = 0
		st := s.gate.admit(c)
		if st == nil {
			continue // closed and counted for the summary
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handle(ctx, c, st)
		}()
	}
}

func (s *Server) handle(ctx context.Context, raw net.Conn, st *startup) {
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	now := time.Now()
	var talked atomic.Bool // sent its identification line
	c := newIdleConn(raw, s.cfg.IdleTimeout, now.Add(s.cfg.IdentGrace), now.Add(s.cfg.LoginGrace), func() {
		talked.Store(true)
		s.gate.identSeen(st)
	}, &st.heard)
	addr := raw.RemoteAddr().String()
	conn, chans, reqs, err := ssh.NewServerConn(c, s.ssh.Load())
	failed := s.takeAttempts(addr)
	if err != nil {
		switch {
		case s.gate.evicted(st):
			// counted by the gate
		case !talked.Load():
			s.gate.ended(st, whySilent)
		case failed == "":
			// Scanners, audits, clients that gave up: counted, as
			// they may come in floods. Real login attempts get a
			// line each.
			s.gate.ended(st, whyNoAuth)
		default:
			s.gate.ended(st, "")
			s.logf("ssh: no login from %s%s: %v", addr, failed, err)
		}
		return
	}
	defer conn.Close()
	c.loggedIn()
	if !s.gate.login(st) {
		s.logf("ssh: %s from %s: refused, already %d logged in", conn.User(), addr, s.cfg.MaxConns)
		s.busy(conn, chans, reqs)
		return
	}
	defer s.gate.logout()
	s.logf("ssh: %s logged in from %s with key %s", conn.User(), addr, conn.Permissions.Extensions["key"])
	start := time.Now()
	// Global requests are all refused: "tcpip-forward" (remote
	// forwarding) is the only one a client would send that matters.
	go ssh.DiscardRequests(reqs)
	sessions := make(chan struct{}, s.cfg.MaxSessions)
	var wg sync.WaitGroup
	for nc := range chans {
		if nc.ChannelType() != "session" {
			// direct-tcpip (ssh -L), x11, agent channels...
			nc.Reject(ssh.Prohibited, "this router offers shell sessions only, no forwarding")
			continue
		}
		select {
		case sessions <- struct{}{}:
		default:
			nc.Reject(ssh.ResourceShortage, fmt.Sprintf("at most %d sessions per connection", s.cfg.MaxSessions))
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			<-sessions
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sessions }()
			s.session(ch, creqs, addr, connID(conn))
		}()
	}
	wg.Wait()
	s.logf("ssh: %s from %s logged out after %v", conn.User(), addr, time.Since(start).Round(time.Second))
}

// busy tells a client that logged in while MaxConns others are: its
// channels are refused with the reason, which OpenSSH prints before it
// leaves; the connection is closed after the login grace if the client
// stays.
func (s *Server) busy(conn *ssh.ServerConn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request) {
	go ssh.DiscardRequests(reqs)
	t := time.AfterFunc(s.cfg.LoginGrace, func() { conn.Close() })
	defer t.Stop()
	for nc := range chans {
		nc.Reject(ssh.ResourceShortage, fmt.Sprintf("this router allows %d logged-in connections, all are in use", s.cfg.MaxConns))
	}
}

// authLog remembers a connection's failed attempts, to log them in one
// line when it ends without a login rather than one line each.
func (s *Server) authLog(m ssh.ConnMetadata, method string, err error) {
	if err == nil || method == "none" {
		return
	}
	s.tries.Lock()
	defer s.tries.Unlock()
	a := s.failed[m.RemoteAddr().String()]
	if a == nil {
		a = &attempts{methods: map[string]int{}}
		s.failed[m.RemoteAddr().String()] = a
	}
	a.user = m.User()
	a.methods[method]++
}

func (s *Server) takeAttempts(addr string) string {
	s.tries.Lock()
	a := s.failed[addr]
	delete(s.failed, addr)
	s.tries.Unlock()
	if a == nil {
		return ""
	}
	var m []string
	for k, n := range a.methods {
		m = append(m, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(m)
	return fmt.Sprintf(" (user %q, failed %s)", a.user, strings.Join(m, ", "))
}
