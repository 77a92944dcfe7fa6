package chart

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/ocf/report"
)

// Series is one line on a chart: throughput against request size.
type Series struct {
	Label    string
	Points   [][2]float64 // (size bytes, kB/s)
	Dashed   bool         // published results are dashed
	Hardware bool         // a hardware engine: drawn thicker, marked in the legend
}

// Source is one report to draw.
type Source struct {
	Report *report.Report
	// Label names it in the legend; "" means Label(Report, "").
	Label string
}

// Label names a report for a legend: board (or "host"), boot number, and
// whether it was measured under QEMU; fallback (e.g. a file name) when the
// report says nothing about where it comes from.
func Label(r *report.Report, fallback string) string {
	name := r.Env.Board
	if name == "" {
		name = fallback
	}
	if name == "" {
		name = "host"
	}
	// A fallback such as "IMAGE boot 3" (how ocfw report names a kept
	// report) already says which boot: say it once.
	if boot := fmt.Sprintf(" boot %d", r.Boot); r.Boot > 0 && !strings.HasSuffix(name, boot) {
		name += boot
	}
	if r.Env.Emulated() {
		name += " (QEMU)"
	}
	return name
}

// Reference choices for Data.
const (
	// RefAuto overlays the published results from the same class of
	// board (Geode, IXP4xx) and for the engines the reports name.
	RefAuto = "auto"
	RefAll  = "all"
	RefNone = "none"
)

// Data collects the series per cipher from the sources and the published
// results ref selects: RefAuto, RefAll, RefNone, or comma-separated words
// each matched, ignoring case, against a published result's platform and
// engine module (e.g. "glxsb,IXP425").
func Data(sources []Source, ref string) (map[string][]Series, error) {
	out := map[string][]Series{}
	for _, src := range sources {
		r := src.Report
		label := src.Label
		if label == "" {
			label = Label(r, "")
		}
		for _, row := range r.Speed {
			if row.Err != "" && len(row.Cells) == 0 {
				continue
			}
			s := Series{Label: label + ": " + row.Engine, Hardware: row.Hardware}
			if row.Hardware {
				s.Label += " [hardware]"
			}
			if row.Multi > 1 {
				s.Label += fmt.Sprintf(" x%d", row.Multi)
			}
			for _, c := range row.Cells {
				s.Points = append(s.Points, [2]float64{float64(c.Size), c.KBps})
			}
			out[row.Cipher] = append(out[row.Cipher], s)
		}
		espSeries(out, r, label)
	}
	keep, err := referenceFilter(sources, ref)
	if err != nil || keep == nil {
		return out, err
	}
	pub, err := ReferenceResults()
	if err != nil {
		return nil, err
	}
	type key struct{ platform, module, cipher string }
	series := map[key]*Series{}
	var order []key
	for _, p := range pub {
		if _, ok := out[p.Cipher]; !ok || p.Threads != 1 || !keep(p) {
			continue
		}
		k := key{p.Platform, p.Module, p.Cipher}
		if series[k] == nil {
			series[k] = &Series{Label: fmt.Sprintf("published: %s, %s", p.Platform, moduleName(p.Module)), Dashed: true,
				Hardware: p.Module != "none" && p.Module != "soft"}
			order = append(order, k)
		}
		series[k].Points = append(series[k].Points, [2]float64{float64(p.Size), p.KBps})
	}
	for _, k := range order {
		s := series[k]
		sort.Slice(s.Points, func(i, j int) bool { return s.Points[i][0] < s.Points[j][0] })
		out[k.cipher] = append(out[k.cipher], *s)
	}
	return out, nil
}

func moduleName(m string) string {
	switch m {
	case "none":
		return "user-space software"
	case "soft":
		return "kernel software"
	}
	return m + " engine"
}

// engineModules are the published results' module names for the catalog
// engines.
var engineModules = map[string]string{"geode-aes": "glxsb", "hifn-795x": "hifn", "ixp4xx": "ixp", "safenet": "safe"}

