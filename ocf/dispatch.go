package ocf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// Dispatcher is a Driver that spreads work over engines (usually
// hardware) and a software fallback, following a Policy.
//
// A session opens the first permitted engine that supports the cipher and
// key, and always a fallback session too. Each request goes to the engine
// when its size reaches the cipher's MinHardware, otherwise to software.
// An engine request that errors, times out or (when verified) differs from
// software is redone in software, so the caller gets a correct result or an
// error, never a wrong result. An engine that times out or gives a wrong
// result is marked failed and no session uses it again.
//
// Engines never write into the caller's buffers: they get a private
// buffer, copied out only after success (and verification). A request
// that hangs and writes later therefore cannot corrupt the caller's Dst.
// That copy costs a memcpy per engine request, small beside any engine's
// own per-request cost.
//
// A batch is split into an engine sub-batch and a software sub-batch, run
// one after the other, so requests in one batch must not depend on each
// other's output (e.g. one request reading what an earlier one wrote).
type Dispatcher struct {
	fallback *engine
	engines  []*engine
	policy   Policy // read-only after NewDispatcher; failures live in engine.failed
	timing   atomic.Bool
	onFail   atomic.Pointer[func(driver, reason string)]
}

type engine struct {
	drv   Driver
	name  string
	hw    bool
	caps  Caps
	stats counters
	// failed holds the reason once the engine is marked failed.
	failed atomic.Pointer[string]
}

// DispatchName is the Name of every Dispatcher.
const DispatchName = "dispatch"

// NewDispatcher builds a dispatcher over engines, tried in order (put
// hardware first), with fallback as the software that serves small
// requests and redoes failed ones. The policy is copied.
func NewDispatcher(fallback Driver, engines []Driver, p Policy) (*Dispatcher, error) {
	if fallback == nil {
		return nil, errors.New("ocf: dispatcher needs a software fallback driver")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	d := &Dispatcher{policy: p.Clone()}
	seen := map[string]bool{}
	mk := func(drv Driver) (*engine, error) {
		if drv == nil {
			return nil, errors.New("ocf: nil engine driver")
		}
		name := drv.Name()
		if seen[name] {
			return nil, fmt.Errorf("ocf: driver name %q given twice to the dispatcher", name)
		}
		seen[name] = true
		return &engine{drv: drv, name: name, hw: drv.Hardware(), caps: drv.Caps()}, nil
	}
	var err error
	if d.fallback, err = mk(fallback); err != nil {
		return nil, err
	}
	for _, drv := range engines {
		e, err := mk(drv)
		if err != nil {
			return nil, err
		}
		if reason, ok := d.policy.Failed[e.name]; ok {
			e.failed.Store(&reason)
		}
		d.engines = append(d.engines, e)
	}
	return d, nil
}

func (d *Dispatcher) Name() string { return DispatchName }

// Hardware reports whether any engine that is not failed is hardware.
func (d *Dispatcher) Hardware() bool {
	for _, e := range d.engines {
		if e.hw && e.failed.Load() == nil {
			return true
		}
	}
	return false
}

// Caps are the fallback's: every session needs it, engines only speed up
// part of the work.
func (d *Dispatcher) Caps() Caps { return d.fallback.caps }

// SetTiming turns measuring time per driver on or off for sessions opened
// afterwards (off by default: reading the clock twice costs about as much
// as a 16-byte request).
func (d *Dispatcher) SetTiming(on bool) { d.timing.Store(on) }

// OnFailure sets a function called (once per engine) when the dispatcher
// marks an engine failed, e.g. to log it.
func (d *Dispatcher) OnFailure(fn func(driver, reason string)) { d.onFail.Store(&fn) }

// MarkFailed stops the use of engine name by every session; the first
// reason given is kept.
func (d *Dispatcher) MarkFailed(name, reason string) error {
	for _, e := range d.engines {
		if e.name == name {
			d.markFailed(e, reason)
			return nil
		}
	}
	return fmt.Errorf("ocf: dispatcher has no engine %q", name)
}

func (d *Dispatcher) markFailed(e *engine, reason string) {
	if e.failed.CompareAndSwap(nil, &reason) {
		if fn := d.onFail.Load(); fn != nil && *fn != nil {
			(*fn)(e.name, reason)
		}
	}
}

// Policy returns the dispatcher's policy with the engines it marked
// failed added to Failed, ready to be saved.
func (d *Dispatcher) Policy() Policy {
	p := d.policy.Clone()
	for _, e := range d.engines {
		if r := e.failed.Load(); r != nil {
			if p.Failed == nil {
				p.Failed = map[string]string{}
			}
			p.Failed[e.name] = *r
		}
	}
	return p
}

// Stats returns a snapshot of every driver's counters, engines first.
func (d *Dispatcher) Stats() Stats {
	s := make(Stats, 0, len(d.engines)+1)
	for _, e := range append(d.engines[:len(d.engines):len(d.engines)], d.fallback) {
		ds := e.stats.snapshot(e.name, e.hw)
		if r := e.failed.Load(); r != nil {
			ds.Failed = *r
		}
		s = append(s, ds)
	}
	return s
}

// WriteStats prints Stats as a table.
func (d *Dispatcher) WriteStats(w io.Writer) error { return d.Stats().Write(w) }

// Open starts a session: a fallback session always, and an engine session
// when the policy and the engines' Caps allow one for c and key.
func (d *Dispatcher) Open(c *Cipher, key []byte) (Session, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil cipher", ErrUnknownCipher)
	}
	sw, err := d.fallback.drv.Open(c, key)
	if err != nil {
		return nil, err
	}
	s := &dsession{d: d, c: sw.Cipher(), sw: sw, timing: d.timing.Load()}
	defer s.setPlain()
	cp := d.policy.Ciphers[c.Name]
	if cp.SoftwareOnly {
		return s, nil
	}
	for _, e := range d.candidates(cp.Driver) {
		if e.failed.Load() != nil || !d.policy.permits(e.name) || !e.caps.Supports(c.Name, len(key)) {
			continue
		}
		hw, err := e.drv.Open(c, key)
		if err != nil {
			continue // e.g. a key the engine refuses despite its caps: software serves
		}
		s.hw, s.eng = hw, e
		s.min, s.max = cp.MinHardware, e.caps.MaxRequest
		s.verify = d.policy.verifies(e.name)
		s.timeout = d.policy.timeout()
		if s.timeout > 0 {
			// A worker goroutine runs engine requests so that the caller
			// can stop waiting for one that hangs.
			s.jobs = make(chan []Request, 1)
			s.results = make(chan error, 2)
			s.timer = time.NewTimer(time.Hour)
			s.timer.Stop()
			go work(hw, s.jobs, s.results)
		}
		break
	}
	return s, nil
}

