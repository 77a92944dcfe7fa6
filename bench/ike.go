package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ocfw/ocfw/internal/lab/strongswan"
)

// ikeResult is the IKE section: tunnel setup time, ocfw's endpoint
// against charon-to-charon, and ESP throughput of an IKEv2-keyed tunnel
// against a manually keyed one, from one world VM
// (internal/lab/strongswan's TestBenchIKE).
type ikeResult struct {
	strongswan.BenchResult
	OCFWMedian, CharonMedian, SwanctlMedian float64
	// The fastest trial of each side and their ratio: what a quiet
	// moment of the host gave.
	OCFWBest, CharonBest, BestRatio float64
	// SetupRatio is ocfw's median over charon's; NetRatio the same with
	// swanctl's own start taken off charon's.
	SetupRatio, NetRatio float64
	// Best MB/s of each side and the ratios IKEv2 over manual, with the
	// same SA settings (no ESN, ESPRatio) and as ocfw tunnel keys makes
	// them (ESN).
	IKEBest, ManualBest, ManualNoESNBest, ESPRatio, ESNRatio float64
	// PairRatios is IKEv2 over manual (no ESN) for each pair of streams
	// run back to back; PairMedian their median, the figure the goal
	// checks, and PairQ1..PairQ3 and PairMin..PairMax their spread. A
	// pair sees one moment of the host, so the host's drift (the cause
	// of the best-of ratios' swing) cancels within it.
	PairRatios                                   []float64
	PairMedian, PairQ1, PairQ3, PairMin, PairMax float64
}

// runIKE runs TestBenchIKE with -trials trials per side.
func runIKE(ctx context.Context, r *runner) error {
	out, err := r.run(ctx, []string{strongswan.EnvBench + "=" + strconv.Itoa(r.trials)},
		"go", "test", "-count=1", "-timeout", "30m", "-run", "^TestBenchIKE$", "-v", "./internal/lab/strongswan")
	if err != nil {
		return err
	}
	if strings.Contains(out, "--- SKIP: TestBenchIKE") {
		return fmt.Errorf("the world VM test skipped (kernel package, QEMU or apt-get missing: `ocfw kernel fetch`): %s", tail(out, 400))
	}
	res, err := parseIKE(out)
	if err != nil {
		return err
	}
	r.res.IKE = res
	r.res.goalMax("IKE", "tunnel setup, first IKE_SA_INIT to traffic: ocfw initiating vs charon (median)", "<= 1.0x", "x", res.SetupRatio, 1.0)
	r.res.goal("IKE", "ESP throughput, IKEv2-keyed vs manually keyed tunnel, same cipher, no ESN on either (median of back-to-back pairs)", ">= 0.95x", res.PairMedian, 0.95)
	return nil
}

