package esp

import (
	"fmt"

	"github.com/ocfw/ocfw/ocf"
)

// Measurements turns a run into the policy's measurements: one per
// engine, its ESP payload throughput (kB/s) at the given sizes (all
// measured sizes when none are given), named by driver as the kernel
// engine choice (ocf/kcrypto) names engines; software is the one row
// that is not hardware, so kcrypto takes it as the reference. An engine
// with an error at any of those sizes is left out: a step that broke
// off proves nothing, and the engine is not chosen on it.
func Measurements(res *Result, sizes ...int) []ocf.Measurement {
	var order []string
	byEngine := map[string]*ocf.Measurement{}
	bad := map[string]bool{}
	for _, r := range res.Rows {
		if len(sizes) > 0 && !contains(sizes, r.Size) {
			continue
		}
		m, ok := byEngine[r.Engine]
		if !ok {
			m = &ocf.Measurement{Engine: r.Driver, Cipher: res.Cipher, Hardware: r.Hardware}
			byEngine[r.Engine] = m
			order = append(order, r.Engine)
		}
		if r.Err != "" {
			bad[r.Engine] = true
			continue
		}
		m.Sizes = append(m.Sizes, r.Size)
		m.KBps = append(m.KBps, r.MBps*1000)
	}
	var out []ocf.Measurement
	for _, id := range order {
		if m := byEngine[id]; !bad[id] && len(m.Sizes) > 0 {
			out = append(out, *m)
		}
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// KernelPolicy is the policy for the kernel's engine choice decided on
// ESP at one packet size (kcrypto.MTU for tunnel traffic): ocf's
// DerivePolicy over Measurements(res, size) with the software row as the
// reference, so the engine chosen for the cipher is the one that beats
// software by margin (0: ocf.DefaultMargin) at that size and is the
// fastest there; none beating it keeps the cipher in software. Engines
// the verdicts failed are excluded. With Measurements(res, size) as
// Speeds it is what kcrypto.Promote needs to rank on ESP:
//
//	kcrypto.Promote(kcrypto.Input{Engines: e, Policy: esp.KernelPolicy(res, v, kcrypto.MTU, 0),
//		Speeds: esp.Measurements(res, kcrypto.MTU), Ciphers: []string{res.Cipher}})
func KernelPolicy(res *Result, verdicts []ocf.Verdict, size int, margin float64) ocf.Policy {
	return ocf.DeriveOnSoftware(verdicts, Measurements(res, size), ocf.Margin(margin))
}

// Choose is the row ocfw's policy makes the kernel's choice at size: the
// fastest hardware engine among those that beat software by margin (0:
// ocf.DefaultMargin) there, else software; rows with errors never win.
// It errs when software was not measured at size.
func Choose(res *Result, size int, margin float64) (Row, error) {
	margin = ocf.Margin(margin)
	var soft *Row
	for i := range res.Rows {
		r := &res.Rows[i]
		if r.Size == size && !r.Hardware && r.Err == "" {
			soft = r
			break
		}
	}
	if soft == nil {
		return Row{}, fmt.Errorf("esp: no software measurement at %d bytes to compare with", size)
	}
	best := *soft
	for _, r := range res.Rows {
		if r.Size == size && r.Hardware && r.Err == "" && ocf.Beats(r.MBps, soft.MBps, margin) && r.MBps > best.MBps {
			best = r
		}
	}
	return best, nil
}
