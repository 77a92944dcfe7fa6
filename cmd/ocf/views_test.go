package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/store"
)

func TestWriteLog(t *testing.T) {
	at := time.Date(2026, 12, 4, 9, 40, 1, 0, time.UTC)
	lines := []store.LogLine{
		{Seq: 7, Time: at, Text: "ssh: root logged in"},
		{Seq: 8, Time: at.Add(time.Second), Text: "dhcp: lease to \x1b[2Jevil"},
	}
	var b bytes.Buffer
	last, err := writeLog(&b, lines, 7)
	if err != nil || last != 8 {
		t.Fatalf("writeLog: last %d, %v", last, err)
	}
	if want := "2026-12-04 09:40:02 dhcp: lease to \\x1b[2Jevil\n"; b.String() != want {
		t.Errorf("got %q, want %q (after seq 7 only, escaped)", b.String(), want)
	}
}

// -n keeps the last lines; -f prints only what is new on each read.
func TestFollowLog(t *testing.T) {
	at := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	line := func(seq uint64) store.LogLine {
		return store.LogLine{Seq: seq, Time: at.Add(time.Duration(seq) * time.Second), Text: "line " + string(rune('0'+seq))}
	}
	reads := [][]store.LogLine{
		{line(1), line(2), line(3)},
		{line(2), line(3)}, // nothing new
		{line(3), line(4), line(5)},
	}
	stop := errors.New("card gone")
	n := 0
	read := func() ([]store.LogLine, error) {
		if n == len(reads) {
			return nil, stop
		}
		n++
		return reads[n-1], nil
	}
	var b bytes.Buffer
	err := followLog(&b, read, &logFlags{follow: true, lines: 2, every: time.Millisecond})
	if !errors.Is(err, stop) {
		t.Fatalf("followLog ended with %v", err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		got = append(got, l[len("2026-12-04 09:00:00 "):])
	}
	if strings.Join(got, "|") != "line 2|line 3|line 4|line 5" {
		t.Errorf("printed %q", got)
	}
}
