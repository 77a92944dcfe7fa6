package kerneltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
)

// Options says what to run in the guest.
type Options struct {
	// Package is the package whose tests run in the guest, as given to
	// `go test -c`; "" means the calling test's own package.
	Package string
	// Modules to load before the tests; their modules.dep dependencies
	// are added, modules built into the kernel are skipped.
	Modules []string
	// ModuleFiles are host paths of module files from outside the kernel
	// package (an out-of-tree test module built for this kernel), loaded
	// after Modules, in order; whatever they need must be in Modules.
	ModuleFiles []string
	// Run, Bench and Benchtime become the guest's -test.run, -test.bench
	// and -test.benchtime. The environment variables OCFW_KERNELTEST_RUN,
	// OCFW_KERNELTEST_BENCH and OCFW_KERNELTEST_BENCHTIME override them,
	// so guest benchmarks can be asked for from the command line.
	Run, Bench, Benchtime string
	// Args are more flags for the guest test binary.
	Args []string
	// Env is passed to the guest's tests (names: letters, digits, _).
	Env map[string]string
	// Trees are host directories put at the guest's / after the
	// harness's files (WriteTree): programs the tests run, such as a
	// tree of Debian i386 packages with its own loader and libraries.
	Trees []string

	// KernelPackage is the Debian kernel package; "" means
	// linux-image-686 for i386 and, for armel, the ARM stand-in's
	// (qemu.RaspiStandIn: linux-image-rpi on QEMU's raspi1ap).
	KernelPackage string
	// Arch is the Debian architecture: "" or "i386" (GOARCH=386
	// GO386=softfloat, QEMU's Pentium II), or "armel" (GOARCH=arm GOARM=5,
	// the IXP4xx boards' target, on the ARM stand-in machine).
	Arch     string
	CacheDir string // "" means debian.DefaultCacheDir
	MemoryMB int    // 0 means 256 (i386); the ARM stand-in has its own fixed size
	// Timeout is the QEMU watchdog; 0 means 4 minutes (or less when the
	// host test's deadline is nearer).
	Timeout time.Duration
	// QEMUArgs are more emulator arguments, e.g. a device the tests need
	// ("-device virtio-crypto-pci,...").
	QEMUArgs []string
}

// EnvRequire is labtest.EnvRequire: set to "1", it turns a missing kernel
// package or QEMU into a test failure instead of a skip (CI sets it).
const EnvRequire = labtest.EnvRequire

// Result is what a guest run produced.
type Result struct {
	ExitCode    int           // the guest test binary's exit code
	Output      string        // guest output between the markers, without \r
	Console     string        // the whole console
	Initramfs   int64         // size of the uncompressed initramfs in bytes
	Build       time.Duration // compiling the test binary and the initramfs
	BootToTests time.Duration // QEMU start to the start marker
	Total       time.Duration
}

// goArch maps a Debian architecture to the Go target environment.
var goArch = map[string][]string{
	"i386":  {"GOARCH=386", "GO386=softfloat"},
	"armel": {"GOARCH=arm", "GOARM=5"},
}

var qemuArch = map[string]string{"i386": "i386", "armel": "arm"}

// armStandIn is the machine and kernel armel guests boot on.
var armStandIn = qemu.RaspiStandIn

// defaultPackage is the kernel package for a Debian architecture.
func defaultPackage(arch string) string {
	if arch == armStandIn.DebianArch {
		return armStandIn.KernelPackage
	}
	return "linux-image-686"
}

