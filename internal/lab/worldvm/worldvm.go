// Package worldvm boots "the world around a router" in QEMU: a second VM
// whose network cards are wired, over unix stream sockets, to the router
// VM's cards, and whose agent (./agent, run as /init) serves DHCP, DNS,
// TCP echo, SNTP and SSH client duties, one command at a time, on the
// serial console. A host test drives it step by step with Do while it
// drives the router VM.
//
// Each of the world's cards can be moved into a network namespace of its
// own (`ns wan eth0`, `ns lan eth1`), so traffic between the router's
// WAN and LAN sides has to pass through the router VM: inside the world
// the two sides share nothing.
//
// The world never reaches the host's network: its only NICs are stream
// sockets to another VM (qemu.NIC cannot express a tap, a bridge or an
// unrestricted user network), and its namespaces have no route anywhere
// else.
//
// Start order. QEMU 7.2's listening side (server=on) creates its socket
// at startup and boots without waiting for a peer; the connecting side
// connects once, when it starts, and never retries. So: Start the world
// first (it returns once its sockets exist), then start the router VM
// with each world card's Peer; both then boot in parallel. A restarted
// router VM connects again to the same socket. Start refuses a
// connecting card whose socket does not exist yet.
package worldvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
)

// AgentPackage is the agent's import path, built for the guest by Start.
const AgentPackage = "github.com/ocfw/ocfw/internal/lab/worldvm/agent"

// Config says how to build and boot a world.
type Config struct {
	// Name is used in messages ("" means "world").
	Name string
	// NICs are the world's cards, eth0, eth1, ... in order. A world's
	// cards normally Listen; give the router VM their Peer. A card's
	// driver module is added from its model.
	NICs []qemu.NIC
	// Modules are more kernel modules to load (dependencies added).
	Modules []string
	// Files are put into the guest (absolute path to content, mode
	// 0600), e.g. an SSH private key for the ssh command. Not under
	// /dev, /proc, /sys or /tmp, which are mounted over.
	Files map[string][]byte
	// Trees are host directories whose contents are put at the guest's
	// root, after Files (kerneltest.WriteTree): e.g. Debian packages
	// unpacked with their libraries and /lib/ld-linux.so.2, whose
	// programs the agent's start and exec commands run.
	Trees []string
	// MemoryMB is the guest's RAM; 0 means 256.
	MemoryMB int
	// KernelPackage is the Debian kernel package ("" means
	// linux-image-686); CacheDir its cache ("" means the default).
	KernelPackage, CacheDir string
	// Dir holds the agent and the initramfs; "" means a temporary
	// directory that Kill removes.
	Dir string
	// Agent is a prebuilt agent binary (GOARCH=386 GO386=softfloat);
	// "" builds AgentPackage, which needs the working directory inside
	// this module.
	Agent string
	// Timeout is QEMU's wall-clock watchdog; 0 means 30 minutes.
	Timeout time.Duration
	// Echo, when set, gets a live copy of the console.
	Echo io.Writer
}

// nicModules are the Debian 686 kernel's drivers for QEMU's i386 NICs.
var nicModules = map[string]string{
	"": "e1000", "e1000": "e1000", "ne2k_pci": "ne2k-pci", "pcnet": "pcnet32",
	"rtl8139": "8139too", "virtio-net-pci": "virtio_net",
}

// World is a running world VM.
type World struct {
	name    string
	vm      *qemu.VM
	args    []string
	nics    []qemu.NIC
	tempDir string // removed by Kill

	// Build is the time spent building the agent and the initramfs.
	Build time.Duration

	readyOnce sync.Once
	readyErr  error
	bootTime  time.Duration
	uptime    string

	mu  sync.Mutex // one command at a time
	seq int
}

// ErrMissing marks a missing QEMU or kernel package (see Missing).
var ErrMissing = errors.New("worldvm: prerequisite missing")

// Missing reports whether err says QEMU or the cached kernel package is
// missing: a test skips then (or fails with OCFW_REQUIRE_KERNEL=1).
func Missing(err error) bool { return errors.Is(err, ErrMissing) || kerneltest.Missing(err) }