// referenceFilter returns which published results to keep; nil keeps none.
func referenceFilter(sources []Source, ref string) (func(Published) bool, error) {
	switch strings.ToLower(strings.TrimSpace(ref)) {
	case "", RefNone:
		return nil, nil
	case RefAll:
		return func(Published) bool { return true }, nil
	case RefAuto:
		class := map[string]bool{}
		modules := map[string]bool{}
		for _, src := range sources {
			env := src.Report.Env
			b, cpu := strings.ToLower(env.Board), strings.ToLower(env.CPU)
			switch {
			case strings.HasPrefix(b, "alix") || strings.HasPrefix(b, "net5501") || strings.Contains(cpu, "geode"):
				class["geode"] = true
			case strings.HasPrefix(b, "nslu2") || strings.HasPrefix(b, "avila") || strings.Contains(cpu, "xscale"):
				class["ixp425"] = true
			}
			for _, e := range env.Engines {
				if m, ok := engineModules[e.ID]; ok {
					modules[m] = true
				}
			}
		}
		if len(class) == 0 && len(modules) == 0 {
			return nil, nil
		}
		return func(p Published) bool {
			plat := strings.ToLower(p.Platform)
			for c := range class {
				if strings.Contains(plat, c) {
					return true
				}
			}
			return modules[p.Module]
		}, nil
	}
	var words []string
	for _, w := range strings.Split(ref, ",") {
		if w = strings.ToLower(strings.TrimSpace(w)); w != "" {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return nil, &ReferenceError{Ref: ref}
	}
	return func(p Published) bool {
		for _, w := range words {
			if strings.Contains(strings.ToLower(p.Platform), w) || strings.ToLower(p.Module) == w {
				return true
			}
		}
		return false
	}, nil
}

// Own measurements get strong colours; published results muted ones with
// their own dash patterns, so a crowded panel stays readable.
var (
	palette      = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}
	mutedPalette = []string{"#6b6b6b", "#9c7a3c", "#4f7f7f", "#8a5a8a", "#7a8a3c", "#5a6f9c"}
	dashes       = []string{"6 4", "2 3", "9 3 2 3", "12 4", "3 6"}
)

