package chart

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

//go:embed reference/openssl-speed-history.csv
var referenceCSV []byte

// Published is one published openssl speed result.
type Published struct {
	Source   string
	Platform string
	Module   string // "none" user space, "soft" kernel software, else a hardware engine
	Cipher   string
	Threads  int
	Size     int
	KBps     float64
	Note     string
}

// ReferenceResults returns the published results shipped with ocfw.
func ReferenceResults() ([]Published, error) {
	return ParseReference(bytes.NewReader(referenceCSV))
}

// ParseReference reads the reference CSV layout
// (source,platform,module,cipher,threads,block_bytes,kbytes_per_sec,note).
func ParseReference(r io.Reader) ([]Published, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 8
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("reference csv: %w", err)
	}
	if header[0] != "source" || header[6] != "kbytes_per_sec" {
		return nil, fmt.Errorf("reference csv: unexpected header %q", header)
	}
	var out []Published
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reference csv: %w", err)
		}
		th, err1 := strconv.Atoi(rec[4])
		size, err2 := strconv.Atoi(rec[5])
		kb, err3 := strconv.ParseFloat(rec[6], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			line, _ := cr.FieldPos(0)
			return nil, fmt.Errorf("reference csv line %d: bad number in %q", line, rec)
		}
		out = append(out, Published{Source: rec[0], Platform: rec[1], Module: rec[2], Cipher: rec[3], Threads: th, Size: size, KBps: kb, Note: rec[7]})
	}
}
