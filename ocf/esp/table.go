package esp

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable prints a run in the layout of the speed table (ocf/speed):
// a header, a "type" line with the packet sizes, one line per engine
// with MB/s of payload received, the engine and driver last; then the
// CPU busy per cell, and the rows' errors and the run's notes.
func WriteTable(w io.Writer, res *Result) error {
	var b strings.Builder
	sizes, engines := layout(res)
	kind := res.Cipher + "+" + res.Auth
	fmt.Fprintf(&b, "ESP %s through a tunnel between two network namespaces: MB/s of UDP payload received\n", kind)
	head := func() {
		fmt.Fprintf(&b, "%-*s", len(kind), "type")
		for _, s := range sizes {
			fmt.Fprintf(&b, " %7d bytes", s)
		}
		b.WriteString("  engine\n")
	}
	cells := func(cell func(Row) string) {
		for _, e := range engines {
			fmt.Fprintf(&b, "%-*s", len(kind), kind)
			drv := ""
			for _, s := range sizes {
				r, ok := res.Row(e, s)
				switch {
				case !ok || r.Err != "" && r.Packets == 0:
					fmt.Fprintf(&b, " %13s", "-")
				default:
					fmt.Fprintf(&b, " %13s", cell(r))
				}
				if ok && drv == "" {
					drv = r.Driver
				}
			}
			fmt.Fprintf(&b, "  %s (%s)\n", e, drv)
		}
	}
	head()
	cells(func(r Row) string { return fmt.Sprintf("%.2fM", r.MBps) })
	b.WriteString("\nCPU busy (all CPUs, /proc/stat) while sending:\n")
	head()
	cells(func(r Row) string { return fmt.Sprintf("%.0f%%", r.CPU*100) })
	if res.Default != "" {
		fmt.Fprintf(&b, "\nThe kernel's own choice for %s: %s", res.Kernel, res.Default)
		if res.Restored != "" && res.Restored != res.Default {
			fmt.Fprintf(&b, " (after the run: %s)", res.Restored)
		}
		b.WriteString("\n")
	}
	for _, r := range res.Rows {
		if r.Err != "" {
			fmt.Fprintf(&b, "%s at %d bytes: %s\n", r.Engine, r.Size, r.Err)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// layout is the sizes and engines of the rows, in first-seen order.
func layout(res *Result) (sizes []int, engines []string) {
	for _, r := range res.Rows {
		if !contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
		seen := false
		for _, e := range engines {
			seen = seen || e == r.Engine
		}
		if !seen {
			engines = append(engines, r.Engine)
		}
	}
	return sizes, engines
}
