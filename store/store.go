package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ocfw/ocfw/internal/fat"
)

// Device is the data partition: the FAT file system at offset 0.
type Device interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
}

// Options tune a Store.
type Options struct {
	// Progress, when set, gets a line before and after every write, for
	// the console (and the power-cut test, which times its kills by them).
	Progress func(format string, args ...any)
	// WriteTime, test images only, stretches every write to about this
	// long, sector by sector, so a test can cut the power inside one.
	WriteTime time.Duration
	// Now is the clock for log records; nil means time.Now.
	Now func() time.Time
}

// Store is the board's writer. It is safe for concurrent use.
type Store struct {
	mu   sync.Mutex
	dev  Device
	opts Options
	ext  map[string]fat.Extent
	fsys *fat.FS

	contents *Contents
	next     string // the state copy the next commit goes to
	logSeq   uint64
	logPos   int64 // sector index of the newest log record, -1 when none
}

// ErrLayout says the data partition is not as the build left it; nothing
// is written then.
var ErrLayout = errors.New("the data partition's ocfw files are not as the build made them")

// Open checks the data partition (read-only) and loads the store. It
// refuses — and then nothing is ever written — unless every one of Files
// is there with one contiguous extent of its size, in a FAT whose copies
// agree about it, owned by no other file.
func Open(dev Device, size int64, opts Options) (*Store, error) {
	fsys, err := fat.Open(dev, 0, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	if _, err := fsys.Owners(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	s := &Store{dev: dev, opts: opts, ext: map[string]fat.Extent{}, fsys: fsys}
	for _, f := range Files() {
		e, err := fsys.Extent(Dir + "/" + f.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrLayout, err)
		}
		if e.Size != f.Size {
			return nil, fmt.Errorf("%w: %s is %d bytes, want %d", ErrLayout, e.Path, e.Size, f.Size)
		}
		s.ext[f.Name] = e
	}
	c, err := Load(s.readFile)
	if err != nil {
		return nil, err
	}
	s.contents = c
	s.next = StateA
	if c.From == StateA {
		s.next = StateB
	}
	s.logPos = -1
	if n := len(c.Log); n > 0 {
		s.logSeq = c.Log[n-1].Seq
		// Find the newest record's sector: the ring is read in order.
		b, _ := s.readFile(LogFile)
		for o := int64(0); o+sectorSize <= int64(len(b)); o += sectorSize {
			if r, err := decode(b[o:o+sectorSize], kindLog); err == nil && r.seq == s.logSeq {
				s.logPos = o / sectorSize
			}
		}
	}
	return s, nil
}

func (s *Store) readFile(name string) ([]byte, error) {
	e, ok := s.ext[name]
	if !ok {
		return nil, fmt.Errorf("%s: not a store file", name)
	}
	b := make([]byte, e.Size)
	if _, err := s.dev.ReadAt(b, e.Offset); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
}

// Contents is what Open found (and what was written since), newest
// state first. The caller must not change it.
func (s *Store) Contents() *Contents {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.contents
}

// Problems are what Open found damaged or torn and ignored.
func (s *Store) Problems() []string { return s.Contents().Problems }

// StateLost says Open found the state lost (Contents.Lost): what was kept
// in it (the SSH host key among the values) is gone, and whoever makes
// it anew must say so loudly.
func (s *Store) StateLost() bool { return s.Contents().Lost }

// write puts data at off inside file name's extent and syncs the device.
func (s *Store) write(name string, off int64, data []byte, what string) error {
	e := s.ext[name]
	if off < 0 || off+int64(len(data)) > e.Size {
		return fmt.Errorf("store: %s: %d bytes at %d do not fit its %d", name, len(data), off, e.Size)
	}
	// Log records (what == "") are one sector, written whole: they are
	// neither announced nor stretched.
	if what != "" {
		s.progress("ocfw: store: writing %s (%d bytes to %s)", what, len(data), name)
	}
	if s.opts.WriteTime > 0 && what != "" {
		chunks := (len(data) + sectorSize - 1) / sectorSize
		pause := s.opts.WriteTime / time.Duration(chunks)
		// Pause before each sector: a cut early in the window finds
		// nothing written yet, a later one a part, the last the whole.
		for i := 0; i < len(data); i += sectorSize {
			j := min(i+sectorSize, len(data))
			time.Sleep(pause)
			if _, err := s.dev.WriteAt(data[i:j], e.Offset+off+int64(i)); err != nil {
				return err
			}
			if err := s.dev.Sync(); err != nil {
				return err
			}
		}
	} else if _, err := s.dev.WriteAt(data, e.Offset+off); err != nil {
		return err
	}
	if err := s.dev.Sync(); err != nil {
		return err
	}
	if what != "" {
		s.progress("ocfw: store: wrote %s", what)
	}
	return nil
}

func (s *Store) progress(format string, args ...any) {
	if s.opts.Progress != nil {
		s.opts.Progress(format, args...)
	}
}

// commit writes st as the next state record into the older copy.
func (s *Store) commit(st State, what string) error {
	payload, err := json.Marshal(st)
	if err != nil {
		return err
	}
	seq := s.contents.Seq + 1
	rec := encode(record{seq: seq, kind: kindState, payload: payload})
	if len(rec) > StateSize {
		return fmt.Errorf("store: state of %d bytes is larger than its %d-byte copy", len(rec), StateSize)
	}
	// Round up to whole sectors: the rest of the last sector is zero.
	buf := make([]byte, (len(rec)+sectorSize-1)/sectorSize*sectorSize)
	copy(buf, rec)
	if err := s.write(s.next, 0, buf, what); err != nil {
		return err
	}
	c := *s.contents
	c.State, c.Seq, c.From = st, seq, s.next
	s.contents = &c
	if s.next == StateA {
		s.next = StateB
	} else {
		s.next = StateA
	}
	return nil
}

// clone copies the current state so a failed commit leaves it unchanged.
func (s *Store) clone() State {
	st := s.contents.State
	st.Reports = append([]Slot(nil), st.Reports...)
	vs := make(map[string]json.RawMessage, len(st.Values))
	for k, v := range st.Values {
		vs[k] = v
	}
	st.Values = vs
	return st
}

// BeginBoot takes the next boot number and writes it before anything
// else, so a number is never used twice, whatever happens to this boot.
func (s *Store) BeginBoot() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.clone()
	st.Boot++
	if err := s.commit(st, fmt.Sprintf("boot counter %d", st.Boot)); err != nil {
		return 0, err
	}
	return st.Boot, nil
}

