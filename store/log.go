package store

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// LogLine is one log record.
type LogLine struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}

// maxLogText is what fits one sector with the header and a timestamp.
const maxLogText = sectorSize - headerSize - 8

func encodeLog(seq uint64, t time.Time, text string) []byte {
	if len(text) > maxLogText {
		text = text[:maxLogText-3] + "..."
	}
	p := make([]byte, 8+len(text))
	ns := uint64(t.UnixNano())
	for i := 0; i < 8; i++ {
		p[i] = byte(ns >> (8 * i))
	}
	copy(p[8:], text)
	b := encode(record{seq: seq, kind: kindLog, payload: p})
	out := make([]byte, sectorSize)
	copy(out, b)
	return out
}

// readLog returns the valid records of a log ring, oldest first.
func readLog(b []byte) []LogLine {
	var out []LogLine
	for o := 0; o+sectorSize <= len(b); o += sectorSize {
		r, err := decode(b[o:o+sectorSize], kindLog)
		if err != nil || len(r.payload) < 8 {
			continue
		}
		var ns uint64
		for i := 0; i < 8; i++ {
			ns |= uint64(r.payload[i]) << (8 * i)
		}
		out = append(out, LogLine{Seq: r.seq, Time: time.Unix(0, int64(ns)).UTC(), Text: string(r.payload[8:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// LogLines appends lines (their Time and Text; Seq is given here) to the
// ring as consecutive records, in one device write — two when the run
// wraps the ring's end. Each record stays one checksummed sector, so a
// power cut inside the write leaves every sector either its new record,
// its old one or a torn one that is ignored: the ring is never damaged,
// the cut loses at most the lines of this write.
func (s *Store) LogLines(lines []LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.ext[LogFile].Size / sectorSize
	if int64(len(lines)) > n {
		lines = lines[int64(len(lines))-n:]
	}
	pos, seq := s.logPos, s.logSeq
	for len(lines) > 0 {
		start := (pos + 1) % n
		run := min(int64(len(lines)), n-start) // up to the ring's end
		buf := make([]byte, 0, run*sectorSize)
		for i := int64(0); i < run; i++ {
			seq++
			buf = append(buf, encodeLog(seq, lines[i].Time, lines[i].Text)...)
		}
		if err := s.write(LogFile, start*sectorSize, buf, ""); err != nil {
			return err
		}
		pos = start + run - 1
		s.logPos, s.logSeq = pos, seq
		lines = lines[run:]
	}
	return nil
}

// Printable escapes what a terminal or a log reader would take for
// control: C0 and C1 control characters (ESC, CR, LF, BEL ...), DEL,
// bytes that are not UTF-8 (a lone 0x9b is CSI to some terminals), and
// the Unicode marks that reorder or break lines. The result is one line
// that shows what was there: ESC becomes \x1b, LF \n. Text from the
// network (a DHCP host name, an SSH user name) ends up in log lines: it
// must neither move the console's cursor nor forge a line of its own.
func Printable(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0, r == 0x2028, r == 0x2029, r == 0x061c,
			r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Defaults of a LogWriter: the bound on the card's log writes.
const (
	// DefaultLogInterval is the least time between two writes of
	// ordinary lines (per-packet events, their summaries, retries): a
	// flood of them costs at most 60 s / 10 s = 6 writes a minute.
	DefaultLogInterval = 10 * time.Second
	// DefaultLogUrgentGap is the least time between two writes when an
	// important line (a boot stage, an error, the WAN coming up) waits:
	// it is on the card within 2 s, and even a flood of important lines
	// costs at most 30 writes a minute.
	DefaultLogUrgentGap = 2 * time.Second
	// DefaultLogBatch is the most records one write carries (16 KiB,
	// one contiguous run of the ring); lines beyond it within one
	// interval are counted and said in one line instead.
	DefaultLogBatch = 32
)

// LogWriterOptions tune a LogWriter; zero values are the defaults.
type LogWriterOptions struct {
	Interval  time.Duration
	UrgentGap time.Duration
	Batch     int
	Now       func() time.Time
}

// LogWriter stands in front of the store's log ring: it gathers lines in
// RAM and writes them in batches, so that the card's log costs a bounded
// number of writes whatever the traffic — at most one write per Interval
// for ordinary lines and one per UrgentGap while an important line waits,
// each of at most Batch sectors. What a power cut loses is what waits in
// RAM: at most the last Interval's lines (UrgentGap's for important
// ones). Every line is made Printable first. Safe for concurrent use.
type LogWriter struct {
	st   *Store
	opts LogWriterOptions

	mu      sync.Mutex
	pending []LogLine
	dropped int // lines over Batch since the last write
	urgent  bool
	last    time.Time // of the last write
	timer   *time.Timer
	due     time.Time // when timer fires; zero when none is set
	closed  bool
	writing sync.Mutex // one write at a time, in order
}

// NewLogWriter makes a LogWriter for st.
func NewLogWriter(st *Store, opts LogWriterOptions) *LogWriter {
	if opts.Interval <= 0 {
		opts.Interval = DefaultLogInterval
	}
	if opts.UrgentGap <= 0 {
		opts.UrgentGap = DefaultLogUrgentGap
	}
	if opts.Batch <= 1 {
		opts.Batch = DefaultLogBatch
	}
	if opts.Now == nil {
		opts.Now = st.opts.Now
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &LogWriter{st: st, opts: opts}
}

// Add queues an ordinary line: it is written with the next batch.
func (w *LogWriter) Add(text string) { w.add(text, false) }

// AddNow queues an important line: it is written within UrgentGap.
func (w *LogWriter) AddNow(text string) { w.add(text, true) }

func (w *LogWriter) add(text string, urgent bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.opts.Now()
	if w.closed {
		// After Close (the board is going down): straight to the card.
		w.mu.Unlock()
		w.st.LogLines([]LogLine{{Time: now, Text: Printable(text)}})
		w.mu.Lock()
		return
	}
	// One record is kept for the line that counts the dropped ones.
	if len(w.pending) >= w.opts.Batch-1 {
		w.dropped++
	} else {
		w.pending = append(w.pending, LogLine{Time: now, Text: Printable(text)})
	}
	w.urgent = w.urgent || urgent
	gap := w.opts.Interval
	if w.urgent {
		gap = w.opts.UrgentGap
	}
	due := w.last.Add(gap)
	if due.Before(now) {
		due = now
	}
	if w.due.IsZero() || due.Before(w.due) {
		if w.timer != nil {
			w.timer.Stop()
		}
		w.due = due
		w.timer = time.AfterFunc(due.Sub(now), func() { w.Flush() })
	}
}

// Flush writes what waits now (the end of the boot, a shutdown) and
// returns the last write's error, if any.
func (w *LogWriter) Flush() error {
	w.writing.Lock()
	defer w.writing.Unlock()
	w.mu.Lock()
	batch := w.pending
	if w.dropped > 0 {
		batch = append(batch, LogLine{Time: w.opts.Now(), Text: fmt.Sprintf(
			"log: %d more line(s) not written: more than %d in %v (the card's write bound)", w.dropped, w.opts.Batch-1, w.opts.Interval)})
	}
	w.pending, w.dropped, w.urgent = nil, 0, false
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.due = time.Time{}
	if len(batch) > 0 {
		w.last = w.opts.Now()
	}
	w.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	return w.st.LogLines(batch)
}

// Close writes what waits; later lines go to the card one by one (the
// last words of a shutdown).
func (w *LogWriter) Close() error {
	err := w.Flush()
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	return err
}

// ReadLog reads the log ring from the card as it is now (Contents' Log
// is what Open found). A record being written while it is read fails
// its checksum and is left out, as a torn one would be.
func (s *Store) ReadLog() ([]LogLine, error) {
	b, err := s.readFile(LogFile)
	if err != nil {
		return nil, err
	}
	return readLog(b), nil
}
