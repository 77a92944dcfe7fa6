// Package qemu runs a QEMU system emulator with the guest's serial console
// on a pipe: boot a kernel and initramfs or a disk image, wait for text,
// type input, and stop on a wall-clock watchdog, because a guest that
// hangs early prints nothing at all.
//
// It is not vmtest's qemu package for the reasons in package kerneltest's
// doc; what it needs is small: a fixed machine and CPU per guest
// architecture (a Pentium II without SSE2 for i386), the serial console
// on a pipe, text and regexp expectations, and the watchdog.
package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Arch describes the emulator for one guest architecture.
type Arch struct {
	Binary  string // qemu-system-i386
	Package string // the Debian package that ships Binary
	Machine string // default -M
	CPU     string // default -cpu
}

// Arches are the guest architectures the firmware targets. The i386 CPU
// is a Pentium II: no SSE2, like the Geode LX, so a Go binary built
// without GO386=softfloat dies here as it would on the board.
var Arches = map[string]Arch{
	"i386": {Binary: "qemu-system-i386", Package: "qemu-system-x86", Machine: "pc", CPU: "pentium2"},
	"arm":  {Binary: "qemu-system-arm", Package: "qemu-system-arm", Machine: "virt"},
}

// DefaultTimeout is the watchdog when Config.Timeout is zero.
const DefaultTimeout = 5 * time.Minute

// Config says what to boot.
type Config struct {
	Arch     string // key of Arches; "" means "i386"
	Binary   string // emulator override; "" means the Arch's
	Machine  string // "" means the Arch's
	CPU      string // "" means the Arch's
	MemoryMB int    // 0 means 256

	Kernel string // -kernel
	Initrd string // -initrd
	DTB    string // -dtb, the device tree an ARM machine boots the kernel with
	Append string // kernel command line
	Disk   string // raw disk image, attached as the first IDE disk
	// DiskInterface is how Disk is attached: "" means IDE; "sd" is the
	// SD card slot of the raspi machines.
	DiskInterface string

	// NICs are the network cards, in PCI order (eth0, eth1, ... in a
	// Linux guest); their netdevs are named net0, net1, ... None means
	// no network at all.
	NICs []NIC

	Args []string // extra emulator arguments

	// Timeout is the wall-clock watchdog: past it the emulator is killed
	// and Wait reports a *TimeoutError. 0 means DefaultTimeout; negative
	// means no watchdog (a person at the console ends the run).
	Timeout time.Duration

	// Echo, when set, gets a live copy of the console (e.g. os.Stderr
	// while debugging).
	Echo io.Writer

	// Reboot lets a guest's reset restart it (a power cycle, as the
	// board's own reset does); false stops the emulator at the first
	// reset (-no-reboot).
	Reboot bool

	// Watchdog adds QEMU's i6300esb watchdog (x86), whose expiry resets
	// the guest as its own reset does (with Reboot false, that ends the
	// emulator): what an upgrade's trial boot pets (boot.Watchdog).
	Watchdog bool
}

// ErrNotInstalled marks a missing emulator binary.
var ErrNotInstalled = errors.New("QEMU is not installed")

// TimeoutError reports a guest stopped by the watchdog.
type TimeoutError struct {
	After time.Duration
	Tail  string // last console lines
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("qemu: guest still running after %v, killed by the watchdog (a hang, or too slow); last console lines:\n%s", e.After, e.Tail)
}

func (c Config) arch() (Arch, error) {
	name := c.Arch
	if name == "" {
		name = "i386"
	}
	a, ok := Arches[name]
	if !ok {
		return Arch{}, fmt.Errorf("qemu: unknown guest architecture %q (have i386, arm)", name)
	}
	return a, nil
}

// Binary returns the path of the emulator for c, or an error wrapping
// ErrNotInstalled that names the Debian package to install.
func (c Config) BinaryPath() (string, error) {
	a, err := c.arch()
	if err != nil {
		return "", err
	}
	bin := c.Binary
	if bin == "" {
		bin = a.Binary
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found (apt-get install %s)", ErrNotInstalled, bin, a.Package)
	}
	return p, nil
}

