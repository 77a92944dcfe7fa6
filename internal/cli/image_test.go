package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
)

// build, inspect and flash through the CLI, with a stand-in initramfs
// (the userland build is the rootfs package's to test).
func TestBuildInspectFlashCLI(t *testing.T) {
	if err := firmware.CheckTools("bios-cf"); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	deb, err := debian.CachedKernel("linux-image-686", "i386", "")
	if err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initrd.xz")
	os.WriteFile(initrd, append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 1000)...), 0o644)
	img := filepath.Join(dir, "alix.img")
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	out, errs, code := ocfw(t, "build", "--board", "alix2d13", "--kernel", deb, "--initramfs", initrd, "-o", img)
	if code != 0 {
		t.Fatalf("build: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, img) || !strings.Contains(out, "manifest:") {
		t.Errorf("build output:\n%s", out)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "sha256sums"))
	if err != nil || !strings.Contains(string(sums), "  alix.img\n") {
		t.Errorf("sha256sums: %v\n%s", err, sums)
	}

	out, errs, code = ocfw(t, "inspect", img)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errs)
	}
	for _, want := range []string{`label "OCFWBOOT"`, `label "OCFWDATA"`, "/vmlinuz", "console=ttyS0,38400n8", "board alix2d13"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = ocfw(t, "inspect", "--json", img)
	var info firmware.Info
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || len(info.Partitions) != 2 {
		t.Errorf("inspect --json: exit %d\n%s", code, out)
	}
	if _, errs, code := ocfw(t, "inspect", initrd); code == 0 || !strings.Contains(errs, "not an ocfw image") {
		t.Errorf("inspect of a non-image: exit %d: %s", code, errs)
	}

	target := filepath.Join(dir, "card.bin")
	out, errs, code = ocfw(t, "flash", "--yes", img, target)
	if code != 0 || !strings.Contains(out, "verified") || !strings.Contains(errs, "verified") {
		t.Fatalf("flash: exit %d\n%s\n%s", code, out, errs)
	}
	f, _ := os.OpenFile(target, os.O_RDWR, 0)
	f.WriteAt([]byte{0x12, 0x34}, 510) // the MBR's 55 AA
	f.Close()
	if _, errs, code := ocfw(t, "flash", "--verify-only", img, target); code == 0 || !strings.Contains(errs, "verify failed") {
		t.Errorf("verify of a changed target: exit %d: %s", code, errs)
	}
	// Without --yes and no answer, nothing is written.
	if _, errs, code := ocfw(t, "flash", img, filepath.Join(dir, "other.bin")); code == 0 || !strings.Contains(errs, "not confirmed") {
		t.Errorf("unconfirmed flash: exit %d: %s", code, errs)
	}
	if _, errs, code := ocfw(t, "build", "--board", "alix2d13", "--kernel", deb, "--initramfs", initrd, "--size", "300", "-o", filepath.Join(dir, "big.img")); code == 0 || !strings.Contains(errs, "128 MB card") {
		t.Errorf("oversized build: exit %d: %s", code, errs)
	}
}

func TestParseSizeMiB(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{{"120", 120, true}, {"240M", 240, true}, {"240MiB", 240, true}, {"1G", 1024, true}, {"", 0, true}, {"-5", 0, false}, {"12x", 0, false}, {"0", 0, false}} {
		got, err := parseSizeMiB(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("%q: %d, %v", tc.in, got, err)
		}
	}
}
