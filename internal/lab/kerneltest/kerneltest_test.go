package kerneltest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/u-root/u-root/pkg/cpio"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// guestModules are what the guest tests below need: AF_ALG with DES from
// a module with its own dependency (libdes), and a built-in (hmac).
var guestModules = []string{"af_alg", "algif_skcipher", "algif_hash", "des_generic", "hmac"}

// TestKernelInTheLoop boots this package's tests in QEMU; the TestGuest*
// tests then run inside.
func TestKernelInTheLoop(t *testing.T) {
	res := Run(t, Options{Modules: guestModules, Run: "TestGuest"})
	for _, want := range []string{"--- PASS: TestGuestModulesLoaded", "--- PASS: TestGuestAFALG", "--- PASS: TestGuestIsPID1Child"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("guest output lacks %q", want)
		}
	}
}

// A test that panics in the guest still ends with the marker and a
// non-zero exit code, and the panic is in the output.
func TestKernelInTheLoopReportsPanic(t *testing.T) {
	if testing.Short() {
		t.Skip("second boot: skipped with -short")
	}
	if InGuest() {
		t.Skip("inside the guest")
	}
	res, err := Boot(t, Options{Run: "TestGuestPanics", Env: map[string]string{"OCFW_KERNELTEST_PANIC": "1"}})
	if Missing(err) {
		labtest.SkipOrFail(t, "panicking guest not booted: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Output, "panic: deliberate guest panic") {
		t.Errorf("exit code %d, output:\n%s", res.ExitCode, res.Output)
	}
}

func guestOnly(t *testing.T) {
	if !InGuest() {
		t.Skip("runs inside the kerneltest guest (TestKernelInTheLoop)")
	}
}

func TestGuestModulesLoaded(t *testing.T) {
	guestOnly(t)
	b, err := os.ReadFile("/proc/modules")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"af_alg", "algif_skcipher", "algif_hash", "des_generic", "libdes"} {
		if !bytes.Contains(b, []byte(m+" ")) {
			t.Errorf("%s not loaded; /proc/modules:\n%s", m, b)
		}
	}
	if _, err := os.Stat("/proc/crypto"); err != nil {
		t.Error(err)
	}
}

func TestGuestAFALG(t *testing.T) {
	guestOnly(t)
	for _, a := range []unix.SockaddrALG{
		{Type: "skcipher", Name: "cbc(des)"}, // des_generic + libdes
		{Type: "skcipher", Name: "cbc(aes)"}, // built in
		{Type: "hash", Name: "hmac(sha256)"},
	} {
		fd, err := unix.Socket(unix.AF_ALG, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("AF_ALG socket: %v", err)
		}
		if err := unix.Bind(fd, &a); err != nil {
			t.Errorf("bind %s %s: %v", a.Type, a.Name, err)
		}
		unix.Close(fd)
	}
}

func TestGuestIsPID1Child(t *testing.T) {
	guestOnly(t)
	if os.Getppid() != 1 {
		t.Errorf("parent pid %d, want 1 (tests run in a child of init)", os.Getppid())
	}
	if d := os.TempDir(); d != "/tmp" {
		t.Errorf("TempDir = %s", d)
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "x"), []byte("x"), 0o644); err != nil {
		t.Error(err)
	}
}

func TestGuestPanics(t *testing.T) {
	guestOnly(t)
	if os.Getenv("OCFW_KERNELTEST_PANIC") == "1" {
		panic("deliberate guest panic")
	}
}

func TestCommandLine(t *testing.T) {
	t.Setenv("OCFW_KERNELTEST_BENCH", "")
	os.Unsetenv("OCFW_KERNELTEST_BENCH")
	tests := []struct {
		name  string
		opts  Options
		short bool
		want  string
		err   string
	}{
		{
			name: "plain",
			opts: Options{Arch: "i386"},
			want: "console=ttyS0 quiet panic=-1 -- -test.v=true -test.timeout=1m40s",
		},
		{
			name:  "filters, env, short",
			opts:  Options{Arch: "i386", Run: "TestA|TestB", Bench: ".", Env: map[string]string{"B": "two words", "A": "1"}, Args: []string{"-test.count=1"}},
			short: true,
			want:  `console=ttyS0 quiet panic=-1 A=1 B="two words" -- -test.v=true -test.timeout=1m40s -test.run=TestA|TestB -test.bench=. -test.short -test.count=1`,
		},
		{name: "quote in value", opts: Options{Arch: "i386", Run: `a"b`}, err: "cannot go on a kernel command line"},
		{name: "bad env name", opts: Options{Arch: "i386", Env: map[string]string{"a.b": "1"}}, err: "not a plain NAME"},
		{name: "space in a flag", opts: Options{Arch: "i386", Args: []string{"-x y"}}, err: "only NAME=value"},
		{name: "too long", opts: Options{Arch: "i386", Run: strings.Repeat("x", 2100)}, err: "too long"},
		{
			name: "armel, on the ARM stand-in",
			opts: Options{Arch: "armel", Run: "TestKernel"},
			want: "console=ttyAMA0 initcall_blacklist=bcm2835_power_driver_init quiet panic=-1 -- -test.v=true -test.timeout=1m40s -test.run=TestKernel",
		},
		// ARM's COMMAND_LINE_SIZE is 1024: what fits x86 may not.
		{name: "too long for ARM", opts: Options{Arch: "armel", Run: strings.Repeat("x", 1100)}, err: "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := commandLine(tt.opts, 2*time.Minute, tt.short)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got  %s (%v)\nwant %s", got, err, tt.want)
			}
		})
	}
	t.Setenv("OCFW_KERNELTEST_BENCH", "BenchmarkX")
	got, _ := commandLine(Options{Arch: "i386", Bench: "."}, 2*time.Minute, false)
	if !strings.HasSuffix(got, " -test.bench=BenchmarkX") {
		t.Errorf("environment override: %s", got)
	}
}

