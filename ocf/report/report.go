// Package report joins what the firmware learns at boot — self-test
// results, the speed table, the hardware/software policy derived from
// them, and the environment they were measured in — into one document,
// as text for the console and JSON for the card.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/soft"
	"github.com/ocfw/ocfw/ocf/speed"
)

// Version of the JSON layout.
const Version = 1

// Environment is where the report was made.
type Environment struct {
	Kernel    string   `json:"kernel"`
	CPU       string   `json:"cpu"`
	GOARCH    string   `json:"goarch"`
	GoVersion string   `json:"go_version"`
	Board     string   `json:"board,omitempty"`
	Engines   []Engine `json:"engines"`
}

// Engine is one engine as found on the system.
type Engine struct {
	ID       string `json:"id,omitempty"` // catalog id, when known
	Driver   string `json:"driver"`
	Module   string `json:"module,omitempty"`
	Priority int    `json:"priority,omitempty"`
	Present  bool   `json:"present"`
}

// Report is one boot's (or one host run's) findings.
type Report struct {
	Version  int               `json:"version"`
	Boot     int               `json:"boot,omitempty"` // boot counter on the card
	Env      Environment       `json:"environment"`
	SelfTest []selftest.Result `json:"selftest"`
	Speed    []speed.Row       `json:"speed"`
	Policy   ocf.Policy        `json:"policy"`
	Notes    []string          `json:"notes,omitempty"`
}

// Failed reports whether any present engine failed its self-test.
func (r *Report) Failed() bool {
	for _, t := range r.SelfTest {
		if t.Status == selftest.Fail {
			return true
		}
	}
	return false
}

// HostEnvironment describes the machine this process runs on.
func HostEnvironment() Environment {
	env := Environment{GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		env.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				env.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return env
}

// DefaultMargin is how much faster than software an engine must be at a
// size before the policy sends requests of that size to it: below that,
// the noise of one boot's measurement could flip the choice.
const DefaultMargin = 0.15

// DerivePolicy turns self-test and speed results into a dispatcher
// policy: engines that failed are excluded, engines that passed are
// trusted, and for each cipher the engine that beats Go software by
// margin from the smallest request size on (at every larger size too) is
// preferred from that size. A cipher no engine beats stays in software.
func DerivePolicy(tests []selftest.Result, rows []speed.Row, margin float64) ocf.Policy {
	p := ocf.Policy{Ciphers: map[string]ocf.CipherPolicy{}}
	failed := map[string]string{}
	passed := map[string]bool{}
	for _, t := range tests {
		switch t.Status {
		case selftest.Fail:
			reason := t.Cipher + ": self-test failed"
			if t.Failure != nil {
				reason = t.Cipher + ": " + t.Failure.String()
			}
			if _, seen := failed[t.Engine]; !seen {
				failed[t.Engine] = reason
			}
		case selftest.Pass:
			passed[t.Engine] = true
		}
	}
	if len(failed) > 0 {
		p.Failed = failed
	}
	for e := range passed {
		if _, bad := failed[e]; !bad && e != soft.Name {
			p.Trusted = append(p.Trusted, e)
		}
	}
	sort.Strings(p.Trusted)

	ciphers := map[string]bool{}
	sw := map[string]speed.Row{}
	for _, r := range rows {
		ciphers[r.Cipher] = true
		if r.Engine == soft.Name && r.Err == "" {
			sw[r.Cipher] = r
		}
	}
	for _, t := range tests {
		ciphers[t.Cipher] = true
	}
	for cipher := range ciphers {
		best, bestMin, bestTop := "", 0, 0.0
		ref, haveRef := sw[cipher]
		for _, r := range rows {
			if r.Cipher != cipher || !r.Hardware || r.Err != "" || !haveRef {
				continue
			}
			if _, bad := failed[r.Engine]; bad {
				continue
			}
			min, ok := threshold(r, ref, margin)
			if !ok {
				continue
			}
			top := r.Cells[len(r.Cells)-1].KBps
			if best == "" || min < bestMin || (min == bestMin && top > bestTop) {
				best, bestMin, bestTop = r.Engine, min, top
			}
		}
		if best == "" {
			p.Ciphers[cipher] = ocf.CipherPolicy{SoftwareOnly: true}
		} else {
			p.Ciphers[cipher] = ocf.CipherPolicy{MinHardware: bestMin, Driver: best}
		}
	}
	return p
}

// threshold is the smallest measured size from which hw beats sw by
// margin at that size and every larger one.
func threshold(hw, sw speed.Row, margin float64) (int, bool) {
	min, ok := 0, false
	for i := len(hw.Cells) - 1; i >= 0; i-- {
		c := hw.Cells[i]
		ref := sw.KBps(c.Size)
		if ref <= 0 || c.KBps < ref*(1+margin) {
			break
		}
		min, ok = c.Size, true
	}
	return min, ok
}

// JSON renders the report, indented, with a trailing newline.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Read parses a report written by JSON, refusing other documents.
func Read(rd io.Reader) (*Report, error) {
	dec := json.NewDecoder(rd)
	var r Report
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("not an ocfw report: %w", err)
	}
	if r.Version != Version {
		return nil, fmt.Errorf("report version %d: this ocfw reads version %d", r.Version, Version)
	}
	return &r, nil
}

