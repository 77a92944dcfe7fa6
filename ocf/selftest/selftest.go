// Package selftest proves that an engine gives right answers: known-answer
// tests from the standard documents (vectors/*.txt), then a cross-check in
// the manner of FreeBSD's cryptocheck — random keys, IVs and data of many
// sizes, unaligned buffers and in-place operation — against Go software.
// Every engine request runs under a timeout, so a hung engine is a failure,
// never a hung boot.
package selftest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/soft"
)

// Status of one (engine, cipher) pair.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	// Absent: the engine is in the plan but not in this kernel or
	// hardware. Reported, not a failure.
	Absent Status = "absent"
)

func (s Status) String() string { return string(s) }

// ParseStatus is the one reader of a status as reports write it.
func ParseStatus(s string) (Status, error) {
	switch st := Status(s); st {
	case Pass, Fail, Absent:
		return st, nil
	}
	return "", fmt.Errorf("self-test status %q: want %s, %s or %s", s, Pass, Fail, Absent)
}

// UnmarshalJSON reads a status with ParseStatus, so a report with a
// status this ocfw does not know fails to read instead of counting as
// absent.
func (s *Status) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("self-test status: want a string, got %s", b)
	}
	st, err := ParseStatus(v)
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// Result is the outcome for one engine and cipher.
type Result struct {
	Engine      string   `json:"engine"` // the driver name tested, e.g. "cbc-aes-geode"
	Cipher      string   `json:"cipher"`
	Status      Status   `json:"status"`
	KATs        int      `json:"kats"`         // known-answer checks passed (each direction counts)
	CrossChecks int      `json:"cross_checks"` // cross-check cases passed
	Failure     *Failure `json:"failure,omitempty"`
	Reason      string   `json:"reason,omitempty"` // why absent
	Millis      int64    `json:"ms"`
}

// Failure is the first failing case, with what is needed to reproduce it.
type Failure struct {
	Case     string `json:"case"` // vector id, or "cross-check" with size and layout
	Op       string `json:"op"`
	Size     int    `json:"size"`
	Key      string `json:"key"`
	IV       string `json:"iv,omitempty"`
	Expected string `json:"expected,omitempty"` // hex, 32 bytes from a little before the first difference
	Got      string `json:"got,omitempty"`
	Err      string `json:"error,omitempty"`
}

func (f *Failure) String() string {
	s := fmt.Sprintf("%s: %s of %d bytes", f.Case, f.Op, f.Size)
	if f.Expected == "" && f.Got == "" {
		return s + ": " + f.Err
	}
	s += fmt.Sprintf(": key %s", f.Key)
	if f.IV != "" {
		s += " iv " + f.IV
	}
	return s + fmt.Sprintf(": expected %s, got %s (%s)", f.Expected, f.Got, f.Err)
}

// Options tune a self-test.
type Options struct {
	// Timeout bounds each engine request; 0 means 5s.
	Timeout time.Duration
	// Sizes are the cross-check request sizes in bytes; sizes that are not
	// a multiple of a cipher's block size are skipped for that cipher.
	// Nil means DefaultSizes.
	Sizes []int
	// Seed makes the random cases reproducible; 0 picks 1.
	Seed uint64
	// Reference computes expected results; nil means Go software.
	Reference ocf.Driver
	// Full runs every known-answer vector (the CAVP files whole); without
	// it the vectors marked set = full are left out, as at boot.
	Full bool
}

// DefaultSizes run from one block to 64 KiB, including odd multiples of
// the block size and sizes that are not multiples of 16 (for MACs).
var DefaultSizes = []int{8, 16, 24, 48, 55, 64, 208, 1000, 1024, 1552, 4096, 8200, 16384, 65536}

