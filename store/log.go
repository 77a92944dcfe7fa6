package store

import (
	"sort"
	"time"
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