// CommandLine returns the emulator arguments for c (without the binary).
func (c Config) CommandLine() ([]string, error) {
	a, err := c.arch()
	if err != nil {
		return nil, err
	}
	pick := func(v, def string) string {
		if v != "" {
			return v
		}
		return def
	}
	mem := c.MemoryMB
	if mem == 0 {
		mem = 256
	}
	// TCG, never KVM: under KVM the host CPU would run SSE2 instructions
	// that -cpu pentium2 only hides from CPUID, and softfloat mistakes
	// would go unnoticed.
	args := []string{"-M", pick(c.Machine, a.Machine), "-accel", "tcg", "-m", strconv.Itoa(mem),
		"-nographic", "-monitor", "none", "-serial", "stdio", "-no-reboot", "-nodefaults", "-no-user-config"}
	if c.Reboot {
		args = slices.DeleteFunc(args, func(a string) bool { return a == "-no-reboot" })
	}
	if cpu := pick(c.CPU, a.CPU); cpu != "" {
		args = append(args, "-cpu", cpu)
	}
	if c.Kernel == "" && c.Disk == "" {
		return nil, errors.New("qemu: nothing to boot: set Kernel or Disk")
	}
	if c.Kernel != "" {
		args = append(args, "-kernel", c.Kernel)
		if c.Initrd != "" {
			args = append(args, "-initrd", c.Initrd)
		}
		if c.DTB != "" {
			args = append(args, "-dtb", c.DTB)
		}
		if c.Append != "" {
			args = append(args, "-append", c.Append)
		}
	} else if c.Initrd != "" || c.Append != "" || c.DTB != "" {
		return nil, errors.New("qemu: Initrd, DTB and Append need a Kernel")
	}
	if c.Disk != "" {
		if strings.Contains(c.Disk, ",") {
			return nil, fmt.Errorf("qemu: disk image path %q contains a comma", c.Disk)
		}
		iface := c.DiskInterface
		switch iface {
		case "":
			iface = "ide"
		case "ide", "sd":
		default:
			return nil, fmt.Errorf("qemu: disk interface %q: want ide or sd", iface)
		}
		args = append(args, "-drive", "file="+c.Disk+",format=raw,if="+iface)
	}
	if c.Watchdog && a.Binary != Arches["i386"].Binary {
		return nil, errors.New("qemu: the i6300esb watchdog is a PC's: Watchdog needs the i386 guest")
	}
	if slices.ContainsFunc(c.NICs, func(n NIC) bool { return n.USBPort != "" }) {
		args = append(args, USBHub...) // before the cards in its ports
	}
	for i, n := range c.NICs {
		a, err := n.Args("net" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		args = append(args, a...)
	}
	if c.Watchdog {
		// After the NICs: their PCI slots, and so eth0, eth1..., stay.
		args = append(args, "-device", "i6300esb", "-action", "watchdog=reset")
	}
	return append(args, c.Args...), nil
}

// VM is a running emulator.
type VM struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	timeout time.Duration
	start   time.Time

	mu      sync.Mutex
	console bytes.Buffer
	cursor  int           // end of the last WaitFor match
	changed chan struct{} // closed and replaced on new output and on exit
	stderr  bytes.Buffer

	done     chan struct{} // closed when the emulator has exited
	exited   bool          // set with waitErr, under mu, before done closes
	waitErr  error
	timedOut bool
}

