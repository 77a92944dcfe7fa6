package build

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/boot"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/kbuild"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/ocf/speed"
	"github.com/ocfw/ocfw/plan"
)

var reportRe = regexp.MustCompile(`ocfw: report (written: (/ocfw/report-\d+\.json)|kept in RAM only: [^\r\n]*)`)

var selfTestRe = regexp.MustCompile(`ocfw: self-test: (\d+) passed, (\d+) failed, (\d+) absent`)

// TestFirmwareImageBoots builds the real firmware through Build (rootfs:
// u-root init and the ocf boot sequence) into an ALIX image and boots it
// from the IDE disk to the self-test line, then powers it off from the
// shell.
func TestFirmwareImageBoots(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the userland and boots QEMU; -short")
	}
	if err := firmware.CheckTools(plan.BootBIOSCF); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	if err := qemu.Installed("i386"); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	// Two ciphers keep the emulated Pentium II's self-test and speed run short.
	pl, err := cat.Resolve(boards.Request{Board: "alix2d13", Ciphers: []string{"aes-128-cbc", "hmac-sha1"}})
	if err != nil {
		t.Fatal(err)
	}
	deb, err := debian.CachedKernel(pl.Kernel.Package, pl.Kernel.Arch, "")
	if err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	ctx := context.Background()
	seedDevCrypto(t)
	dir := t.TempDir()
	if d := os.Getenv("OCFW_TEST_KEEP"); d != "" {
		dir = d // keep the image for a look afterwards
	}
	img := filepath.Join(dir, "alix.img")
	res, err := Build(ctx, pl, Options{Output: img, Kernel: deb, SourceDateEpoch: 1700000000, Tool: "ocfw test",
		Boot: plan.Options{SpeedBudget: "2s", ESPBudget: "0s"}}) // the ESP run is e2e's
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if len(res.Steps) != 4 || res.Steps[1].Name != "cryptodev" {
		t.Errorf("steps %v, want kernel, cryptodev, initramfs, image", res.Steps)
	}
	if m.Inputs["kernel"] == "" || len(m.Inputs) < 3 {
		t.Errorf("manifest inputs: %v", m.Inputs)
	}
	// The Geode's engine is hardware: /dev/crypto's module is built and
	// listed, by the hash of the module the cache holds.
	if ko, err := os.ReadFile(devCryptoCached(t)); err != nil || m.Inputs["module/cryptodev.ko"] != fmt.Sprintf("%x", sha256.Sum256(ko)) {
		t.Errorf("manifest input module/cryptodev.ko %q, want the cached module's hash (%v)", m.Inputs["module/cryptodev.ko"], err)
	}
	opts := vmtest.Options{Timeout: 6 * time.Minute}
	// OCFW_TEST_CONSOLE names a file that gets a live copy of the console.
	if p := os.Getenv("OCFW_TEST_CONSOLE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		opts.Echo = f
	}
	vm := vmtest.Start(t, img, opts)
	// The console prints the report marker, then the self-test summary.
	rep, err := vm.WaitForRegexp(ctx, reportRe)
	if err != nil {
		t.Fatalf("no report marker from the booted image: %v\n%s", err, vm.Tail(40))
	}
	got, err := vm.WaitForRegexp(ctx, selfTestRe)
	if err != nil {
		t.Fatalf("no self-test line from the booted image: %v\n%s", err, vm.Tail(40))
	}
	t.Logf("self-test line after %v: %s", vm.Elapsed().Round(time.Millisecond), got[0])
	if got[2] != "0" {
		t.Errorf("self-test failures: %s\n%s", got[0], vm.Tail(40))
	}
	if err := vm.WaitFor(ctx, "ocfw: boot sequence done"); err != nil {
		t.Fatalf("%v\n%s", err, vm.Tail(20))
	}
	// The boot self-tested both planned ciphers through /dev/crypto
	// (before the summary line) on each kernel engine, and says which
	// kernel driver /dev/crypto answers with after the engine choice.
	for _, c := range []string{"aes-128-cbc", "hmac-sha1"} {
		for _, re := range []*regexp.Regexp{
			regexp.MustCompile(`ocfw: /dev/crypto: ` + regexp.QuoteMeta(c) + ` on \S+: pass`),
			regexp.MustCompile(`ocfw: /dev/crypto: ` + regexp.QuoteMeta(c) + ` answers with \S+: pass`),
		} {
			if !re.MatchString(vm.Console()) {
				t.Errorf("no line %q on the console:\n%s", re, vm.Tail(60))
			}
		}
	}
	// cryptodev.ko was loaded at boot: its misc device is there (the
	// command's echo has no "10:").
	vm.Send("cat /sys/class/misc/crypto/dev\n")
	if _, err := vm.WaitForRegexp(ctx, regexp.MustCompile(`(?m)^10:\d+\s*$`)); err != nil {
		t.Errorf("no /dev/crypto misc device after the boot: %v\n%s", err, vm.Tail(20))
	}
	// sync first: once (of several runs) report-0001.json read back as 0
	// bytes after a bare poweroff; see the notes for the rootfs side.
	vm.Send("sync\n")
	vm.Send("poweroff\n")
	vm.Wait()
	if rep[2] == "" {
		// The data partition passes fsck.fat (TestBIOSCFImageChecks); a
		// mount failure here is the boot sequence's (see the marker).
		t.Errorf("the firmware did not write its report to the image's data partition: %s", rep[0])
		return
	}
	// The report the firmware wrote is on the image's data partition.
	info, err := firmware.Inspect(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Reports) == 0 || info.Reports[0].Report == nil {
		t.Errorf("inspect finds no report on the data partition after the boot: %+v", info.Reports)
	} else if info.Reports[0].Boot != 1 {
		t.Errorf("first boot's report says boot %d", info.Reports[0].Boot)
	} else {
		// The speed through /dev/crypto: a row per planned cipher, named
		// like its self-test row, measured at every size from 16 to 8192.
		sp := info.Reports[0].Report.DevCryptoSpeed
		for _, c := range []string{"aes-128-cbc", "hmac-sha1"} {
			var row *speed.Row
			for i := range sp {
				if sp[i].Cipher == c {
					row = &sp[i]
				}
			}
			if row == nil || row.Err != "" || !strings.HasPrefix(row.Engine, "/dev/crypto:") || len(row.Cells) != len(boot.DevCryptoSizes) {
				t.Errorf("report: /dev/crypto speed row for %s: %+v (rows %+v)", c, row, sp)
				continue
			}
			for _, cell := range row.Cells {
				if cell.KBps <= 0 || cell.Ops == 0 {
					t.Errorf("report: /dev/crypto %s at %d bytes: %+v", c, cell.Size, cell)
				}
			}
		}
	}
}

