package firmware

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/plan"
)

// testMarker is what the test /init prints once it runs.
const testMarker = "ocfw-firmware-test: init running"

// The test /init: print the marker, power off.
const testInitSrc = `package main

import (
	"fmt"
	"syscall"
)

func main() {
	fmt.Println("` + testMarker + `")
	syscall.Sync()
	syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}
`

func testPlan(t testing.TB, board string, cards ...string) *plan.Plan {
	t.Helper()
	c, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Resolve(boards.Request{Board: board, Cards: cards})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// debKernel returns a cached Debian kernel, or an error saying it is missing.
func debKernel(pkg, arch string) (*debian.Kernel, error) {
	deb, err := debian.CachedKernel(pkg, arch, "")
	if err != nil {
		return nil, err
	}
	return debian.ExtractKernelCached(deb, "")
}

var (
	x86Once   sync.Once
	x86Kernel *debian.Kernel
	x86Initrd string
	x86Err    error
	x86Dir    string
)

// x86Payload is Debian's i386 kernel and an initramfs with the test init,
// built once per test binary.
func x86Payload(t *testing.T) Input {
	t.Helper()
	x86Once.Do(func() {
		x86Kernel, x86Err = debKernel("linux-image-686", "i386")
		if x86Err != nil {
			return
		}
		x86Dir, x86Err = os.MkdirTemp("", "ocfw-firmware-test-")
		if x86Err != nil {
			return
		}
		src := filepath.Join(x86Dir, "init.go")
		if x86Err = os.WriteFile(src, []byte(testInitSrc), 0o644); x86Err != nil {
			return
		}
		bin := filepath.Join(x86Dir, "init")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, src)
		cmd.Dir = x86Dir
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=386", "GO386=softfloat", "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			x86Err = &buildErr{string(out)}
			return
		}
		x86Initrd = filepath.Join(x86Dir, "initrd.cpio")
		f, err := os.Create(x86Initrd)
		if err != nil {
			x86Err = err
			return
		}
		defer f.Close()
		x86Err = (&kerneltest.Initramfs{Init: bin}).Write(f)
	})
	if x86Err != nil {
		if _, ok := x86Err.(*buildErr); ok {
			t.Fatal(x86Err)
		}
		labtest.SkipOrFail(t, "%v", x86Err)
	}
	return Input{Kernel: x86Kernel.Vmlinuz, KernelVersion: x86Kernel.Version, Initramfs: x86Initrd,
		Inputs: map[string]string{"test-init": "built from testInitSrc"}}
}

type buildErr struct{ out string }

func (e *buildErr) Error() string { return "building the test init: " + e.out }

func TestMain(m *testing.M) {
	code := m.Run()
	if x86Dir != "" {
		os.RemoveAll(x86Dir)
	}
	os.Exit(code)
}
