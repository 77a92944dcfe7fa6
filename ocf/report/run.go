package report

import (
	"fmt"
	"io"
	"time"

	"github.com/ocfw/ocfw/ocf/probe"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
)

// RunOptions tune a full run.
type RunOptions struct {
	SelfTest selftest.Options
	// Speed options; when Speed.Duration is 0 the cell time is derived
	// from SpeedBudget.
	Speed speed.Options
	// SpeedBudget bounds the whole speed table when no cell time is
	// given: the cell time is the budget over the number of cells,
	// between MinCell and 1s.
	SpeedBudget time.Duration
	// NoSpeed skips the speed table (self-test and policy only).
	NoSpeed bool
	// Margin for the policy; 0 means DefaultMargin.
	Margin float64
	// Progress, when set, gets a line per step (the console at boot).
	Progress io.Writer
}

// MinCell is the shortest cell the budget may give: shorter cells are
// dominated by timer granularity and scheduling on a 500 MHz board.
const MinCell = 50 * time.Millisecond

// Run self-tests every present target, measures those that passed, derives
// the policy and returns the report. Absent targets are reported absent;
// engines that failed are not measured (a hung engine would hang the
// table) and are excluded by the policy.
func Run(targets []probe.Target, opt RunOptions) *Report {
	r := &Report{Version: Version, Env: HostEnvironment()}
	seen := map[string]bool{}
	for _, t := range targets {
		if !seen[t.Name] {
			seen[t.Name] = true
			r.Env.Engines = append(r.Env.Engines, Engine{ID: t.Engine, Driver: t.Name, Module: t.Module, Present: t.Present()})
		}
	}
	progress := func(format string, args ...any) {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, format+"\n", args...)
		}
	}
	var passed []probe.Target
	for _, t := range targets {
		if !t.Present() {
			r.SelfTest = append(r.SelfTest, selftest.AbsentResult(t.Name, t.Cipher, t.Reason))
			progress("selftest %-12s %-22s absent: %s", t.Cipher, t.Name, t.Reason)
			continue
		}
		res := selftest.Check(t.Driver, t.Cipher, opt.SelfTest)
		res.Engine = t.Name
		r.SelfTest = append(r.SelfTest, res)
		if res.Status == selftest.Pass {
			passed = append(passed, t)
			progress("selftest %-12s %-22s pass (%d ms)", t.Cipher, t.Name, res.Millis)
		} else {
			progress("selftest %-12s %-22s FAIL: %v", t.Cipher, t.Name, res.Failure)
		}
	}
	if !opt.NoSpeed && len(passed) > 0 {
		so := opt.Speed
		if so.Duration == 0 {
			sizes := len(so.Sizes)
			if sizes == 0 {
				sizes = len(speed.Sizes)
			}
			so.Duration = CellTime(opt.SpeedBudget, len(passed)*sizes)
		}
		for _, t := range passed {
			row := speed.Measure(t.Driver, t.Cipher, so)
			row.Engine = t.Name
			r.Speed = append(r.Speed, row)
			progress("speed    %-12s %-22s %s", t.Cipher, t.Name, summary(row))
		}
	}
	r.Policy = Derive(r.SelfTest, r.Speed, nil, opt.Margin).Dispatcher
	return r
}

// CellTime spreads budget over cells, between MinCell and one second; a
// zero budget means one second per cell.
func CellTime(budget time.Duration, cells int) time.Duration {
	if budget <= 0 || cells <= 0 {
		return time.Second
	}
	d := budget / time.Duration(cells)
	return min(max(d, MinCell), time.Second)
}

func summary(row speed.Row) string {
	if row.Err != "" {
		return "error: " + row.Err
	}
	if len(row.Cells) == 0 {
		return "no cells"
	}
	last := row.Cells[len(row.Cells)-1]
	return fmt.Sprintf("%.0f kB/s at %d bytes", last.KBps, last.Size)
}