// Sizes that need no build are refused before anything is built: the
// kernel given does not even exist, so reaching the kernel step would
// give another error.
func TestSizeErrorsBeforeBuilding(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		board  string
		size   int
		cardMB int
		want   string
		tools  string
	}{
		{"alix2d13", 300, 0, "larger than the alix2d13's 128 MB card", plan.BootBIOSCF},
		{"net5501", 240, 128, "128 MB card", plan.BootBIOSCF},
		{"alix2d13", 36, 0, "data partition", plan.BootBIOSCF},
		{"avila-gw2348", 8, 0, "need at least 16 MiB", plan.BootRedBoot},
		{"avila-gw2348", 200, 128, "larger than the 128 MB card", plan.BootRedBoot},
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.board, tc.size), func(t *testing.T) {
			if err := firmware.CheckTools(tc.tools); err != nil {
				labtest.SkipOrFail(t, "%v", err)
			}
			pl, err := cat.Resolve(boards.Request{Board: tc.board})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			_, err = Build(context.Background(), pl, Options{Output: filepath.Join(dir, "x.img"), Kernel: filepath.Join(dir, "no-such-kernel"),
				SizeMiB: tc.size, CardMB: tc.cardMB})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if es, _ := os.ReadDir(dir); len(es) != 0 {
				t.Errorf("left %v behind", es)
			}
		})
	}
}

// seedDevCrypto puts the cryptodev-linux source from shared/deps into
// the ocfw cache, so that builds take it from there and never download
// it, and skips (fails under OCFW_REQUIRE_KERNEL) without the tools.
func seedDevCrypto(t *testing.T) {
	t.Helper()
	cache, err := debian.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := kbuild.StoreSource(cache, labtest.SharedDep(t, kbuild.CryptodevSource)); err != nil {
		t.Fatal(err)
	}
	if _, err := kbuild.Headers(context.Background(), kbuild.Options{}); err != nil {
		labtest.SkipOrFail(t, "cryptodev.ko cannot be built: %v", err)
	}
}

// devCryptoCached is the cryptodev.ko the cache holds (built, or taken
// from there, by the build just made).
func devCryptoCached(t *testing.T) string {
	t.Helper()
	m, err := kbuild.Cryptodev(context.Background(), kbuild.CryptodevOptions{NoDownload: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Built {
		t.Error("the image's build left no cryptodev.ko in the cache")
	}
	return m.Path
}
