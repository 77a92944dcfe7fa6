// Package realclient is for tests only: it runs real programs nobody
// here wrote (dhclient, udhcpc, dhcpcd...) inside a network namespace
// made by router/netns, on this host, against a service the test runs
// in-process in another namespace. The programs never see the host's
// interfaces: each runs under nsenter in its namespace, optionally with
// tmpfs mounted over the directories it writes (a private mount
// namespace), and is killed with its process group when the test ends.
// StartTerminal runs one on a pseudo-terminal of its own instead, for
// what a person types (OpenSSH's ssh -tt into the router's shell).
package realclient

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/router/netns"
)

// Need is the path of the program name, looked up in PATH and the sbin
// directories (root's programs are there, and a test's PATH may lack
// them). A missing program skips t, or fails it under
// OCFW_REQUIRE_KERNEL=1.
func Need(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	labtest.SkipOrFail(t, "%s is not installed (Debian has it; .ci/run installs it)", name)
	return ""
}

// Link is two namespaces joined by a veth pair: the service's end with
// an address, the client's end without (a DHCP client's end starts so).
type Link struct {
	Server, Client     *netns.NS
	ServerIf, ClientIf string
}

// NewLink makes the two namespaces and the pair; serverAddr is the
// service end's prefix ("192.168.7.1/24"). A host that cannot make
// them (no root, no veth) skips t, or fails it under
// OCFW_REQUIRE_KERNEL=1. Both namespaces close when t ends.
func NewLink(t testing.TB, serverAddr string) *Link {
	t.Helper()
	srv, err := netns.New("service")
	if err != nil {
		labtest.SkipOrFail(t, "this host cannot make a network namespace (needs root): %v", err)
		return nil
	}
	t.Cleanup(func() { srv.Close() })
	cli, err := netns.New("client")
	if err != nil {
		labtest.SkipOrFail(t, "this host cannot make a network namespace (needs root): %v", err)
		return nil
	}
	t.Cleanup(func() { cli.Close() })
	l := &Link{Server: srv, Client: cli, ServerIf: "svc0", ClientIf: "cli0"}
	if err := netns.Veth(srv, l.ServerIf, serverAddr, cli, l.ClientIf, ""); err != nil {
		labtest.SkipOrFail(t, "this host cannot make a veth pair: %v", err)
		return nil
	}
	return l
}

// HasAddr reports whether ifname in ns carries the IPv4 prefix
// ("198.51.100.50/24"): what a client under test put on its link.
func HasAddr(t testing.TB, ns *netns.NS, ifname, prefix string) bool {
	t.Helper()
	l, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		t.Fatalf("realclient: %s in %s: %v", ifname, ns.Name, err)
	}
	as, err := ns.Netlink().AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatalf("realclient: addresses of %s in %s: %v", ifname, ns.Name, err)
	}
	for _, a := range as {
		if a.IPNet.String() == prefix {
			return true
		}
	}
	return false
}

// Options are how Start runs a program.
type Options struct {
	// Tmpfs are directories that get an empty tmpfs in a mount
	// namespace of the program's own, for programs whose state paths
	// cannot be set (dhcpcd's /run and /var/lib/dhcpcd). They must
	// exist.
	Tmpfs []string
	// Env is added to the test's environment.
	Env []string
}

// Proc is a program started by Start.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

type lockedWriter struct{ p *Proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

// Start runs argv (argv[0] a path, e.g. from Need) inside ns and
// collects its stdout and stderr. The process and everything it starts
// (its own process group) is killed when t ends.
func Start(t testing.TB, ns *netns.NS, opts Options, argv ...string) *Proc {
	t.Helper()
	nsenter := Need(t, "nsenter")
	// The namespace's descriptor is the child's fd 3; nsenter enters it
	// before running the rest. A duplicate, so that the os.File closing
	// it leaves the namespace's own descriptor alone.
	fd, err := unix.FcntlInt(uintptr(ns.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("realclient: duplicating %s's descriptor: %v", ns.Name, err)
	}
	nsFile := os.NewFile(uintptr(fd), "netns "+ns.Name)
	defer nsFile.Close()
	// (nsenter's -n takes its file attached.)
	args := []string{"-n/proc/self/fd/3", "--"}
	if len(opts.Tmpfs) > 0 {
		unshare := Need(t, "unshare")
		script := ""
		for _, d := range opts.Tmpfs {
			// No mkdir: that would create the directory on the host.
			script += fmt.Sprintf("mount -t tmpfs -o mode=0755 ocfw-test %q && ", d)
		}
		script += `exec "$@"`
		// unshare -m makes the new mounts private: the host sees none.
		args = append(args, unshare, "-m", "/bin/sh", "-c", script, "sh")
	}
	args = append(args, argv...)
	p := &Proc{Name: filepath.Base(argv[0]), done: make(chan struct{})}
	p.cmd = exec.Command(nsenter, args...)
	p.cmd.ExtraFiles = []*os.File{nsFile}
	p.cmd.Stdout, p.cmd.Stderr = lockedWriter{p}, lockedWriter{p}
	p.cmd.Env = append(os.Environ(), opts.Env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("realclient: starting %s: %v", strings.Join(argv, " "), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("%s's output:\n%s", p.Name, p.Output())
		}
	})
	return p
}

// Output is what the program wrote so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// WaitFor waits until the output matches re (from the start, or counts
// matches: n of them) or the program ends or timeout passes; it reports
// whether n matches arrived.
func (p *Proc) WaitFor(re *regexp.Regexp, n int, timeout time.Duration) bool {
	return waitMatches(p.Output, p.done, re, n, timeout)
}

// waitMatches polls output until it holds n matches of re, done closes
// or timeout passes; it reports whether n matches arrived.
func waitMatches(output func() string, done <-chan struct{}, re *regexp.Regexp, n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if len(re.FindAllStringIndex(output(), -1)) >= n {
			return true
		}
		select {
		case <-done:
			return len(re.FindAllStringIndex(output(), -1)) >= n
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// Wait waits up to timeout for the program to end: its error, or an
// error saying it is still running.
func (p *Proc) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %v", p.Name, timeout)
	}
}

// Kill kills the program (a server a test takes away mid-run) and
// waits for it to end.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if err := p.Wait(5 * time.Second); err != nil && !strings.Contains(err.Error(), "killed") {
		t.Fatalf("realclient: killing %s: %v", p.Name, err)
	}
}

// Signal sends sig to the program (nsenter execs it: same process).
func (p *Proc) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// Script writes an executable shell script with body into a new
// temporary directory of t and returns its path.
func Script(t testing.TB, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}
