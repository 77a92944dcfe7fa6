// Package speed measures engines the way `openssl speed -evp CIPHER
// -elapsed` does — throughput by wall clock at 16 to 16384 bytes — so the
// firmware's numbers can be set beside published ones, and adds CPU
// utilisation per cell (user+sys over wall), which shows what a hardware
// engine saves even where it is not faster.
package speed

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
)

// Sizes are openssl speed's block sizes.
var Sizes = []int{16, 64, 256, 1024, 8192, 16384}

// Options tune a measurement.
type Options struct {
	// Duration of each cell; 0 means 1s (openssl's -seconds 3 is too long
	// for a boot).
	Duration time.Duration
	// Multi runs this many concurrent workers, each with its own session
	// (openssl's -multi N); 0 means 1.
	Multi int
	// Sizes in bytes; nil means Sizes.
	Sizes []int
}

func (o *Options) defaults() {
	if o.Duration <= 0 {
		o.Duration = time.Second
	}
	if o.Multi <= 0 {
		o.Multi = 1
	}
	if o.Sizes == nil {
		o.Sizes = Sizes
	}
}

// Cell is one (size) measurement of a row.
type Cell struct {
	Size int `json:"size"`
	// KBps is thousands of bytes processed per second of wall time, the
	// unit openssl speed prints.
	KBps float64 `json:"kbytes_per_sec"`
	Ops  int64   `json:"ops"`
	// CPU is user+sys time over wall time (1.0 = one core busy).
	CPU    float64 `json:"cpu"`
	Millis int64   `json:"ms"`
}

// Row is one engine and cipher across sizes.
type Row struct {
	Engine   string `json:"engine"`
	Cipher   string `json:"cipher"`
	Hardware bool   `json:"hardware"`
	Multi    int    `json:"multi"`
	Cells    []Cell `json:"cells"`
	Err      string `json:"error,omitempty"`
}

// KBps returns the throughput at size, or 0 when not measured.
func (r *Row) KBps(size int) float64 {
	for _, c := range r.Cells {
		if c.Size == size {
			return c.KBps
		}
	}
	return 0
}

// Measure runs cipher on d at every size. Errors end the row and are
// recorded in it, never panic or hang the caller beyond the cell time plus
// one request.
func Measure(d ocf.Driver, cipher string, opt Options) Row {
	opt.defaults()
	row := Row{Engine: d.Name(), Cipher: cipher, Hardware: d.Hardware(), Multi: opt.Multi}
	c, err := ocf.LookupCipher(cipher)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	for _, size := range opt.Sizes {
		if size%c.BlockSize != 0 {
			continue
		}
		cell, err := measureCell(d, c, size, opt)
		if err != nil {
			row.Err = fmt.Sprintf("%d bytes: %v", size, err)
			return row
		}
		row.Cells = append(row.Cells, cell)
	}
	return row
}

func measureCell(d ocf.Driver, c *ocf.Cipher, size int, opt Options) (Cell, error) {
	type worker struct {
		s    ocf.Session
		reqs []ocf.Request
		ops  int64
		err  error
	}
	key := make([]byte, c.KeySize)
	for i := range key {
		key[i] = byte(i*7 + 1)
	}
	ws := make([]*worker, opt.Multi)
	for i := range ws {
		s, err := d.Open(c, key)
		if err != nil {
			for _, w := range ws[:i] {
				w.s.Close()
			}
			return Cell{}, err
		}
		req := ocf.Request{Src: make([]byte, size)}
		switch c.Kind {
		case catalog.KindMAC:
			req.Op, req.Dst = ocf.MAC, make([]byte, c.DigestSize)
		default:
			req.Op, req.IV, req.Dst = ocf.Encrypt, make([]byte, c.IVSize), make([]byte, size)
		}
		ws[i] = &worker{s: s, reqs: []ocf.Request{req}}
	}
	defer func() {
		for _, w := range ws {
			w.s.Close()
		}
	}()
	// A stop flag set by a timer, like openssl's alarm: reading the clock
	// per request would cost more than a 16-byte request on a Geode.
	var stop atomic.Bool
	var wg sync.WaitGroup
	ru0 := rusage()
	start := time.Now()
	timer := time.AfterFunc(opt.Duration, func() { stop.Store(true) })
	defer timer.Stop()
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := w.s.Do(w.reqs); err != nil {
					w.err = err
					return
				}
				w.ops++
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := rusage() - ru0
	var ops int64
	for _, w := range ws {
		if w.err != nil {
			return Cell{}, w.err
		}
		ops += w.ops
	}
	return Cell{Size: size, Ops: ops, KBps: float64(ops) * float64(size) / wall.Seconds() / 1000,
		CPU: cpu.Seconds() / wall.Seconds(), Millis: wall.Milliseconds()}, nil
}

// rusage is this process's user+sys CPU time so far.
func rusage() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Header is the line openssl speed prints above its table.
const Header = "The 'numbers' are in 1000s of bytes per second processed."

// WriteTable prints rows in openssl speed's layout: the header line, a
// "type" line with the sizes, then one line per row. The engine follows
// the numbers so the numbers line up with openssl's own output; a second
// table gives CPU utilisation per cell.
func WriteTable(w io.Writer, rows []Row) error {
	sizes := sizesOf(rows)
	var b strings.Builder
	b.WriteString(Header + "\n")
	b.WriteString(fmt.Sprintf("%-13s", "type"))
	for _, s := range sizes {
		b.WriteString(fmt.Sprintf(" %7d bytes", s))
	}
	b.WriteString("  engine\n")
	for _, r := range rows {
		b.WriteString(fmt.Sprintf("%-13s", r.Cipher))
		for _, s := range sizes {
			if v, ok := cell(r, s); ok {
				b.WriteString(fmt.Sprintf(" %12.2fk", v.KBps))
			} else {
				b.WriteString(fmt.Sprintf(" %13s", "-"))
			}
		}
		b.WriteString("  " + r.Engine)
		if r.Multi > 1 {
			b.WriteString(fmt.Sprintf(" (multi %d)", r.Multi))
		}
		if r.Err != "" {
			b.WriteString("  error: " + r.Err)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nCPU utilisation (user+sys / wall):\n")
	b.WriteString(fmt.Sprintf("%-13s", "type"))
	for _, s := range sizes {
		b.WriteString(fmt.Sprintf(" %7d bytes", s))
	}
	b.WriteString("  engine\n")
	for _, r := range rows {
		b.WriteString(fmt.Sprintf("%-13s", r.Cipher))
		for _, s := range sizes {
			if v, ok := cell(r, s); ok {
				b.WriteString(fmt.Sprintf(" %12.0f%%", v.CPU*100))
			} else {
				b.WriteString(fmt.Sprintf(" %13s", "-"))
			}
		}
		b.WriteString("  " + r.Engine + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cell(r Row, size int) (Cell, bool) {
	for _, c := range r.Cells {
		if c.Size == size {
			return c, true
		}
	}
	return Cell{}, false
}

func sizesOf(rows []Row) []int {
	seen := map[int]bool{}
	var out []int
	for _, s := range Sizes {
		seen[s] = true
		out = append(out, s)
	}
	for _, r := range rows {
		for _, c := range r.Cells {
			if !seen[c.Size] {
				seen[c.Size] = true
				out = append(out, c.Size)
			}
		}
	}
	return out
}
