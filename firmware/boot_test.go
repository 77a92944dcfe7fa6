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
	// SeaBIOS's serial mirror (sercon) draws the screen lazily and may
	// cut a line with cursor moves, so count in the text without escapes;
	// on failure show the raw start, escapes quoted, to see what it did.
	screen := biosText(vm.Console())
	for _, line := range []string{"SYSLINUX 6", "Loading " + BootKernel} {
		if n := strings.Count(screen, line); n != 1 {
			raw := vm.Console()
			if i := strings.Index(raw, "Linux version"); i > 0 {
				raw = raw[:i]
			}
			t.Errorf("%q is on the serial console %d times, want once; the console before the kernel, quoted:\n%q", line, n, raw)
		}
	}
	vm.Wait()
}

// escapeRe matches the terminal controls SeaBIOS's sercon and the kernel
// send: CSI sequences (ESC [ ... final byte) and ESC c (reset).
var escapeRe = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|c)`)

// biosText is the console as text: escapes and carriage returns removed.
func biosText(s string) string {
	return strings.ReplaceAll(escapeRe.ReplaceAllString(s, ""), "\r", "")
}

func TestBIOSText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS\r\n", "SeaBIOS\n"},
		{"Loading /vm\x1b[5;12Hlinuz... ok\r\n", "Loading /vmlinuz... ok\n"},
		{"plain", "plain"},
	} {
		if got := biosText(c.in); got != c.want {
			t.Errorf("biosText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