// WriteText prints the report as the console shows it: environment,
// self-test summary, speed table, policy.
func (r *Report) WriteText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ocfw crypto report")
	if r.Boot > 0 {
		fmt.Fprintf(&b, ", boot %d", r.Boot)
	}
	fmt.Fprintf(&b, "\nkernel %s, %s, %s (%s)\n", orDash(r.Env.Kernel), orDash(r.Env.CPU), r.Env.GOARCH, r.Env.GoVersion)
	for _, e := range r.Env.Engines {
		state := "present"
		if !e.Present {
			state = "absent"
		}
		fmt.Fprintf(&b, "engine %-20s %-8s module %s\n", e.Driver, state, orDash(e.Module))
	}
	b.WriteString("\nself-test:\n")
	WriteSelfTest(&b, r.SelfTest)
	if len(r.Speed) > 0 {
		b.WriteString("\n")
		if err := speed.WriteTable(&b, r.Speed); err != nil {
			return err
		}
	}
	b.WriteString("\npolicy:\n")
	WritePolicy(&b, r.Policy)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteSelfTest prints one line per result and a summary line.
func WriteSelfTest(w io.Writer, results []selftest.Result) {
	var pass, fail, absent int
	for _, t := range results {
		line := fmt.Sprintf("  %-6s %-12s %-22s", strings.ToUpper(string(t.Status)), t.Cipher, t.Engine)
		switch t.Status {
		case selftest.Pass:
			pass++
			line += fmt.Sprintf(" %d known answers, %d cross-checks, %d ms", t.KATs, t.CrossChecks, t.Millis)
		case selftest.Fail:
			fail++
			if t.Failure != nil {
				line += " " + t.Failure.String()
			}
		case selftest.Absent:
			absent++
			line += " " + t.Reason
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintf(w, "self-test: %d passed, %d failed, %d absent\n", pass, fail, absent)
}

// WritePolicy prints a policy as `ocf policy` shows it.
func WritePolicy(w io.Writer, p ocf.Policy) {
	names := make([]string, 0, len(p.Ciphers))
	for c := range p.Ciphers {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		cp := p.Ciphers[c]
		switch {
		case cp.SoftwareOnly:
			fmt.Fprintf(w, "  %-12s software at every size\n", c)
		case cp.Driver != "":
			fmt.Fprintf(w, "  %-12s %s from %d bytes, software below\n", c, cp.Driver, cp.MinHardware)
		default:
			fmt.Fprintf(w, "  %-12s any engine from %d bytes\n", c, cp.MinHardware)
		}
	}
	failed := make([]string, 0, len(p.Failed))
	for e := range p.Failed {
		failed = append(failed, e)
	}
	sort.Strings(failed)
	for _, e := range failed {
		fmt.Fprintf(w, "  excluded %s: %s\n", e, p.Failed[e])
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