func parseIKE(out string) (*ikeResult, error) {
	for _, line := range strings.Split(out, "\n") {
		_, j, ok := strings.Cut(line, strongswan.BenchMarker)
		if !ok {
			continue
		}
		res := &ikeResult{}
		if err := json.Unmarshal([]byte(strings.TrimSpace(j)), &res.BenchResult); err != nil {
			return nil, fmt.Errorf("the IKE bench's result: %v", err)
		}
		b := res.BenchResult
		if len(b.OCFWSetup) == 0 || len(b.CharonSetup) == 0 || len(b.IKEMBps) == 0 || len(b.ManualMBps) == 0 || len(b.ManualNoESNMBps) == 0 {
			return nil, fmt.Errorf("the IKE bench's result lacks figures: %s", j)
		}
		res.OCFWMedian, res.CharonMedian, res.SwanctlMedian = median(b.OCFWSetup), median(b.CharonSetup), median(b.SwanctlStart)
		res.SetupRatio = res.OCFWMedian / res.CharonMedian
		res.OCFWBest, res.CharonBest = minOf(b.OCFWSetup), minOf(b.CharonSetup)
		res.BestRatio = res.OCFWBest / res.CharonBest
		if net := res.CharonMedian - res.SwanctlMedian; net > 0 {
			res.NetRatio = res.OCFWMedian / net
		}
		res.IKEBest, res.ManualBest, res.ManualNoESNBest = maxOf(b.IKEMBps), maxOf(b.ManualMBps), maxOf(b.ManualNoESNMBps)
		if res.ManualNoESNBest > 0 {
			res.ESPRatio = res.IKEBest / res.ManualNoESNBest
		}
		if res.ManualBest > 0 {
			res.ESNRatio = res.IKEBest / res.ManualBest
		}
		for i := range min(len(b.IKEMBps), len(b.ManualNoESNMBps)) {
			if b.ManualNoESNMBps[i] > 0 {
				res.PairRatios = append(res.PairRatios, b.IKEMBps[i]/b.ManualNoESNMBps[i])
			}
		}
		if len(res.PairRatios) == 0 {
			return nil, fmt.Errorf("the IKE bench's result has no pair with a manual figure: %s", j)
		}
		res.PairMedian, res.PairQ1, res.PairQ3 = median(res.PairRatios), quantile(res.PairRatios, 0.25), quantile(res.PairRatios, 0.75)
		res.PairMin, res.PairMax = minOf(res.PairRatios), maxOf(res.PairRatios)
		return res, nil
	}
	return nil, fmt.Errorf("no IKE bench result in the test's output: %s", tail(out, 600))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// quantile is the q-quantile of xs, interpolated between the nearest
// ranks (q 0.5 is the median).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func ikeTable(b *strings.Builder, e *ikeResult) {
	fmt.Fprintf(b, "### 8. IKEv2: tunnel setup time and ESP throughput, one world VM\n\n")
	fmt.Fprintf(b, "Debian linux-image-686 under `qemu-system-i386 -cpu pentium2` (TCG), strongSwan 5.9.8 (Debian bookworm i386) and ocfw's `router/ike` (in the world agent, GOARCH=386 GO386=softfloat) in network namespaces over veth. Setup: IKE %s, ESP %s, PSK; from the command that starts the initiator (ocfw: the agent's `ike`; charon: `swanctl --initiate`) to a TCP echo through the tunnel, timed on the host; the same charon configuration answers both; %d trials per side, alternating, median.\n\n",
		e.Suite, e.ESP, len(e.OCFWSetup))
	fmt.Fprintf(b, "| initiator | median s | best s | trials s |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| ocfw `router/ike` | %.3f | %.3f | %s |\n", e.OCFWMedian, e.OCFWBest, numList(e.OCFWSetup))
	fmt.Fprintf(b, "| charon (`swanctl --initiate`) | %.3f | %.3f | %s |\n", e.CharonMedian, e.CharonBest, numList(e.CharonSetup))
	fmt.Fprintf(b, "| ratio ocfw / charon | %.2fx | %.2fx | |\n", e.SetupRatio, e.BestRatio)
	fmt.Fprintf(b, "| `swanctl --stats` (starting swanctl) | %.3f | | %s |\n", e.SwanctlMedian, numList(e.SwanctlStart))
	fmt.Fprintf(b, "| ratio ocfw / (charon - swanctl's start) | %.2fx | | |\n\n", e.NetRatio)
	fmt.Fprintf(b, "ESP throughput: a TCP stream for %.0f s through the ocfw-charon tunnel (charon sending, ocfw's SAs installed through `router/ipsec`; no ESN: charon's `esp_proposals` has none) and through manually keyed ones (`router/ipsec`'s `Seqs` at both ends, 128-packet window; with ESN as `ocfw tunnel keys` makes them, and without), all %s; MB/s of payload the receiver counted. %d rounds: in each, the IKEv2-keyed stream and the manual one without ESN back to back, their order alternating from round to round (A B, B A, ...), then the manual one with ESN. The figure is the median of the per-pair ratios; a pair sees one moment of the host, so its drift cancels within the pair.\n\n",
		e.StreamSeconds, e.ESP, len(e.IKEMBps))
	fmt.Fprintf(b, "| IKEv2 / manual (no ESN on either), per pair | value |\n|---|---|\n")
	fmt.Fprintf(b, "| median | **%.2fx** |\n", e.PairMedian)
	fmt.Fprintf(b, "| quartiles (25%% - 75%%) | %.2fx - %.2fx |\n", e.PairQ1, e.PairQ3)
	fmt.Fprintf(b, "| range | %.2fx - %.2fx |\n", e.PairMin, e.PairMax)
	fmt.Fprintf(b, "| pairs, in run order | %s |\n\n", numList(e.PairRatios))
	fmt.Fprintf(b, "| tunnel | median MB/s | best MB/s | runs MB/s |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| IKEv2-keyed | %.3f | %.3f | %s |\n", median(e.IKEMBps), e.IKEBest, numList(e.IKEMBps))
	fmt.Fprintf(b, "| manually keyed, no ESN | %.3f | %.3f | %s |\n", median(e.ManualNoESNMBps), e.ManualNoESNBest, numList(e.ManualNoESNMBps))
	fmt.Fprintf(b, "| manually keyed, ESN | %.3f | %.3f | %s |\n", median(e.ManualMBps), e.ManualBest, numList(e.ManualMBps))
	fmt.Fprintf(b, "| ratio of the best runs, IKEv2 / manual no ESN (the old figure) | | %.2fx | |\n", e.ESPRatio)
	fmt.Fprintf(b, "| ratio of the best runs, IKEv2 (no ESN) / manual with ESN | | %.2fx | |\n\n", e.ESNRatio)
	if e.IKEState != "" {
		fmt.Fprintf(b, "The senders' SAs as the kernel holds them (`ip -d xfrm state`, keys blanked):\n\n```\n# IKEv2-keyed (charon, east2)\n%s\n# manual, no ESN (router/ipsec, md)\n%s\n```\n\n", e.IKEState, e.ManualNoESNState)
	}
}