func TestParseGuestOutput(t *testing.T) {
	console := "SeaBIOS\r\nboot noise\r\n" + StartMarker + " 3.14\r\n=== RUN   TestX\r\n--- FAIL: TestX (0.00s)\r\n\r\n" + ExitMarker + " 1\r\n[ 9.1] reboot: Power down\r\n"
	out := guestOutput(console)
	if out != "=== RUN   TestX\n--- FAIL: TestX (0.00s)" {
		t.Errorf("guestOutput = %q", out)
	}
	if f := failures(out); f != ":\n--- FAIL: TestX (0.00s)" {
		t.Errorf("failures = %q", f)
	}
	// A failed test's own lines go with its FAIL line, a passed one's not.
	out = "=== RUN   TestA\n    a_test.go:1: fine\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n=== RUN   TestB/sub\n" +
		"    b_test.go:9: took in 9 packets\n        want 10\n=== NAME  TestB\n    b_test.go:12: after\n--- FAIL: TestB (5.00s)\n    --- FAIL: TestB/sub (5.00s)"
	want := ":\n--- FAIL: TestB (5.00s)\n    b_test.go:12: after\n--- FAIL: TestB/sub (5.00s)\n    b_test.go:9: took in 9 packets\n    want 10"
	if f := failures(out); f != want {
		t.Errorf("failures =\n%s\nwant\n%s", f, want)
	}
	// Without a start marker the tail of the boot is what matters.
	if out := guestOutput("Kernel panic - not syncing: VFS\r\n"); !strings.Contains(out, "Kernel panic") {
		t.Errorf("no marker: %q", out)
	}
}

