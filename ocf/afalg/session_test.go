package afalg

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/ocf"
)

// A fake kernel: the far end of a SOCK_SEQPACKET socketpair that answers
// every message. It exercises the session plumbing (sendmsg, reads, AIO
// batches, matching results to requests) on a host without AF_ALG; the
// control messages are checked byte for byte in cmsg_test.go, and the real
// kernel in socket_test.go.
type fakeKernel struct {
	t     *testing.T
	ours  []int
	wg    sync.WaitGroup
	reply func(in, out []byte) int
}

// cipherReply makes the fake behave like a cipher: same length, every
// byte xored, so each request's output depends on its own input.
func cipherReply(in, out []byte) int {
	for i, b := range in {
		out[i] = b ^ 0xa5
	}
	return len(in)
}

// macReply answers 20 bytes derived from the message length.
func macReply(in, out []byte) int {
	for i := range 20 {
		out[i] = byte(len(in) + i)
	}
	return 20
}

func newFakeKernel(t *testing.T, n int, reply func(in, out []byte) int) *fakeKernel {
	f := &fakeKernel{t: t, reply: reply}
	for range n {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.ours = append(f.ours, fds[0])
		f.wg.Add(1)
		go f.serve(fds[1])
	}
	return f
}

// serve answers until the other end is closed. Its buffers are allocated
// once so that allocation counts of the session stay meaningful.
func (f *fakeKernel) serve(fd int) {
	defer f.wg.Done()
	defer unix.Close(fd)
	in := make([]byte, MaxRequest+1)
	out := make([]byte, MaxRequest+1)
	for {
		n, err := unix.Read(fd, in)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		// n == 0 is an empty message or the end; a reply to the end
		// fails with EPIPE.
		if _, err := unix.Write(fd, out[:f.reply(in[:n], out)]); err != nil {
			return
		}
	}
}

func (f *fakeKernel) wait() { f.wg.Wait() }

func fakeSkSession(t *testing.T, cipher string, depth int) (*skSession, *fakeKernel) {
	c, err := ocf.LookupCipher(cipher)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeKernel(t, depth, cipherReply)
	s := &skSession{c: c, driver: "fake", label: "skcipher fake", tfm: -1, ops: f.ours}
	s.setup()
	t.Cleanup(func() { s.Close(); f.wait() })
	return s, f
}

func TestSessionPlumbing(t *testing.T) {
	for _, depth := range []int{1, 4} {
		s, _ := fakeSkSession(t, "aes-128-cbc", depth)
		if depth > 1 && !s.Batched() {
			t.Logf("no Linux AIO on this host: depth %d runs one at a time", depth)
		}
		iv := make([]byte, 16)
		var reqs []ocf.Request
		var want [][]byte
		for i, n := range []int{16, 0, 64, 4096, 32, 16, 1024, 48, 160, MaxRequest} {
			src := bytes.Repeat([]byte{byte(i + 1)}, n)
			w := make([]byte, n)
			cipherReply(src, w)
			want = append(want, w)
			r := ocf.Request{Op: ocf.Encrypt, IV: iv, Src: src}
			if i%2 == 1 {
				r.Dst = make([]byte, n) // out of place
			}
			reqs = append(reqs, r)
		}
		if err := s.Do(reqs); err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		for i := range reqs {
			if !bytes.Equal(reqs[i].Out(), want[i]) {
				t.Errorf("depth %d request %d (%d bytes): wrong output", depth, i, len(reqs[i].Src))
			}
		}
	}
}

func TestSessionBadRequestsDoNotReachKernel(t *testing.T) {
	s, _ := fakeSkSession(t, "aes-128-cbc", 2)
	iv := make([]byte, 16)
	good := func() ocf.Request { return ocf.Request{Op: ocf.Decrypt, IV: iv, Src: make([]byte, 32)} }
	reqs := []ocf.Request{
		good(),
		{Op: ocf.Encrypt, IV: iv[:8], Src: make([]byte, 16)},                    // short IV
		{Op: ocf.Encrypt, IV: iv, Src: make([]byte, 17)},                        // not whole blocks
		{Op: ocf.Encrypt, IV: iv, Src: make([]byte, 32), Dst: make([]byte, 16)}, // short Dst
		{Op: ocf.MAC, IV: iv, Src: make([]byte, 16)},                            // wrong op
		{Op: ocf.Encrypt, IV: iv, Src: make([]byte, MaxRequest+16)},             // too large
		good(),
	}
	wantErr := []error{nil, ocf.ErrIVSize, ocf.ErrLength, ocf.ErrLength, ocf.ErrOp, ocf.ErrTooLarge, nil}
	err := s.Do(reqs)
	if !errors.Is(err, ocf.ErrIVSize) {
		t.Errorf("Do = %v, want the first request error (ErrIVSize)", err)
	}
	for i, r := range reqs {
		if !errors.Is(r.Err, wantErr[i]) || (wantErr[i] == nil) != (r.Err == nil) {
			t.Errorf("request %d: Err = %v, want %v", i, r.Err, wantErr[i])
		}
	}
	// Good requests around the bad ones were done, and the fake saw only
	// them: a later request still gets its own answer.
	for _, i := range []int{0, 6} {
		if !bytes.Equal(reqs[i].Out(), bytes.Repeat([]byte{0xa5}, 32)) {
			t.Errorf("request %d output %x, want the fake's answer", i, reqs[i].Out())
		}
	}
}

