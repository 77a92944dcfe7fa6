package report

import (
	"fmt"

	"github.com/ocfw/ocfw/ocf/selftest"
)

// Choose picks from the reports a card keeps, newest first (nil for an
// unreadable one), those of the boots in want; with all, every readable
// one; with neither, the newest readable one. missing is each boot in
// want that no readable report is of.
func Choose(kept []*Report, all bool, want []int) (chosen []*Report, missing []int) {
	for _, r := range kept {
		if r == nil {
			continue
		}
		take := all || (len(want) == 0 && len(chosen) == 0)
		for _, b := range want {
			take = take || b == r.Boot
		}
		if take {
			chosen = append(chosen, r)
		}
	}
	for _, b := range want {
		found := false
		for _, r := range chosen {
			found = found || r.Boot == b
		}
		if !found {
			missing = append(missing, b)
		}
	}
	return chosen, missing
}

// Summary is the report in one line, as a list of kept reports shows
// it: board, kernel and the self-test tally, and whether it ran in QEMU.
func (r *Report) Summary() string {
	s := fmt.Sprintf("%s, kernel %s: self-test %s", orUnknown(r.Env.Board), orUnknown(r.Env.Kernel), r.Tally())
	if r.Env.Emulated() {
		s += " (QEMU)"
	}
	return s
}

// FailedEngines names, once each and in report order, the engines that
// failed a self-test.
func (r *Report) FailedEngines() []string {
	var names []string
	seen := map[string]bool{}
	for _, t := range r.SelfTest {
		if t.Status == selftest.Fail && !seen[t.Engine] {
			seen[t.Engine] = true
			names = append(names, t.Engine)
		}
	}
	return names
}

// ExportName is the file name for the report exported on its own:
// BOARD-boot-N.json, or BOARD-report.json (host-report.json for a host
// run) when it is of no boot.
func (r *Report) ExportName() string {
	b := r.Env.Board
	if b == "" {
		b = "host"
	}
	if r.Boot > 0 {
		return fmt.Sprintf("%s-boot-%d.json", b, r.Boot)
	}
	return b + "-report.json"
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
