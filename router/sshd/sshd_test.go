package sshd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// memKeys is a KeyStore in memory that can fail on purpose.
type memKeys struct {
	key     []byte
	ok      bool
	loadErr error
	saveErr error
	saves   int
}

func (m *memKeys) Load() ([]byte, bool, error) { return m.key, m.ok, m.loadErr }

func (m *memKeys) Save(b []byte) error {
	if m.saveErr != nil {
		return m.saveErr
	}
	m.key, m.ok = append([]byte(nil), b...), true
	m.saves++
	return nil
}

// logBuf collects a server's log lines.
type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitFor returns the log once it holds want, or after 5 s (a hang
// guard, not a timing assertion).
func (l *logBuf) waitFor(want string) string {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s := l.String(); strings.Contains(s, want) {
			return s
		}
	}
	return l.String()
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func authorizedLine(s ssh.Signer, comment string) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))) + " " + comment
}

type testServer struct {
	addr    string
	hostKey ssh.PublicKey
	user    ssh.Signer // the authorized key
	log     *logBuf
	srv     *Server
}

// start runs a server on 127.0.0.1 with one authorized key and /bin/sh
// as the shell; the test's end stops it and checks that Serve returns.
func start(t *testing.T, tune func(*Config)) *testServer {
	t.Helper()
	ts := &testServer{user: newSigner(t), log: &logBuf{}}
	host, err := LoadHostKey(&memKeys{}, ts.log.logf)
	if err != nil {
		t.Fatal(err)
	}
	ts.hostKey = host.PublicKey()
	keys, bad := ParseAuthorizedKeys([]string{authorizedLine(ts.user, "admin@laptop")})
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	cfg := Config{HostKey: host, AuthorizedKeys: keys, Shell: "/bin/sh", Logf: ts.log.logf}
	if tune != nil {
		tune(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second): // hang guard
			t.Errorf("Serve did not return after its context ended")
		}
	})
	return ts
}

func (ts *testServer) dial(auth ...ssh.AuthMethod) (*ssh.Client, error) {
	return ssh.Dial("tcp", ts.addr, &ssh.ClientConfig{
		User:            "root",
		Auth:            auth,
		HostKeyCallback: ssh.FixedHostKey(ts.hostKey),
		Timeout:         10 * time.Second, // hang guard
	})
}

func (ts *testServer) login(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := ts.dial(ssh.PublicKeys(ts.user))
	if err != nil {
		t.Fatalf("login with the authorized key: %v\nlog:\n%s", err, ts.log)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func run(t *testing.T, c *ssh.Client, cmd string) (stdout, stderr string, err error) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var o, e bytes.Buffer
	s.Stdout, s.Stderr = &o, &e
	err = s.Run(cmd)
	return o.String(), e.String(), err
}

func TestExecReturnsOutputAndExitStatus(t *testing.T) {
	ts := start(t, nil)
	c := ts.login(t)

	out, _, err := run(t, c, "echo hi")
	if err != nil || out != "hi\n" {
		t.Errorf("echo hi: got %q, %v; want \"hi\\n\" and exit 0", out, err)
	}
	out, errOut, err := run(t, c, "echo partial; echo oops >&2; exit 3")
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 3 {
		t.Errorf("exit 3: got %v, want exit status 3", err)
	}
	if out != "partial\n" || errOut != "oops\n" {
		t.Errorf("got stdout %q stderr %q, want \"partial\\n\" and \"oops\\n\" apart", out, errOut)
	}
	_, _, err = run(t, c, "kill -TERM $$")
	if !errors.As(err, &ee) || ee.Signal() != "TERM" {
		t.Errorf("a shell killed by SIGTERM: got %v, want exit-signal TERM", err)
	}
	// The environment is the configured one, not the test process's.
	out, _, _ = run(t, c, "echo $HOME:$PATH:$TERM:${GOPATH-unset}; pwd")
	if want := "/:" + strings.TrimPrefix(DefaultEnv[0], "PATH=") + "::unset\n/\n"; out != want {
		t.Errorf("environment: got %q, want %q", out, want)
	}
	want := "root logged in from 127.0.0.1:"
	if log := ts.log.waitFor(want); !strings.Contains(log, want) || !strings.Contains(log, Fingerprint(ts.user.PublicKey())+" (admin@laptop)") {
		t.Errorf("log lacks the login with the key's fingerprint and comment:\n%s", log)
	}
}

func TestWrongKeyIsRefused(t *testing.T) {
	ts := start(t, nil)
	if c, err := ts.dial(ssh.PublicKeys(newSigner(t))); err == nil {
		c.Close()
		t.Fatal("an unknown key logged in")
	}
	// The server logs once its side of the handshake ends, which may be
	// after the client's.
	if log := ts.log.waitFor("no login from 127.0.0.1"); !strings.Contains(log, "publickey×") {
		t.Errorf("the failure is not logged with its method:\n%s", log)
	}
}

func TestPasswordsAreNeverAsked(t *testing.T) {
	ts := start(t, nil)
	asked := false
	_, err := ts.dial(
		ssh.PasswordCallback(func() (string, error) { asked = true; return "root", nil }),
		ssh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) { asked = true; return nil, nil }),
	)
	if err == nil {
		t.Fatal("a password client logged in")
	}
	// The server offered publickey only: the client had nothing to try
	// beyond "none", and never produced a password.
	if asked || !strings.Contains(err.Error(), "attempted methods [none]") {
		t.Errorf("got %v (password asked: %v); want the password never asked for", err, asked)
	}
}

