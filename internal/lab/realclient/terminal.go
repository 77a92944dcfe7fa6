package realclient

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
)

// Terminal is a program run on this host on a pseudo-terminal of its
// own, as a person at a terminal runs it: what a test sends is typed,
// keys and all (OpenSSH's `ssh -tt` into a shell with a line editor).
type Terminal struct {
	Name string
	cmd  *exec.Cmd
	ptmx *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

// StartTerminal runs argv (argv[0] a path, e.g. from Need) on a new
// 80x24 pseudo-terminal, with env added to the test's environment. The
// program and its session are killed when t ends.
func StartTerminal(t testing.TB, env []string, argv ...string) *Terminal {
	t.Helper()
	tm := &Terminal{Name: filepath.Base(argv[0]), done: make(chan struct{})}
	tm.cmd = exec.Command(argv[0], argv[1:]...)
	tm.cmd.Env = append(os.Environ(), env...)
	ptmx, err := pty.StartWithSize(tm.cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatalf("realclient: starting %s on a pty: %v", argv[0], err)
	}
	tm.ptmx = ptmx
	copied := make(chan struct{})
	go func() {
		// The master reads EIO once the program and its children
		// have let go of the terminal: its end of file.
		io.Copy(lockedTermWriter{tm}, ptmx)
		close(copied)
	}()
	go func() {
		tm.err = tm.cmd.Wait()
		select {
		case <-copied:
		case <-time.After(2 * time.Second): // a child still holds the tty
		}
		close(tm.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-tm.cmd.Process.Pid, syscall.SIGKILL)
		<-tm.done
		ptmx.Close()
		if t.Failed() {
			t.Logf("%s's terminal:\n%q", tm.Name, tm.Output())
		}
	})
	return tm
}

type lockedTermWriter struct{ tm *Terminal }

func (w lockedTermWriter) Write(b []byte) (int, error) {
	w.tm.mu.Lock()
	defer w.tm.mu.Unlock()
	return w.tm.out.Write(b)
}

// Send types s.
func (tm *Terminal) Send(s string) error {
	_, err := io.WriteString(tm.ptmx, s)
	return err
}

// Output is what the terminal showed so far, escape sequences and all.
func (tm *Terminal) Output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()
}

// WaitFor waits until the output holds n matches of re, the program
// ends or timeout passes; it reports whether n matches arrived.
func (tm *Terminal) WaitFor(re *regexp.Regexp, n int, timeout time.Duration) bool {
	return waitMatches(tm.Output, tm.done, re, n, timeout)
}

// Wait waits up to timeout for the program to end: its error, or an
// error saying it is still running.
func (tm *Terminal) Wait(timeout time.Duration) error {
	select {
	case <-tm.done:
		return tm.err
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %v", tm.Name, timeout)
	}
}

// OpenSSHArgs are the options of an OpenSSH client that logs in with
// the private key file key only (no agent, no user config, no other
// keys) on port, trusting the host key it first sees (kept in the file
// known).
func OpenSSHArgs(key, known string, port int) []string {
	return []string{"-F", "/dev/null",
		"-o", "UserKnownHostsFile=" + known, "-o", "StrictHostKeyChecking=accept-new",
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-o", "ConnectTimeout=20", "-i", key, "-p", fmt.Sprint(port)}
}

// OpenSSH runs an OpenSSH client (ssh, scp, sftp) at bin with args (the
// options first: OpenSSHArgs' or a test's own) and stdin as given,
// without the user's agent, killed after timeout (a hang guard). What
// it printed and its exit code; err only when it could not run or was
// killed (code < 0): a client that ran and failed says so by its code
// and stderr.
func OpenSSH(bin string, timeout time.Duration, stdin string, args ...string) (stdout, stderr string, code int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if code >= 0 {
		err = nil
	}
	return out.String(), errb.String(), code, err
}