// candidates lists engines in order, the preferred one first.
func (d *Dispatcher) candidates(preferred string) []*engine {
	if preferred == "" {
		return d.engines
	}
	out := make([]*engine, 0, len(d.engines))
	for _, e := range d.engines {
		if e.name == preferred {
			out = append(out, e)
		}
	}
	for _, e := range d.engines {
		if e.name != preferred {
			out = append(out, e)
		}
	}
	return out
}

// work runs engine batches for one session until it receives nil, then
// closes the engine session. Sends never block (results has room for a
// batch result and the close result), so a worker whose session gave up
// waiting still finishes and exits.
func work(hw Session, jobs <-chan []Request, results chan<- error) {
	for reqs := range jobs {
		if reqs == nil {
			break
		}
		results <- hw.Do(reqs)
	}
	results <- hw.Close()
}

type dsession struct {
	d       *Dispatcher
	c       *Cipher
	sw      Session
	hw      Session // nil when no engine serves this session
	eng     *engine
	min     int // smallest request for the engine
	max     int // largest request the engine takes (0: any)
	verify  bool
	timeout time.Duration // per request; <= 0 runs the engine inline

	jobs    chan []Request
	results chan error
	timer   *time.Timer

	// Reused per batch so that requests do not allocate.
	route  []int32 // per caller request: -1 software, else index into hwReqs
	hwReqs []Request
	state  []uint8 // per hwReqs entry
	arena  []byte  // engine output, never the caller's memory
	swReqs []Request
	swIdx  []int32

	hwT, swT tally
	closed   bool
	timing   bool // measure time (the dispatcher's setting at Open)
	plain    bool // no engine, not closed, no timing: the short path
}

const (
	hwDone     uint8 = iota // engine result accepted
	hwRedo                  // engine failed: redo in software
	hwVerify                // compare with a software result
	hwTimedOut              // whole batch timed out
)

func (s *dsession) Cipher() *Cipher { return s.c }

func (s *dsession) Driver() string {
	if s.hw == nil {
		return DispatchName + "(" + s.sw.Driver() + ")"
	}
	return DispatchName + "(" + s.hw.Driver() + "," + s.sw.Driver() + ")"
}

