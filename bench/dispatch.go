package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// dispatchCell is the dispatcher's cost over a direct software session for
// one cipher and size (BenchmarkDispatchOverhead: the two alternate in
// rounds of 256 requests inside one benchmark; fastest round of each).
type dispatchCell struct {
	Cipher       string  `json:"cipher"`
	Size         int     `json:"size"`
	DirectNs     float64 `json:"direct_ns_req"`
	DispatchNs   float64 `json:"dispatch_ns_req"`
	OverheadPct  float64 `json:"overhead_pct"`
	AllocsPerReq float64 `json:"allocs_per_req"`
}

// overheadReqsPerOp is BenchmarkDispatchOverhead's requests per op: two
// rounds (direct and dispatcher) of 256.
const overheadReqsPerOp = 512

// runDispatch is benchmark item 2: the dispatcher's overhead over a
// direct soft session (BenchmarkDispatchOverhead in ocf).
func runDispatch(ctx context.Context, r *runner) error {
	bin, err := r.goTestBinary(ctx, "./ocf", "ocf.test")
	if err != nil {
		return err
	}
	out, err := r.run(ctx, nil, bin, "-test.run", "^$", "-test.bench", "^BenchmarkDispatchOverhead$",
		"-test.benchtime", r.benchtime, "-test.benchmem", "-test.count", strconv.Itoa(r.trials))
	if err != nil {
		return err
	}
	cells, err := parseDispatch(out)
	if err != nil {
		return err
	}
	r.res.Dispatch = cells
	worst16, allocs := 0.0, 0.0
	for _, c := range cells {
		if c.Size == 16 && c.Cipher != "null" {
			worst16 = max(worst16, c.OverheadPct)
		}
		allocs = max(allocs, c.AllocsPerReq)
	}
	r.res.goalMax("2", "dispatcher overhead over direct soft at 16 bytes (worst cipher)", "<= 10%", "%", worst16, 10)
	r.res.goalMax("2", "allocations per request through the dispatcher (any cipher, size)", "0", "allocs", allocs, 0)
	return nil
}

// parseDispatch folds -count runs of BenchmarkDispatchOverhead into one
// cell per cipher and size: the fastest direct and dispatcher figures of
// all runs, and the most allocations seen.
func parseDispatch(out string) ([]dispatchCell, error) {
	var cells []dispatchCell
	idx := map[string]int{}
	for _, g := range parseGoBench(out) {
		rest, ok := strings.CutPrefix(g.Name, "BenchmarkDispatchOverhead/")
		if !ok {
			continue
		}
		i := strings.LastIndex(rest, "/")
		if i < 0 {
			continue
		}
		size, err := strconv.Atoi(rest[i+1:])
		if err != nil {
			continue
		}
		d, okd := g.Metrics["direct-ns/req"]
		p, okp := g.Metrics["dispatch-ns/req"]
		if !okd || !okp {
			return nil, fmt.Errorf("%s: no direct-ns/req or dispatch-ns/req metric", g.Name)
		}
		k, exists := idx[rest]
		if !exists {
			k = len(cells)
			idx[rest] = k
			cells = append(cells, dispatchCell{Cipher: rest[:i], Size: size, DirectNs: math.Inf(1), DispatchNs: math.Inf(1)})
		}
		c := &cells[k]
		c.DirectNs = min(c.DirectNs, d)
		c.DispatchNs = min(c.DispatchNs, p)
		c.AllocsPerReq = max(c.AllocsPerReq, g.Metrics["allocs/op"]/overheadReqsPerOp)
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("no BenchmarkDispatchOverhead results in: %s", tail(out, 400))
	}
	for i := range cells {
		cells[i].OverheadPct = 100 * (cells[i].DispatchNs/cells[i].DirectNs - 1)
	}
	return cells, nil
}

func dispatchTable(b *strings.Builder, cells []dispatchCell) {
	fmt.Fprintf(b, "### 2. Dispatcher overhead over a direct software session\n\n")
	fmt.Fprintf(b, "`BenchmarkDispatchOverhead` (ocf): direct and dispatcher sessions alternate in rounds of 256 requests in one process; fastest round of each, per request.\n\n")
	fmt.Fprintf(b, "| cipher | size | direct ns/req | dispatcher ns/req | overhead | allocs/req |\n|---|---|---|---|---|---|\n")
	for _, c := range cells {
		fmt.Fprintf(b, "| %s | %d | %.1f | %.1f | %+.1f%% | %g |\n", c.Cipher, c.Size, c.DirectNs, c.DispatchNs, c.OverheadPct, c.AllocsPerReq)
	}
	fmt.Fprintf(b, "\n")
}
