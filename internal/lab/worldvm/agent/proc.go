package main

// Programs from the guest's trees (worldvm.Config.Trees): started in a
// namespace in the background, or run to completion.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// startArg0 is argv[0] of the agent run again as a started program's
// trampoline (see trampoline).
const startArg0 = "world-start"

// maxOutput is how much of a program's output is kept: the end.
const maxOutput = 64 << 10

// tailBuffer keeps the last maxOutput bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > maxOutput {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-maxOutput:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// proc is a program started by start.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  tailBuffer
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done is closed
}

var (
	procName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	envWord  = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)
)

// programArgs splits [VAR=VALUE...] PROGRAM [ARG...]: the program is an
// absolute path; it gets a PATH of the usual directories and the
// variables.
func programArgs(words []string) (env, argv []string, err error) {
	env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	for len(words) > 0 && envWord.MatchString(words[0]) {
		env, words = append(env, words[0]), words[1:]
	}
	if len(words) == 0 || !path.IsAbs(words[0]) {
		return nil, nil, kinded("usage", errors.New("want [VAR=VALUE...] /ABSOLUTE/PROGRAM [ARG...]"))
	}
	if _, err := os.Stat(words[0]); err != nil {
		return nil, nil, kinded("usage", fmt.Errorf("program %s: %w (is its tree in the world's Config.Trees?)", words[0], err))
	}
	return env, words, nil
}