func TestAuthAttemptsAreLimited(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxAuthTries = 2 })
	// A few wrong keys first still get in: key queries have their own
	// budget.
	c, err := ts.dial(ssh.PublicKeys(newSigner(t), newSigner(t), ts.user))
	if err != nil {
		t.Fatalf("two wrong keys before the right one: %v", err)
	}
	c.Close()
	var many []ssh.Signer
	for range 6 {
		many = append(many, newSigner(t))
	}
	_, err = ts.dial(ssh.PublicKeys(append(many, ts.user)...))
	if err == nil || !strings.Contains(err.Error(), "too many authentication failures") {
		t.Errorf("six wrong keys before the right one: got %v, want too many authentication failures", err)
	}
}

func TestHostKeyIsMadeOnceAndKept(t *testing.T) {
	store := &memKeys{}
	var log logBuf
	k1, err := LoadHostKey(store, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	if store.saves != 1 || k1.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Fatalf("first start: %d saves of a %s key, want 1 ed25519", store.saves, k1.PublicKey().Type())
	}
	fp := Fingerprint(k1.PublicKey())
	if !strings.HasPrefix(fp, "SHA256:") || len(fp) != len("SHA256:")+43 || !strings.Contains(log.String(), fp) {
		t.Errorf("fingerprint %q: want SHA256: and 43 base64 characters, logged (log: %s)", fp, log.String())
	}
	// A restart: the same key, nothing saved.
	k2, err := LoadHostKey(store, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	if Fingerprint(k2.PublicKey()) != fp || store.saves != 1 {
		t.Errorf("restart: fingerprint %s, %d saves; want %s, 1", Fingerprint(k2.PublicKey()), store.saves, fp)
	}
	// A client that knows the first key accepts the server restarted
	// with the stored one.
	user := newSigner(t)
	keys, _ := ParseAuthorizedKeys([]string{authorizedLine(user, "")})
	srv, err := New(Config{HostKey: k2, AuthorizedKeys: keys, Shell: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	c, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(user)},
		HostKeyCallback: ssh.FixedHostKey(k1.PublicKey()), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("client pinned to the first key: %v", err)
	}
	c.Close()
	if srv.Fingerprint() != fp {
		t.Errorf("Server.Fingerprint %s, want %s", srv.Fingerprint(), fp)
	}
}

func TestDamagedHostKey(t *testing.T) {
	t.Run("unreadable key is replaced loudly", func(t *testing.T) {
		store := &memKeys{key: []byte("-----BEGIN OPENSSH PRIVATE KEY-----\ngarbage\n"), ok: true}
		var log logBuf
		k, err := LoadHostKey(store, log.logf)
		if err != nil {
			t.Fatal(err)
		}
		if store.saves != 1 {
			t.Errorf("the new key was not saved")
		}
		if l := log.String(); !strings.Contains(l, "WARNING") || !strings.Contains(l, "unreadable") || !strings.Contains(l, Fingerprint(k.PublicKey())) {
			t.Errorf("log: %q; want a warning naming the new fingerprint", l)
		}
		again, _ := LoadHostKey(store, log.logf)
		if Fingerprint(again.PublicKey()) != Fingerprint(k.PublicKey()) {
			t.Errorf("the replacement is not the key kept")
		}
	})
	t.Run("store unreadable is an error, nothing replaced", func(t *testing.T) {
		store := &memKeys{loadErr: errors.New("i/o error")}
		if _, err := LoadHostKey(store, nil); err == nil || store.saves != 0 {
			t.Errorf("got %v with %d saves, want an error and no save", err, store.saves)
		}
	})
	t.Run("unsaved key still serves, loudly", func(t *testing.T) {
		store := &memKeys{saveErr: errors.New("store full")}
		var log logBuf
		k, err := LoadHostKey(store, log.logf)
		if err != nil || k == nil {
			t.Fatalf("got %v, want a key", err)
		}
		if !strings.Contains(log.String(), "could not save") {
			t.Errorf("log %q does not say the key is not kept", log.String())
		}
	})
}

// reader collects a pty's output for expect.
type reader struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{}
}