func (o *Options) defaults() {
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Sizes == nil {
		o.Sizes = DefaultSizes
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Reference == nil {
		o.Reference = soft.New()
	}
}

// Check runs the known-answer tests and the cross-check of cipher on d.
func Check(d ocf.Driver, cipher string, opt Options) Result {
	opt.defaults()
	start := time.Now()
	r := Result{Engine: d.Name(), Cipher: cipher}
	c, err := ocf.LookupCipher(cipher)
	if err != nil {
		r.Status, r.Failure = Fail, &Failure{Case: "setup", Err: err.Error()}
		return r
	}
	t := &tester{d: d, c: c, opt: opt, res: &r, rng: rand.New(rand.NewPCG(opt.Seed, 0x6f6366))}
	// The cross-check runs only when every known answer passed; either
	// stage's error fails the result, with the Failure it recorded.
	err = t.kats()
	if err == nil {
		err = t.crossCheck()
	}
	switch {
	case r.Failure != nil:
		r.Status = Fail
	case err != nil: // an error that recorded no Failure still fails
		r.Status, r.Failure = Fail, &Failure{Case: "self-test", Err: err.Error()}
	default:
		r.Status = Pass
	}
	r.Millis = time.Since(start).Milliseconds()
	return r
}

// AbsentResult records an engine the plan expects but this system lacks.
func AbsentResult(engine, cipher, reason string) Result {
	return Result{Engine: engine, Cipher: cipher, Status: Absent, Reason: reason}
}

var errFailed = errors.New("selftest: failed")

type tester struct {
	d   ocf.Driver
	c   *ocf.Cipher
	opt Options
	res *Result
	rng *rand.Rand
}

func (t *tester) fail(f Failure) error {
	if t.res.Failure == nil {
		t.res.Failure = &f
	}
	return errFailed
}

func (t *tester) kats() error {
	vs, err := Vectors()
	if err != nil {
		return t.fail(Failure{Case: "vectors", Err: err.Error()})
	}
	for _, v := range vs {
		if v.Cipher != t.c.Name || (v.Full && !t.opt.Full) {
			continue
		}
		if t.c.Kind == catalog.KindMAC {
			got, err := t.run(v.Key, ocf.Request{Op: ocf.MAC, Src: v.Data, Dst: make([]byte, t.c.DigestSize)})
			if err := t.compare(v.ID, "mac", v.Key, nil, v.Data, v.MAC, got, err, len(v.MAC)); err != nil {
				return err
			}
			t.res.KATs++
			continue
		}
		if v.Encrypt {
			got, err := t.run(v.Key, ocf.Request{Op: ocf.Encrypt, IV: v.IV, Src: v.Plaintext, Dst: make([]byte, len(v.Plaintext))})
			if err := t.compare(v.ID, "encrypt", v.Key, v.IV, v.Plaintext, v.Ciphertext, got, err, 0); err != nil {
				return err
			}
			t.res.KATs++
		}
		if v.Decrypt {
			got, err := t.run(v.Key, ocf.Request{Op: ocf.Decrypt, IV: v.IV, Src: v.Ciphertext, Dst: make([]byte, len(v.Ciphertext))})
			if err := t.compare(v.ID, "decrypt", v.Key, v.IV, v.Ciphertext, v.Plaintext, got, err, 0); err != nil {
				return err
			}
			t.res.KATs++
		}
	}
	return nil
}

// crossCheck compares the engine with the reference on random cases.
func (t *tester) crossCheck() error {
	for i, size := range t.opt.Sizes {
		if size%t.c.BlockSize != 0 {
			continue
		}
		if m := t.d.Caps().MaxRequest; m > 0 && size > m {
			continue
		}
		key := t.key()
		iv := t.bytes(t.c.IVSize)
		offset := []int{0, 1, 3, 7}[i%4] // unaligned buffers
		inPlace := i%2 == 1
		data := t.bytes(size)
		layout := fmt.Sprintf("cross-check %d bytes, offset %d", size, offset)
		if inPlace {
			layout += ", in place"
		}
		if t.c.Kind == catalog.KindMAC {
			want, err := t.reference(key, ocf.Request{Op: ocf.MAC, Src: data, Dst: make([]byte, t.c.DigestSize)})
			if err != nil {
				return t.fail(Failure{Case: layout, Op: "mac (reference)", Size: size, Err: err.Error()})
			}
			src := shifted(data, offset)
			got, err := t.run(key, ocf.Request{Op: ocf.MAC, Src: src, Dst: make([]byte, t.c.DigestSize)})
			if err := t.compare(layout, "mac", key, nil, data, want, got, err, 0); err != nil {
				return err
			}
			t.res.CrossChecks++
			continue
		}
		want, err := t.reference(key, ocf.Request{Op: ocf.Encrypt, IV: iv, Src: data, Dst: make([]byte, size)})
		if err != nil {
			return t.fail(Failure{Case: layout, Op: "encrypt (reference)", Size: size, Err: err.Error()})
		}
		src := shifted(data, offset)
		req := ocf.Request{Op: ocf.Encrypt, IV: iv, Src: src}
		if !inPlace {
			req.Dst = shifted(make([]byte, size), (offset+1)%8)
		}
		got, err := t.run(key, req)
		if err := t.compare(layout, "encrypt", key, iv, data, want, got, err, 0); err != nil {
			return err
		}
		// And back: the engine must decrypt its own (correct) output.
		src = shifted(want, offset)
		req = ocf.Request{Op: ocf.Decrypt, IV: iv, Src: src}
		if !inPlace {
			req.Dst = shifted(make([]byte, size), (offset+5)%8)
		}
		got, err = t.run(key, req)
		if err := t.compare(layout, "decrypt", key, iv, want, data, got, err, 0); err != nil {
			return err
		}
		t.res.CrossChecks++
	}
	return nil
}

func (t *tester) key() []byte {
	if t.c.Kind == catalog.KindMAC {
		// HMAC keys of several lengths, including longer than a block.
		return t.bytes([]int{t.c.KeySize, 16, 64, 100}[t.rng.IntN(4)])
	}
	return t.bytes(t.c.KeySize)
}

func (t *tester) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(t.rng.Uint32())
	}
	return b
}