// Run boots the package's tests in QEMU and fails t when they fail, the
// guest hangs or the marker is missing. It skips (or fails, with
// OCFW_REQUIRE_KERNEL=1) when QEMU or the cached kernel package is
// missing, skips with -short (a boot takes 20 s to 2 minutes), and skips
// inside the guest itself.
func Run(t testing.TB, opts Options) *Result {
	t.Helper()
	if InGuest() {
		t.Skip("inside the kerneltest guest already")
	}
	if testing.Short() {
		t.Skip("boots the kernel in QEMU to run the tests inside; skipped with -short")
	}
	res, err := Boot(t, opts)
	if res != nil {
		t.Logf("kernel-in-the-loop: initramfs %.1f MiB, build %v, QEMU start to tests %v, total %v",
			float64(res.Initramfs)/(1<<20), res.Build.Round(time.Millisecond), res.BootToTests.Round(time.Millisecond), res.Total.Round(time.Millisecond))
		if res.Output != "" {
			t.Logf("guest output:\n%s", res.Output)
		}
	}
	var missing *missingError
	switch {
	case errors.As(err, &missing):
		labtest.SkipOrFail(t, "kernel-in-the-loop tests not booted: %v", err)
	case err != nil:
		t.Fatal(err)
	case res.ExitCode != 0:
		t.Fatalf("guest tests failed (exit code %d)%s", res.ExitCode, failures(res.Output))
	}
	return res
}

// missingError is a missing prerequisite: skip, or fail when required.
type missingError struct{ msg string }

// Missing reports whether err is a missing kernel package or QEMU.
func Missing(err error) bool {
	var m *missingError
	return errors.As(err, &m)
}

func (e *missingError) Error() string { return e.msg }

func failures(out string) string {
	// With -test.v a test's log lines follow its "=== RUN" (or "=== NAME"
	// or "=== CONT") line as they are written; the ones of a failed test
	// carry the reason, so they go with its "--- FAIL" line: CI shows
	// only a part of the output, and the reason must be in that part.
	logs := map[string][]string{}
	cur := ""
	var fails []string
	for _, line := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "=== "):
			if f := strings.Fields(line); len(f) == 3 && f[1] != "PAUSE" {
				cur = f[2]
			}
		case strings.HasPrefix(trimmed, "--- FAIL: "):
			fails = append(fails, trimmed)
			if f := strings.Fields(trimmed); len(f) >= 3 {
				l := logs[f[2]]
				if len(l) > 10 {
					l = append([]string{"..."}, l[len(l)-10:]...)
				}
				for _, x := range l {
					fails = append(fails, "    "+x)
				}
			}
		case strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "kerneltest:"):
			fails = append(fails, trimmed)
		case cur != "" && strings.HasPrefix(line, "    ") && !strings.HasPrefix(trimmed, "--- "):
			logs[cur] = append(logs[cur], trimmed)
		}
	}
	if len(fails) == 0 {
		return ""
	}
	return ":\n" + strings.Join(fails, "\n")
}