func newReader(r io.Reader) *reader {
	rd := &reader{more: make(chan struct{}, 1)}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			rd.mu.Lock()
			rd.buf.Write(b[:n])
			rd.mu.Unlock()
			select {
			case rd.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return rd
}

func (rd *reader) expect(t *testing.T, want string) {
	t.Helper()
	guard := time.After(10 * time.Second) // hang guard
	for {
		rd.mu.Lock()
		got := rd.buf.String()
		rd.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		select {
		case <-rd.more:
		case <-guard:
			t.Fatalf("output never had %q; got %q", want, got)
		}
	}
}

func TestInteractiveShellOnAPty(t *testing.T) {
	ts := start(t, nil)
	c := ts.login(t)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, _ := s.StdinPipe()
	out, _ := s.StdoutPipe()
	if err := s.RequestPty("xterm-ocfw", 24, 80, ssh.TerminalModes{ssh.ECHO: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	rd := newReader(out)
	// The echo of what is typed shows $TERM and "stty size", not their
	// values, so a match is the shell's answer.
	io.WriteString(in, "echo T=$TERM; stty size; tty\n")
	rd.expect(t, "T=xterm-ocfw")
	rd.expect(t, "24 80")
	rd.expect(t, "/dev/pts/")

	if err := s.WindowChange(40, 100); err != nil {
		t.Fatal(err)
	}
	// Requests are handled in order: the answer to this one means the
	// window change is done.
	if ok, err := s.SendRequest("sync@test", true, nil); ok || err != nil {
		t.Fatalf("unknown request: got %v, %v; want refused", ok, err)
	}
	io.WriteString(in, "stty size; exit 7\n")
	rd.expect(t, "40 100")
	var ee *ssh.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 7 {
		t.Errorf("exit 7 from the pty shell: got %v", err)
	}
}

func TestShellWithoutAPty(t *testing.T) {
	ts := start(t, nil)
	c := ts.login(t)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Stdin = strings.NewReader("echo hi from a pipe\ntty || echo no tty\nexit 4\n")
	var out bytes.Buffer
	s.Stdout = &out
	err = s.Shell()
	if err == nil {
		err = s.Wait()
	}
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 4 {
		t.Errorf("got %v, want exit status 4", err)
	}
	if got := out.String(); !strings.HasPrefix(got, "hi from a pipe\n") || !strings.Contains(got, "no tty") {
		t.Errorf("output %q", got)
	}
}

func TestSubsystemsAndForwardingAreRefused(t *testing.T) {
	ts := start(t, nil)
	c := ts.login(t)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stderr, err := s.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Any but sftp: taken, to end at once with the hint (and exit
	// status 1, which TestOpenSSHSubsystemHint sees).
	if err := s.RequestSubsystem("netconf"); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(stderr); err != nil || string(b) != SubsystemHint {
		t.Errorf("netconf subsystem: stderr %q, %v; want the hint", b, err)
	}
	if !strings.Contains(ts.log.String(), `refused subsystem "netconf"`) {
		t.Errorf("refusal not logged:\n%s", ts.log)
	}
	// ssh -L: the target is this test's own listener, on loopback.
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if conn, err := c.Dial("tcp", target.Addr().String()); err == nil {
		conn.Close()
		t.Error("local forwarding (direct-tcpip) accepted")
	}
	// ssh -R.
	if ln, err := c.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
		t.Error("remote forwarding (tcpip-forward) accepted")
	}
	// The connection still works.
	if out, _, err := run(t, c, "echo still"); err != nil || out != "still\n" {
		t.Errorf("after refusals: %q, %v", out, err)
	}
}

func TestConnectionLimit(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxConns = 2 })
	a := ts.login(t)
	ts.login(t)
	// The server counts a login once its side of the handshake is done,
	// which may be after the client's: wait for both.
	for deadline := time.Now().Add(10 * time.Second); strings.Count(ts.log.String(), " logged in from ") < 2 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) { // hang guard
	}
	// A third logs in, and is told why it gets no session.
	third := func() error {
		c, err := ts.dial(ssh.PublicKeys(ts.user))
		if err != nil {
			return err
		}
		defer c.Close()
		s, err := c.NewSession()
		if err != nil {
			return err
		}
		s.Close()
		return nil
	}
	if err := third(); err == nil || !strings.Contains(err.Error(), "allows 2 logged-in connections") {
		t.Fatalf("a third connection with MaxConns 2: %v; want its session refused with the reason", err)
	}
	if log := ts.log.waitFor("already 2 logged in"); !strings.Contains(log, "already 2 logged in") {
		t.Errorf("refusal not logged:\n%s", log)
	}
	// Once one leaves, its slot is free again (the server notices the
	// close on its own time: retry until then).
	a.Close()
	guard := time.After(10 * time.Second) // hang guard
	for {
		err := third()
		if err == nil {
			return
		}
		select {
		case <-guard:
			t.Fatalf("the slot was never freed: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestSlowLoginAndIdleConnectionsAreClosed(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.LoginGrace = 100 * time.Millisecond
		c.IdleTimeout = 100 * time.Millisecond
	})
	// A TCP client that never logs in: the server sends its version and
	// hangs up when the grace ends.
	raw, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second)) // hang guard
	got, err := io.ReadAll(raw)
	if err != nil || !strings.HasPrefix(string(got), "SSH-2.0-ocfw\r\n") {
		t.Errorf("never-logging-in client: read %q, %v; want the version, then the server's close", got, err)
	}
	// A logged-in client that says nothing is closed.
	c := ts.login(t)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // hang guard
		t.Fatal("an idle connection was never closed")
	}
}