// shifted copies b into a buffer starting off bytes past an aligned
// allocation, so engines see unaligned addresses.
func shifted(b []byte, off int) []byte {
	buf := make([]byte, len(b)+off)
	copy(buf[off:], b)
	return buf[off : off+len(b) : off+len(b)]
}

func (t *tester) reference(key []byte, req ocf.Request) ([]byte, error) {
	s, err := t.opt.Reference.Open(t.c, key)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	reqs := []ocf.Request{req}
	if err := s.Do(reqs); err != nil {
		return nil, err
	}
	return output(&reqs[0]), nil
}

func output(r *ocf.Request) []byte {
	if r.Op == ocf.MAC {
		return r.Dst
	}
	return r.Out()
}

// run performs one request on the engine under the timeout. The request's
// buffers are private to this call, so an engine that finishes late cannot
// write into anything the test still reads.
func (t *tester) run(key []byte, req ocf.Request) ([]byte, error) {
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := t.d.Open(t.c, key)
		if err != nil {
			done <- result{err: fmt.Errorf("open session: %w", err)}
			return
		}
		defer s.Close()
		reqs := []ocf.Request{req}
		err = s.Do(reqs)
		out := append([]byte(nil), output(&reqs[0])...)
		done <- result{out, err}
	}()
	timer := time.NewTimer(t.opt.Timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.out, r.err
	case <-timer.C:
		return nil, fmt.Errorf("%w after %v: the engine did not answer", ocf.ErrTimeout, t.opt.Timeout)
	}
}

// compare checks got against want (the first n bytes when n > 0, for
// truncated MACs) and records the first failure.
func (t *tester) compare(id, op string, key, iv, in, want, got []byte, err error, n int) error {
	f := Failure{Case: id, Op: op, Size: len(in), Key: hex.EncodeToString(key), IV: hex.EncodeToString(iv)}
	if err != nil {
		f.Err = err.Error()
		return t.fail(f)
	}
	if n > 0 && len(got) >= n {
		got = got[:n]
	}
	if !bytes.Equal(got, want) {
		// Show the bytes around the first difference, not just the start.
		i := firstDiff(got, want)
		from := max(0, i-16)
		f.Expected, f.Got = window(want, from), window(got, from)
		f.Err = fmt.Sprintf("first difference at byte %d; showing from byte %d", i, from)
		return t.fail(f)
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// window is up to 32 bytes of b from offset from, in hex.
func window(b []byte, from int) string {
	if from >= len(b) {
		return "(nothing)"
	}
	end := min(len(b), from+32)
	s := hex.EncodeToString(b[from:end])
	if end < len(b) {
		s += "..."
	}
	return s
}
