package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/sshd"
)

// asShell makes the test binary the shell when a test starts it so.
const asShell = "OCFSH_TEST_AS_SHELL=1"

func TestMain(m *testing.M) {
	if os.Getenv("OCFSH_TEST_AS_SHELL") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHistory(t *testing.T) {
	for _, tc := range []struct {
		name        string
		add         []string
		interrupted bool
		want        []string // newest first
	}{
		{"newest first", []string{"a", "b"}, false, []string{"b", "a"}},
		{"no empty lines", []string{"a", "", "  "}, false, []string{"a"}},
		{"no repeat of the last", []string{"a", "a", "b", "a"}, false, []string{"a", "b", "a"}},
		{"nothing interrupted", []string{"a"}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &history{keys: &keyReader{interrupted: tc.interrupted}}
			for _, l := range tc.add {
				h.Add(l)
			}
			var got []string
			for i := 0; i < h.Len(); i++ {
				got = append(got, h.At(i))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("history %q, want %q", got, tc.want)
			}
		})
	}
	h := &history{keys: &keyReader{}}
	for i := 0; i < maxHistory+10; i++ {
		h.Add(strings.Repeat("x", i+1))
	}
	if h.Len() != maxHistory || h.At(maxHistory-1) != strings.Repeat("x", 11) {
		t.Errorf("a full history keeps the newest %d lines: %d, oldest %q", maxHistory, h.Len(), h.At(h.Len()-1))
	}
}