func (s *dsession) setPlain() { s.plain = s.hw == nil && !s.closed && !s.timing }

func (s *dsession) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.plain = false
	var err error
	if s.hw != nil {
		if s.jobs != nil {
			s.jobs <- nil
			err = <-s.results
		} else {
			err = s.hw.Close()
		}
		s.hw = nil
	}
	s.d.fallback.stats.add(&s.swT)
	return errors.Join(err, s.sw.Close())
}

// dropEngine stops using the engine in this session. A worker (idle here)
// closes the engine session itself.
func (s *dsession) dropEngine() {
	if s.jobs != nil {
		s.jobs <- nil
		s.jobs = nil
	} else if s.hw != nil {
		s.hw.Close()
	}
	s.hw = nil
	s.setPlain()
}

// toEngine reports whether r should go to the engine.
func (s *dsession) toEngine(r *Request) bool {
	n := len(r.Src)
	if n < s.min || (s.max > 0 && n > s.max) {
		return false
	}
	// Bad requests go to software, which reports them: a caller's mistake
	// must not count against an engine.
	return CheckRequest(s.c, r) == nil
}

func (s *dsession) Do(reqs []Request) error {
	if !s.plain {
		return s.do(reqs)
	}
	// The common path, kept short: everything in software, handed
	// straight through, counted in the session.
	err := s.sw.Do(reqs)
	s.swT.requests += uint64(len(reqs))
	for i := range reqs {
		s.swT.bytes += uint64(len(reqs[i].Src))
	}
	if err != nil || s.swT.requests >= statsEvery {
		s.publishSoft(reqs, err)
	}
	return err
}

// publishSoft counts a software batch's errors and publishes the session's
// software counts. Atomic adds cost as much as a small request, so
// error-free batches are published in groups (and on Close).
func (s *dsession) publishSoft(reqs []Request, err error) {
	if err != nil {
		for i := range reqs {
			if reqs[i].Err != nil {
				s.swT.errors++
			}
		}
	}
	s.d.fallback.stats.add(&s.swT)
}

func (s *dsession) do(reqs []Request) error {
	if s.closed {
		for i := range reqs {
			reqs[i].Err = ErrClosed
		}
		return ErrClosed
	}
	if s.hw != nil && s.eng.failed.Load() != nil {
		s.dropEngine()
	}
	if s.hw != nil {
		for i := range reqs {
			if s.toEngine(&reqs[i]) {
				return s.mixed(reqs)
			}
		}
	}
	var t0 time.Time
	timing := s.timing
	if timing {
		t0 = time.Now()
	}
	err := s.sw.Do(reqs)
	if timing {
		s.swT.nanos += uint64(time.Since(t0))
	}
	s.swT.requests += uint64(len(reqs))
	for i := range reqs {
		s.swT.bytes += uint64(len(reqs[i].Src))
	}
	if err != nil || timing || s.swT.requests >= statsEvery {
		s.publishSoft(reqs, err)
	}
	return err
}

// statsEvery is how many software requests a session counts before it
// publishes them to the dispatcher's Stats.
const statsEvery = 64

