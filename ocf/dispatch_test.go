package ocf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/fault"
	"github.com/ocfw/ocfw/ocf/soft"
)

// sizes are the request sizes the tests sweep (0 included: an empty
// request is valid for every cipher).
var sizes = []int{0, 16, 64, 256, 1024, 8192, 16384}

// good is an engine that works: a Failing driver that fails nothing.
func good(name string) ocf.Driver { return fault.NewFailing(name, soft.New(), fault.Sizes()) }

func newDispatcher(t *testing.T, p ocf.Policy, engines ...ocf.Driver) *ocf.Dispatcher {
	t.Helper()
	d, err := ocf.NewDispatcher(soft.New(), engines, p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func openCipher(t testing.TB, d ocf.Driver, name string) ocf.Session {
	t.Helper()
	c, err := ocf.LookupCipher(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Open(c, key(c))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func key(c *ocf.Cipher) []byte { return randBytes(uint64(len(c.Name)), c.KeySize) }

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// request builds a request of n bytes for c, out of place (or in place) .
func request(c *ocf.Cipher, n int, seed uint64, inPlace bool) ocf.Request {
	src := randBytes(seed, n)
	if c.Kind == catalog.KindMAC {
		return ocf.Request{Op: ocf.MAC, Src: src, Dst: make([]byte, c.DigestSize)}
	}
	r := ocf.Request{Op: ocf.Encrypt, IV: randBytes(seed+1, c.IVSize), Src: src}
	if !inPlace {
		r.Dst = make([]byte, n)
	}
	return r
}

// reference computes what soft gives for r (r is not changed).
func reference(t testing.TB, c *ocf.Cipher, r ocf.Request) []byte {
	t.Helper()
	s := openCipher(t, soft.New(), c.Name)
	cp := ocf.Request{Op: r.Op, IV: r.IV, Src: bytes.Clone(r.Src), Dst: make([]byte, max(len(r.Src), c.DigestSize))}
	if err := s.Do([]ocf.Request{cp}); err != nil {
		t.Fatal(err)
	}
	if r.Op == ocf.MAC {
		return cp.Dst[:c.DigestSize]
	}
	return cp.Dst[:len(r.Src)]
}

func output(c *ocf.Cipher, r *ocf.Request) []byte {
	if r.Op == ocf.MAC {
		return r.Dst[:c.DigestSize]
	}
	return r.Out()
}

func statsOf(t *testing.T, d *ocf.Dispatcher, name string) ocf.DriverStats {
	t.Helper()
	for _, s := range d.Stats() {
		if s.Driver == name {
			return s
		}
	}
	t.Fatalf("no stats for %q in %+v", name, d.Stats())
	return ocf.DriverStats{}
}

func TestDispatchChoosesBySize(t *testing.T) {
	p := ocf.Policy{
		Trusted: []string{"hw"},
		Ciphers: map[string]ocf.CipherPolicy{"aes-128-cbc": {MinHardware: 256}},
	}
	d := newDispatcher(t, p, good("hw"))
	c, _ := ocf.LookupCipher("aes-128-cbc")
	s := openCipher(t, d, c.Name)
	if s.Driver() != "dispatch(hw,go)" {
		t.Fatalf("session driver %q, want dispatch(hw,go)", s.Driver())
	}
	var wantHW, wantSW uint64
	for i, n := range sizes {
		r := request(c, n, uint64(i), i%2 == 0)
		w := reference(t, c, r)
		reqs := []ocf.Request{r}
		if err := s.Do(reqs); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(output(c, &reqs[0]), w) {
			t.Fatalf("%d bytes: wrong output", n)
		}
		if n >= 256 {
			wantHW++
		} else {
			wantSW++
		}
	}
	s.Close() // publishes the software counts
	if hw, sw := statsOf(t, d, "hw").Requests, statsOf(t, d, "go").Requests; hw != wantHW || sw != wantSW {
		t.Fatalf("engine served %d and software %d requests, want %d and %d", hw, sw, wantHW, wantSW)
	}
	if v := statsOf(t, d, "hw").Verified; v != 0 {
		t.Fatalf("a trusted engine was verified %d times", v)
	}
}

// capsDriver overrides a driver's caps.
type capsDriver struct {
	ocf.Driver
	caps ocf.Caps
}

func (c capsDriver) Caps() ocf.Caps { return c.caps }

func TestDispatchPolicyChoosesEngine(t *testing.T) {
	aesOnly128 := capsDriver{good("aes128"), ocf.Caps{Ciphers: map[string][]int{"aes-128-cbc": {16}}}}
	small := capsDriver{good("small"), ocf.Caps{Ciphers: map[string][]int{"aes-128-cbc": {16}}, MaxRequest: 1024}}
	for _, tc := range []struct {
		name    string
		policy  ocf.Policy
		engines []ocf.Driver
		cipher  string
		size    int
		want    string // name of the driver that must serve
	}{
		{"first engine", ocf.Policy{}, []ocf.Driver{good("a"), good("b")}, "aes-128-cbc", 64, "a"},
		{"deny", ocf.Policy{Deny: []string{"a"}}, []ocf.Driver{good("a"), good("b")}, "aes-128-cbc", 64, "b"},
		{"allow", ocf.Policy{Allow: []string{"b"}}, []ocf.Driver{good("a"), good("b")}, "aes-128-cbc", 64, "b"},
		{"allow none usable", ocf.Policy{Allow: []string{"c"}}, []ocf.Driver{good("a"), good("b")}, "aes-128-cbc", 64, "go"},
		{"failed in policy", ocf.Policy{Failed: map[string]string{"a": "self-test"}}, []ocf.Driver{good("a"), good("b")}, "aes-128-cbc", 64, "b"},
		{"preferred driver", ocf.Policy{Ciphers: map[string]ocf.CipherPolicy{"aes-128-cbc": {Driver: "b"}}}, []ocf.Driver{good("a"), good("b")}, "aes-128-cbc", 64, "b"},
		{"software only", ocf.Policy{Ciphers: map[string]ocf.CipherPolicy{"aes-128-cbc": {SoftwareOnly: true}}}, []ocf.Driver{good("a")}, "aes-128-cbc", 64, "go"},
		{"below min size", ocf.Policy{Ciphers: map[string]ocf.CipherPolicy{"aes-128-cbc": {MinHardware: 65}}}, []ocf.Driver{good("a")}, "aes-128-cbc", 64, "go"},
		{"at min size", ocf.Policy{Ciphers: map[string]ocf.CipherPolicy{"aes-128-cbc": {MinHardware: 64}}}, []ocf.Driver{good("a")}, "aes-128-cbc", 64, "a"},
		{"min size of another cipher", ocf.Policy{Ciphers: map[string]ocf.CipherPolicy{"des-cbc": {MinHardware: 1 << 20}}}, []ocf.Driver{good("a")}, "aes-128-cbc", 64, "a"},
		{"cipher not in caps", ocf.Policy{}, []ocf.Driver{aesOnly128, good("b")}, "aes-256-cbc", 64, "b"},
		{"key size not in caps", ocf.Policy{}, []ocf.Driver{aesOnly128}, "aes-192-cbc", 64, "go"},
		{"cipher in caps", ocf.Policy{}, []ocf.Driver{aesOnly128, good("b")}, "aes-128-cbc", 64, "aes128"},
		{"over max request", ocf.Policy{}, []ocf.Driver{small}, "aes-128-cbc", 2048, "go"},
		{"within max request", ocf.Policy{}, []ocf.Driver{small}, "aes-128-cbc", 1024, "small"},
		{"mac on engine", ocf.Policy{}, []ocf.Driver{good("a")}, "hmac-sha1", 64, "a"},
		{"null on engine", ocf.Policy{}, []ocf.Driver{good("a")}, "null", 64, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.policy.Clone()
			p.Trusted = []string{"a", "b", "aes128", "small"} // unverified, so only one driver works
			d := newDispatcher(t, p, tc.engines...)
			c, _ := ocf.LookupCipher(tc.cipher)
			s := openCipher(t, d, tc.cipher)
			r := request(c, tc.size, 7, false)
			w := reference(t, c, r)
			reqs := []ocf.Request{r}
			if err := s.Do(reqs); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(output(c, &reqs[0]), w) {
				t.Fatal("wrong output")
			}
			s.Close() // publishes the software counts
			for _, st := range d.Stats() {
				served := st.Requests > 0
				if served != (st.Driver == tc.want) {
					t.Errorf("%s served %d requests; want only %s to serve", st.Driver, st.Requests, tc.want)
				}
			}
		})
	}
}

func TestFallbackOnError(t *testing.T) {
	d := newDispatcher(t, ocf.Policy{}, fault.NewFailing("hw", soft.New(), fault.Sizes(1024, 8192)))
	for _, cname := range catalog.CipherNames() {
		t.Run(cname, func(t *testing.T) {
			c, _ := ocf.LookupCipher(cname)
			s := openCipher(t, d, cname)
			before := statsOf(t, d, "hw")
			reqs := make([]ocf.Request, len(sizes))
			wants := make([][]byte, len(sizes))
			for i, n := range sizes {
				reqs[i] = request(c, n, uint64(i), i%2 == 1)
				wants[i] = reference(t, c, reqs[i])
			}
			if err := s.Do(reqs); err != nil {
				t.Fatalf("Do = %v; the engine's errors should have been redone in software", err)
			}
			for i := range reqs {
				if reqs[i].Err != nil || !bytes.Equal(output(c, &reqs[i]), wants[i]) {
					t.Fatalf("%d bytes: err %v, output correct %v", sizes[i], reqs[i].Err, bytes.Equal(output(c, &reqs[i]), wants[i]))
				}
			}
			after := statsOf(t, d, "hw")
			if got := after.Fallbacks - before.Fallbacks; got != 2 {
				t.Errorf("%d fallbacks, want 2 (the 1024- and 8192-byte requests)", got)
			}
			if got := after.Errors - before.Errors; got != 2 {
				t.Errorf("%d engine errors, want 2", got)
			}
			if after.Failed != "" {
				t.Errorf("engine marked failed (%s) after request errors; errors only cause fallbacks", after.Failed)
			}
		})
	}
}

// A hanging engine: the caller gets the software result within the
// timeout, the engine is marked failed, and its late junk never reaches
// the caller's buffers.
func TestFallbackOnTimeout(t *testing.T) {
	for _, inPlace := range []bool{false, true} {
		t.Run(fmt.Sprintf("inPlace=%v", inPlace), func(t *testing.T) {
			h := fault.NewHanging(context.Background(), "hw", soft.New(), fault.AtLeast(4096))
			defer h.Wait()
			defer h.Release()
			d := newDispatcher(t, ocf.Policy{Timeout: ocf.Duration(50 * time.Millisecond), Trusted: []string{"hw"}}, h)
			var failed []string
			var mu sync.Mutex
			d.OnFailure(func(name, reason string) {
				mu.Lock()
				failed = append(failed, name+": "+reason)
				mu.Unlock()
			})
			c, _ := ocf.LookupCipher("aes-256-cbc")
			s := openCipher(t, d, c.Name)
			reqs := []ocf.Request{request(c, 16, 1, inPlace), request(c, 4096, 2, inPlace), request(c, 64, 3, inPlace)}
			wants := [][]byte{reference(t, c, reqs[0]), reference(t, c, reqs[1]), reference(t, c, reqs[2])}
			if err := s.Do(reqs); err != nil {
				t.Fatal(err)
			}
			check := func(when string) {
				for i := range reqs {
					if !bytes.Equal(output(c, &reqs[i]), wants[i]) {
						t.Fatalf("%s: request %d (%d bytes) has a wrong result", when, i, len(reqs[i].Src))
					}
				}
			}
			check("after Do")
			st := statsOf(t, d, "hw")
			if st.Timeouts != 1 || st.Fallbacks != 3 || st.Failed == "" {
				t.Fatalf("engine stats %+v; want 1 timeout, 3 fallbacks, marked failed", st)
			}
			mu.Lock()
			if len(failed) != 1 || !strings.Contains(failed[0], "did not finish within 150ms") {
				t.Errorf("OnFailure calls %q; want one about the timeout", failed)
			}
			mu.Unlock()
			// The engine is out of use: a new large request runs in software.
			more := []ocf.Request{request(c, 8192, 4, inPlace)}
			if err := s.Do(more); err != nil {
				t.Fatal(err)
			}
			if n := statsOf(t, d, "hw").Requests; n != 3 {
				t.Fatalf("engine got %d requests, want still 3", n)
			}
			if _, ok := d.Policy().Failed["hw"]; !ok {
				t.Fatal("Policy().Failed misses the timed-out engine")
			}
			// Let the engine finish and scribble; the caller must not see it.
			h.Release()
			h.Wait()
			check("after the engine's late write")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCorruptingEngineNeverYieldsWrongOutput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy ocf.Policy
		when   func(int) bool
	}{
		{"default policy, corrupts every size", ocf.Policy{}, nil},
		{"default policy, corrupts 8192 only", ocf.Policy{}, fault.Sizes(8192)},
		{"verify all, trusted engine", ocf.Policy{Verify: ocf.VerifyAll, Trusted: []string{"hw"}}, fault.Sizes(16, 16384)},
		{"verify untrusted, no timeout", ocf.Policy{Verify: ocf.VerifyUntrusted, Timeout: -1}, fault.AtLeast(1024)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cname := range catalog.CipherNames() {
				d := newDispatcher(t, tc.policy, fault.NewCorrupting("hw", soft.New(), tc.when))
				c, _ := ocf.LookupCipher(cname)
				s := openCipher(t, d, cname)
				// One request per Do, then all sizes in one batch.
				for i, n := range sizes {
					r := []ocf.Request{request(c, n, uint64(i), i%2 == 0)}
					w := reference(t, c, r[0])
					if err := s.Do(r); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(output(c, &r[0]), w) {
						t.Fatalf("%s, %d bytes: wrong output", cname, n)
					}
				}
				batch := make([]ocf.Request, len(sizes))
				wants := make([][]byte, len(sizes))
				for i, n := range sizes {
					batch[i] = request(c, n, uint64(100+i), i%2 == 1)
					wants[i] = reference(t, c, batch[i])
				}
				if err := s.Do(batch); err != nil {
					t.Fatal(err)
				}
				for i := range batch {
					if !bytes.Equal(output(c, &batch[i]), wants[i]) {
						t.Fatalf("%s batch, %d bytes: wrong output", cname, sizes[i])
					}
				}
				st := statsOf(t, d, "hw")
				if cname != "null" || tc.when == nil || tc.when(16) {
					// Every cipher but a size-0 null request can be corrupted.
					if st.Mismatches == 0 || st.Failed == "" {
						t.Fatalf("%s: engine stats %+v; want a mismatch and the engine marked failed", cname, st)
					}
				}
			}
		})
	}
}

// VerifyOff with a trusted engine really hands out the engine's result:
// the knob does what it says, and this is the risk it documents.
func TestVerifyOffTrustsEngine(t *testing.T) {
	d := newDispatcher(t, ocf.Policy{Verify: ocf.VerifyOff}, fault.NewCorrupting("hw", soft.New(), nil))
	c, _ := ocf.LookupCipher("aes-128-cbc")
	s := openCipher(t, d, c.Name)
	r := []ocf.Request{request(c, 64, 1, false)}
	w := reference(t, c, r[0])
	if err := s.Do(r); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(output(c, &r[0]), w) {
		t.Fatal("with verification off the corrupting engine's output was not handed out")
	}
}

func TestStatsCount(t *testing.T) {
	d := newDispatcher(t, ocf.Policy{Trusted: []string{"hw"}, Ciphers: map[string]ocf.CipherPolicy{"aes-128-cbc": {MinHardware: 1024}}},
		fault.NewFailing("hw", soft.New(), fault.Sizes(8192)))
	d.SetTiming(true)
	c, _ := ocf.LookupCipher("aes-128-cbc")
	s := openCipher(t, d, c.Name)
	reqs := []ocf.Request{
		request(c, 16, 1, false),   // software
		request(c, 1024, 2, false), // engine
		request(c, 8192, 3, true),  // engine fails, redone in software
		{Op: ocf.Encrypt, IV: make([]byte, 3), Src: make([]byte, 2048)}, // bad IV: software reports it
	}
	err := s.Do(reqs)
	if !errors.Is(err, ocf.ErrIVSize) || reqs[0].Err != nil || reqs[1].Err != nil || reqs[2].Err != nil {
		t.Fatalf("Do = %v, errors %v %v %v; want only the bad IV to fail", err, reqs[0].Err, reqs[1].Err, reqs[2].Err)
	}
	hw, sw := statsOf(t, d, "hw"), statsOf(t, d, "go")
	if hw.Requests != 2 || hw.Bytes != 1024+8192 || hw.Errors != 1 || hw.Fallbacks != 1 || hw.Verified != 0 || !hw.Hardware {
		t.Errorf("engine stats %+v; want 2 requests, 9216 bytes, 1 error, 1 fallback", hw)
	}
	if sw.Requests != 3 || sw.Bytes != 16+8192+2048 || sw.Errors != 1 || sw.Hardware {
		t.Errorf("software stats %+v; want 3 requests, 10256 bytes, 1 error", sw)
	}
	if hw.Time <= 0 || sw.Time <= 0 {
		t.Errorf("timing on, but times are %v and %v", hw.Time, sw.Time)
	}

	var buf bytes.Buffer
	if err := d.WriteStats(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "driver") {
		t.Fatalf("stats table:\n%s\nwant a header and one line per driver", buf.String())
	}
	for _, l := range lines[1:] {
		if utf8.RuneCountInString(l) != utf8.RuneCountInString(lines[0]) {
			t.Fatalf("stats table is not aligned:\n%s", buf.String())
		}
	}
	if f := strings.Fields(lines[1]); f[0] != "hw" || f[2] != "2" || f[3] != "9216" || f[4] != "1" || f[5] != "1" {
		t.Fatalf("engine line %q; want hw yes 2 9216 1 1 ...", lines[1])
	}

	d.MarkFailed("hw", "operator said so")
	buf.Reset()
	d.WriteStats(&buf)
	if !strings.Contains(buf.String(), "hw: failed: operator said so") {
		t.Fatalf("stats do not say the engine failed:\n%s", buf.String())
	}
}

// The soft-only path and the trusted-engine path must not allocate per
// batch.
func TestDispatchNoAllocations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engines []ocf.Driver
	}{{"software only", nil}, {"trusted engine", []ocf.Driver{good("hw")}}} {
		d := newDispatcher(t, ocf.Policy{Trusted: []string{"hw"}}, tc.engines...)
		for _, cname := range catalog.CipherNames() {
			c, _ := ocf.LookupCipher(cname)
			s := openCipher(t, d, cname)
			reqs := []ocf.Request{request(c, 1024, 1, false), request(c, 64, 2, true)}
			if a := testing.AllocsPerRun(50, func() {
				if err := s.Do(reqs); err != nil {
					t.Fatal(err)
				}
			}); a != 0 {
				t.Errorf("%s, %s: %v allocations per batch, want 0", tc.name, cname, a)
			}
		}
	}
}

func TestDispatchBadInputs(t *testing.T) {
	if _, err := ocf.NewDispatcher(nil, nil, ocf.Policy{}); err == nil {
		t.Error("NewDispatcher without a fallback succeeded")
	}
	if _, err := ocf.NewDispatcher(soft.New(), []ocf.Driver{good("a"), good("a")}, ocf.Policy{}); err == nil {
		t.Error("NewDispatcher with two engines named alike succeeded")
	}
	if _, err := ocf.NewDispatcher(soft.New(), []ocf.Driver{nil}, ocf.Policy{}); err == nil {
		t.Error("NewDispatcher with a nil engine succeeded")
	}
	if _, err := ocf.NewDispatcher(soft.New(), nil, ocf.Policy{Verify: "sometimes"}); err == nil {
		t.Error("NewDispatcher with a bad policy succeeded")
	}
	d := newDispatcher(t, ocf.Policy{}, good("hw"))
	if err := d.MarkFailed("nope", "x"); err == nil {
		t.Error("MarkFailed of an unknown engine succeeded")
	}
	if _, err := d.Open(nil, nil); !errors.Is(err, ocf.ErrUnknownCipher) {
		t.Errorf("Open(nil) = %v", err)
	}
	c, _ := ocf.LookupCipher("aes-128-cbc")
	if _, err := d.Open(c, make([]byte, 5)); !errors.Is(err, ocf.ErrKeySize) {
		t.Errorf("Open with a 5-byte key = %v", err)
	}
	s := openCipher(t, d, c.Name)
	buf := make([]byte, 64)
	bad := []ocf.Request{
		{Op: ocf.Encrypt, IV: make([]byte, 8), Src: buf[:32]},
		{Op: ocf.Encrypt, IV: make([]byte, 16), Src: buf[:33]},
		{Op: ocf.MAC, Src: buf[:32], Dst: buf[32:]},
		{Op: ocf.Decrypt, IV: make([]byte, 16), Src: buf[:32], Dst: buf[:16]},
		{Op: ocf.Encrypt, IV: make([]byte, 16), Src: buf[:32], Dst: buf[16:48]},
		{Op: 0, IV: make([]byte, 16), Src: buf[:16]},
	}
	wantErr := []error{ocf.ErrIVSize, ocf.ErrLength, ocf.ErrOp, ocf.ErrLength, ocf.ErrLength, ocf.ErrOp}
	if err := s.Do(bad); err == nil {
		t.Fatal("a batch of bad requests succeeded")
	}
	for i := range bad {
		if !errors.Is(bad[i].Err, wantErr[i]) {
			t.Errorf("bad request %d: error %v, want %v", i, bad[i].Err, wantErr[i])
		}
	}
	if st := statsOf(t, d, "hw"); st.Requests != 0 || st.Failed != "" {
		t.Errorf("bad requests reached the engine: %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	after := []ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16), Src: buf[:16]}}
	if err := s.Do(after); !errors.Is(err, ocf.ErrClosed) || !errors.Is(after[0].Err, ocf.ErrClosed) {
		t.Errorf("Do after Close = %v", err)
	}
}

// Sessions on one dispatcher run in parallel while an engine corrupts and
// gets marked failed under them (run with -race).
func TestDispatchConcurrentSessions(t *testing.T) {
	d := newDispatcher(t, ocf.Policy{}, fault.NewCorrupting("hw", soft.New(), fault.Sizes(1024)))
	c, _ := ocf.LookupCipher("aes-128-cbc")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.Open(c, key(c))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for i := range 50 {
				r := []ocf.Request{request(c, sizes[1+i%6], uint64(g*1000+i), false)}
				w := reference(t, c, r[0])
				if err := s.Do(r); err != nil || !bytes.Equal(r[0].Dst, w) {
					errs <- fmt.Errorf("session %d request %d: err %v or wrong output", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := statsOf(t, d, "hw"); st.Failed == "" || st.Mismatches == 0 {
		t.Errorf("engine stats %+v; want it caught and failed", st)
	}
}

// benchSizes are the sizes of the project's speed tables.
var benchSizes = []int{16, 64, 256, 1024, 8192, 16384}

func benchRequest(c *ocf.Cipher, n int) []ocf.Request {
	if c.Kind == catalog.KindMAC {
		return []ocf.Request{{Op: ocf.MAC, Src: make([]byte, n), Dst: make([]byte, c.DigestSize)}}
	}
	return []ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, c.IVSize), Src: make([]byte, n)}}
}

// BenchmarkDispatch is the dispatcher over software only (no engine): the
// framework's cost on the path every small request takes. Compare with
// BenchmarkSoft in ocf/soft.
func BenchmarkDispatch(b *testing.B) {
	d, err := ocf.NewDispatcher(soft.New(), nil, ocf.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range catalog.Ciphers() {
		b.Run(c.Name, func(b *testing.B) {
			s := openCipher(b, d, c.Name)
			for _, n := range benchSizes {
				b.Run(fmt.Sprint(n), func(b *testing.B) {
					req := benchRequest(&c, n)
					b.SetBytes(int64(n))
					b.ReportAllocs()
					for b.Loop() {
						if err := s.Do(req); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkDispatchOverhead runs a direct soft session and a dispatcher
// session side by side in short alternating rounds and reports each one's
// fastest round per request, and the dispatcher's extra time in percent
// from those: the minimum is what is left when other work on the machine
// (a shared CI host) does not interfere.
func BenchmarkDispatchOverhead(b *testing.B) {
	d, err := ocf.NewDispatcher(soft.New(), nil, ocf.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"aes-128-cbc", "null", "hmac-sha1"} {
		c, _ := ocf.LookupCipher(name)
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				direct, disp := openCipher(b, soft.New(), name), openCipher(b, d, name)
				req := benchRequest(c, n)
				const round = 256
				minDirect, minDisp := time.Duration(1<<62), time.Duration(1<<62)
				run := func(s ocf.Session, best *time.Duration) {
					t0 := time.Now()
					for range round {
						s.Do(req)
					}
					*best = min(*best, time.Since(t0))
				}
				b.SetBytes(int64(2 * round * n))
				b.ReportAllocs()
				odd := false
				for b.Loop() {
					if odd = !odd; odd {
						run(direct, &minDirect)
						run(disp, &minDisp)
					} else {
						run(disp, &minDisp)
						run(direct, &minDirect)
					}
				}
				b.ReportMetric(float64(minDirect)/round, "direct-ns/req")
				b.ReportMetric(float64(minDisp)/round, "dispatch-ns/req")
				b.ReportMetric(100*(float64(minDisp)/float64(minDirect)-1), "overhead-%")
			})
		}
	}
}

// BenchmarkDispatchEngine is the cost of the engine path (worker
// goroutine, timer, private buffer) with a trusted engine that is really
// Go software, against BenchmarkDispatch at the same size.
func BenchmarkDispatchEngine(b *testing.B) {
	d, err := ocf.NewDispatcher(soft.New(), []ocf.Driver{good("hw")}, ocf.Policy{Trusted: []string{"hw"}})
	if err != nil {
		b.Fatal(err)
	}
	c, _ := ocf.LookupCipher("aes-128-cbc")
	s := openCipher(b, d, c.Name)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("%s/%d", c.Name, n), func(b *testing.B) {
			req := benchRequest(c, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Do(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