// Boot is Run without the verdict: it returns the guest's result, or an
// error for a missing prerequisite (see Missing), a failed build, a
// hang or a missing marker. Tests of the harness itself use it.
func Boot(t testing.TB, opts Options) (*Result, error) {
	if opts.Arch == "" {
		opts.Arch = "i386"
	}
	if opts.KernelPackage == "" {
		opts.KernelPackage = defaultPackage(opts.Arch)
	}
	env, ok := goArch[opts.Arch]
	if !ok {
		return nil, fmt.Errorf("kerneltest: no Go target for architecture %q", opts.Arch)
	}
	qcfg := qemu.Config{Arch: qemuArch[opts.Arch], MemoryMB: opts.MemoryMB}
	if _, err := qcfg.BinaryPath(); err != nil {
		return nil, &missingError{err.Error()}
	}
	deb, err := debian.CachedKernel(opts.KernelPackage, opts.Arch, opts.CacheDir)
	if err != nil {
		cache := opts.CacheDir
		if cache == "" {
			cache, _ = debian.DefaultCacheDir()
		}
		return nil, &missingError{fmt.Sprintf("kernel package %s (%s) is not in the cache %s: fetch it first with "+
			"`ocfw kernel fetch` (apt-get download, needs the network; OCFW_CACHE chooses the cache): %v",
			opts.KernelPackage, opts.Arch, cache, err)}
	}

	start := time.Now()
	kernel, err := debian.ExtractKernelCached(deb, opts.CacheDir)
	if err != nil {
		return nil, err
	}
	idx, err := kernel.Modules()
	if err != nil {
		return nil, err
	}
	mods, builtin, err := idx.Closure(opts.Modules...)
	if err != nil {
		return nil, err
	}
	if len(builtin) > 0 {
		t.Logf("built into %s, not loaded: %s", kernel.Version, strings.Join(builtin, " "))
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "guest.test")
	if err := buildTest(opts.Package, bin, env); err != nil {
		return nil, err
	}
	initrd := filepath.Join(dir, "initramfs.cpio")
	ir := &Initramfs{Init: bin, Kernel: kernel, Modules: mods, ModuleFiles: opts.ModuleFiles}
	if err := writeInitrd(initrd, ir, opts.Trees); err != nil {
		return nil, err
	}

	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 4 * time.Minute
	}
	if dl, ok := deadline(t); ok {
		if left := time.Until(dl) - 10*time.Second; left < timeout {
			timeout = left
		}
	}
	if timeout < 30*time.Second {
		return nil, fmt.Errorf("kerneltest: only %v left before the test deadline, too little to boot", timeout)
	}
	cmdline, err := commandLine(opts, timeout, testing.Short())
	if err != nil {
		return nil, err
	}
	qcfg.Kernel, qcfg.Initrd, qcfg.Append = kernel.Vmlinuz, initrd, cmdline
	if opts.Arch == armStandIn.DebianArch {
		// QEMU has no IXP4xx machine: the ARM stand-in's, with the
		// device tree from the kernel package.
		dtb, err := kernel.DTB(armStandIn.DTB)
		if err != nil {
			return nil, fmt.Errorf("kerneltest: %s on %s: %w", opts.KernelPackage, armStandIn.Machine, err)
		}
		if opts.MemoryMB != 0 && opts.MemoryMB != armStandIn.MemoryMB {
			return nil, fmt.Errorf("kerneltest: MemoryMB %d: QEMU's %s has %d MiB, no other size", opts.MemoryMB, armStandIn.Machine, armStandIn.MemoryMB)
		}
		qcfg = armStandIn.Config(kernel.Vmlinuz, dtb, initrd, cmdline, "")
	}
	qcfg.Timeout = timeout
	qcfg.Args = append(qcfg.Args, opts.QEMUArgs...)
	t.Logf("kerneltest: %s", qcfg)
	res := &Result{Build: time.Since(start)}
	if fi, err := os.Stat(initrd); err == nil {
		res.Initramfs = fi.Size()
	}
	boot := time.Now()
	ctx := context.Background()
	vm, err := qemu.Start(ctx, qcfg)
	if err != nil {
		return nil, err
	}
	defer vm.Kill()
	finish := func() {
		res.Console = vm.Console()
		res.Output = guestOutput(res.Console)
		res.Total = time.Since(start)
	}
	if err := vm.WaitFor(ctx, StartMarker); err != nil {
		finish()
		return res, fmt.Errorf("kerneltest: the guest never started the tests: %w", err)
	}
	res.BootToTests = time.Since(boot)
	m, err := vm.WaitForRegexp(ctx, exitRe)
	if err != nil {
		finish()
		return res, fmt.Errorf("kerneltest: no %s marker from the guest: %w", ExitMarker, err)
	}
	res.ExitCode, _ = strconv.Atoi(m[1])
	// The guest powers off right after the marker; give it a moment.
	done := make(chan struct{})
	go func() { vm.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Logf("kerneltest: the guest did not power off after the marker; killed")
	}
	finish()
	return res, nil
}