// WriteSVG draws one panel per cipher: kB/s (log scale) against request
// size (log scale), with a legend under each panel. The same data gives
// the same bytes.
func WriteSVG(w io.Writer, data map[string][]Series) error {
	ciphers := make([]string, 0, len(data))
	for c := range data {
		ciphers = append(ciphers, c)
	}
	sort.Strings(ciphers)
	if len(ciphers) == 0 {
		return fmt.Errorf("chart: no speed results to draw (a report without a speed table?)")
	}
	const (
		width  = 760
		plotW  = 560
		plotH  = 300
		left   = 80
		top    = 40
		legend = 16
	)
	var b strings.Builder
	heights := make([]int, len(ciphers))
	total := 0
	for i, c := range ciphers {
		heights[i] = top + plotH + 50 + legend*len(data[c]) + 20
		total += heights[i]
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, total)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, total)
	y0 := 0
	for i, c := range ciphers {
		series := data[c]
		minX, maxX := 16.0, 16384.0
		minY, maxY := math.Inf(1), math.Inf(-1)
		for _, s := range series {
			for _, p := range s.Points {
				minX, maxX = math.Min(minX, p[0]), math.Max(maxX, p[0])
				if p[1] > 0 {
					minY, maxY = math.Min(minY, p[1]), math.Max(maxY, p[1])
				}
			}
		}
		if math.IsInf(minY, 1) {
			minY, maxY = 1, 10
		}
		// Whole decades on the y axis.
		lo, hi := math.Floor(math.Log10(minY)), math.Ceil(math.Log10(maxY))
		if hi <= lo {
			hi = lo + 1
		}
		lx0, lx1 := math.Log2(minX), math.Log2(maxX)
		px := func(x float64) float64 { return left + (math.Log2(x)-lx0)/(lx1-lx0)*plotW }
		py := func(y float64) float64 { return float64(y0+top) + plotH - (math.Log10(y)-lo)/(hi-lo)*plotH }

		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="15" font-weight="bold">%s: throughput by request size</text>`+"\n", left, y0+24, html.EscapeString(c))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", left, y0+top, plotW, plotH)
		for d := lo; d <= hi; d++ {
			y := py(math.Pow(10, d))
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, left+plotW, y, y)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, siUnit(math.Pow(10, d)*1000)+"B/s")
		}
		for x := minX; x <= maxX; x *= 4 {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/>`+"\n", px(x), px(x), y0+top, y0+top+plotH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), y0+top+plotH+16, sizeLabel(x))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">request size (bytes)</text>`+"\n", left+plotW/2, y0+top+plotH+34)
		own, pub := 0, 0
		for j, s := range series {
			color, dash, width := palette[own%len(palette)], "", 2
			if s.Dashed {
				color = mutedPalette[pub%len(mutedPalette)]
				dash = fmt.Sprintf(` stroke-dasharray="%s"`, dashes[pub%len(dashes)])
				pub++
			} else {
				own++
			}
			if s.Hardware {
				width = 3
			}
			var pts []string
			for _, p := range s.Points {
				if p[1] > 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
				}
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%d"%s points="%s"/>`+"\n", color, width, dash, strings.Join(pts, " "))
			for _, pt := range pts {
				xy := strings.Split(pt, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`+"\n", xy[0], xy[1], color)
			}
			ly := y0 + top + plotH + 50 + legend*j
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="%d"%s/>`+"\n", left, left+24, ly-4, ly-4, color, width, dash)
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+30, ly, html.EscapeString(s.Label))
		}
		y0 += heights[i]
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func siUnit(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%gG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

func sizeLabel(x float64) string {
	if x >= 1024 {
		return fmt.Sprintf("%gK", x/1024)
	}
	return fmt.Sprintf("%g", x)
}

// ESPPanel is the chart key of a report's ESP run: one panel per
// cipher+auth, beside the AF_ALG panels, in the same units.
func ESPPanel(cipher, auth string) string { return "ESP " + cipher + "+" + auth }

// espSeries adds one series per engine of r's ESP run: UDP payload
// received through the tunnel per packet size, in kB/s like the speed
// rows (the report keeps MB/s).
func espSeries(out map[string][]Series, r *report.Report, label string) {
	if r.ESP == nil || r.ESP.Result == nil || len(r.ESP.Rows) == 0 {
		return
	}
	key := ESPPanel(r.ESP.Cipher, r.ESP.Auth)
	idx := map[string]int{}
	var list []Series
	for _, row := range r.ESP.Rows {
		if row.Err != "" || row.MBps <= 0 {
			continue
		}
		i, ok := idx[row.Engine]
		if !ok {
			s := Series{Label: label + ": " + row.Engine + " (ESP)", Hardware: row.Hardware}
			if row.Hardware {
				s.Label += " [hardware]"
			}
			i = len(list)
			idx[row.Engine] = i
			list = append(list, s)
		}
		list[i].Points = append(list[i].Points, [2]float64{float64(row.Size), row.MBps * 1000})
	}
	for _, s := range list {
		sort.Slice(s.Points, func(i, j int) bool { return s.Points[i][0] < s.Points[j][0] })
		out[key] = append(out[key], s)
	}
}

// ReferenceError is a choice of published results (Data's ref) that
// chooses nothing.
type ReferenceError struct{ Ref string }

func (e *ReferenceError) Error() string { return e.Worded("reference") }

// Worded is the message with the choice named by the caller (its flag).
func (e *ReferenceError) Worded(name string) string {
	return fmt.Sprintf("%s %q: want auto, all, none, or words to match published platforms and engines", name, e.Ref)
}