// fakeKernel lays out a modules tree with a modules.dep.
func fakeKernel(t *testing.T) *debian.Kernel {
	dir := t.TempDir()
	k := &debian.Kernel{Version: "9.9-test", ModulesDir: filepath.Join(dir, "lib/modules/9.9-test")}
	files := map[string]string{
		"modules.dep":                 "kernel/crypto/af_alg.ko:\nkernel/crypto/algif_hash.ko: kernel/crypto/af_alg.ko\nkernel/other.ko:\n",
		"kernel/crypto/af_alg.ko":     "AF",
		"kernel/crypto/algif_hash.ko": "HASH",
		"kernel/other.ko":             "OTHER",
		"modules.builtin":             "kernel/crypto/hmac.ko\n",
	}
	for name, body := range files {
		p := filepath.Join(k.ModulesDir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

func TestInitramfs(t *testing.T) {
	k := fakeKernel(t)
	idx, err := k.Modules()
	if err != nil {
		t.Fatal(err)
	}
	mods, _, err := idx.Closure("algif_hash", "hmac")
	if err != nil {
		t.Fatal(err)
	}
	init := filepath.Join(t.TempDir(), "init")
	os.WriteFile(init, []byte("\x7fELF test binary"), 0o600)
	build := func() []byte {
		var buf bytes.Buffer
		if err := (&Initramfs{Init: init, Kernel: k, Modules: mods}).Write(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	first := build()
	// Reproducible: a rebuild after touching the inputs is byte-identical.
	later := time.Now().Add(time.Hour)
	os.Chtimes(init, later, later)
	if !bytes.Equal(first, build()) {
		t.Error("two builds from the same inputs differ")
	}

	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(first)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]cpio.Record{}
	for _, r := range recs {
		got[r.Name] = r
		if r.MTime != 0 || r.UID != 0 {
			t.Errorf("%s: mtime %d uid %d, want 0", r.Name, r.MTime, r.UID)
		}
	}
	content := func(name string) string {
		r, ok := got[name]
		if !ok {
			t.Errorf("%s missing from the initramfs", name)
			return ""
		}
		b, _ := io.ReadAll(io.NewSectionReader(r.ReaderAt, 0, int64(r.FileSize)))
		return string(b)
	}
	if r := got["init"]; r.Mode != cpio.S_IFREG|0o755 {
		t.Errorf("init mode %o", r.Mode)
	}
	if r := got["dev/console"]; r.Mode != cpio.S_IFCHR|0o600 || r.Rmajor != 5 || r.Rminor != 1 {
		t.Errorf("dev/console = %+v", r.Info)
	}
	for _, d := range []string{"proc", "sys", "tmp", "lib/modules/9.9-test/kernel/crypto"} {
		if r, ok := got[d]; !ok || r.Mode&cpio.S_IFMT != cpio.S_IFDIR {
			t.Errorf("directory %s missing", d)
		}
	}
	if s := content("kerneltest/modules"); s != "/lib/modules/9.9-test/kernel/crypto/af_alg.ko\n/lib/modules/9.9-test/kernel/crypto/algif_hash.ko\n" {
		t.Errorf("load list = %q", s)
	}
	if s := content("lib/modules/9.9-test/kernel/crypto/algif_hash.ko"); s != "HASH" {
		t.Errorf("module content = %q", s)
	}
	if s := content("lib/modules/9.9-test/modules.dep"); s != "kernel/crypto/af_alg.ko:\nkernel/crypto/algif_hash.ko: kernel/crypto/af_alg.ko\n" {
		t.Errorf("modules.dep = %q", s)
	}
	if _, ok := got["lib/modules/9.9-test/kernel/other.ko"]; ok {
		t.Error("a module outside the closure was packed")
	}
}

// Module files from outside the kernel package go under
// /kerneltest/extra and load after the kernel's own, in the order given;
// two with one name are refused rather than one hiding the other.
func TestInitramfsModuleFiles(t *testing.T) {
	k := fakeKernel(t)
	idx, err := k.Modules()
	if err != nil {
		t.Fatal(err)
	}
	mods, _, err := idx.Closure("af_alg")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	init := filepath.Join(dir, "init")
	os.WriteFile(init, []byte("\x7fELF test binary"), 0o600)
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.MkdirAll(filepath.Join(dir, "b"), 0o755)
	extra := []string{filepath.Join(dir, "a", "zz_test.ko"), filepath.Join(dir, "b", "aa_test.ko")}
	os.WriteFile(extra[0], []byte("ZZ"), 0o600)
	os.WriteFile(extra[1], []byte("AA"), 0o600)
	var buf bytes.Buffer
	if err := (&Initramfs{Init: init, Kernel: k, Modules: mods, ModuleFiles: extra}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(buf.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range recs {
		if r.Mode&cpio.S_IFMT == cpio.S_IFREG {
			b, _ := io.ReadAll(io.NewSectionReader(r.ReaderAt, 0, int64(r.FileSize)))
			got[r.Name] = string(b)
		}
	}
	if s := got["kerneltest/modules"]; s != "/lib/modules/9.9-test/kernel/crypto/af_alg.ko\n/kerneltest/extra/zz_test.ko\n/kerneltest/extra/aa_test.ko\n" {
		t.Errorf("load list = %q", s)
	}
	if got["kerneltest/extra/zz_test.ko"] != "ZZ" || got["kerneltest/extra/aa_test.ko"] != "AA" {
		t.Errorf("module files: %q %q", got["kerneltest/extra/zz_test.ko"], got["kerneltest/extra/aa_test.ko"])
	}
	os.WriteFile(filepath.Join(dir, "b", "zz_test.ko"), []byte("ZZ2"), 0o600)
	err = (&Initramfs{Init: init, ModuleFiles: []string{extra[0], filepath.Join(dir, "b", "zz_test.ko")}}).Write(io.Discard)
	if err == nil || !strings.Contains(err.Error(), "two module files named zz_test.ko") {
		t.Errorf("same name twice: %v", err)
	}
}

func TestLoadModulesReportsMissingFile(t *testing.T) {
	list := filepath.Join(t.TempDir(), "modules")
	os.WriteFile(list, []byte("\n/lib/modules/none/kernel/crypto/af_alg.ko\n"), 0o644)
	err := loadModules(list)
	if err == nil || !strings.Contains(err.Error(), "/lib/modules/none/kernel/crypto/af_alg.ko") {
		t.Errorf("err = %v, want it to name the module", err)
	}
	// No list at all: nothing to load, not an error.
	if err := loadModules(filepath.Join(t.TempDir(), "absent")); err != nil {
		t.Errorf("absent list: %v", err)
	}
}