// Start boots c. The emulator is killed when ctx ends or the watchdog
// fires; call Wait (or Kill) to release it.
func Start(ctx context.Context, c Config) (*VM, error) {
	bin, err := c.BinaryPath()
	if err != nil {
		return nil, err
	}
	args, err := c.CommandLine()
	if err != nil {
		return nil, err
	}
	for _, f := range []string{c.Kernel, c.Initrd, c.DTB, c.Disk} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("qemu: %w", err)
		}
	}
	vm := &VM{timeout: c.Timeout, changed: make(chan struct{}), done: make(chan struct{})}
	if vm.timeout == 0 {
		vm.timeout = DefaultTimeout
	}
	vm.cmd = exec.Command(bin, args...)
	// If the test binary dies (e.g. go test's own timeout), take the
	// emulator with it rather than leave a guest running.
	vm.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	vm.cmd.Stderr = &lockedWriter{vm: vm, w: &vm.stderr}
	out, err := vm.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if vm.stdin, err = vm.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	vm.start = time.Now()
	if err := vm.cmd.Start(); err != nil {
		return nil, fmt.Errorf("qemu: starting %s: %w", bin, err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 4096)
		for {
			n, err := out.Read(buf)
			if n > 0 {
				vm.mu.Lock()
				vm.console.Write(buf[:n])
				vm.notifyLocked()
				vm.mu.Unlock()
				if c.Echo != nil {
					c.Echo.Write(buf[:n])
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		var fire <-chan time.Time // nil: never
		if vm.timeout > 0 {
			watchdog := time.NewTimer(vm.timeout)
			defer watchdog.Stop()
			fire = watchdog.C
		}
		exited := make(chan error, 1)
		go func() {
			<-readDone // all output read before Wait closes the pipe
			exited <- vm.cmd.Wait()
		}()
		var err error
		select {
		case err = <-exited:
		case <-fire:
			vm.mu.Lock()
			vm.timedOut = true
			vm.mu.Unlock()
			vm.cmd.Process.Kill()
			err = <-exited
		case <-ctx.Done():
			vm.cmd.Process.Kill()
			<-exited
			err = ctx.Err()
		}
		vm.mu.Lock()
		vm.waitErr = err
		vm.exited = true
		vm.notifyLocked()
		vm.mu.Unlock()
		close(vm.done)
	}()
	return vm, nil
}

type lockedWriter struct {
	vm *VM
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.vm.mu.Lock()
	defer l.vm.mu.Unlock()
	return l.w.Write(p)
}

func (vm *VM) notifyLocked() {
	close(vm.changed)
	vm.changed = make(chan struct{})
}

// Console returns everything the guest printed so far.
func (vm *VM) Console() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.console.String()
}

// Tail returns the last n lines of the console, for failure messages.
func (vm *VM) Tail(n int) string { return TailLines(vm.Console(), n) }

// TailLines returns the last n lines of s without carriage returns.
func TailLines(s string, n int) string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r", ""), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Elapsed is the time since the emulator started.
func (vm *VM) Elapsed() time.Duration { return time.Since(vm.start) }

// WaitFor waits until the console shows text after the previous match,
// and moves past it (expect-style, so a command's echo and its output can
// be told apart). It fails when ctx ends, the emulator exits or the
// watchdog fires first.
func (vm *VM) WaitFor(ctx context.Context, text string) error {
	_, err := vm.wait(ctx, strconv.Quote(text), func(s string) (int, []string) {
		i := strings.Index(s, text)
		if i < 0 {
			return -1, nil
		}
		return i + len(text), []string{text}
	})
	return err
}

// WaitForRegexp is WaitFor with a regular expression; it returns the
// match and its submatches.
func (vm *VM) WaitForRegexp(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	return vm.wait(ctx, "/"+re.String()+"/", func(s string) (int, []string) {
		loc := re.FindStringSubmatchIndex(s)
		if loc == nil {
			return -1, nil
		}
		m := make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = s[loc[2*i]:loc[2*i+1]]
			}
		}
		return loc[1], m
	})
}

