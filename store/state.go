package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
)

// State is what the state copies hold.
type State struct {
	// Boot counts the boots that found the store; each boot takes the
	// next number before it writes anything else.
	Boot int `json:"boot"`
	// Reports are the kept reports, oldest first, each in its slot.
	Reports []Slot `json:"reports,omitempty"`
	// Values are named documents (the policy; later leases, host keys).
	Values map[string]json.RawMessage `json:"values,omitempty"`
}

// Slot says which report a slot holds.
type Slot struct {
	File   string `json:"file"`
	Boot   int    `json:"boot"`
	Length int    `json:"length"`
	SHA256 string `json:"sha256"`
}

// Contents is what a reader finds in the store.
type Contents struct {
	State State
	// Seq is the sequence number of the state record read, 0 when the
	// store was never written.
	Seq uint64
	// From names the state copy it came from.
	From string
	// Reports are the kept reports that read back intact, newest first.
	Reports []Report
	// Log holds the log's records, oldest first.
	Log []LogLine
	// Problems are what was found damaged or torn and ignored.
	Problems []string
}

// Report is one kept report.
type Report struct {
	Slot
	JSON []byte // the report itself, without the padding
}

// ReadFileFunc reads one of Files by name (inside Dir): from an image
// through a FAT reader, from a mounted card, or from the board's extents.
type ReadFileFunc func(name string) ([]byte, error)

// Load reads the store. A store never written gives an empty State and no
// error; missing files are an error (this is not an ocfw data partition,
// or it was changed).
func Load(read ReadFileFunc) (*Contents, error) {
	c := &Contents{}
	for _, name := range []string{StateA, StateB} {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		r, err := decode(b, kindState)
		switch {
		case errors.Is(err, errAllZero):
			continue
		case err != nil:
			c.Problems = append(c.Problems, fmt.Sprintf("%s: %v (the other copy is used)", name, err))
			continue
		}
		if r.seq <= c.Seq {
			continue
		}
		var st State
		if err := json.Unmarshal(r.payload, &st); err != nil {
			c.Problems = append(c.Problems, fmt.Sprintf("%s: record %d does not decode: %v", name, r.seq, err))
			continue
		}
		c.State, c.Seq, c.From = st, r.seq, name
	}
	for i := len(c.State.Reports) - 1; i >= 0; i-- {
		s := c.State.Reports[i]
		b, err := read(s.File)
		if err != nil {
			c.Problems = append(c.Problems, fmt.Sprintf("%s (boot %d): %v", s.File, s.Boot, err))
			continue
		}
		if s.Length <= 0 || s.Length > len(b) {
			c.Problems = append(c.Problems, fmt.Sprintf("%s (boot %d): length %d does not fit the slot", s.File, s.Boot, s.Length))
			continue
		}
		if sum := sha256.Sum256(b[:s.Length]); hex.EncodeToString(sum[:]) != s.SHA256 {
			c.Problems = append(c.Problems, fmt.Sprintf("%s (boot %d): contents changed since it was written (sha256 differs)", s.File, s.Boot))
			continue
		}
		c.Reports = append(c.Reports, Report{Slot: s, JSON: b[:s.Length]})
	}
	if b, err := read(LogFile); err == nil {
		c.Log = readLog(b)
	} else {
		c.Problems = append(c.Problems, fmt.Sprintf("%s: %v", LogFile, err))
	}
	return c, nil
}

// DirReader reads the store from a folder, e.g. the ocfw folder of a card
// mounted on a PC.
func DirReader(fsys fs.FS) ReadFileFunc {
	return func(name string) ([]byte, error) { return fs.ReadFile(fsys, name) }
}

// Value decodes a named value into v; false when there is none.
func (s *State) Value(name string, v any) (bool, error) {
	raw, ok := s.Values[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(raw, v)
}
