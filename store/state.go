package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
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
	// Problems are what was found damaged or torn and ignored, each
	// saying what it means; the boot prints and logs them, inspect
	// counts them as problems.
	Problems []string
	// Notes are what a power cut leaves by design and the store put
	// right: nothing is lost.
	Notes []string
	// Lost says no state copy was readable although the store had been
	// written: the card was damaged (a power cut never does this), and
	// the counter, report list and values are gone. Seq is then the
	// highest sequence number a damaged copy still showed.
	Lost bool
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
//
// The two state copies tell a power cut from damage: a write goes to the
// older copy, so a cut leaves at most one copy torn — the newest, whose
// header usually still checks and names the record after the other's —
// and the other intact. Both copies unreadable is never a cut: the state
// is lost (Lost), and what the report slots still hold is taken back, so
// that no report is overwritten and no boot number used twice.
func Load(read ReadFileFunc) (*Contents, error) {
	c := &Contents{}
	type copyInfo struct {
		name   string
		hdrSeq uint64 // the header's sequence number when it checks
		err    error
	}
	var bad []copyInfo
	blanks := 0
	for _, name := range []string{StateA, StateB} {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		r, err := decode(b, kindState)
		switch {
		case errors.Is(err, errAllZero):
			blanks++
			continue
		case err != nil:
			seq, _ := header(b)
			bad = append(bad, copyInfo{name: name, hdrSeq: seq, err: err})
			continue
		}
		var st State
		if err := json.Unmarshal(r.payload, &st); err != nil {
			bad = append(bad, copyInfo{name: name, hdrSeq: r.seq, err: fmt.Errorf("record does not decode: %v", err)})
			continue
		}
		if r.seq <= c.Seq {
			continue
		}
		c.State, c.Seq, c.From = st, r.seq, name
	}
	switch {
	case len(bad) == 0:
	case c.From != "":
		d := bad[0]
		switch {
		case d.hdrSeq > c.Seq:
			c.Problems = append(c.Problems, fmt.Sprintf("%s: its record %d, the newest, is torn or damaged (%v): record %d in %s is used, so what the last write changed is lost. A power cut during that write leaves this (the board then overwrites it at its next boot); on a card that booted since, it is damage", d.name, d.hdrSeq, d.err, c.Seq, c.From))
		case d.hdrSeq > 0:
			c.Problems = append(c.Problems, fmt.Sprintf("%s: its record %d, older than record %d in %s, is damaged (%v): nothing is lost, but a power cut does not do this: the card may be failing", d.name, d.hdrSeq, c.Seq, c.From, d.err))
		default:
			c.Problems = append(c.Problems, fmt.Sprintf("%s: damaged or torn, its header does not check (%v): record %d in %s is used", d.name, d.err, c.Seq, c.From))
		}
	case len(bad) == 1 && blanks == 1 && bad[0].hdrSeq <= 1 && !slotsHoldReports(read):
		// Only the first write ever reaches one copy alone: a cut
		// during it loses at most boot 1's number, which wrote no
		// report (the report comes after the number).
		c.Notes = append(c.Notes, fmt.Sprintf("%s: the first state record is torn or damaged (%v), the other copy was never written: the store starts afresh (a power cut during the first boot's first write leaves this)", bad[0].name, bad[0].err))
	default:
		c.Lost = true
		var why []string
		for _, d := range bad {
			why = append(why, fmt.Sprintf("%s: %v", d.name, d.err))
			// New records must come after anything a damaged copy
			// still shows.
			c.Seq = max(c.Seq, d.hdrSeq)
		}
		if blanks > 0 {
			why = append(why, "the other copy is blank")
		}
		c.Problems = append(c.Problems, fmt.Sprintf("THE CARD'S STATE WAS LOST: no state copy is readable (%s); a power cut never does this, so the card may be failing. The boot counter, the list of reports and the kept values (policy, DHCP leases, SSH host key) are gone", strings.Join(why, "; ")))
	}
	adopted := adoptSlots(read, c)
	if c.Lost {
		msg := "no earlier report was found in the report slots"
		if n := len(adopted); n > 0 {
			msg = fmt.Sprintf("%d report(s) found in the report slots are kept (boots %d to %d)", n, adopted[0].Boot, adopted[n-1].Boot)
		}
		c.Problems = append(c.Problems, fmt.Sprintf("state lost: %s; boot numbers continue after %d, so no report is overwritten", msg, c.State.Boot))
	} else if n := len(adopted); n > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("the report of boot %d (%s) is newer than every report the state names (a power cut between its write and its naming leaves this): it is kept", adopted[n-1].Boot, adopted[n-1].File))
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
			c.Problems = append(c.Problems, fmt.Sprintf("%s (boot %d): contents changed since it was written (sha256 differs): the card is damaged or the file was edited", s.File, s.Boot))
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

// slotsHoldReports says whether any report slot holds a report.
func slotsHoldReports(read ReadFileFunc) bool {
	var probe Contents
	return len(adoptSlots(read, &probe)) > 0
}

// adoptSlots takes into c's state the reports the slots hold that are
// newer than every report the state names — all of them when the state
// was lost, the one a cut caught between its write and its naming, or
// those a damaged newest copy named — and raises the boot counter past
// every report on the card. So a slot that holds a report newer than the
// kept ones is never the next one written, and no boot number is reused.
// It returns the adopted slots, oldest first.
func adoptSlots(read ReadFileFunc, c *Contents) []Slot {
	st := &c.State
	named := map[string]bool{}
	newest := 0
	for _, r := range st.Reports {
		named[r.File] = true
		newest = max(newest, r.Boot)
	}
	var found []Slot
	for i := 1; i <= Slots; i++ {
		name := SlotName(i)
		b, err := read(name)
		if err != nil {
			continue
		}
		// The slot is the report, spaces, and a newline at its very end;
		// the report's own trailing newline stays, so its sha256 does.
		js := bytes.TrimRight(bytes.TrimSuffix(b, []byte("\n")), " ")
		if len(js) == 0 || js[0] != '{' {
			continue
		}
		var head struct {
			Boot int `json:"boot"`
		}
		if json.Unmarshal(js, &head) != nil || head.Boot <= 0 {
			continue // never written, torn, or not a report
		}
		st.Boot = max(st.Boot, head.Boot)
		if named[name] || head.Boot <= newest {
			continue
		}
		sum := sha256.Sum256(js)
		found = append(found, Slot{File: name, Boot: head.Boot, Length: len(js), SHA256: hex.EncodeToString(sum[:])})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Boot < found[j].Boot })
	if len(found) > 0 {
		st.Reports = append(append([]Slot(nil), st.Reports...), found...)
		if n := len(st.Reports); n > Keep {
			st.Reports = st.Reports[n-Keep:]
		}
	}
	return found
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
