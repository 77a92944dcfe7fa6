package store_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocfw/ocfw/store"
)

// countDev counts the device writes and the sectors they cover.
type countDev struct {
	*memDev
	mu      sync.Mutex
	writes  int
	sectors int
}

func (d *countDev) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	d.writes++
	d.sectors += (len(p) + 511) / 512
	d.mu.Unlock()
	return d.memDev.WriteAt(p, off)
}

func (d *countDev) count() (int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes, d.sectors
}

// The writer puts many lines into one device write, keeps their order
// and times across the ring's end, and counts what is over a batch in
// one line instead of writing it.
func TestLogWriterBatches(t *testing.T) {
	dev := &countDev{memDev: &memDev{b: partition(t), budget: -1}}
	st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// An interval longer than the test: only Flush writes.
	w := store.NewLogWriter(st, store.LogWriterOptions{Interval: time.Hour, UrgentGap: time.Hour, Batch: 32})
	w.Add("first") // nothing written before: due now, written by the timer
	waitFor(t, func() bool { n, _ := dev.count(); return n == 1 })
	for i := 0; i < 100; i++ {
		w.Add(fmt.Sprintf("line %d", i))
	}
	if n, _ := dev.count(); n != 1 {
		t.Fatalf("%d device writes before the interval passed, want 1", n)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	n, sectors := dev.count()
	if n != 2 || sectors != 1+32 {
		t.Errorf("after 101 lines: %d writes of %d sectors, want 2 writes of 1+32", n, sectors)
	}
	c, err := store.Load(readerOf(t, dev.b))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, l := range c.Log {
		texts = append(texts, l.Text)
	}
	got := strings.Join(texts, "|")
	if !strings.HasPrefix(got, "first|line 0|line 1|") || !strings.Contains(got, "|line 30|log: 69 more line(s) not written") {
		t.Errorf("log ring: %s", got)
	}
	// Across the ring's end (2048 records): two writes, all in order.
	for i := 0; i < 70; i++ {
		for j := 0; j < 31; j++ {
			w.Add(fmt.Sprintf("r%d.%d", i, j))
		}
		w.Flush()
	}
	c, _ = store.Load(readerOf(t, dev.b))
	if len(c.Log) != 2048 {
		t.Fatalf("%d records after wrapping, want the ring's 2048", len(c.Log))
	}
	for i := 1; i < len(c.Log); i++ {
		if c.Log[i].Seq != c.Log[i-1].Seq+1 {
			t.Fatalf("records %d and %d: seq %d then %d", i-1, i, c.Log[i-1].Seq, c.Log[i].Seq)
		}
	}
	if last := c.Log[len(c.Log)-1].Text; last != "r69.30" {
		t.Errorf("newest record %q, want r69.30", last)
	}
}

// An important line does not wait for the interval; a closed writer
// writes what it held.
func TestLogWriterUrgentAndClose(t *testing.T) {
	dev := &countDev{memDev: &memDev{b: partition(t), budget: -1}}
	st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := store.NewLogWriter(st, store.LogWriterOptions{Interval: time.Hour, UrgentGap: 50 * time.Millisecond})
	w.Add("a")
	waitFor(t, func() bool { n, _ := dev.count(); return n == 1 })
	w.Add("b")
	w.AddNow("WAN up")
	waitFor(t, func() bool { n, _ := dev.count(); return n == 2 })
	w.Add("held")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c, _ := store.Load(readerOf(t, dev.b))
	var texts []string
	for _, l := range c.Log {
		texts = append(texts, l.Text)
	}
	if got := strings.Join(texts, "|"); got != "a|b|WAN up|held" {
		t.Errorf("log ring %q, want a|b|WAN up|held", got)
	}
}

// A power cut inside a batch write loses at most that batch's lines and
// never the ring: each sector is its own checksummed record.
func TestLogBatchPowerCut(t *testing.T) {
	fresh := partition(t)
	for _, budget := range []int64{0, 100, 512, 512*5 + 77, 512 * 9} {
		dev := &memDev{b: append([]byte(nil), fresh...), budget: -1}
		st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var before []store.LogLine
		for i := 0; i < 5; i++ {
			before = append(before, store.LogLine{Time: time.Unix(int64(i), 0), Text: fmt.Sprintf("kept %d", i)})
		}
		if err := st.LogLines(before); err != nil {
			t.Fatal(err)
		}
		dev.budget = budget
		var batch []store.LogLine
		for i := 0; i < 10; i++ {
			batch = append(batch, store.LogLine{Time: time.Unix(100, 0), Text: fmt.Sprintf("batch %d", i)})
		}
		if err := st.LogLines(batch); err == nil {
			t.Fatalf("budget %d: the cut went unnoticed", budget)
		}
		dev.dead, dev.budget = false, -1
		st2, err := store.Open(dev, int64(len(dev.b)), store.Options{})
		if err != nil {
			t.Fatalf("budget %d: open after the cut: %v", budget, err)
		}
		log := st2.Contents().Log
		// A record is whole once its header and text are on the card
		// (the rest of its sector is padding): 32+8+7 bytes here.
		whole := 0
		for whole < 10 && int64(whole)*512+47 <= budget {
			whole++
		}
		if len(log) != 5+whole {
			t.Errorf("budget %d: %d records, want the 5 before and %d whole ones of the batch", budget, len(log), whole)
		}
		for i, l := range log {
			want := fmt.Sprintf("kept %d", i)
			if i >= 5 {
				want = fmt.Sprintf("batch %d", i-5)
			}
			if l.Text != want {
				t.Errorf("budget %d: record %d %q, want %q", budget, i, l.Text, want)
			}
		}
		// The next write goes on after the newest whole record.
		if err := st2.LogLines([]store.LogLine{{Time: time.Unix(200, 0), Text: "after"}}); err != nil {
			t.Fatal(err)
		}
		c, _ := store.Load(readerOf(t, dev.b))
		if n := len(c.Log); n != 6+whole || c.Log[n-1].Text != "after" {
			t.Errorf("budget %d: after the next write %d records, newest %q", budget, n, c.Log[n-1].Text)
		}
	}
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text: 1.2.3.4", "plain text: 1.2.3.4"},
		{"ünïcode – ok", "ünïcode – ok"},
		{"evil\x1b]0;PWNED\a\x1b[2J\r\nocfw: x", `evil\x1b]0;PWNED\x07\x1b[2J\r\nocfw: x`},
		{"tab\there\x7f\x00", `tab\there\x7f\x00`},
		{"c1 \u009b31m and raw \x9b", `c1 \u009b31m and raw \x9b`},
		{"bidi \u202eevil\u2028next", `bidi \u202eevil\u2028next`},
	} {
		if got := store.Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := store.Printable(store.Printable(tc.in)); again != tc.want {
			t.Errorf("Printable is not idempotent on %q: %q", tc.in, again)
		}
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("timed out")
}

// ReadLog sees what was logged since Open, which Contents does not.
func TestReadLogIsCurrent(t *testing.T) {
	dev := &memDev{b: partition(t), budget: -1}
	st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"one", "two"} {
		if err := st.Log(l); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := st.ReadLog()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Text)
	}
	if strings.Join(got, ",") != "one,two" {
		t.Errorf("ReadLog: %q, want one, two", got)
	}
}