func TestSessionKernelErrorsAreValues(t *testing.T) {
	c, _ := ocf.LookupCipher("des-cbc")
	// Descriptors that do not exist: the kernel answers EBADF, the
	// session tries to replace the socket, fails, and says so.
	s := &skSession{c: c, label: "skcipher nowhere", tfm: -1, ops: []int{-1}}
	s.setup()
	reqs := []ocf.Request{
		{Op: ocf.Encrypt, IV: make([]byte, 8), Src: make([]byte, 8)},
		{Op: ocf.Encrypt, IV: make([]byte, 8), Src: make([]byte, 8)},
	}
	err := s.Do(reqs)
	if !errors.Is(err, unix.EBADF) || !strings.Contains(err.Error(), "skcipher nowhere encrypt 8 bytes: sendmsg") {
		t.Errorf("Do = %v, want a wrapped EBADF naming the request", err)
	}
	if !errors.Is(reqs[1].Err, errBroken) {
		t.Errorf("second request Err = %v, want errBroken", reqs[1].Err)
	}
	if err := s.Do(reqs[:1]); !errors.Is(err, errBroken) {
		t.Errorf("Do on a broken session = %v, want errBroken", err)
	}
}

func TestSessionClosed(t *testing.T) {
	s, _ := fakeSkSession(t, "null", 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	reqs := []ocf.Request{{Op: ocf.Encrypt, Src: []byte("x")}}
	if err := s.Do(reqs); !errors.Is(err, ocf.ErrClosed) || !errors.Is(reqs[0].Err, ocf.ErrClosed) {
		t.Errorf("Do after Close = %v (req %v), want ErrClosed", err, reqs[0].Err)
	}
}

func TestHashSessionPlumbing(t *testing.T) {
	c, _ := ocf.LookupCipher("hmac-sha1")
	f := newFakeKernel(t, 1, macReply)
	s := &hashSession{c: c, label: "hash fake", tfm: -1, op: f.ours[0]}
	defer f.wait()
	defer s.Close()
	reqs := []ocf.Request{
		{Op: ocf.MAC, Src: []byte("abc"), Dst: make([]byte, 20)},
		{Op: ocf.MAC, Src: nil, Dst: make([]byte, 32)}, // empty message, roomy Dst
		{Op: ocf.MAC, Src: make([]byte, 1000), Dst: make([]byte, 19)},
		{Op: ocf.Encrypt, Src: []byte("abc"), Dst: make([]byte, 20)},
	}
	err := s.Do(reqs)
	if !errors.Is(err, ocf.ErrLength) {
		t.Errorf("Do = %v, want ErrLength for the short Dst", err)
	}
	for i, n := range []int{3, 0} {
		want := make([]byte, 20)
		macReply(make([]byte, n), want)
		if reqs[i].Err != nil || !bytes.Equal(reqs[i].Dst[:20], want) {
			t.Errorf("request %d: %v %x, want %x", i, reqs[i].Err, reqs[i].Dst, want)
		}
	}
	if !bytes.Equal(reqs[1].Dst[20:], make([]byte, 12)) {
		t.Errorf("MAC wrote past DigestSize: %x", reqs[1].Dst)
	}
	if !errors.Is(reqs[3].Err, ocf.ErrOp) {
		t.Errorf("encrypt on a MAC session: %v, want ErrOp", reqs[3].Err)
	}
}

// The request path allocates nothing: buffers and message headers are
// reused.
func TestSessionAllocs(t *testing.T) {
	for _, depth := range []int{1, 4} {
		s, _ := fakeSkSession(t, "aes-128-cbc", depth)
		reqs := make([]ocf.Request, 8)
		for i := range reqs {
			reqs[i] = ocf.Request{Op: ocf.Encrypt, IV: make([]byte, 16), Src: make([]byte, 256)}
		}
		var err error
		allocs := testing.AllocsPerRun(50, func() { err = s.Do(reqs) })
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Errorf("depth %d: %.1f allocations per batch of %d, want 0", depth, allocs, len(reqs))
		}
	}
}

func TestOpenChecksBeforeKernel(t *testing.T) {
	// A Driver as New builds it for a pinned AES engine, without a kernel:
	// Open must refuse bad input before it binds anything.
	d := &Driver{entry: &Entry{Driver: "cbc-aes-geode", Module: "geode_aes"},
		caps: ocf.Caps{Ciphers: map[string][]int{"aes-128-cbc": {16}}, MaxRequest: MaxRequest}}
	aes, _ := ocf.LookupCipher("aes-128-cbc")
	des, _ := ocf.LookupCipher("des-cbc")
	tests := []struct {
		name string
		c    *ocf.Cipher
		key  []byte
		want error
	}{
		{"short key", aes, make([]byte, 15), ocf.ErrKeySize},
		{"long key", aes, make([]byte, 24), ocf.ErrKeySize},
		{"cipher the engine lacks", des, make([]byte, 8), ocf.ErrUnsupported},
		{"nil cipher", nil, nil, ocf.ErrUnknownCipher},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := d.Open(tt.c, tt.key)
			if !errors.Is(err, tt.want) || s != nil {
				t.Errorf("Open = %v, %v; want %v", s, err, tt.want)
			}
		})
	}
	if d.Name() != "cbc-aes-geode" || !d.Hardware() {
		t.Errorf("Name/Hardware = %q/%v, want cbc-aes-geode/true", d.Name(), d.Hardware())
	}
}