// Boot is the current boot number (0 before BeginBoot on a fresh store).
func (s *Store) Boot() int { return s.Contents().State.Boot }

// PutReport keeps a report for boot: it goes into a slot no kept report
// uses, is synced, and only then does the state name it and let go of
// the oldest report beyond Keep. A report for a boot the store keeps one
// of already replaces it (the boot's report updated once its tunnels
// settled): the old slot is not touched, and the one commit that names
// the new slot lets go of the old, so a cut leaves the one or the other.
func (s *Store) PutReport(boot int, js []byte) (Slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(js) == 0 || len(js) > SlotSize {
		return Slot{}, fmt.Errorf("store: a report of %d bytes does not fit a %d-byte slot", len(js), SlotSize)
	}
	st := s.clone()
	used := map[string]bool{}
	for _, r := range st.Reports {
		used[r.File] = true
	}
	// The slot after the newest report's, round robin, spreads the writes.
	start := 0
	if n := len(st.Reports); n > 0 {
		fmt.Sscanf(st.Reports[n-1].File, "report-%02d.json", &start)
	}
	file := ""
	for k := 1; k <= Slots; k++ {
		i := (start+k-1)%Slots + 1
		if !used[SlotName(i)] {
			file = SlotName(i)
			break
		}
	}
	if file == "" {
		return Slot{}, errors.New("store: no free report slot")
	}
	// JSON padded with spaces (JSON whitespace) to the whole slot.
	buf := make([]byte, SlotSize)
	copy(buf, js)
	for i := len(js); i < len(buf); i++ {
		buf[i] = ' '
	}
	buf[len(buf)-1] = '\n'
	if err := s.write(file, 0, buf, fmt.Sprintf("report of boot %d", boot)); err != nil {
		return Slot{}, err
	}
	sum := sha256.Sum256(js)
	slot := Slot{File: file, Boot: boot, Length: len(js), SHA256: hex.EncodeToString(sum[:])}
	st.Reports = append(slices.DeleteFunc(st.Reports, func(r Slot) bool { return r.Boot == boot }), slot)
	if n := len(st.Reports); n > Keep {
		st.Reports = st.Reports[n-Keep:]
	}
	if err := s.commit(st, fmt.Sprintf("state naming %s", file)); err != nil {
		return Slot{}, err
	}
	// Keep Contents' report list current.
	c := *s.contents
	others := slices.DeleteFunc(slices.Clone(c.Reports), func(r Report) bool { return r.Boot == boot })
	c.Reports = append([]Report{{Slot: slot, JSON: append([]byte(nil), js...)}}, others...)
	if len(c.Reports) > Keep {
		c.Reports = c.Reports[:Keep]
	}
	s.contents = &c
	return slot, nil
}

// SetValue stores a named document (JSON-encoded v).
func (s *Store) SetValue(name string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.clone()
	st.Values[name] = raw
	if err := roomFor(st); err != nil {
		return fmt.Errorf("store: value %s (%d bytes) not kept: %w", name, len(raw), err)
	}
	return s.commit(st, "value "+name)
}

// roomFor checks that st would still fit its copy with the boot counter
// at its largest and every report slot named: a value never takes the
// room the counter and the reports need, so one that grows too big is
// refused alone and every other write goes on.
func roomFor(st State) error {
	full := st
	full.Boot = math.MaxInt32
	full.Reports = make([]Slot, Keep)
	for i := range full.Reports {
		full.Reports[i] = Slot{File: SlotName(Slots), Boot: math.MaxInt32, Length: SlotSize, SHA256: strings.Repeat("0", 64)}
	}
	payload, err := json.Marshal(full)
	if err != nil {
		return err
	}
	if n := headerSize + len(payload); n > StateSize {
		return fmt.Errorf("the state would take %d bytes of its %d-byte copy, counting the room kept for the boot counter and %d reports", n, StateSize, Keep)
	}
	return nil
}

// Log appends a line to the log ring, overwriting the oldest record once
// the ring is full.
func (s *Store) Log(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now
	if s.opts.Now != nil {
		now = s.opts.Now
	}
	n := s.ext[LogFile].Size / sectorSize
	pos := (s.logPos + 1) % n
	seq := s.logSeq + 1
	if err := s.write(LogFile, pos*sectorSize, encodeLog(seq, now(), text), ""); err != nil {
		return err
	}
	s.logPos, s.logSeq = pos, seq
	return nil
}

// ReadFile reads a file a user put into the store's folder on a PC (such
// as the site config), through the read-only FAT reader; an error
// wrapping fs.ErrNotExist when there is none.
func (s *Store) ReadFile(name string, max int64) ([]byte, error) {
	return s.fsys.ReadFile(Dir+"/"+name, max)
}

// Value decodes the named document into v; false when there is none.
func (s *Store) Value(name string, v any) (bool, error) {
	st := s.Contents().State
	return st.Value(name, v)
}