// A client that leaves hangs up what its command started. Also when
// this process ignores SIGHUP, as the board's router does (started by
// `ocf boot`, which ignores it while giving up the console) and as a
// test run under nohup does: an ignored SIGHUP is inherited through exec,
// and the hang-up would end nothing.
func TestClientGoneHangsUpItsCommand(t *testing.T) {
	t.Run("SIGHUP-as-started", clientGoneHangsUp)
	t.Run("SIGHUP-ignored-here", func(t *testing.T) {
		signal.Ignore(syscall.SIGHUP)
		t.Cleanup(func() { signal.Reset(syscall.SIGHUP) })
		clientGoneHangsUp(t)
	})
}

func clientGoneHangsUp(t *testing.T) {
	ts := start(t, nil)
	c := ts.login(t)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := s.StdoutPipe()
	// A child of the shell, in the shell's group: the hang-up must reach
	// it too.
	if err := s.Start("sleep 1000 & echo $!; wait"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("pid line %q", line)
	}
	c.Close()
	guard := time.After(10 * time.Second) // hang guard
	for {
		// Signal 0 probes; a zombie not yet reaped by /bin/sh's exit
		// counts as gone only once reaped, so also look at its state.
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || zombie(pid) {
			return
		}
		select {
		case <-guard:
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("sleep (pid %d) still runs after its client left", pid)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

func TestParseAuthorizedKeys(t *testing.T) {
	good := newSigner(t)
	lines := []string{
		authorizedLine(good, "me@laptop"),
		"",
		"# a comment",
		"ssh-ed25519 AAAAnotbase64",
		`from="10.0.0.0/8" ` + authorizedLine(newSigner(t), "restricted"),
		authorizedLine(newSigner(t), "a") + "\n" + authorizedLine(newSigner(t), "b"),
	}
	keys, bad := ParseAuthorizedKeys(lines)
	if len(keys) != 1 || keys[0].Comment != "me@laptop" || !bytes.Equal(keys[0].Key.Marshal(), good.PublicKey().Marshal()) {
		t.Errorf("keys: %+v", keys)
	}
	var idx []int
	for _, e := range bad {
		var le *LineError
		if !errors.As(e, &le) {
			t.Fatalf("%v is not a LineError", e)
		}
		idx = append(idx, le.Index)
	}
	if fmt.Sprint(idx) != "[3 4 5]" {
		t.Errorf("bad lines %v (%v), want [3 4 5]", idx, bad)
	}
	if len(bad) == 3 && !strings.Contains(bad[1].Error(), "ssh.authorized_keys[4]: options from=") {
		t.Errorf("options error: %v", bad[1])
	}
	if _, err := New(Config{HostKey: good}); err == nil {
		t.Error("New accepted a config without keys")
	}
}

// TestSecondHostKeyKeepsTheFirst: a box whose store holds only the
// ed25519 key (as written before the RSA key existed) keeps that key,
// gains an RSA key saved beside it, and keeps both from then on; the
// document still reads as the ed25519 key to a reader that knows only
// one key (the older firmware).
func TestSecondHostKeyKeepsTheFirst(t *testing.T) {
	store := &memKeys{}
	old, err := LoadHostKey(store, nil) // the store as an older firmware left it
	if err != nil {
		t.Fatal(err)
	}
	oldDoc := append([]byte(nil), store.key...)
	var log logBuf
	ks, err := LoadHostKeys(store, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || Fingerprint(ks[0].PublicKey()) != Fingerprint(old.PublicKey()) || ks[1].PublicKey().Type() != ssh.KeyAlgoRSA {
		t.Fatalf("got %d keys, first %s; want the stored ed25519 key %s and an RSA key", len(ks), Fingerprint(ks[0].PublicKey()), Fingerprint(old.PublicKey()))
	}
	if store.saves != 2 || !bytes.HasPrefix(store.key, oldDoc) {
		t.Errorf("%d saves; the new document does not begin with the old one", store.saves)
	}
	if !strings.Contains(log.String(), Fingerprint(ks[1].PublicKey())) {
		t.Errorf("the new RSA key is not logged: %s", log.String())
	}
	if k, err := ssh.ParsePrivateKey(store.key); err != nil || Fingerprint(k.PublicKey()) != Fingerprint(old.PublicKey()) {
		t.Errorf("a one-key reader of the new document: %v, want the ed25519 key", err)
	}
	// Restart: both kept, nothing saved.
	again, err := LoadHostKeys(store, nil)
	if err != nil || len(again) != 2 || store.saves != 2 ||
		Fingerprint(again[0].PublicKey()) != Fingerprint(ks[0].PublicKey()) ||
		Fingerprint(again[1].PublicKey()) != Fingerprint(ks[1].PublicKey()) {
		t.Errorf("restart: %v, %d keys, %d saves; want the same two keys and no save", err, len(again), store.saves)
	}
	// A damaged RSA part is replaced; the ed25519 key stays.
	store.key = append(append([]byte(nil), oldDoc...), "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"...)
	log = logBuf{}
	fixed, err := LoadHostKeys(store, log.logf)
	if err != nil || len(fixed) != 2 || Fingerprint(fixed[0].PublicKey()) != Fingerprint(old.PublicKey()) || !strings.Contains(log.String(), "unreadable") {
		t.Errorf("damaged RSA key: %v, log %q; want the ed25519 key kept, the RSA key replaced loudly", err, log.String())
	}
	// Its size in the store (the board's 64 KiB state record holds it,
	// base64 in JSON).
	if n := len(store.key) * 4 / 3; n > 4096 {
		t.Errorf("both keys take %d bytes in the store, want under 4 KiB", n)
	}
}

// TestStartupTable: clients that talk SSH but never log in fill at most
// MaxStartups places; a newcomer closes the one heard from longest ago
// (never one busy logging in while a staler one is there), bare
// connects then take each other's place rather than more talking ones',
// and the logged-in places are left alone.
func TestStartupTable(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.MaxStartups, c.PerSourceStartups = 4, 100
		c.IdentGrace, c.LoginGrace = time.Minute, time.Minute
	})
	admin := ts.login(t) // logged in first: not counted in the table
	// The server takes it out of the table once its side of the
	// handshake is done, which may be after the client's: wait, or the
	// table would count it as its stalest.
	if log := ts.log.waitFor(" logged in from "); !strings.Contains(log, " logged in from ") {
		t.Fatalf("the admin's login is not logged:\n%s", log)
	}
	open := func(talk bool) net.Conn {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if talk {
			io.WriteString(c, "SSH-2.0-stuck\r\n")
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // hang guard
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if talk && err == nil {
			// The server's KEXINIT comes once it has read our line:
			// from then on it counts as talking, heard from now.
			_, err = br.ReadByte()
		}
		if err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
			t.Fatalf("connection %d: %q, %v; want the server's version (a newcomer is never refused)", len(ts.srv.gate.starting), line, err)
		}
		return c
	}
	// alive reports whether the server still holds c: a read times
	// out rather than ending.
	alive := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		var ne net.Error
		_, err := io.ReadAll(c)
		return errors.As(err, &ne) && ne.Timeout()
	}
	var talking []net.Conn
	for range 30 {
		talking = append(talking, open(true))
	}
	ts.srv.gate.mu.Lock()
	n := len(ts.srv.gate.starting)
	ts.srv.gate.mu.Unlock()
	if n != 4 {
		t.Fatalf("%d unauthenticated held, want the table's 4", n)
	}
	for i, c := range talking {
		if want := i >= 26; alive(c) != want {
			t.Errorf("talking connection %d of 30: held %v, want %v (the newest 4 held)", i, !want, want)
		}
	}
	// The oldest of the four is heard from again (half a packet
	// length: the server reads it and waits for the rest): now the
	// second oldest is the stalest.
	talking[26].Write([]byte{0, 0})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) { // hang guard
		ts.srv.gate.mu.Lock()
		stalest := ts.srv.gate.stalestLocked(nil)
		ts.srv.gate.mu.Unlock()
		if stalest.conn.RemoteAddr().String() == talking[27].LocalAddr().String() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never read the half packet length")
		}
	}
	for range 10 {
		open(false)
	}
	for i, want := range map[int]bool{26: true, 27: false, 28: true, 29: true} {
		if alive(talking[i]) != want {
			t.Errorf("after 10 bare connects, talking connection %d: held %v, want %v", i, !want, want)
		}
	}
	if out, _, err := run(t, admin, "echo ok"); err != nil || out != "ok\n" {
		t.Errorf("the logged-in admin: %q, %v", out, err)
	}
}