func numList(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%.3f", x))
	}
	return strings.Join(s, ", ")
}

// ikeMemRow is one run of bench/ikemem: the daemon under qemu-arm with
// some peers.
type ikeMemRow struct {
	Peers, Rounds int
	Report        ikeMemReport
	// QemuMaxRSSKiB is qemu-arm's peak resident set: the emulator and its
	// translated code with the program; an upper bound only.
	QemuMaxRSSKiB int64
	PeersTook     string
}

// ikeMemReport is bench/ikemem's Report.
type ikeMemReport struct {
	GOARCH        string `json:"goarch"`
	Peers         int    `json:"peers"`
	Established   int    `json:"established"`
	Installs      int64  `json:"child_installs"`
	PeakHeapInuse uint64 `json:"peak_heap_inuse"`
	PeakSys       uint64 `json:"peak_sys"`
	HeapInuse     uint64 `json:"heap_inuse"`
	Sys           uint64 `json:"sys"`
	StackInuse    uint64 `json:"stack_inuse"`
	Goroutines    int    `json:"goroutines"`
	Baseline      uint64 `json:"baseline_heap_inuse"`
}

// ikeMemBudget is the share of the NSLU2's 32 MiB the IKE daemon may
// take (Go heap in use at its peak, 4 peers rekeying): an eighth.
const ikeMemBudget = 4 << 20

// runIKEMem is the ikemem section: bench/ikemem's daemon built for the
// NSLU2 (GOARCH=arm GOARM=5) under qemu-arm, its peers native.
func runIKEMem(ctx context.Context, r *runner) error {
	qemu, err := exec.LookPath("qemu-arm")
	if err != nil {
		return fmt.Errorf("qemu-arm (Debian's qemu-user) is needed: %v", err)
	}
	armBin, hostBin := filepath.Join(r.tmp, "ikemem-arm"), filepath.Join(r.tmp, "ikemem")
	if _, err := r.run(ctx, []string{"GOOS=linux", "GOARCH=arm", "GOARM=5", "CGO_ENABLED=0"}, "go", "build", "-o", armBin, "./bench/ikemem"); err != nil {
		return err
	}
	if _, err := r.run(ctx, []string{"CGO_ENABLED=0"}, "go", "build", "-o", hostBin, "./bench/ikemem"); err != nil {
		return err
	}
	res := &ikeMemResult{Budget: ikeMemBudget}
	for i, peers := range []int{1, 4, 16} {
		row, err := ikeMemRun(ctx, qemu, armBin, hostBin, 15500+10*i, peers, 3)
		if err != nil {
			return err
		}
		r.logf("ikemem: %d peers: peak heap %d KiB, peak sys %d KiB, qemu-arm max RSS %d KiB", peers,
			row.Report.PeakHeapInuse>>10, row.Report.PeakSys>>10, row.QemuMaxRSSKiB)
		res.Rows = append(res.Rows, *row)
		if peers == 4 {
			r.res.goalMax("IKE", "IKE daemon's peak Go heap, 4 peers rekeying, GOARCH=arm under qemu-arm", "<= 4 MiB (1/8 of the NSLU2's 32 MiB)", "MiB",
				float64(row.Report.PeakHeapInuse)/(1<<20), float64(ikeMemBudget)/(1<<20))
		}
	}
	r.res.IKEMem = res
	return nil
}

