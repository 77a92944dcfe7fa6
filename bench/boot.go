package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/plan"
)

// trivialMarker is bench/trivialinit's console line.
const trivialMarker = "ocfw-bench: trivial init reached"

// bootResult is benchmark item 6: QEMU power-on to the firmware's report
// against power-on to a trivial /init of the same kernel started with
// -kernel.
type bootResult struct {
	Board       string    `json:"board"`
	Report      string    `json:"report"` // where the report went
	ReportS     float64   `json:"report_s"`
	ReportRuns  []float64 `json:"report_runs"`
	TrivialS    float64   `json:"trivial_s"`
	TrivialRuns []float64 `json:"trivial_runs"`
	Ratio       float64   `json:"ratio"`
	Machine     string    `json:"machine"`
}

// bootRuns is how many times each boot runs (they alternate; best
// counts): a firmware boot under TCG takes about 40 s here, more when
// the host is busy, and the whole harness should stay within 15 minutes.
const bootRuns = 1

func runBoot(ctx context.Context, r *runner) error {
	var img, kernel, karg string
	if b := r.res.Build; b != nil && b.WarmOcfw != nil {
		img, kernel, karg = b.WarmOcfw.ImagePath, b.WarmOcfw.Kernel, b.WarmOcfw.KernelArg
	} else {
		child := filepath.Join(r.tmp, "bench")
		if _, err := r.run(ctx, nil, "go", "build", "-o", child, "./bench"); err != nil {
			return err
		}
		out, err := r.run(ctx, nil, child, "image", buildBoard, filepath.Join(r.tmp, "boot"))
		if err != nil {
			return err
		}
		var ib imageBuild
		if err := json.Unmarshal([]byte(lastLine(out)), &ib); err != nil {
			return fmt.Errorf("bench image output: %v", err)
		}
		img, kernel, karg = ib.ImagePath, ib.Kernel, ib.KernelArg
	}
	if kernel == "" {
		var err error
		if kernel, karg, err = kernelFor(ctx, buildBoard); err != nil {
			return err
		}
	}
	initBin := filepath.Join(r.tmp, "trivialinit")
	if _, err := r.run(ctx, []string{"GOARCH=386", "GO386=softfloat", "CGO_ENABLED=0"}, "go", "build", "-o", initBin, "./bench/trivialinit"); err != nil {
		return err
	}
	initrd := filepath.Join(r.tmp, "trivial.cpio")
	f, err := os.Create(initrd)
	if err != nil {
		return err
	}
	err = (&kerneltest.Initramfs{Init: initBin}).Write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	res := &bootResult{Board: buildBoard, Machine: "qemu-system-i386 -M pc -cpu pentium2 -m 256 (TCG)"}
	base := qemu.Config{Arch: "i386", Machine: "pc", CPU: "pentium2", MemoryMB: 256, Timeout: 6 * time.Minute}
	for i := 0; i < bootRuns; i++ {
		// The image's data partition keeps reports between boots: boot a
		// fresh copy each time so every run is a first boot.
		disk := filepath.Join(r.tmp, fmt.Sprintf("boot%d.img", i))
		if _, err := r.run(ctx, nil, "cp", "--sparse=always", img, disk); err != nil {
			return err
		}
		cfg := base
		cfg.Disk = disk
		rep, kept, err := bootFirmware(ctx, cfg)
		os.Remove(disk)
		if err != nil {
			return err
		}
		res.ReportRuns = append(res.ReportRuns, rep)
		if res.ReportS == 0 || rep < res.ReportS {
			res.ReportS, res.Report = rep, kept
		}
		cfg = base
		cfg.Kernel, cfg.Initrd, cfg.Append = kernel, initrd, karg+" panic=10"
		t, err := bootTrivial(ctx, cfg)
		if err != nil {
			return err
		}
		res.TrivialRuns = append(res.TrivialRuns, t)
	}
	res.TrivialS = minOf(res.TrivialRuns)
	res.Ratio = res.ReportS / res.TrivialS
	r.res.Boot = res
	return nil
}

// reportRe matches the boot sequence's report line: written to the data
// partition, or kept in RAM when the partition cannot be used (the
// report exists either way; the table says which).
var reportRe = regexp.MustCompile(regexp.QuoteMeta(plan.MarkReportWritten) + `|` + regexp.QuoteMeta(plan.MarkReportRAM) + `([^\r\n]*)`)

var selfTestRe = regexp.MustCompile(`ocfw: self-test: \d+ passed, \d+ failed, \d+ absent`)

// bootFirmware boots the CF image and returns seconds from power-on to
// the report line, and how the report was kept.
func bootFirmware(ctx context.Context, cfg qemu.Config) (report float64, kept string, err error) {
	vm, err := qemu.Start(ctx, cfg)
	if err != nil {
		return 0, "", err
	}
	defer vm.Kill()
	m, err := vm.WaitForRegexp(ctx, reportRe)
	if err != nil {
		return 0, "", fmt.Errorf("firmware boot: no report line: %w", err)
	}
	report = vm.Elapsed().Seconds()
	kept = "written to the data partition"
	if strings.HasPrefix(m[0], plan.MarkReportRAM) {
		kept = "kept in RAM only: " + strings.TrimSpace(m[1])
	}
	// The summary follows the report; a boot that reports failures is
	// not a boot to time.
	st, err := vm.WaitForRegexp(ctx, selfTestRe)
	if err != nil {
		return 0, "", fmt.Errorf("firmware boot: no self-test summary: %w", err)
	}
	if !strings.Contains(st[0], " 0 failed") {
		return 0, "", fmt.Errorf("firmware boot: %s", st[0])
	}
	return report, kept, nil
}

func bootTrivial(ctx context.Context, cfg qemu.Config) (float64, error) {
	vm, err := qemu.Start(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer vm.Kill()
	if err := vm.WaitFor(ctx, trivialMarker); err != nil {
		return 0, fmt.Errorf("trivial boot: %w", err)
	}
	return vm.Elapsed().Seconds(), nil
}

func bootTable(b *strings.Builder, x *bootResult) {
	fmt.Fprintf(b, "### 6. Boot time in QEMU (%s)\n\n%s, best of %d boot(s) each, alternating.\n\n", x.Board, x.Machine, len(x.ReportRuns))
	fmt.Fprintf(b, "| boot | power-on to | seconds |\n|---|---|---|\n")
	fmt.Fprintf(b, "| firmware CF image (SeaBIOS, SYSLINUX, kernel, modules, self-test, speed table) | report (%s) | %.1f |\n", x.Report, x.ReportS)
	fmt.Fprintf(b, "| same kernel, `-kernel`, trivial /init | init running | %.1f |\n", x.TrivialS)
	fmt.Fprintf(b, "| ratio | report / trivial | %.2f |\n\n", x.Ratio)
}