// TestIdentGrace: a connection that sends nothing is closed after the
// short ident grace; one that has sent its identification line gets the
// login grace.
func TestIdentGrace(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.IdentGrace, c.LoginGrace = 200*time.Millisecond, time.Minute
	})
	bare, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	talking, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer talking.Close()
	io.WriteString(talking, "SSH-2.0-slow\r\n")
	begin := time.Now()
	bare.SetReadDeadline(time.Now().Add(10 * time.Second)) // hang guard
	if _, err := io.ReadAll(bare); err != nil {
		t.Errorf("a silent connection: %v, want closed by the server", err)
	}
	// Three ident graces on, the talking one still waits for its key
	// exchange.
	talking.SetReadDeadline(begin.Add(600 * time.Millisecond))
	var ne net.Error
	if _, err := io.ReadAll(talking); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("a connection that sent its identification: %v after %v, want still open", err, time.Since(begin).Round(time.Millisecond))
	}
}

func TestSourceOf(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:22":                 "192.0.2.7/32",
		"[::ffff:192.0.2.7]:22":        "192.0.2.7/32",
		"[2001:db8:1:2:aaaa::1]:22":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb::9]:40000": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:22":            "fe80::/64",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := sourceOf(a).String(); got != want {
			t.Errorf("sourceOf(%s) = %s, want %s", addr, got, want)
		}
	}
}