// writeInitrd writes the guest's initramfs to name: the harness's
// archive, then one archive per tree (the kernel unpacks concatenated
// archives in order).
func writeInitrd(name string, ir *Initramfs, trees []string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := ir.Write(f); err != nil {
		f.Close()
		return err
	}
	for _, tree := range trees {
		if err := WriteTree(f, tree); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

var exitRe = regexp.MustCompile(ExitMarker + ` (-?\d+)`)

func deadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

// guestOutput is the console between the start and exit markers.
func guestOutput(console string) string {
	s := strings.ReplaceAll(console, "\r", "")
	if i := strings.Index(s, StartMarker); i >= 0 {
		s = s[i:]
		if j := strings.IndexByte(s, '\n'); j >= 0 {
			s = s[j+1:]
		}
	} else {
		return qemu.TailLines(s, 60) // the boot went wrong: show how
	}
	if i := strings.Index(s, ExitMarker); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, "\n")
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// commandLine builds the kernel command line. Arguments after "--" become
// the init's argv; NAME=value words before it its environment.
func commandLine(opts Options, timeout time.Duration, short bool) (string, error) {
	words := []string{"console=ttyS0", "quiet", "panic=-1"}
	maxLine := 2000 // x86 COMMAND_LINE_SIZE is 2048
	if opts.Arch == armStandIn.DebianArch {
		words = append(strings.Fields(armStandIn.Cmdline()), "quiet", "panic=-1")
		maxLine = 1000 // ARM's is 1024
	}
	names := make([]string, 0, len(opts.Env))
	for k := range opts.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !envName.MatchString(k) {
			return "", fmt.Errorf("kerneltest: environment name %q is not a plain NAME", k)
		}
		w, err := quoteWord(k + "=" + opts.Env[k])
		if err != nil {
			return "", err
		}
		words = append(words, w)
	}
	words = append(words, "--", "-test.v=true",
		// The guest's own timeout leaves room to report before the watchdog.
		"-test.timeout="+(timeout-20*time.Second).Round(time.Second).String())
	pick := func(opt, env string) string {
		if v, ok := os.LookupEnv(env); ok {
			return v
		}
		return opt
	}
	for _, f := range []struct{ flag, val string }{
		{"-test.run", pick(opts.Run, "OCFW_KERNELTEST_RUN")},
		{"-test.bench", pick(opts.Bench, "OCFW_KERNELTEST_BENCH")},
		{"-test.benchtime", pick(opts.Benchtime, "OCFW_KERNELTEST_BENCHTIME")},
	} {
		if f.val != "" {
			w, err := quoteWord(f.flag + "=" + f.val)
			if err != nil {
				return "", err
			}
			words = append(words, w)
		}
	}
	if short {
		words = append(words, "-test.short")
	}
	for _, a := range opts.Args {
		w, err := quoteWord(a)
		if err != nil {
			return "", err
		}
		words = append(words, w)
	}
	line := strings.Join(words, " ")
	if len(line) > maxLine {
		return "", fmt.Errorf("kerneltest: kernel command line too long (%d bytes)", len(line))
	}
	return line, nil
}

// quoteWord quotes the value of a NAME=value word containing spaces the
// way the kernel's parser understands (NAME="a b").
func quoteWord(w string) (string, error) {
	if strings.ContainsAny(w, "\"\n\x00") {
		return "", fmt.Errorf("kerneltest: %q cannot go on a kernel command line", w)
	}
	if !strings.ContainsAny(w, " \t") {
		return w, nil
	}
	k, v, ok := strings.Cut(w, "=")
	if !ok {
		return "", fmt.Errorf("kerneltest: %q: only NAME=value words may contain spaces", w)
	}
	return k + `="` + v + `"`, nil
}

// buildTest cross-compiles pkg's test binary to out.
func buildTest(pkg, out string, targetEnv []string) error {
	// go test puts its own GOROOT/bin first on the tests' PATH, so this
	// is the go command running the host tests.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("kerneltest: no go command to build the guest tests: %w", err)
	}
	if pkg == "" {
		pkg = "."
	}
	cmd := exec.Command(goBin, "test", "-c", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	cmd.Env = append(cmd.Env, targetEnv...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kerneltest: building %s's tests for the guest (%s): %w\n%s", pkg, strings.Join(targetEnv, " "), err, stderr.String())
	}
	if _, err := os.Stat(out); err != nil {
		return fmt.Errorf("kerneltest: %s has no test files to run in the guest", pkg)
	}
	return nil
}
