package boardvm

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/build"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
	"github.com/ocfw/ocfw/plan"
)

// TestARMBoot builds the NSLU2's firmware (its plan, GOARCH=arm GOARM=5
// userland, every cipher) for the ARM stand-in, with the stand-in
// kernel's modules, and boots it in qemu-system-arm as ocfw run does: the
// boot sequence runs to the report on the SD card, every kernel and Go
// (engine, cipher) pair passes its self-test, the IXP4xx engine is
// absent with the reason, the speed table has every size, and the shell
// answers a command typed on the console. Its one port is a usb-net
// card on the stand-in's USB hub, unplugged (no site config).
func TestARMBoot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the ARM firmware and boots it in qemu-system-arm; skipped with -short")
	}
	// One guest, beside the power-cut tests' one: two cores, two guests.
	t.Parallel()
	s := qemu.RaspiStandIn
	var missing []string
	if err := qemu.Installed(s.Arch); err != nil {
		missing = append(missing, err.Error())
	}
	if err := firmware.CheckTools(plan.BootQEMUARM); err != nil {
		missing = append(missing, err.Error())
	}
	deb, err := debian.CachedKernel(s.KernelPackage, s.DebianArch, "")
	if err != nil {
		missing = append(missing, fmt.Sprintf("the %s (%s) package in the cache (ocfw kernel fetch --board nslu2 --stand-in): %v", s.KernelPackage, s.DebianArch, err))
	}
	if len(missing) > 0 {
		labtest.SkipOrFail(t, "the ARM boot needs: %s", strings.Join(missing, "; "))
	}
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := cat.Resolve(boards.Request{Board: "nslu2", StandIn: true})
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "nslu2-standin.img")
	t0 := time.Now()
	res, err := build.Build(context.Background(), pl, build.Options{Output: img, Kernel: deb, SourceDateEpoch: 1700000000,
		Tool: "ocfw test", Boot: plan.Options{SpeedBudget: "10s", ESPBudget: "0s"}}) // no ESP run: nothing here reads it
	if err != nil {
		t.Fatal(err)
	}
	budget := int64(pl.Image.InitramfsBudgetKB) * 1024
	t.Logf("built in %v: initramfs %d KiB %s (%d KiB raw) of the nslu2's %d KiB ramdisk budget; modules: %s",
		time.Since(t0).Round(time.Second), res.Rootfs.Size/1024, pl.Image.Compression, res.Rootfs.RawSize/1024, budget/1024, strings.Join(res.Rootfs.Modules, " "))
	if res.Rootfs.Size > budget {
		t.Errorf("initramfs %d bytes, over the nslu2's %d-byte budget", res.Rootfs.Size, budget)
	}
	for _, m := range []string{"aes_arm", "sha1_arm", "af_alg", "algif_skcipher", "algif_hash", "cdc_ether"} {
		if !contains(res.Rootfs.Modules, m) {
			t.Errorf("module %s not in the initramfs", m)
		}
	}

	release := regexp.MustCompile(`\d+\.\d+\.\d+-\d+-rpi`)
	var log []string
	run, err := Run(context.Background(), img, RunOptions{Timeout: 12 * time.Minute, PoweroffAfterReport: true,
		Log: func(format string, args ...any) {
			line := fmt.Sprintf(format, args...)
			log = append(log, line)
			t.Logf("ocfw run: %s", line)
		},
		Script: func(ctx context.Context, vm *qemu.VM) error {
			if err := vm.Send("cat /proc/sys/kernel/osrelease\n"); err != nil {
				return err
			}
			m, err := vm.WaitForRegexp(ctx, release)
			if err == nil {
				t.Logf("the shell answered: %s", m[0])
			}
			return err
		}})
	if err != nil {
		if run != nil {
			t.Logf("console:\n%s", qemu.TailLines(run.Console, 80))
		}
		t.Fatal(err)
	}
	t.Logf("booted to the report and powered off in %v", run.Elapsed.Round(time.Second))
	joined := strings.Join(log, "\n")
	for _, want := range []string{"qemu-system-arm -M raspi1ap ", "-dtb ", "if=sd", "initcall_blacklist=bcm2835_power_driver_init", "does not prove", "no IXP4xx NPE-C",
		"-device usb-hub,bus=usb-bus.0,port=1 ", "-device usb-net,netdev=net0,bus=usb-bus.0,port=1.1,", "port wan (usb0): unplugged"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the run's log does not say %q:\n%s", want, joined)
		}
	}
	for _, want := range []string{"ocfw: boot 1;", "ocfw: report written: /ocfw/report-01.json (boot 1)", speed.Header} {
		if !strings.Contains(run.Console, want) {
			t.Errorf("console lacks %q", want)
		}
	}
	r := run.Report
	if r == nil || !run.NewReport {
		t.Fatalf("no new report on the SD card (report %v)", r)
	}
	passed := map[string]bool{}
	for _, st := range r.SelfTest {
		switch {
		case st.Status == selftest.Pass:
			passed[st.Engine+"/"+st.Cipher] = true
		case strings.Contains(st.Engine, "ixp4xx") && st.Status == selftest.Absent:
			if !strings.Contains(st.Reason, "stand-in") || !strings.Contains(st.Reason, "ixp4xx_crypto") {
				t.Errorf("%s on %s absent without the stand-in's reason: %q", st.Cipher, st.Engine, st.Reason)
			}
		default:
			t.Errorf("%s on %s: %s %s %v", st.Cipher, st.Engine, st.Status, st.Reason, st.Failure)
		}
	}
	// Kernel software and Go for each of the 9 ciphers; the kernel's ARM
	// assembler AES and SHA are the ones tested.
	if len(passed) != 2*len(catalog.CipherNames()) {
		t.Errorf("%d (engine, cipher) pairs passed, want %d: %v", len(passed), 2*len(catalog.CipherNames()), passed)
	}
	for _, want := range []string{"cbc(aes-arm)/aes-128-cbc", "hmac(sha1-asm)/hmac-sha1", "go/aes-128-cbc"} {
		if !passed[want] {
			t.Errorf("%s did not pass: %v", want, passed)
		}
	}
	rows := 0
	for _, row := range r.Speed {
		rows++
		if row.Err != "" || len(row.Cells) != len(speed.Sizes) {
			t.Errorf("speed %s %s: %d cells of %d, error %q", row.Engine, row.Cipher, len(row.Cells), len(speed.Sizes), row.Err)
		}
		delete(passed, row.Engine+"/"+row.Cipher)
	}
	if len(passed) > 0 {
		t.Errorf("no speed row for %v", passed)
	}
	if !release.MatchString(r.Env.Kernel) {
		t.Errorf("the report names kernel %q, not the stand-in's", r.Env.Kernel)
	}
	t.Logf("report: %d self-tests, %d speed rows of %d sizes, kernel %s", len(r.SelfTest), rows, len(speed.Sizes), r.Env.Kernel)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