func TestKeyReaderRewritesInterrupt(t *testing.T) {
	for _, tc := range []struct {
		in, want    string
		interrupted bool
	}{
		{"ls\r", "ls\r", false},
		{"ls -l\x03", "ls -l\x05^C\r", true},
		{"a\x03b\r", "a\x05^C\rb\r", true},
	} {
		k := &keyReader{r: strings.NewReader(tc.in)}
		var got bytes.Buffer
		buf := make([]byte, 3) // small reads: the rewrite spans them
		for {
			n, err := k.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if got.String() != tc.want || k.interrupted != tc.interrupted {
			t.Errorf("%q: read %q (interrupted %v), want %q (%v)", tc.in, got.String(), k.interrupted, tc.want, tc.interrupted)
		}
	}
}

func TestExecAndScripts(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(script, []byte("echo $1-$2\nexit 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// head is a stand-in that says what it was given, as u-root's would
	// read it: -N must reach it as -n N.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "head"), []byte("#!/bin/sh\necho \"head $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, tc := range []struct {
		args  []string
		stdin string
		out   string
		code  int
	}{
		{[]string{"-c", "echo a; exit 3"}, "", "a\n", 3},
		{[]string{"-c", "type reboot"}, "", "reboot is a function", 0},
		{[]string{"-c", "head -3 /proc/meminfo"}, "", "head -n 3 /proc/meminfo\n", 0},
		{[]string{"-c", "head -n 2 f; head f; echo ${_n-unset}"}, "", "head -n 2 f\nhead f\nunset\n", 0},
		{[]string{script, "x", "y"}, "", "x-y\n", 4},
		{nil, "echo piped\nexit 2\n", "piped\n", 2}, // stdin not a terminal: read whole
		{[]string{"-c", "nosuchcommand-ocfsh"}, "", "", 127},
	} {
		cmd := exec.Command(self(t), tc.args...)
		cmd.Env = append(os.Environ(), asShell)
		cmd.Stdin = strings.NewReader(tc.stdin)
		out, _ := cmd.Output()
		if !strings.Contains(string(out), tc.out) || cmd.ProcessState.ExitCode() != tc.code {
			t.Errorf("ocfsh %q: %q exit %d, want %q and %d", tc.args, out, cmd.ProcessState.ExitCode(), tc.out, tc.code)
		}
	}
}

// edits are the keys an admin types and what must come of them: each
// line echoes its result as "=RESULT" so that the count of "\n=X\r"
// in the output counts runs (a pipe to the console has no \\r: the
// terminal adds it).
var edits = []struct {
	name, keys, ran string
	runs            int // how often ran has run by then
}{
	{"a line", "echo =abc\r", "=abc", 1},
	{"up runs it again", "\x1b[A\r", "=abc", 2},
	{"^P is up too", "\x10\r", "=abc", 3},
	{"left and insert", "echo =xz\x1b[D\x1b[Dy\r", "=yxz", 1},
	{"^A, ^E", "cho =1\x01e\x05 2\r", "=1 2", 1},
	{"backspace", "echo =ab\x7f\x7fcd\r", "=cd", 1},
	{"^C drops the line", "echo =dropped\x03echo =after\r", "=after", 1},
	{"history skips what ^C dropped", "\x1b[A\x1b[A\r", "=cd", 2},
	{"down goes back", "\x1b[A\x1b[A\x1b[A\x1b[B\r", "=after", 2},
	{"a line over two", "for i in 1 2\rdo echo =n$i\rdone\r", "=n2", 1},
}

// typeEdits sends each of edits and waits for its result.
func typeEdits(t *testing.T, send func(string) error, wait func(*regexp.Regexp, int) bool) {
	t.Helper()
	for _, e := range edits {
		if err := send(e.keys); err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`\n` + regexp.QuoteMeta(e.ran) + `\r?\n`)
		if !wait(re, e.runs) {
			t.Fatalf("%s: %q typed, want %q run %d time(s)", e.name, e.keys, e.ran, e.runs)
		}
	}
}

// TestLineEditingOnAPty: the shell on a terminal, as in an SSH session
// with a pty.
func TestLineEditingOnAPty(t *testing.T) {
	tm := realclient.StartTerminal(t, []string{asShell, "TERM=xterm"}, self(t))
	wait := func(re *regexp.Regexp, n int) bool { return tm.WaitFor(re, n, 20*time.Second) }
	if !wait(regexp.MustCompile(`# $`), 1) {
		t.Fatal("no prompt")
	}
	typeEdits(t, tm.Send, wait)
	// ^Z while a command runs stops nothing: no job control, and a
	// stopped shell could not be resumed.
	tm.Send("sleep 1; echo =slept\r")
	time.Sleep(300 * time.Millisecond)
	tm.Send("\x1a")
	if !wait(regexp.MustCompile(`=slept\r\n`), 1) {
		t.Fatal("^Z during a command stopped it")
	}
	tm.Send("exit 6\r")
	if err := tm.Wait(10 * time.Second); err == nil || !strings.Contains(err.Error(), "exit status 6") {
		t.Errorf("exit 6: %v", err)
	}
}

// TestLineEditingOnTheConsole: the shell as u-root's init starts it on
// the serial console: stdin the terminal, stdout and stderr a pipe (its
// multi-console writer), a terminal that reports no size.
func TestLineEditingOnTheConsole(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
	cmd := exec.Command(self(t))
	cmd.Env = append(os.Environ(), asShell, "TERM=linux")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	defer cmd.Process.Kill()
	go io.Copy(io.Discard, ptmx) // what the tty itself echoes: none while editing
	wait := func(re *regexp.Regexp, n int) bool {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			mu.Lock()
			s := out.String()
			mu.Unlock()
			if len(re.FindAllStringIndex(s, -1)) >= n {
				return true
			}
		}
		return false
	}
	if !wait(regexp.MustCompile(`# $`), 1) {
		t.Fatal("no prompt")
	}
	send := func(s string) error { _, err := io.WriteString(ptmx, s); return err }
	defer func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("the console showed:\n%q", out.String())
			mu.Unlock()
		}
	}()
	typeEdits(t, send, wait)
	send("\x04") // ^D on an empty line ends the shell
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("^D: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("^D did not end the shell")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestOpenSSHLineEditing: OpenSSH's ssh -tt, on a terminal of its own,
// logged in to the router's SSH server that runs this shell.
func TestOpenSSHLineEditing(t *testing.T) {
	client := realclient.Need(t, "ssh")
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	host, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	userPub, userPriv, _ := ed25519.GenerateKey(rand.Reader)
	sp, _ := ssh.NewPublicKey(userPub)
	keys, bad := sshd.ParseAuthorizedKeys([]string{string(ssh.MarshalAuthorizedKey(sp))})
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	blk, err := ssh.MarshalPrivateKey(userPriv, "test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "id")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := sshd.New(sshd.Config{HostKey: host, AuthorizedKeys: keys, Shell: self(t),
		Env: append(append([]string(nil), sshd.DefaultEnv...), asShell)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	args := append([]string{client}, realclient.OpenSSHArgs(keyFile, filepath.Join(dir, "known_hosts"), ln.Addr().(*net.TCPAddr).Port)...)
	tm := realclient.StartTerminal(t, []string{"TERM=xterm", "SSH_AUTH_SOCK="}, append(args, "-tt", "root@127.0.0.1")...)
	wait := func(re *regexp.Regexp, n int) bool { return tm.WaitFor(re, n, 30*time.Second) }
	if !wait(regexp.MustCompile(`# $`), 1) {
		t.Fatal("no prompt over ssh")
	}
	typeEdits(t, tm.Send, wait)
	tm.Send("exit 7\r")
	if err := tm.Wait(20 * time.Second); err == nil || !strings.Contains(err.Error(), "exit status 7") {
		t.Errorf("ssh after exit 7: %v, want exit status 7", err)
	}
}
