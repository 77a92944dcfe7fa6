package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/lab/refspeed"
)

// results is bench.json; bench.md is rendered from it.
type results struct {
	Command   string           `json:"command"`
	Started   string           `json:"started"`
	Seconds   float64          `json:"seconds"`
	Host      hostInfoT        `json:"host"`
	Trials    int              `json:"trials"`
	Sections  []sectionStatus  `json:"sections"`
	Goals     []goal           `json:"goals"`
	Crypto    *cryptoResult    `json:"crypto,omitempty"`
	Crypto386 *cryptoResult    `json:"crypto386,omitempty"`
	Dispatch  []dispatchCell   `json:"dispatch,omitempty"`
	AFALG     *afalgResult     `json:"afalg,omitempty"`
	Build     *buildResult     `json:"build,omitempty"`
	Rebuild   *rebuildResult   `json:"rebuild,omitempty"`
	Boot      *bootResult      `json:"boot,omitempty"`
	ESP       *espResult       `json:"esp,omitempty"`
	IKE       *ikeResult       `json:"ike,omitempty"`
	IKEMem    *ikeMemResult    `json:"ikemem,omitempty"`
	V6Mem     *v6memResult     `json:"v6mem,omitempty"`
	V6Time    *v6timeResult    `json:"v6time,omitempty"`
	Manage    *manageResult    `json:"manage,omitempty"`
	DevCrypto *refspeed.Result `json:"devcrypto,omitempty"`
}

type sectionStatus struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
	Skipped string  `json:"skipped,omitempty"`
}

type cryptoResult struct {
	Reference string `json:"reference"`
	Cells     []cell `json:"cells"`
}

// goal is one of the performance targets the benchmarks check (the
// "goal" rows of bench.md and the README; Item is the benchmark item it
// belongs to) and what was measured.
type goal struct {
	Item     string  `json:"item"`
	What     string  `json:"what"`
	Target   string  `json:"target"`
	Measured float64 `json:"measured"`
	Met      bool    `json:"met"`
	// Short is by how much it falls short, in percent of the target.
	Short float64 `json:"short_pct,omitempty"`
	Unit  string  `json:"unit,omitempty"` // "" means a ratio (x)
}

// goal records a "measured >= min" target.
func (r *results) goal(item, what, target string, measured, min float64) {
	g := goal{Item: item, What: what, Target: target, Measured: measured, Met: measured >= min}
	if !g.Met && min > 0 {
		g.Short = 100 * (1 - measured/min)
	}
	r.Goals = append(r.Goals, g)
}

// goalMax records a "measured <= limit" target.
func (r *results) goalMax(item, what, target, unit string, measured, limit float64) {
	g := goal{Item: item, What: what, Target: target, Measured: measured, Met: measured <= limit, Unit: unit}
	if !g.Met {
		g.Short = measured - limit
	}
	r.Goals = append(r.Goals, g)
}

func (r *results) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "bench.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "bench.md"), []byte(r.markdown()), 0o644)
}

// docResults is the committed document that shows the last run's tables,
// between docBegin and docEnd.
const (
	docResults = "docs/benchmarks-results.md"
	docBegin   = "<!-- bench/run results: begin (written by bench/run, do not edit by hand) -->"
	docEnd     = "<!-- bench/run results: end -->"
)

// writeDocSection replaces what lies between the markers in the document
// at path with section, leaving the rest of the document as it was.
func writeDocSection(path, section string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, docBegin), strings.Index(s, docEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no section between %q and %q to replace", path, docBegin, docEnd)
	}
	out := s[:i+len(docBegin)] + "\n\n" + strings.TrimSpace(section) + "\n\n" + s[j:]
	return atomicfile.WriteFile(path, []byte(out), 0o644)
}

