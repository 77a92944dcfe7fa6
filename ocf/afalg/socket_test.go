package afalg

// Tests against the running kernel's AF_ALG. This development machine's
// kernel has none, so by hand they skip; kernel_test.go runs them inside
// QEMU, where OCFW_IN_GUEST=1 makes a missing AF_ALG a failure.

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/ocftest"
)

// kernelRequired: inside the QEMU guest a missing AF_ALG fails instead of
// skipping. On the host OCFW_REQUIRE_KERNEL=1 (CI) does not make these
// tests fail on a kernel without AF_ALG: that variable already makes
// TestKernelInTheLoop fail when it cannot run them in QEMU, and failing
// here as well would fail every CI host whose kernel lacks AF_ALG, such as
// the development machine.
func kernelRequired() bool { return os.Getenv("OCFW_IN_GUEST") == "1" }

func needKernel(tb testing.TB) {
	tb.Helper()
	err := Available()
	if err == nil {
		return
	}
	if kernelRequired() {
		tb.Fatalf("AF_ALG required in the guest (OCFW_IN_GUEST=1) but unavailable: %v", err)
	}
	msg := "TestKernelInTheLoop runs these tests inside QEMU"
	if labtest.Required() {
		msg += ", and fails under " + labtest.EnvRequire + "=1 if it cannot"
	}
	tb.Skipf("no AF_ALG in this kernel (%v); %s", err, msg)
}

// kernelCiphers are the catalog ciphers AF_ALG can serve.
func kernelCiphers() []ocf.Cipher {
	var out []ocf.Cipher
	for _, c := range catalog.Ciphers() {
		if c.KernelType == "skcipher" || c.KernelType == "hash" {
			out = append(out, c)
		}
	}
	return out
}

func random(tb testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return b
}

func testKey(tb testing.TB, c *ocf.Cipher) []byte {
	if c.Kind == catalog.KindNull {
		return nil
	}
	return random(tb, c.KeySize)
}

// sizes of random requests: whole blocks for ciphers; MACs also get odd
// lengths and the empty message.
func sizes(c *ocf.Cipher) []int {
	if c.Kind == catalog.KindMAC {
		return []int{0, 1, 63, 64, 65, 1000, 8192}
	}
	b := max(c.BlockSize, 16)
	return []int{b, 4 * b, 1024, 8192, MaxRequest}
}

// randomRequests makes a mixed batch for c with its expected outputs.
func randomRequests(tb testing.TB, c *ocf.Cipher, key []byte) (reqs []ocf.Request, want [][]byte) {
	for i, n := range sizes(c) {
		for _, op := range []ocf.Op{ocf.Encrypt, ocf.Decrypt} {
			r := ocf.Request{Op: op, IV: random(tb, c.IVSize), Src: random(tb, n)}
			switch {
			case c.Kind == catalog.KindMAC:
				if op == ocf.Decrypt {
					continue
				}
				r = ocf.Request{Op: ocf.MAC, Src: r.Src, Dst: make([]byte, c.DigestSize)}
			case (i+int(op))%2 == 0:
				r.Dst = make([]byte, n) // out of place; otherwise in place
			}
			w, err := ocftest.Reference(c, key, r)
			if err != nil {
				tb.Fatal(err)
			}
			reqs = append(reqs, r)
			want = append(want, w)
		}
	}
	return reqs, want
}

func checkResults(t *testing.T, c *ocf.Cipher, reqs []ocf.Request, want [][]byte) {
	t.Helper()
	for i := range reqs {
		r := &reqs[i]
		got := r.Dst
		if c.Kind != catalog.KindMAC {
			got = r.Out()
		}
		if r.Err != nil {
			t.Errorf("request %d (%s %d bytes): %v", i, r.Op, len(r.Src), r.Err)
		} else if !bytes.Equal(got, want[i]) {
			t.Errorf("request %d (%s %d bytes): kernel and Go differ", i, r.Op, len(r.Src))
		}
	}
}

// bindings lists how a test binds c: the generic name, then every tested
// driver /proc/crypto lists for it (after a first bind made the kernel
// instantiate or load it).
func bindings(t *testing.T, c *ocf.Cipher) []string {
	t.Helper()
	if fd, err := bind(c.KernelType, c.Kernel, ""); err == nil {
		unix.Close(fd)
	} else if errors.Is(err, unix.ENOENT) {
		if os.Getenv("OCFW_IN_GUEST") == "1" {
			t.Fatalf("the guest kernel should offer %s: %v", c.Kernel, err)
		}
		t.Skipf("kernel does not offer %s: %v", c.Kernel, err)
	} else {
		t.Fatal(err)
	}
	entries, err := ReadProcCrypto("")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{c.Kernel}
	for _, e := range Implementations(entries, c.KernelType, c.Kernel) {
		if e.Tested() && e.Name == c.Kernel && (e.MaxKeySize == 0 || c.KeySize <= e.MaxKeySize) {
			names = append(names, e.Driver)
		}
	}
	if len(names) < 2 {
		t.Fatalf("%s bound but /proc/crypto lists no tested driver for it", c.Kernel)
	}
	return names
}

