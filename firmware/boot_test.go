package firmware

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
)

var cmdlineRe = regexp.MustCompile(`Kernel command line: .*console=ttyS0,38400n8 panic=10`)

// bootMarker is what a booted image must print: the firmware's self-test
// line when the image holds the real rootfs, the test init's marker when
// it holds the test initramfs.
func TestBIOSCFImageBoots(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU; -short")
	}
	if err := qemu.Installed("i386"); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	_, img := buildALIX(t, t.TempDir(), ImageOptions{})
	ctx := context.Background()
	vm := vmtest.Start(t, img, vmtest.Options{Timeout: 3 * time.Minute})
	if err := vm.WaitFor(ctx, testMarker); err != nil {
		t.Fatalf("the image did not reach its init: %v\nconsole tail:\n%s", err, vm.Tail(30))
	}
	// The kernel got the board's console argument from syslinux.cfg.
	if !cmdlineRe.MatchString(vm.Console()) {
		t.Errorf("the kernel command line lacks the ALIX console and panic=10:\n%s", vm.Tail(60))
	}
	t.Logf("booted to init in %v", vm.Elapsed().Round(time.Millisecond))
	// The BIOS relays SYSLINUX's screen to the serial port: each line
	// once (a SERIAL line in syslinux.cfg made every one show twice).
	for _, line := range []string{"SYSLINUX 6", "Loading " + BootKernel} {
		if n := strings.Count(vm.Console(), line); n != 1 {
			t.Errorf("%q is on the serial console %d times, want once:\n%s", line, n, vm.Tail(40))
		}
	}
	vm.Wait()
}