func (r *results) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Benchmarks\n\n")
	p("`%s`, started %s on host %s — %s, %d cores (%s), %s; load average %s before, %s after; best of %d interleaved runs per side; %.0f s in all.\n\n",
		r.Command, r.Started, r.Host.Hostname, r.Host.CPU, r.Host.Cores, r.Host.GoVersion, r.Host.OpenSSL, r.Host.LoadBefore, r.Host.LoadAfter, r.Trials, r.Seconds)
	if len(r.Goals) > 0 {
		p("### Goals\n\n| item | what | goal | measured | met? |\n|---|---|---|---|---|\n")
		for _, g := range r.Goals {
			m := fmt.Sprintf("%.2fx", g.Measured)
			if g.Unit != "" {
				m = fmt.Sprintf("%.2f %s", g.Measured, g.Unit)
			}
			met := "yes"
			if !g.Met {
				if g.Unit != "" {
					met = fmt.Sprintf("no (%.2f %s over)", g.Short, g.Unit)
				} else {
					met = fmt.Sprintf("no (%.0f%% short)", g.Short)
				}
			}
			p("| %s | %s | %s | %s | %s |\n", g.Item, g.What, g.Target, m, met)
		}
		p("\n")
	}
	if r.Crypto != nil {
		p("### 1. Go software engine vs OpenSSL (this host)\n\nReference: %s. Cells: Go/OpenSSL ratio (Go MB/s / OpenSSL MB/s, best runs).\n\n", r.Crypto.Reference)
		cryptoTable(&b, r.Crypto.Cells)
	}
	if r.Crypto386 != nil {
		p("### 1b. The boards' build: GOARCH=386 GO386=softfloat vs Debian's i386 OpenSSL, Geode LX instructions only\n\nReference: %s. Cells: Go/OpenSSL ratio (MB/s under the emulator; only the ratio means anything).\n\n", r.Crypto386.Reference)
		cryptoTable(&b, r.Crypto386.Cells)
	}
	if len(r.Dispatch) > 0 {
		dispatchTable(&b, r.Dispatch)
	}
	if r.AFALG != nil {
		afalgTable(&b, r.AFALG)
	}
	if r.Build != nil {
		buildTable(&b, r.Build)
	}
	if r.Rebuild != nil {
		rebuildTable(&b, r.Rebuild)
	}
	if r.Boot != nil {
		bootTable(&b, r.Boot)
	}
	if r.ESP != nil {
		espTable(&b, r.ESP)
	}
	if r.IKE != nil {
		ikeTable(&b, r.IKE)
	}
	if r.IKEMem != nil {
		ikeMemTable(&b, r.IKEMem)
	}
	if r.V6Mem != nil {
		v6memTable(&b, r.V6Mem)
	}
	if r.V6Time != nil {
		v6timeTable(&b, r.V6Time)
	}
	if r.Manage != nil {
		manageTable(&b, r.Manage)
	}
	if r.DevCrypto != nil {
		devCryptoTable(&b, r.DevCrypto)
	}
	var notes []string
	for _, s := range r.Sections {
		switch {
		case s.Error != "":
			notes = append(notes, fmt.Sprintf("- %s: **failed**: %s", s.Name, s.Error))
		case s.Skipped != "":
			notes = append(notes, fmt.Sprintf("- %s: not measured: %s", s.Name, s.Skipped))
		}
	}
	if len(notes) > 0 {
		p("### Not measured\n\n%s\n", strings.Join(notes, "\n"))
	}
	return b.String()
}

func cryptoTable(b *strings.Builder, cells []cell) {
	fmt.Fprintf(b, "| cipher |")
	for _, s := range benchSizes {
		fmt.Fprintf(b, " %d |", s)
	}
	fmt.Fprintf(b, "\n|---|")
	for range benchSizes {
		fmt.Fprintf(b, "---|")
	}
	fmt.Fprintf(b, "\n")
	for _, c := range cryptoCiphers {
		fmt.Fprintf(b, "| %s |", c)
		for _, s := range benchSizes {
			for _, x := range cells {
				if x.Cipher == c && x.Size == s {
					fmt.Fprintf(b, " %.2f (%s/%s) |", x.Ratio, mbs(x.Go), mbs(x.Other))
				}
			}
		}
		fmt.Fprintf(b, "\n")
	}
	fmt.Fprintf(b, "\n")
}

func mbs(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
