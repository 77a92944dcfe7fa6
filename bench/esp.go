package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/esp"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/router/ipsec/espspeed"
)

// espDelayUS is the test engine's per-request delay in the ESP section:
// enough that it loses to software at MTU size under QEMU, so the
// kernel's own choice (the test engine, registered at priority 300, the
// highest) is the wrong one and the policy's is measured against it.
const espDelayUS = 500

// espRow is one packet size: ESP throughput with the kernel's default
// choice of engine and with ocfw's, from the same boot.
type espRow struct {
	Size    int     `json:"size"`
	Default float64 `json:"default_mbs"`
	Choice  float64 `json:"choice_mbs"`
	Ratio   float64 `json:"ratio"`
	// DefaultCPU and ChoiceCPU are the CPU busy over the windows the
	// figures came from.
	DefaultCPU float64 `json:"default_cpu"`
	ChoiceCPU  float64 `json:"choice_cpu"`
}

type espResult struct {
	Kernel  string `json:"kernel"`
	Cipher  string `json:"cipher"`
	DelayUS int    `json:"testaes_delay_us"`
	Trials  int    `json:"trials"`
	// Default is the driver the kernel chose by registered priority;
	// Choice the one ocfw's policy chose from the measurement at MTU
	// size (esp.Choose with ocf's default margin).
	Default     string     `json:"default_driver"`
	DefaultID   string     `json:"default_engine"`
	Choice      string     `json:"choice_driver"`
	ChoiceID    string     `json:"choice_engine"`
	Rows        []espRow   `json:"rows"`
	Measurement esp.Result `json:"measurement"` // best of the trials per engine and size
}

// runESP is the ESP section: one boot of Debian's 686 kernel with QEMU's
// virtio-crypto device and the test engine (router/ipsec/espspeed's
// TestKernelInTheLoop running TestGuestBench), espspeed.Measure run
// -trials times over software, virtio-crypto and the test engine; the
// best figure per engine and size counts.
func runESP(ctx context.Context, r *runner) error {
	out, err := r.run(ctx, []string{
		"OCFW_KERNELTEST_RUN=^TestGuestBench$",
		espspeed.EnvBench + "=" + strconv.Itoa(r.trials),
		espspeed.EnvBenchDelay + "=" + strconv.Itoa(espDelayUS),
	}, "go", "test", "-count=1", "-timeout", "10m", "-run", "^TestKernelInTheLoop$", "-v", "./router/ipsec/espspeed")
	if err != nil {
		return err
	}
	if strings.Contains(out, "--- SKIP: TestKernelInTheLoop") {
		return fmt.Errorf("the QEMU test skipped (kernel package, QEMU or the test module's build tools missing: `ocfw kernel fetch`): %s", tail(out, 400))
	}
	runs, err := parseESP(out)
	if err != nil {
		return err
	}
	res, err := espCompare(runs, kcrypto.MTU)
	if err != nil {
		return err
	}
	res.Kernel = "Debian linux-image-686 under qemu-system-i386 -cpu pentium2 (TCG), virtio-crypto-pci with the builtin backend, ocfw_testaes"
	res.DelayUS = espDelayUS
	r.res.ESP = res
	for _, row := range res.Rows {
		r.res.goal("ESP", fmt.Sprintf("ESP with ocfw's engine vs the kernel's default at %d bytes", row.Size), ">= 1.0x", row.Ratio, 1.0)
	}
	return nil
}

// parseESP reads the results the guest printed, one per trial.
func parseESP(out string) ([]esp.Result, error) {
	var runs []esp.Result
	for _, line := range strings.Split(out, "\n") {
		_, j, ok := strings.Cut(line, espspeed.BenchMarker)
		if !ok {
			continue
		}
		var res esp.Result
		if err := json.Unmarshal([]byte(strings.TrimSpace(j)), &res); err != nil {
			return nil, fmt.Errorf("an ESP result from the guest: %v", err)
		}
		runs = append(runs, res)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no ESP results in the guest output: %s", tail(out, 600))
	}
	return runs, nil
}