// mixed runs a batch that has engine requests: the engine's sub-batch
// first, then one software sub-batch with the small requests, the
// requests to redo and those to verify.
func (s *dsession) mixed(reqs []Request) error {
	timing := s.timing
	s.route = s.route[:0]
	s.hwReqs = s.hwReqs[:0]
	total := 0
	for i := range reqs {
		r := &reqs[i]
		if !s.toEngine(r) {
			s.route = append(s.route, -1)
			continue
		}
		s.route = append(s.route, int32(len(s.hwReqs)))
		s.hwReqs = append(s.hwReqs, Request{Op: r.Op, IV: r.IV, Src: r.Src})
		total += s.outLen(r)
	}
	if cap(s.arena) < total {
		s.arena = make([]byte, total)
	}
	off := 0
	for k := range s.hwReqs {
		n := s.outLen(&s.hwReqs[k])
		s.hwReqs[k].Dst = s.arena[off : off+n : off+n]
		off += n
	}

	var t0 time.Time
	if timing {
		t0 = time.Now()
	}
	batchErr, timedOut := s.runEngine(len(s.hwReqs))
	if timing {
		s.hwT.nanos += uint64(time.Since(t0))
	}
	s.hwT.requests += uint64(len(s.hwReqs))
	for k := range s.hwReqs {
		s.hwT.bytes += uint64(len(s.hwReqs[k].Src))
	}
	s.state = s.state[:0]
	hwReqs := s.hwReqs
	if timedOut {
		s.hwT.timeouts++
		s.hwT.fallbacks += uint64(len(hwReqs))
		d := s.timeout * time.Duration(len(hwReqs))
		s.d.markFailed(s.eng, fmt.Sprintf("a batch of %d requests did not finish within %v", len(hwReqs), d))
		// The worker may still write into the arena and the requests:
		// leave them to it and never look at them again.
		s.arena, s.hwReqs, hwReqs = nil, nil, nil
		s.jobs <- nil // buffered: the worker reads it once the engine returns
		s.jobs, s.hw = nil, nil
		s.setPlain()
	}
	// A batch error that is not one request's error may have cut the
	// batch short: then no result of it is trusted.
	redoAll := batchErr != nil && !isRequestErr(batchErr, hwReqs)
	for k := range hwReqs {
		hr := &hwReqs[k]
		switch {
		case hr.Err != nil || redoAll:
			s.hwT.errors++
			s.hwT.fallbacks++
			s.state = append(s.state, hwRedo)
		case s.verify:
			s.state = append(s.state, hwVerify)
		default:
			s.state = append(s.state, hwDone)
		}
	}

	// Software sub-batch: everything not accepted from the engine, with
	// the caller's own buffers.
	s.swReqs, s.swIdx = s.swReqs[:0], s.swIdx[:0]
	for i := range reqs {
		k := s.route[i]
		if k >= 0 && !timedOut && s.state[k] == hwDone {
			r, hr := &reqs[i], &hwReqs[k]
			copy(s.output(r), hr.Dst)
			r.Err = nil
			continue
		}
		s.swReqs = append(s.swReqs, reqs[i])
		s.swIdx = append(s.swIdx, int32(i))
	}
	if len(s.swReqs) > 0 {
		if timing {
			t0 = time.Now()
		}
		s.sw.Do(s.swReqs)
		if timing {
			s.swT.nanos += uint64(time.Since(t0))
		}
	}
	for j := range s.swReqs {
		i := s.swIdx[j]
		r := &reqs[i]
		r.Err = s.swReqs[j].Err
		s.swT.requests++
		s.swT.bytes += uint64(len(r.Src))
		if r.Err != nil {
			s.swT.errors++
			continue
		}
		if k := s.route[i]; k >= 0 && !timedOut && s.state[k] == hwVerify {
			s.hwT.verified++
			if !bytes.Equal(s.output(r), hwReqs[k].Dst) {
				s.hwT.mismatches++
				s.hwT.fallbacks++
				s.d.markFailed(s.eng, fmt.Sprintf("%s result differed from software on a %d-byte %s request", s.c.Name, len(r.Src), r.Op))
			}
		}
	}
	s.eng.stats.add(&s.hwT)
	s.d.fallback.stats.add(&s.swT)

	for i := range reqs {
		if reqs[i].Err != nil {
			return reqs[i].Err
		}
	}
	return nil
}

// runEngine runs s.hwReqs on the engine, bounded by n request timeouts.
func (s *dsession) runEngine(n int) (err error, timedOut bool) {
	if s.jobs == nil {
		return s.hw.Do(s.hwReqs), false
	}
	s.timer.Reset(s.timeout * time.Duration(n))
	s.jobs <- s.hwReqs
	select {
	case err = <-s.results:
		s.timer.Stop()
		return err, false
	case <-s.timer.C:
		return nil, true
	}
}

// outLen is how many bytes a request writes.
func (s *dsession) outLen(r *Request) int {
	if r.Op == MAC {
		return s.c.DigestSize
	}
	return len(r.Src)
}

// output is the part of the caller's memory a request writes.
func (s *dsession) output(r *Request) []byte {
	if r.Op == MAC {
		return r.Dst[:s.c.DigestSize]
	}
	return r.Out()
}

// isRequestErr reports whether err is one of the requests' own errors.
func isRequestErr(err error, reqs []Request) bool {
	for i := range reqs {
		if reqs[i].Err == err {
			return true
		}
	}
	return false
}

// String describes the dispatcher's engines in order, for logs.
func (d *Dispatcher) String() string {
	var b strings.Builder
	b.WriteString(DispatchName + "[")
	for _, e := range d.engines {
		b.WriteString(e.name)
		if e.failed.Load() != nil {
			b.WriteString("(failed)")
		}
		b.WriteString(" ")
	}
	b.WriteString("fallback " + d.fallback.name + "]")
	return b.String()
}
