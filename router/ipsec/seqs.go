package ipsec

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Manual keys have no rekeying, so an SA's sequence numbers must survive a
// restart (RFC 4303 3.3.3, 3.4.3): an outbound SA that started again from
// 0 under the same key would repeat numbers the peer has seen (its window
// drops them; with ESN it infers the wrong high half and every packet
// fails its ICV), and an inbound SA that started from 0 would, with ESN,
// do the same to the peer's packets. Seqs keeps both in the power-safe
// store, per key.
//
// Outbound, by reservation: before an SA may send number n, the store
// holds a reservation r >= n ("numbers up to r may have been used"). At
// install, r+Reserve is committed first and the SA starts at r; while it
// runs, Check commits a new reservation (current + Reserve) whenever the
// counter has come within Reserve/2 of the stored one. A power cut at any
// moment leaves a committed reservation at or above every number sent, so
// the next start never repeats one. The margin: Check runs every
// DefaultTunnelCheck (20 s) and renews with Reserve/2 = 2^21 numbers
// still free, so the counter cannot pass the reservation unless the
// tunnel sends more than 2^21 packets in 20 s plus one store write, about
// 100 000 packets a second: several times what these boards' ESP engines
// do with the smallest packets. Each restart skips at most Reserve
// numbers, which ESN's 2^64 never runs out of.
//
// Inbound, by a periodic save: Check stores the highest number received
// (when it moved, at most every InSaveInterval), and an install starts the
// inbound SA's window there. The peer's numbers after a restart lie above
// it, so ESN infers their high half right. What was received after the
// last save (at most InSaveInterval of traffic, plus the window) can be
// replayed once each after a restart: the window there is empty.

// SeqValue is the store value holding the counters, per key.
const SeqValue = "ipsec-seq"

// Reserve is how far ahead of the outbound counter the reservation runs.
const Reserve = 1 << 22

// InSaveInterval bounds how often the inbound counter is written: each
// write is a state commit (and two console lines from the store), and
// what arrived since the last one is what a restart leaves replayable.
const InSaveInterval = 5 * time.Minute

// Values is the power-safe store's named values (the board's store).
// SetValue returns once the value is committed.
type Values interface {
	SetValue(name string, v any) error
	Value(name string, v any) (bool, error)
}

// seqRecord is one key's counters in the store.
type seqRecord struct {
	// Out is the reservation: the outbound SA may have used every
	// number up to it, none above.
	Out uint64 `json:"out"`
	// In is a number the inbound SA had received (at least this one).
	In uint64 `json:"in"`
	// Tunnel names the tunnel, for whoever reads the store.
	Tunnel string `json:"tunnel"`
}

// seqLedger is SeqValue.
type seqLedger struct {
	Keys map[string]seqRecord `json:"keys"`
}

// KeyID names a tunnel's keys in the store without holding them: the
// outbound SPI and a SHA-256 over both directions' SPIs, algorithms and
// keys. New keys (a roll) get a new ID, so their counters start afresh.
func KeyID(t Tunnel) string {
	h := sha256.New()
	for _, sa := range []SA{t.Out, t.In} {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], sa.SPI)
		h.Write(b[:])
		for _, f := range [][]byte{[]byte(sa.Cipher), sa.EncKey, []byte(sa.Auth), sa.AuthKey} {
			binary.BigEndian.PutUint32(b[:], uint32(len(f)))
			h.Write(b[:])
			h.Write(f)
		}
	}
	return fmt.Sprintf("%08x-%s", t.Out.SPI, hex.EncodeToString(h.Sum(nil)[:12]))
}

// UntrustedError says a tunnel's counters cannot be trusted, so it stays
// down: sending would repeat sequence numbers the peer has seen.
type UntrustedError struct {
	Tunnel string
	Why    string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("its sequence numbers cannot be trusted: %s; so that the peer does not drop every packet, roll the keys: make a new key file with ocfw tunnel keys on the PC, copy it to both cards (ocfw folder) and restart both boxes", e.Why)
}

// Seqs keeps the tunnels' sequence numbers in the store.
type Seqs struct {
	v Values
	// lost says why the store's earlier state is gone ("" when it is
	// intact): then no key without a record may start from 0.
	lost string

	mu     sync.Mutex
	ledger *seqLedger
	inSave map[string]time.Time // when each key's In was last written
	// Now and InSaveEvery are for tests; zero means time.Now and
	// InSaveInterval.
	Now         func() time.Time
	InSaveEvery time.Duration
}

// NewSeqs keeps the counters in v. lost, when not "", says why the store's
// earlier state was lost (damaged state copies): every key then lacks a
// trustworthy record.
func NewSeqs(v Values, lost string) *Seqs {
	return &Seqs{v: v, lost: lost, inSave: map[string]time.Time{}}
}