// espCompare takes the best run of each engine and size, picks ocfw's
// engine at size mtu from them, and sets it against the kernel's default
// at every size.
func espCompare(runs []esp.Result, mtu int) (*espResult, error) {
	best := runs[0]
	best.Rows = append([]esp.Row(nil), runs[0].Rows...)
	for _, run := range runs[1:] {
		for _, row := range run.Rows {
			for i := range best.Rows {
				b := &best.Rows[i]
				if b.Engine == row.Engine && b.Size == row.Size && row.Err == "" && (b.Err != "" || row.MBps > b.MBps) {
					*b = row
				}
			}
		}
	}
	def := ""
	for _, row := range best.Rows {
		if row.Driver == best.Default {
			def = row.Engine
		}
	}
	if def == "" {
		return nil, fmt.Errorf("the kernel's default %q is not among the engines measured", best.Default)
	}
	choice, err := esp.Choose(&best, mtu, ocf.DefaultMargin)
	if err != nil {
		return nil, err
	}
	res := &espResult{Cipher: best.Cipher + "+" + best.Auth, Trials: len(runs), Default: best.Default, DefaultID: def,
		Choice: choice.Driver, ChoiceID: choice.Engine, Measurement: best}
	for _, row := range best.Rows {
		if row.Engine != def {
			continue
		}
		c, ok := best.Row(choice.Engine, row.Size)
		if !ok || c.Err != "" {
			return nil, fmt.Errorf("no %s figure at %d bytes: %s", choice.Engine, row.Size, c.Err)
		}
		er := espRow{Size: row.Size, Default: row.MBps, Choice: c.MBps, DefaultCPU: row.CPU, ChoiceCPU: c.CPU}
		if row.MBps > 0 {
			er.Ratio = c.MBps / row.MBps
		}
		res.Rows = append(res.Rows, er)
	}
	return res, nil
}

func espTable(b *strings.Builder, e *espResult) {
	fmt.Fprintf(b, "### 7. ESP throughput: ocfw's engine choice vs the kernel's default, one QEMU boot\n\n")
	fmt.Fprintf(b, "%s; ESP %s in tunnel mode between two network namespaces over veth, UDP payload received per second; best of %d run(s) of `espspeed.Measure` (10 s budget each). The test engine sleeps %d µs per request. Kernel's default (highest registered priority): %s (%s). ocfw's choice (the fastest engine at %d bytes beating software by %.0f%%, else software): %s (%s). Ratios only: TCG says nothing about a board's absolute speed.\n\n",
		e.Kernel, e.Cipher, e.Trials, e.DelayUS, e.DefaultID, e.Default, kcrypto.MTU, ocf.DefaultMargin*100, e.ChoiceID, e.Choice)
	fmt.Fprintf(b, "| size | default MB/s | ocfw's MB/s | ratio | CPU default / ocfw's |\n|---|---|---|---|---|\n")
	for _, r := range e.Rows {
		fmt.Fprintf(b, "| %d | %.3f | %.3f | %.2fx | %.0f%% / %.0f%% |\n", r.Size, r.Default, r.Choice, r.Ratio, r.DefaultCPU*100, r.ChoiceCPU*100)
	}
	fmt.Fprintf(b, "\nEvery engine (MB/s, CPU busy):\n\n| engine | driver |")
	sizes := espSizes(&e.Measurement)
	for _, s := range sizes {
		fmt.Fprintf(b, " %d |", s)
	}
	fmt.Fprintf(b, "\n|---|---|%s\n", strings.Repeat("---|", len(sizes)))
	var seen []string
	for _, r := range e.Measurement.Rows {
		if contains(seen, r.Engine) {
			continue
		}
		seen = append(seen, r.Engine)
		fmt.Fprintf(b, "| %s | %s |", r.Engine, r.Driver)
		for _, s := range sizes {
			if x, ok := e.Measurement.Row(r.Engine, s); ok && x.Err == "" {
				fmt.Fprintf(b, " %.3f (%.0f%%) |", x.MBps, x.CPU*100)
			} else {
				fmt.Fprintf(b, " - |")
			}
		}
		fmt.Fprintf(b, "\n")
	}
	fmt.Fprintf(b, "\n")
}

func espSizes(res *esp.Result) []int {
	var out []int
	for _, r := range res.Rows {
		found := false
		for _, s := range out {
			found = found || s == r.Size
		}
		if !found {
			out = append(out, r.Size)
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