// New keys and a new login name (a pushed config) apply to the logins
// that come after; a connection already logged in keeps working, even
// when its key is no longer among them.
func TestSetLoginsKeepsSessions(t *testing.T) {
	ts := start(t, nil)
	old := ts.login(t)
	next := newSigner(t)
	keys, bad := ParseAuthorizedKeys([]string{authorizedLine(next, "new@laptop")})
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	if err := ts.srv.SetLogins("", nil); err == nil {
		t.Error("SetLogins with no keys: accepted")
	}
	if err := ts.srv.SetLogins("admin", keys); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(t, old, "echo still here"); err != nil || out != "still here\n" {
		t.Errorf("the connection logged in before: %q, %v", out, err)
	}
	if c, err := ts.dial(ssh.PublicKeys(ts.user)); err == nil {
		c.Close()
		t.Error("the removed key still logs in")
	}
	login := func(user string) error {
		c, err := ssh.Dial("tcp", ts.addr, &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(next)},
			HostKeyCallback: ssh.FixedHostKey(ts.hostKey), Timeout: 10 * time.Second})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := login("root"); err == nil {
		t.Error("the old login name still logs in")
	}
	if err := login("admin"); err != nil {
		t.Errorf("the new key as the new login name: %v\nlog:\n%s", err, ts.log)
	}
}