// Start builds the agent and the initramfs, starts QEMU and returns once
// the world's listening sockets exist, so the peers' VMs may start; the
// guest is still booting (WaitReady; Do waits by itself). ctx bounds the
// VM's life, not just the start.
func Start(ctx context.Context, cfg Config) (_ *World, err error) {
	name := cfg.Name
	if name == "" {
		name = "world"
	}
	if err := checkFiles(cfg.Files); err != nil {
		return nil, err
	}
	mods := append([]string(nil), cfg.Modules...)
	for i, n := range cfg.NICs {
		if n.RestrictedUser {
			return nil, fmt.Errorf("worldvm: %s: NIC %d: the world has no use for QEMU's user network: wire it to a VM", name, i)
		}
		m, ok := nicModules[n.Model]
		if !ok {
			return nil, fmt.Errorf("worldvm: %s: NIC %d: model %q has no known driver (have e1000, ne2k_pci, pcnet, rtl8139, virtio-net-pci)", name, i, n.Model)
		}
		mods = append(mods, m)
		if !n.Listen {
			if _, err := os.Stat(n.Socket); err != nil {
				return nil, fmt.Errorf("worldvm: %s: NIC %d connects to %s, which does not exist: start the listening VM first (QEMU 7.2 connects once, at startup): %w", name, i, n.Socket, err)
			}
		}
	}
	kernel, err := kerneltest.FindKernel(cfg.KernelPackage, "i386", cfg.CacheDir)
	if err != nil {
		if kerneltest.Missing(err) {
			return nil, fmt.Errorf("%w: %v", ErrMissing, err)
		}
		return nil, err
	}
	w := &World{name: name, nics: cfg.NICs}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "worldvm-"); err != nil {
			return nil, err
		}
		w.tempDir = dir
		defer func() {
			if err != nil {
				os.RemoveAll(dir)
			}
		}()
	}
	start := time.Now()
	initrd, err := buildInitramfs(dir, cfg, kernel, mods)
	if err != nil {
		return nil, err
	}
	w.Build = time.Since(start)
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 30 * time.Minute
	}
	qc := qemu.Config{Arch: "i386", MemoryMB: cfg.MemoryMB, Kernel: kernel.Vmlinuz, Initrd: initrd,
		Append: "console=ttyS0 quiet panic=-1", NICs: cfg.NICs, Timeout: timeout, Echo: cfg.Echo}
	if w.args, err = qc.CommandLine(); err != nil {
		return nil, err
	}
	bin, _ := qc.BinaryPath()
	w.args = append([]string{bin}, w.args...)
	for _, n := range cfg.NICs {
		if n.Listen {
			os.Remove(n.Socket) // a stale one would look like ours
		}
	}
	if w.vm, err = qemu.Start(ctx, qc); err != nil {
		return nil, err
	}
	if err := w.waitSockets(ctx); err != nil {
		w.Kill()
		return nil, err
	}
	return w, nil
}

func checkFiles(files map[string][]byte) error {
	for p := range files {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return fmt.Errorf("worldvm: file %q: want a clean absolute path", p)
		}
		for _, d := range []string{"/dev", "/proc", "/sys", "/tmp", "/init", "/kerneltest", "/lib/modules"} {
			if p == d || strings.HasPrefix(p, d+"/") {
				return fmt.Errorf("worldvm: file %q: %s is the harness's or mounted over at boot", p, d)
			}
		}
	}
	return nil
}

// buildInitramfs writes the agent, the modules, the files and the trees into
// dir/initramfs.cpio and returns its path.
func buildInitramfs(dir string, cfg Config, kernel *debian.Kernel, mods []string) (string, error) {
	idx, err := kernel.Modules()
	if err != nil {
		return "", err
	}
	load, _, err := idx.Closure(mods...)
	if err != nil {
		return "", err
	}
	agent := cfg.Agent
	if agent == "" {
		agent = filepath.Join(dir, "agent")
		if err := kerneltest.BuildProgram(AgentPackage, agent, "i386"); err != nil {
			return "", err
		}
	}
	initrd := filepath.Join(dir, "initramfs.cpio")
	f, err := os.Create(initrd)
	if err != nil {
		return "", err
	}
	defer f.Close()
	ir := &kerneltest.Initramfs{Init: agent, Kernel: kernel, Modules: load}
	if err := ir.Write(f); err != nil {
		return "", err
	}
	if len(cfg.Files) > 0 {
		if err := kerneltest.WriteFiles(f, cfg.Files); err != nil {
			return "", err
		}
	}
	for _, t := range cfg.Trees {
		if err := kerneltest.WriteTree(f, t); err != nil {
			return "", err
		}
	}
	return initrd, f.Close()
}

