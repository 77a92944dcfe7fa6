package rootfs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocfw/ocfw/kernel"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"
)

// testPlan is the ALIX plan cut to two ciphers, so a boot under QEMU's
// emulated Pentium II stays short.
func testPlan(t *testing.T) *plan.Plan {
	t.Helper()
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Resolve(boards.Request{Board: "alix2d13", Ciphers: []string{"aes-128-cbc", "hmac-sha1"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// debianKernel is the cached linux-image-686, or a skip.
func debianKernel(t *testing.T, p *plan.Plan) *kernel.Kernel {
	t.Helper()
	deb, err := debian.CachedKernel(p.Kernel.Package, p.Kernel.Arch, "")
	if err != nil {
		labtest.SkipOrFail(t, "kernel package %s (%s) not cached: run `ocfw kernel fetch --board %s`: %v", p.Kernel.Package, p.Kernel.Arch, p.Board, err)
	}
	k, err := kernel.Load(context.Background(), p, deb, "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func needGo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		if _, err := os.Stat(filepath.Join(os.Getenv("GOROOT"), "bin", "go")); err != nil {
			labtest.SkipOrFail(t, "no go command: the initramfs build compiles the userland")
		}
	}
}

var shared struct {
	once sync.Once
	res  *Result
	err  error
}

// sharedBuild builds the test plan's initramfs once for the tests that
// boot it.
func sharedBuild(t *testing.T) *Result {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the userland initramfs and boots it in QEMU; skipped with -short")
	}
	needGo(t)
	p := testPlan(t)
	k := debianKernel(t, p)
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "ocfw-rootfs-test-")
		if err != nil {
			shared.err = err
			return
		}
		shared.res, shared.err = Build(context.Background(), p, Options{Kernel: k, WorkDir: dir, SourceDateEpoch: 1700000000,
			Boot: plan.Options{SpeedBudget: "1s", ESPBudget: "0s"}, FirmwareFiles: []string{testMicrocode(dir)}})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.res
}

// testMicrocode writes a stand-in NPE microcode file (the real one is
// Intel's, not redistributable) for --firmware-file.
func testMicrocode(dir string) string {
	p := filepath.Join(dir, "NPE-B")
	os.WriteFile(p, []byte("stand-in NPE-B microcode\n"), 0o644)
	return p
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.res != nil {
		os.RemoveAll(filepath.Dir(shared.res.Initramfs))
	}
	os.Exit(code)
}

// bootVM starts the kernel and initramfs, with disk attached when not "".
func bootVM(t *testing.T, res *Result, disk string) *qemu.VM {
	t.Helper()
	p := testPlan(t)
	cfg := qemu.Config{Arch: "i386", Kernel: res.Kernel.Image, Initrd: res.Initramfs, Disk: disk,
		Append: p.Console.KernelArg + " panic=10 quiet", Timeout: 4 * time.Minute}
	if err := qemu.Installed(cfg.Arch); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	if name := os.Getenv("OCFW_CONSOLE_LOG"); name != "" { // a live copy while debugging
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cfg.Echo = f
	}
	vm, err := qemu.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	return vm
}

func waitFor(t *testing.T, vm *qemu.VM, text string) {
	t.Helper()
	if err := vm.WaitFor(context.Background(), text); err != nil {
		t.Fatalf("waiting for %q: %v\nconsole:\n%s", text, err, vm.Tail(60))
	}
}

// shellWorks types a command whose output differs from its echo.
func shellWorks(t *testing.T, vm *qemu.VM) {
	t.Helper()
	time.Sleep(500 * time.Millisecond) // let the shell start reading
	if err := vm.Send("echo shell-$((6*7))-ok\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, vm, "shell-42-ok")
	if err := vm.Send("ls /etc/ocfw\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, vm, "storage-modules")
}

func poweroff(t *testing.T, vm *qemu.VM) {
	t.Helper()
	if err := vm.Send("poweroff\n"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- vm.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("poweroff did not stop the guest; console:\n%s", vm.Tail(20))
	}
}

// The 386 initramfs with Debian's kernel boots on a CPU without SSE2, runs
// the boot sequence without a data partition (report in RAM), prints the
// self-test summary and the speed table, and leaves a working shell.
func TestBootNoDataPartition(t *testing.T) {
	res := sharedBuild(t)
	vm := bootVM(t, res, "")
	waitFor(t, vm, plan.MarkReportRAM)
	waitFor(t, vm, plan.MarkSelfTest)
	waitFor(t, vm, plan.MarkDone)
	con := strings.ReplaceAll(vm.Console(), "\r", "")
	for _, want := range []string{
		"The 'numbers' are in 1000s of bytes per second processed.", // the speed table
		"ocfw: module af_alg", "ocfw: module geode_aes",
		"cbc-aes-geode", // planned, absent under QEMU
	} {
		if !strings.Contains(con, want) {
			t.Errorf("console lacks %q", want)
		}
	}
	var pass, fail, absent int
	i := strings.Index(con, plan.MarkSelfTest)
	if _, err := fmt.Sscanf(con[i+len(plan.MarkSelfTest):], "%d passed, %d failed, %d absent", &pass, &fail, &absent); err != nil {
		t.Fatalf("self-test marker: %v", err)
	}
	// kernel.Kernel and Go software pass for both ciphers; the Geode engine is
	// absent on QEMU's PC.
	if pass < 4 || fail != 0 || absent < 1 {
		t.Errorf("self-test: %d passed, %d failed, %d absent; want >=4 passed, 0 failed, >=1 absent\n%s", pass, fail, absent, vm.Tail(80))
	}
	shellWorks(t, vm)
	poweroff(t, vm)
	t.Logf("initramfs %d bytes raw, %d xz; boot to shell %v", res.RawSize, res.Size, vm.Elapsed().Round(time.Second))
}

// With a FAT disk labelled OCFWDATA the report lands on it: the first
// boot writes the first report into the store, readable from the host.
func TestBootDataPartition(t *testing.T) {
	res := sharedBuild(t)
	for _, tool := range []string{"mkfs.fat", "mcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			labtest.SkipOrFail(t, "%s not installed (apt-get install dosfstools mtools)", tool)
		}
	}
	img := filepath.Join(t.TempDir(), "data.img")
	if err := firmware.DataPartition(context.Background(), img, 16<<20, plan.DataLabel, 1700000000); err != nil {
		t.Fatal(err)
	}
	vm := bootVM(t, res, img)
	waitFor(t, vm, plan.MarkDone)
	if !strings.Contains(vm.Console(), plan.MarkReportWritten+"/ocfw/report-01.json (boot 1)") {
		t.Fatalf("no report on the data partition:\n%s", vm.Tail(40))
	}
	shellWorks(t, vm)
	poweroff(t, vm)

	get := func(name string) []byte {
		out, err := exec.Command("mtype", "-i", img, "::"+name).Output()
		if err != nil {
			t.Fatalf("mtype %s: %v", name, err)
		}
		return out
	}
	c, err := store.Load(func(name string) ([]byte, error) { return get(store.Dir + "/" + name), nil })
	if err != nil || len(c.Reports) != 1 || c.State.Boot != 1 {
		t.Fatalf("store on the card: %v, %+v", err, c)
	}
	r, err := report.Read(bytes.NewReader(c.Reports[0].JSON))
	if err != nil {
		t.Fatalf("report on the card: %v", err)
	}
	if r.Boot != 1 || len(r.SelfTest) == 0 {
		t.Errorf("report: boot %d, %d self-test results; want boot 1 and results", r.Boot, len(r.SelfTest))
	}
	if out, err := exec.Command("fsck.fat", "-n", img).CombinedOutput(); err != nil {
		t.Errorf("fsck.fat -n after the boot: %v\n%s", err, out)
	}
}
