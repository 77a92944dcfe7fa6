package sshd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// Defaults for Config fields left zero.
const (
	// DefaultShell is the board's shell (u-root's gosh), run as
	// `gosh -c CMD` for exec and plain `gosh` for a shell.
	DefaultShell = "/bbin/gosh"
	// DefaultMaxConns bounds connections, logged in or not: each costs
	// buffers and goroutines, and the NSLU2 has 32 MB.
	DefaultMaxConns = 4
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
	DefaultLoginGrace = 30 * time.Second
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

// Config is what the router decides; zero fields take the defaults.
type Config struct {
	// HostKey is from LoadHostKey.
	HostKey ssh.Signer
	// AuthorizedKeys are the only way in (see ParseAuthorizedKeys). Any
	// user name is accepted with them; every session runs as the
	// router's own user (root).
	AuthorizedKeys []AuthorizedKey
	// Shell runs sessions: Shell for a shell, Shell -c CMD for exec.
	Shell string
	// Env is the sessions' environment; nil means DefaultEnv.
	Env          []string
	MaxConns     int
	MaxSessions  int
	MaxAuthTries int
	LoginGrace   time.Duration
	IdleTimeout  time.Duration
	// Logf gets logins, failed logins, refusals and session errors.
	Logf func(format string, args ...any)
}

// Server is an SSH server; one Server may serve several listeners, which
// share its connection limit.
type Server struct {
	cfg    Config
	ssh    *ssh.ServerConfig
	slots  chan struct{}
	keys   map[string]string // marshalled key -> "SHA256:... (comment)"
	logf   func(string, ...any)
	tries  sync.Mutex
	failed map[string]*attempts // remote address -> failed methods, while logging in
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
	s := &Server{
		cfg:    cfg,
		slots:  make(chan struct{}, cfg.MaxConns),
		keys:   map[string]string{},
		logf:   cfg.Logf,
		failed: map[string]*attempts{},
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	for _, k := range cfg.AuthorizedKeys {
		who := Fingerprint(k.Key)
		if k.Comment != "" {
			who += " (" + k.Comment + ")"
		}
		s.keys[string(k.Key.Marshal())] = who
	}
	// Only PublicKeyCallback is set: x/crypto/ssh then offers the
	// client "publickey" and nothing else, so a password or
	// keyboard-interactive attempt fails before any secret is sent.
	s.ssh = &ssh.ServerConfig{
		MaxAuthTries: cfg.MaxAuthTries,
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			who, ok := s.keys[string(key.Marshal())]
			if !ok {
				return nil, errors.New("key not authorized")
			}
			return &ssh.Permissions{Extensions: map[string]string{"key": who}}, nil
		},
		AuthLogCallback: s.authLog,
		ServerVersion:   "SSH-2.0-ocfw",
	}
	s.ssh.AddHostKey(cfg.HostKey)
	return s, nil
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
		select {
		case s.slots <- struct{}{}:
		default:
			s.logf("ssh: refused %s: already %d connections", c.RemoteAddr(), s.cfg.MaxConns)
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-s.slots }()
			s.handle(ctx, c)
		}()
	}
}

func (s *Server) handle(ctx context.Context, raw net.Conn) {
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	c := newIdleConn(raw, s.cfg.IdleTimeout, time.Now().Add(s.cfg.LoginGrace))
	addr := raw.RemoteAddr().String()
	conn, chans, reqs, err := ssh.NewServerConn(c, s.ssh)
	failed := s.takeAttempts(addr)
	if err != nil {
		s.logf("ssh: no login from %s%s: %v", addr, failed, err)
		return
	}
	defer conn.Close()
	c.loggedIn()
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
			s.session(ch, creqs, addr)
		}()
	}
	wg.Wait()
	s.logf("ssh: %s from %s logged out after %v", conn.User(), addr, time.Since(start).Round(time.Second))
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