// waitSockets waits until QEMU has created the listening sockets.
func (w *World) waitSockets(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range w.nics {
		if !n.Listen {
			continue
		}
		for {
			if fi, err := os.Stat(n.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
				break
			}
			if w.vm.Exited() {
				return fmt.Errorf("worldvm: %s: QEMU exited before creating %s: %v", w.name, n.Socket, w.vm.Wait())
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("worldvm: %s: QEMU has not created %s after 30 s", w.name, n.Socket)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

var readyRe = regexp.MustCompile(`(` + MarkReady + `|` + MarkFail + `) ([^\r\n]*)\r?\n`)

// WaitReady waits until the agent serves commands and returns the time
// from QEMU's start to then. Later calls return the first result.
func (w *World) WaitReady(ctx context.Context) (time.Duration, error) {
	w.readyOnce.Do(func() {
		m, err := w.vm.WaitForRegexp(ctx, readyRe)
		if err != nil {
			w.readyErr = fmt.Errorf("worldvm: %s: the agent never became ready: %w", w.name, err)
			return
		}
		if m[1] == MarkFail {
			w.readyErr = fmt.Errorf("worldvm: %s: the agent failed to start: %s", w.name, m[2])
			return
		}
		w.bootTime, w.uptime = w.vm.Elapsed(), m[2]
	})
	return w.bootTime, w.readyErr
}

// GuestUptime is the kernel's uptime (seconds) when the agent became
// ready, as the guest reported it.
func (w *World) GuestUptime() string { return w.uptime }

// DefaultDoTimeout bounds Do when its context has no deadline.
const DefaultDoTimeout = 3 * time.Minute

// Do sends one command line (see the agent's documentation for the
// commands) and returns the reply's text; a command the agent reports as
// failed gives a *ReplyError (ErrorKind says which kind). Commands run
// one at a time.
func (w *World) Do(ctx context.Context, command string) (string, error) {
	if strings.ContainsAny(command, "\r\n") {
		return "", fmt.Errorf("worldvm: command %q: one line only", command)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDoTimeout)
		defer cancel()
	}
	if _, err := w.WaitReady(ctx); err != nil {
		return "", err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	seq := w.seq
	if err := w.vm.Send(fmt.Sprintf("%d %s\n", seq, command)); err != nil {
		return "", err
	}
	re := regexp.MustCompile(`(` + MarkOK + `|` + MarkErr + `) ` + strconv.Itoa(seq) + ` ("(?:[^"\\\r\n]|\\.)*")\r?\n`)
	m, err := w.vm.WaitForRegexp(ctx, re)
	if err != nil {
		return "", fmt.Errorf("worldvm: %s: no reply to %q: %w", w.name, command, err)
	}
	text, err := strconv.Unquote(m[2])
	if err != nil {
		return "", fmt.Errorf("worldvm: %s: reply to %q: %v", w.name, command, err)
	}
	if m[1] == MarkErr {
		return "", &ReplyError{Command: command, Text: text}
	}
	return text, nil
}

// Console returns everything the world printed so far.
func (w *World) Console() string { return w.vm.Console() }

// CommandLine is QEMU's command line, binary first.
func (w *World) CommandLine() []string { return w.args }

// NIC returns the world's card i as configured (with Socket and side).
func (w *World) NIC(i int) qemu.NIC { return w.nics[i] }

// Peer returns the card the router VM needs to connect to the world's
// card i: qemu.Config{NICs: []qemu.NIC{w.Peer(0, mac)}}, or as raw
// arguments, w.Peer(0, mac).Args("wan").
func (w *World) Peer(i int, mac string) qemu.NIC { return w.nics[i].Peer(mac) }

// Wait waits for QEMU to exit (after `poweroff`, or the watchdog).
func (w *World) Wait() error { return w.vm.Wait() }

// Kill stops the VM now, waits for it and removes the temporary
// directory.
func (w *World) Kill() {
	w.vm.Kill()
	if w.tempDir != "" {
		os.RemoveAll(w.tempDir)
	}
}