// openAs opens c bound to kernel name (generic or driver).
func openAs(t *testing.T, c *ocf.Cipher, name string, depth int, key []byte) ocf.Session {
	t.Helper()
	opts := Options{Depth: depth}
	if name != c.Kernel {
		opts.Driver = name
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Open(c, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Every catalog cipher the kernel offers gives Go's answers, bound by its
// generic name and by each driver name, one at a time and batched.
func TestKernelKnownAnswers(t *testing.T) {
	needKernel(t)
	for _, c := range kernelCiphers() {
		t.Run(c.Name, func(t *testing.T) {
			names := bindings(t, &c)
			entries, _ := ReadProcCrypto("")
			for _, name := range names {
				t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
					key := testKey(t, &c)
					one := openAs(t, &c, name, 1, key)
					wantDriver := name
					if e, ok := Resolve(entries, c.KernelType, name); ok {
						wantDriver = e.Driver
					}
					if one.Driver() != wantDriver {
						t.Errorf("Driver() = %q, want %q", one.Driver(), wantDriver)
					}
					t.Logf("%s served by %s", name, one.Driver())

					for _, v := range standardVectors {
						if v.cipher != c.Name {
							continue
						}
						vs := openAs(t, &c, name, 1, h(v.key))
						r := ocf.Request{Op: ocf.Encrypt, IV: h(v.iv), Src: h(v.in)}
						if c.Kind == catalog.KindMAC {
							r = ocf.Request{Op: ocf.MAC, Src: h(v.in), Dst: make([]byte, c.DigestSize)}
						}
						if err := vs.Do([]ocf.Request{r}); err != nil {
							t.Fatalf("%s: %v", v.source, err)
						}
						got := r.Dst
						if c.Kind != catalog.KindMAC {
							got = r.Out()
						}
						if !bytes.Equal(got, h(v.out)) {
							t.Errorf("%s: got %x, want %s", v.source, got, v.out)
						}
					}

					reqs, want := randomRequests(t, &c, key)
					for i := range reqs { // one request per Do
						if err := one.Do(reqs[i : i+1]); err != nil {
							t.Errorf("request %d: %v", i, err)
						}
					}
					checkResults(t, &c, reqs, want)

					reqs, want = randomRequests(t, &c, key)
					batch := openAs(t, &c, name, 4, key)
					if sk, ok := batch.(*skSession); ok && !sk.Batched() {
						t.Errorf("depth 4 session runs one at a time: no Linux AIO?")
					}
					if err := batch.Do(reqs); err != nil {
						t.Errorf("batch: %v", err)
					}
					checkResults(t, &c, reqs, want)
				})
			}
		})
	}
}

// Bad input is refused before the kernel sees it, kernel refusals come
// back as values naming what failed, and a session keeps working after.
func TestKernelErrors(t *testing.T) {
	needKernel(t)
	aes, _ := ocf.LookupCipher("aes-128-cbc")
	des, _ := ocf.LookupCipher("des-cbc")

	_, err := New(Options{Driver: "cbc-aes-nosuch0"})
	if !errors.Is(err, unix.ENOENT) || !errors.Is(err, ocf.ErrUnsupported) || !strings.Contains(err.Error(), "cbc-aes-nosuch0") {
		t.Errorf("New with an unknown driver = %v, want ENOENT/ErrUnsupported naming it", err)
	}

	// des-cbc bound to cbc(aes): the kernel itself rejects the 8-byte key.
	d, err := New(Options{Names: map[string]string{"des-cbc": "cbc(aes)"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(des, random(t, 8)); !errors.Is(err, ocf.ErrKeySize) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("Open with a key the kernel rejects = %v, want ErrKeySize and EINVAL", err)
	}

	d, err = New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(aes, random(t, 17)); !errors.Is(err, ocf.ErrKeySize) {
		t.Errorf("Open with a 17-byte AES key = %v, want ErrKeySize", err)
	}
	key := random(t, 16)
	s, err := d.Open(aes, key)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good := ocf.Request{Op: ocf.Encrypt, IV: random(t, 16), Src: random(t, 64)}
	want, _ := ocftest.Reference(aes, key, good)
	reqs := []ocf.Request{
		{Op: ocf.Encrypt, IV: make([]byte, 15), Src: make([]byte, 16)},
		{Op: ocf.Decrypt, IV: make([]byte, 16), Src: make([]byte, 20)},
		{Op: ocf.Encrypt, IV: make([]byte, 16), Src: make([]byte, MaxRequest+16)},
		good,
	}
	s.Do(reqs)
	for i, want := range []error{ocf.ErrIVSize, ocf.ErrLength, ocf.ErrTooLarge} {
		if !errors.Is(reqs[i].Err, want) {
			t.Errorf("request %d: %v, want %v", i, reqs[i].Err, want)
		}
	}
	if reqs[3].Err != nil || !bytes.Equal(reqs[3].Out(), want) {
		t.Errorf("good request after bad ones: %v", reqs[3].Err)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// Sessions close every socket, including after failed opens and broken
// requests.
func TestKernelNoFDLeak(t *testing.T) {
	needKernel(t)
	before := openFDs(t)
	for _, depth := range []int{1, 4} {
		d, err := New(Options{Depth: depth})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range kernelCiphers() {
			s, err := d.Open(&c, testKey(t, &c))
			if err != nil {
				continue // not offered; the open must still not leak
			}
			s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, c.IVSize), Src: make([]byte, 3*c.BlockSize+1)}})
			if err := s.Close(); err != nil {
				t.Errorf("%s: Close: %v", c.Name, err)
			}
		}
		des, _ := ocf.LookupCipher("des-cbc")
		bad, _ := New(Options{Names: map[string]string{"des-cbc": "cbc(aes)"}})
		if _, err := bad.Open(des, make([]byte, 8)); err == nil {
			t.Error("des key on cbc(aes) opened")
		}
		New(Options{Driver: "cbc-aes-nosuch0"})
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before, %d after", before, after)
	}
}

// In the kernel as on the fake, requests allocate nothing.
func TestKernelAllocs(t *testing.T) {
	needKernel(t)
	aes, _ := ocf.LookupCipher("aes-128-cbc")
	for _, depth := range []int{1, 4} {
		t.Run(fmt.Sprint("depth", depth), func(t *testing.T) {
			s := openAs(t, aes, aes.Kernel, depth, random(t, 16))
			reqs := make([]ocf.Request, 4)
			for i := range reqs {
				reqs[i] = ocf.Request{Op: ocf.Encrypt, IV: make([]byte, 16), Src: make([]byte, 256)}
			}
			var err error
			if a := testing.AllocsPerRun(20, func() { err = s.Do(reqs) }); a != 0 {
				t.Errorf("%.1f allocations per batch, want 0", a)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// asyncStandIn is an asynchronous software skcipher: cryptd hands each
// request to a kernel worker and completes it later, as the Hifn engine
// does, so the AIO path's in-flight completions are exercised without the
// card.
const asyncStandIn = "cryptd(cbc(aes-generic))"

func TestKernelAsyncEngine(t *testing.T) {
	needKernel(t)
	aes, _ := ocf.LookupCipher("aes-128-cbc")
	key := random(t, 16)
	for _, depth := range []int{1, 4, 0} {
		d, err := New(Options{Depth: depth, Names: map[string]string{aes.Name: asyncStandIn}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := d.Open(aes, key)
		if errors.Is(err, unix.ENOENT) {
			t.Skipf("no %s (module cryptd not loaded): %v", asyncStandIn, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if sk := s.(*skSession); depth > 1 && !sk.Batched() {
			t.Errorf("depth %d session runs one at a time", depth)
		}
		entries, _ := ReadProcCrypto("")
		if e, ok := Resolve(entries, "skcipher", asyncStandIn); !ok || !e.Async {
			t.Errorf("%s: /proc/crypto entry %+v, want an async skcipher", asyncStandIn, e)
		}
		reqs, want := randomRequests(t, aes, key)
		if err := s.Do(reqs); err != nil {
			t.Errorf("depth %d: %v", depth, err)
		}
		checkResults(t, aes, reqs, want)
	}
}

// Depth 0 batches only where it pays: asynchronous implementations.
func TestKernelDefaultDepth(t *testing.T) {
	needKernel(t)
	aes, _ := ocf.LookupCipher("aes-128-cbc")
	for _, tt := range []struct {
		name  string
		async bool
	}{{"cbc(aes-generic)", false}, {asyncStandIn, true}} {
		d, err := New(Options{Names: map[string]string{aes.Name: tt.name}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := d.Open(aes, random(t, 16))
		if errors.Is(err, unix.ENOENT) {
			t.Logf("skipping %s: %v", tt.name, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sk := s.(*skSession)
		if sk.Batched() != tt.async || (tt.async && len(sk.ops) != AsyncDepth) {
			t.Errorf("%s: batched %v with %d sockets, want batched %v", tt.name, sk.Batched(), len(sk.ops), tt.async)
		}
		s.Close()
	}
}
