package speed

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/ocf/fault"
	"github.com/ocfw/ocfw/ocf/soft"
)

func TestMeasureSoft(t *testing.T) {
	row := Measure(soft.New(), "aes-128-cbc", Options{Duration: 20 * time.Millisecond})
	if row.Err != "" {
		t.Fatal(row.Err)
	}
	if len(row.Cells) != len(Sizes) {
		t.Fatalf("%d cells, want %d", len(row.Cells), len(Sizes))
	}
	for _, c := range row.Cells {
		if c.Ops <= 0 || c.KBps <= 0 {
			t.Errorf("size %d: ops %d kB/s %.1f", c.Size, c.Ops, c.KBps)
		}
		// Throughput is what the counts say: ops*size over the wall time.
		want := float64(c.Ops) * float64(c.Size) / (float64(c.Millis) / 1000) / 1000
		if c.Millis > 0 && (c.KBps < want*0.9 || c.KBps > want*1.1) {
			t.Errorf("size %d: %.1f kB/s, counts say %.1f", c.Size, c.KBps, want)
		}
		if c.Millis < 20 {
			t.Errorf("size %d: cell ran %d ms, asked for 20", c.Size, c.Millis)
		}
	}
}

func TestMeasureMulti(t *testing.T) {
	row := Measure(soft.New(), "hmac-sha1", Options{Duration: 20 * time.Millisecond, Multi: 2, Sizes: []int{64}})
	if row.Err != "" || row.Multi != 2 || len(row.Cells) != 1 {
		t.Fatalf("%+v", row)
	}
}

func TestMeasureErrorEndsRow(t *testing.T) {
	row := Measure(fault.NewFailing("bad", soft.New(), fault.AtLeast(1024)), "aes-128-cbc", Options{Duration: 10 * time.Millisecond})
	if row.Err == "" || !strings.HasPrefix(row.Err, "1024 bytes:") {
		t.Fatalf("err %q", row.Err)
	}
	if len(row.Cells) != 3 {
		t.Errorf("%d cells before the error, want 3", len(row.Cells))
	}
	if row := Measure(soft.New(), "rot13", Options{}); row.Err == "" {
		t.Error("unknown cipher measured")
	}
}

// The table must parse the way people parse openssl speed output: a
// header line, a "type" line of sizes, one line per row of numbers ending
// in k.
func TestTableLayout(t *testing.T) {
	rows := []Row{
		Measure(soft.New(), "aes-128-cbc", Options{Duration: 5 * time.Millisecond}),
		Measure(soft.New(), "des-ede3-cbc", Options{Duration: 5 * time.Millisecond}),
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if lines[0] != Header {
		t.Errorf("first line %q", lines[0])
	}
	if !regexp.MustCompile(`^type +16 bytes +64 bytes +256 bytes +1024 bytes +8192 bytes +16384 bytes +engine$`).MatchString(lines[1]) {
		t.Errorf("type line %q", lines[1])
	}
	num := regexp.MustCompile(`^(aes-128-cbc|des-ede3-cbc) +(\d+\.\d\dk +){6}go$`)
	for _, l := range lines[2:4] {
		if !num.MatchString(l) {
			t.Errorf("row %q", l)
		}
	}
	// Columns line up: each size label ends where its numbers end.
	end := strings.Index(lines[1], "16 bytes") + len("16 bytes")
	if lines[2][end-1] != 'k' {
		t.Errorf("16-byte column misaligned:\n%s\n%s", lines[1], lines[2])
	}
	// JSON round trip.
	j, _ := json.Marshal(rows)
	var back []Row
	if err := json.Unmarshal(j, &back); err != nil || back[0].KBps(8192) != rows[0].KBps(8192) {
		t.Errorf("json round trip: %v", err)
	}
}
