// Package ocftest has ocf drivers that misbehave on purpose — fail, hang or
// corrupt — by wrapping a working driver, to test what sits above drivers
// (the dispatcher, self-tests). Every one of them claims to be hardware.
// It also has the standard-library reference answers (Reference, Block,
// MAC) that the driver tests compare engines with.
package ocftest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ocfw/ocfw/ocf"
)

// ErrInjected is the error Failing returns.
var ErrInjected = errors.New("ocftest: injected engine failure")

// Sizes matches requests whose Src has one of the given lengths.
func Sizes(n ...int) func(int) bool {
	return func(size int) bool { return slices.Contains(n, size) }
}

// AtLeast matches requests of n bytes or more.
func AtLeast(n int) func(int) bool {
	return func(size int) bool { return size >= n }
}

func matches(when func(int) bool, size int) bool { return when == nil || when(size) }

// base is what the three drivers share: a name, Hardware true, and the
// wrapped driver's caps.
type base struct {
	inner ocf.Driver
	name  string
}

func (b *base) Name() string   { return b.name }
func (b *base) Hardware() bool { return true }
func (b *base) Caps() ocf.Caps { return b.inner.Caps() }

// Failing returns ErrInjected for requests whose size When matches (every
// request when When is nil) and serves the others through the wrapped
// driver.
type Failing struct {
	base
	When func(size int) bool
}

// NewFailing wraps inner under name.
func NewFailing(name string, inner ocf.Driver, when func(int) bool) *Failing {
	return &Failing{base: base{inner: inner, name: name}, When: when}
}

func (f *Failing) Open(c *ocf.Cipher, key []byte) (ocf.Session, error) {
	s, err := f.inner.Open(c, key)
	if err != nil {
		return nil, err
	}
	return &failingSession{Session: s, f: f}, nil
}

type failingSession struct {
	ocf.Session
	f *Failing
}

func (s *failingSession) Driver() string { return s.f.name }

func (s *failingSession) Do(reqs []ocf.Request) error {
	var first error
	for i := range reqs {
		r := &reqs[i]
		if matches(s.f.When, len(r.Src)) {
			r.Err = fmt.Errorf("%w on a %d-byte request", ErrInjected, len(r.Src))
		} else {
			s.Session.Do(reqs[i : i+1])
		}
		if r.Err != nil && first == nil {
			first = r.Err
		}
	}
	return first
}

// Hanging blocks a batch that holds a request of a size When matches until
// Release is called or its context ends. Then it does what a late engine
// at its worst would: it writes junk (0xA5 bytes) over every request's
// output and reports success. Requests it does not block on are served
// correctly.
type Hanging struct {
	base
	When    func(size int) bool
	ctx     context.Context
	release chan struct{}
	once    sync.Once
	blocked chan struct{} // receives one value each time a batch blocks

	mu      sync.Mutex
	running int // batches blocked or writing junk
	idle    sync.Cond
}

// NewHanging wraps inner under name; ctx ending has the effect of
// Release.
func NewHanging(ctx context.Context, name string, inner ocf.Driver, when func(int) bool) *Hanging {
	h := &Hanging{
		base:    base{inner: inner, name: name},
		When:    when,
		ctx:     ctx,
		release: make(chan struct{}),
		blocked: make(chan struct{}, 64),
	}
	h.idle.L = &h.mu
	return h
}

// Release lets every blocked and future batch go on (with junk output).
func (h *Hanging) Release() { h.once.Do(func() { close(h.release) }) }

// Blocked receives a value each time a batch starts blocking.
func (h *Hanging) Blocked() <-chan struct{} { return h.blocked }

// Wait returns once every batch that has blocked so far has finished
// writing. (A mutex, not a WaitGroup: batches start blocking at any time,
// concurrently with Wait.)
func (h *Hanging) Wait() {
	h.mu.Lock()
	for h.running > 0 {
		h.idle.Wait()
	}
	h.mu.Unlock()
}

func (h *Hanging) Open(c *ocf.Cipher, key []byte) (ocf.Session, error) {
	s, err := h.inner.Open(c, key)
	if err != nil {
		return nil, err
	}
	return &hangingSession{Session: s, h: h}, nil
}

type hangingSession struct {
	ocf.Session
	h *Hanging
}

func (s *hangingSession) Driver() string { return s.h.name }

func (s *hangingSession) Do(reqs []ocf.Request) error {
	hang := false
	for i := range reqs {
		hang = hang || matches(s.h.When, len(reqs[i].Src))
	}
	if !hang {
		return s.Session.Do(reqs)
	}
	s.h.mu.Lock()
	s.h.running++
	s.h.mu.Unlock()
	defer func() {
		s.h.mu.Lock()
		s.h.running--
		s.h.idle.Broadcast()
		s.h.mu.Unlock()
	}()
	select {
	case s.h.blocked <- struct{}{}:
	default:
	}
	select {
	case <-s.h.release:
	case <-s.h.ctx.Done():
	}
	for i := range reqs {
		r := &reqs[i]
		out := r.Dst
		if out == nil {
			out = r.Src
		}
		for j := range out {
			out[j] = 0xA5
		}
		r.Err = nil
	}
	return nil
}

// Corrupting serves every request through the wrapped driver, then flips
// the last output byte of requests whose size When matches, and reports
// success: the failure a dispatcher cannot see without checking results.
type Corrupting struct {
	base
	When func(size int) bool
}

// NewCorrupting wraps inner under name.
func NewCorrupting(name string, inner ocf.Driver, when func(int) bool) *Corrupting {
	return &Corrupting{base: base{inner: inner, name: name}, When: when}
}

func (c *Corrupting) Open(ci *ocf.Cipher, key []byte) (ocf.Session, error) {
	s, err := c.inner.Open(ci, key)
	if err != nil {
		return nil, err
	}
	return &corruptingSession{Session: s, c: c}, nil
}

type corruptingSession struct {
	ocf.Session
	c *Corrupting
}

func (s *corruptingSession) Driver() string { return s.c.name }

func (s *corruptingSession) Do(reqs []ocf.Request) error {
	err := s.Session.Do(reqs)
	for i := range reqs {
		r := &reqs[i]
		if r.Err != nil || !matches(s.c.When, len(r.Src)) {
			continue
		}
		out := r.Dst
		if r.Op != ocf.MAC {
			out = r.Out()
		} else if len(out) > s.Cipher().DigestSize {
			out = out[:s.Cipher().DigestSize]
		}
		if len(out) > 0 {
			out[len(out)-1] ^= 0x01
		}
	}
	return err
}
