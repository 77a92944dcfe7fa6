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
	Label  string
	Points [][2]float64 // (size bytes, kB/s)
	Dashed bool         // published results are dashed
}

// Data collects the series per cipher from reports (labelled by
// names[i]) and, when withReference, the published results for the same
// ciphers.
func Data(reports []*report.Report, names []string, withReference bool) (map[string][]Series, error) {
	out := map[string][]Series{}
	for i, r := range reports {
		for _, row := range r.Speed {
			if row.Err != "" && len(row.Cells) == 0 {
				continue
			}
			s := Series{Label: row.Engine}
			if len(reports) > 1 {
				s.Label = names[i] + ": " + row.Engine
			}
			if row.Multi > 1 {
				s.Label += fmt.Sprintf(" x%d", row.Multi)
			}
			for _, c := range row.Cells {
				s.Points = append(s.Points, [2]float64{float64(c.Size), c.KBps})
			}
			out[row.Cipher] = append(out[row.Cipher], s)
		}
	}
	if withReference {
		pub, err := ReferenceResults()
		if err != nil {
			return nil, err
		}
		type key struct{ platform, module, cipher string }
		series := map[key]*Series{}
		var order []key
		for _, p := range pub {
			if _, ok := out[p.Cipher]; !ok || p.Threads != 1 {
				continue
			}
			k := key{p.Platform, p.Module, p.Cipher}
			if series[k] == nil {
				series[k] = &Series{Label: fmt.Sprintf("%s, %s (published)", p.Platform, p.Module), Dashed: true}
				order = append(order, k)
			}
			series[k].Points = append(series[k].Points, [2]float64{float64(p.Size), p.KBps})
		}
		for _, k := range order {
			s := series[k]
			sort.Slice(s.Points, func(i, j int) bool { return s.Points[i][0] < s.Points[j][0] })
			out[k.cipher] = append(out[k.cipher], *s)
		}
	}
	return out, nil
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

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
		for j, s := range series {
			color := palette[j%len(palette)]
			dash := ""
			if s.Dashed {
				dash = ` stroke-dasharray="6 4"`
			}
			var pts []string
			for _, p := range s.Points {
				if p[1] > 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
				}
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
			for _, pt := range pts {
				xy := strings.Split(pt, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`+"\n", xy[0], xy[1], color)
			}
			ly := y0 + top + plotH + 50 + legend*j
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", left, left+24, ly-4, ly-4, color, dash)
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
