package boardvm

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/lab/qemu"
)

// A sparse image is copied byte for byte, with its holes kept.
func TestCopySparse(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.img")
	const size = 64 << 20
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	// Data at the start, in the middle (across a 1 MiB boundary) and
	// close to the end; a hole after the last, up to the size.
	chunks := map[int64][]byte{
		0:              bytes.Repeat([]byte{0x55}, 4096),
		20<<20 - 1000:  bytes.Repeat([]byte{0xaa, 0x01}, 3000),
		size - 256<<10: bytes.Repeat([]byte{0x7e}, 8192),
		size/2 + 12345: []byte("ocfw"),
	}
	for off, b := range chunks {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()

	dst, remove, err := copyForBoot(src, filepath.Join(dir, "copy.img"))
	if err != nil {
		t.Fatal(err)
	}
	remove()
	want, _ := os.ReadFile(src)
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != size || !bytes.Equal(got, want) {
		t.Fatalf("copy differs from the source (%d bytes, want %d)", len(got), size)
	}
	// Where the file system keeps the source sparse, the copy is too.
	var ss, ds syscall.Stat_t
	if err := syscall.Stat(src, &ss); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(dst, &ds); err != nil {
		t.Fatal(err)
	}
	if ss.Blocks*512 < size/4 && ds.Blocks*512 > size/4 {
		t.Errorf("the copy uses %d KiB on disk for %d KiB of data: holes were filled", ds.Blocks/2, ss.Blocks/2)
	}

	// A temporary copy is removed by its cleanup; a kept one stays.
	tmp, remove, err := copyForBoot(src, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("temporary copy: %v", err)
	}
	remove()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("temporary copy %s still there after cleanup: %v", tmp, err)
	}
	if _, err := os.Stat(dst); err != nil {
		t.Errorf("kept copy: %v", err)
	}
	if _, _, err := copyForBoot(src, src); err == nil {
		t.Error("copying the image onto itself was not refused")
	}
	if b, _ := os.ReadFile(src); !bytes.Equal(b, want) {
		t.Error("the refused copy changed the image")
	}
}

func TestRAMReason(t *testing.T) {
	for _, tc := range []struct {
		console, why string
		found        bool
	}{
		{"boot\r\nocfw: report kept in RAM only: no FAT file system labelled OCFWDATA within 6s\r\nocfw: self-test: 3 passed\r\n", "no FAT file system labelled OCFWDATA within 6s", true},
		{"ocfw: report kept in RAM only: first\nocfw: report kept in RAM only: store: slot 3 torn\n", "store: slot 3 torn", true},
		{"ocfw: report kept in RAM only: at the end", "at the end", true},
		{"ocfw: report kept in RAM only: \r\n", "", true},
		{"ocfw: report written: /ocfw/report-01.json (boot 1)\r\n", "", false},
	} {
		why, found := ramReason(tc.console)
		if why != tc.why || found != tc.found {
			t.Errorf("%q: %q %v, want %q %v", tc.console, why, found, tc.why, tc.found)
		}
	}
}

// The watchdog's verdict comes last, after the console's last lines
// (which lose their terminal-changing sequences): a tail ending in the
// shell's prompt must not look like a guest still running.
func TestWatchdogErrorLast(t *testing.T) {
	e := &WatchdogError{After: 10 * time.Minute, Tail: "ocfw: boot sequence done; shell on console\n\x1bc\x1b[?7l$ "}
	lines := strings.Split(e.Error(), "\n")
	want := []string{
		"the guest's last console lines:",
		"  | ocfw: boot sequence done; shell on console",
		"  | $ ",
	}
	if len(lines) != 4 || !slices.Equal(lines[:3], want) {
		t.Fatalf("message:\n%s", e.Error())
	}
	if !strings.HasPrefix(lines[3], "watchdog fired after 10m0s (--timeout): the guest was killed") {
		t.Errorf("last line %q", lines[3])
	}
}

// The virtio-crypto device goes on QEMU's command line exactly when the
// image's plan has its engine, once; the test engine (a module, no
// device) and real cards add nothing.
func TestStandInArgs(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	device := "-object cryptodev-backend-builtin,id=ocfwcrypto0 -device virtio-crypto-pci,cryptodev=ocfwcrypto0"
	for _, tc := range []struct {
		cards []string
		want  string
	}{
		{nil, ""},
		{[]string{"vpn1411"}, ""},
		{[]string{"testaes"}, ""},
		{[]string{"virtio-crypto"}, device},
		{[]string{"testaes", "vpn1411", "virtio-crypto"}, device},
	} {
		pl, err := cat.Resolve(boards.Request{Board: "alix2d13", Cards: tc.cards})
		if err != nil {
			t.Fatal(err)
		}
		args, notes := StandInArgs(pl)
		if got := strings.Join(args, " "); got != tc.want {
			t.Errorf("cards %v: args %q, want %q", tc.cards, got, tc.want)
		}
		if (len(notes) == 1) != (tc.want != "") {
			t.Errorf("cards %v: notes %q", tc.cards, notes)
		}
		// The options go on the emulator's command line as they are.
		cl, err := qemu.Config{Arch: "i386", Disk: "x.img", Args: args}.CommandLine()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cl, " "); strings.Contains(got, "virtio-crypto-pci") != (tc.want != "") || (tc.want != "" && !strings.HasSuffix(got, " "+device)) {
			t.Errorf("cards %v: command line %s", tc.cards, got)
		}
	}
	// A plan with the engine twice (an edited plan) still gets one device.
	pl, _ := cat.Resolve(boards.Request{Board: "alix2d13", Cards: []string{"virtio-crypto"}})
	pl.Engines = append(pl.Engines, pl.Engines...)
	if args, _ := StandInArgs(pl); strings.Join(args, " ") != device {
		t.Errorf("engine twice: %q", args)
	}
}

// TestResetsRebootInRun: an x86 run's emulator restarts the guest at a
// reset instead of ending (no -no-reboot), and carries the i6300esb
// watchdog set to reset, so a reboot, an upgrade's restart and a hung
// trial's watchdog all boot the card again in the same run (issue 29
// point 8; e2e TestRunKeepsCard boots through the first two).
func TestResetsRebootInRun(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, board := range []string{"alix2d13", "net5501"} {
		pl, err := cat.Resolve(boards.Request{Board: board})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := x86Config(pl, 256, "x.img", nil, nil).CommandLine()
		if err != nil {
			t.Fatal(err)
		}
		got := " " + strings.Join(cl, " ") + " "
		if strings.Contains(got, " -no-reboot ") {
			t.Errorf("%s: a reset ends the run: %s", board, got)
		}
		if !strings.Contains(got, " -device i6300esb -action watchdog=reset ") {
			t.Errorf("%s: no watchdog that resets: %s", board, got)
		}
	}
}