// cmdStart starts a program in a namespace under a name, in the
// background, with a mount namespace of its own whose /run (and
// /var/run) is a private tmpfs: daemons with a fixed pid file, such as
// two charons, can run side by side. Its output is kept (output, stop).
func cmdStart(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	name := args[1]
	if !procName.MatchString(name) {
		return "", kinded("usage", fmt.Errorf("program name %q: want lower-case letters, digits, dashes", name))
	}
	env, argv, err := programArgs(args[2:])
	if err != nil {
		return "", err
	}
	p := &proc{name: name, done: make(chan struct{})}
	a.mu.Lock()
	if a.procs == nil {
		a.procs = map[string]*proc{}
	}
	if old, ok := a.procs[name]; ok {
		select {
		case <-old.done:
		default:
			a.mu.Unlock()
			return "", fmt.Errorf("%s already runs (pid %d): stop it first", name, old.cmd.Process.Pid)
		}
	}
	a.procs[name] = p
	a.mu.Unlock()
	p.cmd = &exec.Cmd{Path: "/init", Args: append([]string{startArg0}, argv...), Env: env,
		Stdout: &p.out, Stderr: &p.out,
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Setsid: true}}
	// The child is forked from a thread inside the namespace, so it
	// starts there.
	if err := n.run(p.cmd.Start); err != nil {
		a.mu.Lock()
		delete(a.procs, name)
		a.mu.Unlock()
		return "", fmt.Errorf("starting %s: %w", argv[0], err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	// A program that fails at once (a missing library, a bad option)
	// says so here rather than at the next command.
	select {
	case <-p.done:
		return "", fmt.Errorf("%s exited at once: %v: %s", name, p.err, tail(p.out.String(), 2000))
	case <-time.After(200 * time.Millisecond):
	}
	return fmt.Sprintf("%s pid %d", name, p.cmd.Process.Pid), nil
}

// trampoline runs in the child of start, in its new mount namespace:
// it mounts the private /run and executes the program.
func trampoline(argv []string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := os.MkdirAll("/run", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mounting /run: %w", err)
	}
	if err := os.MkdirAll("/var", 0o755); err != nil {
		return err
	}
	// /var/run is /run, as on Debian; a tree's own /var/run directory
	// gets a private tmpfs of its own.
	if fi, err := os.Lstat("/var/run"); err != nil {
		if err := os.Symlink("/run", "/var/run"); err != nil && !os.IsExist(err) {
			return err
		}
	} else if fi.IsDir() {
		if err := unix.Mount("tmpfs", "/var/run", "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("mounting /var/run: %w", err)
		}
	}
	return unix.Exec(argv[0], argv, os.Environ())
}

func (a *agent) proc(name string) (*proc, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.procs[name]
	if !ok {
		return nil, kinded("usage", fmt.Errorf("no program %q was started", name))
	}
	return p, nil
}

// cmdStop ends a started program (SIGTERM, SIGKILL after 10 s) and
// returns how it exited and its output's end.
func cmdStop(ctx context.Context, a *agent, args []string) (string, error) {
	p, err := a.proc(args[0])
	if err != nil {
		return "", err
	}
	// "kill": SIGKILL, a power cut for the program (no goodbyes to
	// its peers); otherwise SIGTERM, then SIGKILL after 10 s.
	sig := syscall.SIGTERM
	if len(args) > 1 {
		if args[1] != "kill" {
			return "", kinded("usage", fmt.Errorf("stop %s %s: the only option is kill", args[0], args[1]))
		}
		sig = syscall.SIGKILL
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	case <-ctx.Done():
		p.cmd.Process.Kill()
		<-p.done
	}
	return fmt.Sprintf("%s: %v\n%s", p.name, exitText(p.err), tail(p.out.String(), 16<<10)), nil
}

// cmdOutput returns what a started program printed so far (its end),
// after a line saying whether it runs.
func cmdOutput(_ context.Context, a *agent, args []string) (string, error) {
	p, err := a.proc(args[0])
	if err != nil {
		return "", err
	}
	state := "running"
	select {
	case <-p.done:
		state = exitText(p.err)
	default:
	}
	return fmt.Sprintf("%s: %s\n%s", p.name, state, tail(p.out.String(), 32<<10)), nil
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// cmdExec runs a program in a namespace to its end and returns its
// output (stdout and stderr); a nonzero exit is an error with the
// output.
func cmdExec(ctx context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	env, argv, err := programArgs(args[1:])
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &out
	if err := n.run(cmd.Start); err != nil {
		return "", fmt.Errorf("starting %s: %w", argv[0], err)
	}
	err = cmd.Wait()
	text := tail(out.String(), 32<<10)
	if err != nil {
		if ctx.Err() != nil {
			return "", kinded("timeout", fmt.Errorf("%s: %v: %s", argv[0], ctx.Err(), text))
		}
		return "", fmt.Errorf("%s: %v: %s", argv[0], err, text)
	}
	return text, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// cmdVeth joins two namespaces with a veth pair (IF1 in NS1, IF2 in
// NS2) and brings both ends up: an end has a carrier only once the
// other is up too, so up on one end alone would wait in vain.
func cmdVeth(ctx context.Context, a *agent, args []string) (string, error) {
	n1, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	n2, err := a.ns(args[2])
	if err != nil {
		return "", err
	}
	la := netlink.NewLinkAttrs()
	la.Name, la.Namespace = args[1], netlink.NsFd(n1.fd)
	v := &netlink.Veth{LinkAttrs: la, PeerName: args[3], PeerNamespace: netlink.NsFd(n2.fd)}
	a.mu.Lock()
	root := a.nss["root"]
	a.mu.Unlock()
	if err := root.nl.LinkAdd(v); err != nil {
		return "", fmt.Errorf("veth %s-%s: %w (is module veth loaded?)", args[1], args[3], err)
	}
	for _, e := range []struct {
		n      *netNS
		ifname string
	}{{n1, args[1]}, {n2, args[3]}} {
		l, err := e.n.link(e.ifname)
		if err != nil {
			return "", err
		}
		if err := e.n.nl.LinkSetUp(l); err != nil {
			return "", fmt.Errorf("setting %s up: %w", e.ifname, err)
		}
	}
	if err := n1.setUp(ctx, args[1]); err != nil {
		return "", err
	}
	if err := n2.setUp(ctx, args[3]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s - %s/%s", args[0], args[1], args[2], args[3]), nil
}

// cmdWrite writes a file (parents made), e.g. a configuration that
// changes between runs of a started program.
func cmdWrite(_ context.Context, _ *agent, args []string) (string, error) {
	p := args[0]
	if !path.IsAbs(p) || path.Clean(p) != p {
		return "", kinded("usage", fmt.Errorf("path %q: want a clean absolute path", p))
	}
	for _, d := range []string{"/dev", "/proc", "/sys", "/init"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return "", kinded("usage", fmt.Errorf("path %q: %s is not for files", p, d))
		}
	}
	if err := os.MkdirAll(path.Dir(p), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(p, []byte(args[1]), 0o600); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %d bytes", p, len(args[1])), nil
}