func (s *Seqs) load() (*seqLedger, error) {
	if s.ledger != nil {
		return s.ledger, nil
	}
	l := &seqLedger{}
	if _, err := s.v.Value(SeqValue, l); err != nil {
		return nil, fmt.Errorf("the store's %s value does not read: %w", SeqValue, err)
	}
	if l.Keys == nil {
		l.Keys = map[string]seqRecord{}
	}
	s.ledger = l
	return l, nil
}

// put commits rec for id; the ledger in memory changes only once the
// store has it.
func (s *Seqs) put(id string, rec seqRecord) error {
	next := &seqLedger{Keys: make(map[string]seqRecord, len(s.ledger.Keys)+1)}
	for k, v := range s.ledger.Keys {
		next.Keys[k] = v
	}
	next.Keys[id] = rec
	if err := s.v.SetValue(SeqValue, next); err != nil {
		return fmt.Errorf("writing its sequence number reservation to the store: %w", err)
	}
	s.ledger = next
	return nil
}

// Install installs t with its counters resumed from the store: the new
// reservation is committed before the SAs go into the kernel, the
// outbound SA starts at the old reservation and the inbound one at the
// number last saved. A key the store has no record of is new and starts
// from 0, unless the store's state was lost: then t stays down with an
// *UntrustedError. An SA already in the kernel with the same keys (a WAN
// change) keeps running; the reservation still covers it.
func (s *Seqs) Install(h *Handle, t Tunnel) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.trusted(t)
	if err != nil {
		return err
	}
	id := KeyID(t)
	start := rec.Out
	if c, err := h.Counters(t); err == nil && c.Out.Seq > start {
		start = c.Out.Seq // installed already and past the record (cannot happen while Check runs)
	}
	if start > ^uint64(0)-Reserve || !t.Out.ESN && start+Reserve > 0xffffffff {
		return &UntrustedError{Tunnel: t.Name, Why: fmt.Sprintf("the outbound counter (%d) is near its end", start)}
	}
	rec.Tunnel = t.Name
	reserved := rec
	reserved.Out = start + Reserve
	if err := s.put(id, reserved); err != nil {
		return err
	}
	t.Out.Seq, t.In.Seq = start, rec.In
	if t.In.ReplayWindow == 0 {
		t.In.Seq = 0
	}
	return h.Install(t)
}

// Trusted says whether t's counters can be trusted (nil), without the
// kernel: the store has a record of its keys, or has kept its state so
// that keys without one are new. Otherwise an *UntrustedError.
func (s *Seqs) Trusted(t Tunnel) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.trusted(t)
	return err
}

func (s *Seqs) trusted(t Tunnel) (seqRecord, error) {
	l, err := s.load()
	if err != nil {
		return seqRecord{}, err
	}
	rec, ok := l.Keys[KeyID(t)]
	if !ok && s.lost != "" {
		return rec, &UntrustedError{Tunnel: t.Name, Why: s.lost}
	}
	return rec, nil
}

// Check reads t's counters and stores what must be stored: a new
// reservation when the outbound counter has come within Reserve/2 of
// the stored one, and the inbound counter when it moved (at most every
// InSaveInterval). overrun is true when the counter had passed the
// reservation (sent numbers a power cut would make repeat): the caller
// should say so.
func (s *Seqs) Check(h *Handle, t Tunnel) (c TunnelCounters, overrun bool, err error) {
	c, err = h.Counters(t)
	if err != nil {
		return c, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.load()
	if err != nil {
		return c, false, err
	}
	id := KeyID(t)
	rec, ok := l.Keys[id]
	if !ok {
		return c, false, errors.New("no sequence number reservation in the store for its keys")
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	every := InSaveInterval
	if s.InSaveEvery > 0 {
		every = s.InSaveEvery
	}
	next := rec
	overrun = c.Out.Seq > rec.Out
	if c.Out.Seq+Reserve/2 > rec.Out {
		next.Out = c.Out.Seq + Reserve
	}
	inDue := c.In.Seq > rec.In && now().Sub(s.inSave[id]) >= every
	if inDue || next.Out != rec.Out {
		// Whenever a write is made, the inbound counter goes with it.
		if c.In.Seq > next.In {
			next.In = c.In.Seq
		}
		if err := s.put(id, next); err != nil {
			return c, overrun, err
		}
		if next.In != rec.In {
			s.inSave[id] = now()
		}
	}
	return c, overrun, nil
}

// Saved is what the store holds for t's keys: the outbound reservation
// and the inbound counter; ok false when it has no record.
func (s *Seqs) Saved(t Tunnel) (out, in uint64, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.load()
	if err != nil {
		return 0, 0, false, err
	}
	rec, ok := l.Keys[KeyID(t)]
	return rec.Out, rec.In, ok, nil
}