type ikeMemResult struct {
	Budget int64
	Rows   []ikeMemRow
}

func ikeMemRun(ctx context.Context, qemu, armBin, hostBin string, port, peers, rounds int) (*ikeMemRow, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	d := exec.CommandContext(ctx, qemu, armBin, "daemon", "-peers", strconv.Itoa(peers), "-port", strconv.Itoa(port))
	stdin, err := d.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := d.StdoutPipe()
	if err != nil {
		return nil, err
	}
	d.Stderr = os.Stderr
	if err := d.Start(); err != nil {
		return nil, err
	}
	defer d.Process.Kill()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		return nil, fmt.Errorf("ikemem daemon under qemu-arm did not start: %q %v", sc.Text(), sc.Err())
	}
	out, err := exec.CommandContext(ctx, hostBin, "peers", "-peers", strconv.Itoa(peers), "-port", strconv.Itoa(port),
		"-rounds", strconv.Itoa(rounds)).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ikemem peers: %v: %s", err, out)
	}
	stdin.Close()
	if !sc.Scan() {
		return nil, fmt.Errorf("ikemem daemon gave no report: %v", sc.Err())
	}
	row := &ikeMemRow{Peers: peers, Rounds: rounds, PeersTook: strings.TrimSpace(string(out))}
	if err := json.Unmarshal(sc.Bytes(), &row.Report); err != nil {
		return nil, fmt.Errorf("ikemem daemon's report: %v: %s", err, sc.Text())
	}
	if err := d.Wait(); err != nil {
		return nil, fmt.Errorf("ikemem daemon: %v", err)
	}
	if ru, ok := d.ProcessState.SysUsage().(*syscall.Rusage); ok {
		row.QemuMaxRSSKiB = ru.Maxrss
	}
	if row.Report.Established != peers {
		return nil, fmt.Errorf("ikemem daemon: %d of %d peers established", row.Report.Established, peers)
	}
	return row, nil
}

func ikeMemTable(b *strings.Builder, e *ikeMemResult) {
	fmt.Fprintf(b, "### 9. The IKE daemon's memory on the ARM stand-in (qemu-arm, user mode)\n\n")
	fmt.Fprintf(b, "`bench/ikemem` built for the NSLU2 (`GOARCH=arm GOARM=5`): one `router/ike` endpoint, responder for N peers over loopback (the peers run natively); each peer brings its IKE SA up (aes128-sha256-modp2048, ESP aes128-sha256) and does %d rounds of a CHILD SA rekey and an IKE SA rekey. Go's own figures, sampled every 20 ms (peak) and after the run and a GC (end); budget for the peak heap: %d MiB, an eighth of the NSLU2's 32 MiB. qemu-arm's peak RSS includes the emulator and its translated code: an upper bound, not the board's figure.\n\n",
		e.Rows[0].Rounds, e.Budget>>20)
	fmt.Fprintf(b, "| peers | peak heap in use | peak Go Sys | heap at the end | heap before the endpoint | goroutines at the end | qemu-arm max RSS | CHILD SAs installed |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range e.Rows {
		m := r.Report
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %d | %.1f MiB | %d |\n", r.Peers, kib(m.PeakHeapInuse), kib(m.PeakSys), kib(m.HeapInuse), kib(m.Baseline),
			m.Goroutines, float64(r.QemuMaxRSSKiB)/1024, m.Installs)
	}
	fmt.Fprintf(b, "\n")
}

func kib(n uint64) string { return fmt.Sprintf("%d KiB", n>>10) }