func (vm *VM) wait(ctx context.Context, what string, match func(string) (int, []string)) ([]string, error) {
	for {
		vm.mu.Lock()
		s := vm.console.String()[vm.cursor:]
		end, m := match(s)
		if end >= 0 {
			vm.cursor += end
			vm.mu.Unlock()
			return m, nil
		}
		changed := vm.changed
		exited, timedOut, werr := vm.exitedLocked()
		vm.mu.Unlock()
		if exited {
			if timedOut {
				return nil, &TimeoutError{After: vm.timeout, Tail: vm.Tail(20)}
			}
			return nil, fmt.Errorf("qemu: exited (%v) before the console showed %s; %slast console lines:\n%s", exitText(werr), what, vm.stderrNote(), FailureText(vm.Console(), 20))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("qemu: waiting for %s: %w; last console lines:\n%s", what, ctx.Err(), vm.Tail(20))
		}
	}
}

func (vm *VM) exitedLocked() (exited, timedOut bool, err error) {
	return vm.exited, vm.timedOut, vm.waitErr
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

func (vm *VM) stderrNote() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if s := strings.TrimSpace(vm.stderr.String()); s != "" {
		return "emulator said: " + s + "; "
	}
	return ""
}

// Send types s on the guest's serial console.
func (vm *VM) Send(s string) error {
	if _, err := io.WriteString(vm.stdin, s); err != nil {
		return fmt.Errorf("qemu: writing to the console: %w", err)
	}
	return nil
}

// Wait waits for the emulator to exit. It returns nil when the guest
// powered off (or, with -no-reboot, rebooted or panicked: check the
// console), a *TimeoutError when the watchdog killed it, and otherwise
// the emulator's failure with what it printed on stderr.
func (vm *VM) Wait() error {
	<-vm.done
	vm.mu.Lock()
	timedOut, err := vm.timedOut, vm.waitErr
	vm.mu.Unlock()
	if timedOut {
		return &TimeoutError{After: vm.timeout, Tail: vm.Tail(20)}
	}
	if err != nil {
		return fmt.Errorf("qemu: %v; %slast console lines:\n%s", err, vm.stderrNote(), FailureText(vm.Console(), 20))
	}
	return nil
}

// Exited reports whether the emulator has exited.
func (vm *VM) Exited() bool {
	select {
	case <-vm.done:
		return true
	default:
		return false
	}
}

// Kill stops the emulator now and waits for it.
func (vm *VM) Kill() {
	if !vm.Exited() {
		vm.cmd.Process.Kill()
	}
	<-vm.done
}

// Installed returns nil when the emulator for the guest architecture
// arch ("" means i386) is installed, else an error wrapping
// ErrNotInstalled that names the Debian package to install.
func Installed(arch string) error {
	_, err := Config{Arch: arch}.BinaryPath()
	return err
}

// Frozen runs f with the emulator stopped (SIGSTOP, every thread), then
// lets it go on (SIGCONT). The disk image file then holds exactly what
// killing the emulator at that moment would leave on it: QEMU's writes
// reach the file (and the host's page cache) as the guest issues them,
// a write in progress in the kernel finishes before its thread stops,
// and nothing the guest wrote later is there. So a copy taken inside f
// is a power cut at that moment, while the guest runs on after it:
// several cut moments for one boot.
func (vm *VM) Frozen(f func() error) error {
	if vm.Exited() {
		return errors.New("qemu: the emulator has exited: nothing to freeze")
	}
	p := vm.cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("qemu: stopping the emulator: %w", err)
	}
	defer p.Signal(syscall.SIGCONT)
	if err := waitStopped(p.Pid, 10*time.Second); err != nil {
		return err
	}
	return f()
}

// waitStopped waits until every thread of pid is stopped: SIGSTOP stops
// a thread only as it leaves the kernel.
func waitStopped(pid int, d time.Duration) error {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	for end := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("qemu: %w", err)
		}
		running := ""
		for _, task := range tasks {
			b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
			if err != nil {
				continue // the thread ended
			}
			// The state follows the command name's closing parenthesis.
			if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] != 'T' && b[i+2] != 't' {
				running = task.Name()
			}
		}
		if running == "" {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("qemu: thread %s of process %d did not stop within %v", running, pid, d)
		}
	}
}
