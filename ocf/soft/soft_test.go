package soft

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/des"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
)

type vector struct {
	line                 int
	source               string
	cipher               string
	key, iv, input, want []byte
}

// readVectors parses testdata/vectors.txt (format described in the file).
func readVectors(t *testing.T) []vector {
	t.Helper()
	f, err := os.Open("testdata/vectors.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []vector
	source := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "source:"):
			source = strings.TrimSpace(strings.TrimPrefix(line, "source:"))
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 5 {
			t.Fatalf("vectors.txt:%d: want 5 fields (cipher key iv input output), got %d", n, len(fs))
		}
		if source == "" {
			t.Fatalf("vectors.txt:%d: vector without a source line", n)
		}
		v := vector{line: n, source: source, cipher: fs[0]}
		for i, dst := range []*[]byte{&v.key, &v.iv, &v.input, &v.want} {
			if fs[i+1] == "-" {
				continue
			}
			b, err := hex.DecodeString(fs[i+1])
			if err != nil {
				t.Fatalf("vectors.txt:%d: field %d: %v", n, i+2, err)
			}
			*dst = b
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func lookup(t testing.TB, name string) *ocf.Cipher {
	t.Helper()
	c, err := ocf.LookupCipher(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func open(t testing.TB, name string, key []byte) ocf.Session {
	t.Helper()
	s, err := New().Open(lookup(t, name), key)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestVectors(t *testing.T) {
	vs := readVectors(t)
	covered := map[string]bool{}
	for _, v := range vs {
		covered[v.cipher] = true
		t.Run(fmt.Sprintf("%s/line%d", v.cipher, v.line), func(t *testing.T) {
			s := open(t, v.cipher, v.key)
			if s.Cipher().Kind == catalog.KindMAC {
				mac := make([]byte, s.Cipher().DigestSize)
				if err := s.Do([]ocf.Request{{Op: ocf.MAC, Src: v.input, Dst: mac}}); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(mac, v.want) {
					t.Fatalf("%s: MAC %x, want %x", v.source, mac, v.want)
				}
				return
			}
			// Out of place, in place with Dst nil and with Dst == Src, and
			// back again.
			out := make([]byte, len(v.input))
			inNil := bytes.Clone(v.input)
			inSame := bytes.Clone(v.input)
			reqs := []ocf.Request{
				{Op: ocf.Encrypt, IV: v.iv, Src: v.input, Dst: out},
				{Op: ocf.Encrypt, IV: v.iv, Src: inNil},
				{Op: ocf.Encrypt, IV: v.iv, Src: inSame, Dst: inSame},
			}
			if err := s.Do(reqs); err != nil {
				t.Fatal(err)
			}
			for i, got := range [][]byte{out, inNil, inSame} {
				if !bytes.Equal(got, v.want) {
					t.Fatalf("%s: request %d: ciphertext %x, want %x", v.source, i, got, v.want)
				}
			}
			back := make([]byte, len(v.want))
			if err := s.Do([]ocf.Request{{Op: ocf.Decrypt, IV: v.iv, Src: v.want, Dst: back}, {Op: ocf.Decrypt, IV: v.iv, Src: inNil}}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, v.input) || !bytes.Equal(inNil, v.input) {
				t.Fatalf("%s: decryption gave %x and %x, want %x", v.source, back, inNil, v.input)
			}
		})
	}
	for _, c := range catalog.Ciphers() {
		if c.Kind != catalog.KindNull && !covered[c.Name] {
			t.Errorf("no vector for %s in testdata/vectors.txt", c.Name)
		}
	}
}

func TestNullCopies(t *testing.T) {
	s := open(t, "null", nil)
	src := []byte("seventeen bytes!!")
	dst := make([]byte, len(src))
	if err := s.Do([]ocf.Request{{Op: ocf.Encrypt, Src: src, Dst: dst}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatalf("null gave %q, want %q", dst, src)
	}
}

// With all three keys equal, TDEA (EDE) is single DES: a cross-check of the
// 3DES path on inputs longer than the published vector.
func TestTripleDESWithOneKeyIsDES(t *testing.T) {
	k := []byte{0x13, 0x34, 0x57, 0x79, 0x9b, 0xbc, 0xdf, 0xf1}
	s3 := open(t, "des-ede3-cbc", bytes.Repeat(k, 3))
	s1 := open(t, "des-cbc", k)
	iv := []byte("initvect")
	src := randBytes(1, 256)
	a, b := make([]byte, len(src)), make([]byte, len(src))
	if err := s3.Do([]ocf.Request{{Op: ocf.Encrypt, IV: iv, Src: src, Dst: a}}); err != nil {
		t.Fatal(err)
	}
	if err := s1.Do([]ocf.Request{{Op: ocf.Encrypt, IV: iv, Src: src, Dst: b}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("des-ede3-cbc with k,k,k differs from des-cbc with k")
	}
	if bytes.Equal(a, src) {
		t.Fatal("ciphertext equals plaintext")
	}
}

// Each request starts from its own IV: chaining state must not leak from
// one request into the next.
func TestIVIsPerRequest(t *testing.T) {
	for _, name := range []string{"des-cbc", "des-ede3-cbc", "aes-128-cbc", "aes-256-cbc"} {
		c := lookup(t, name)
		s := open(t, name, randBytes(2, c.KeySize))
		src := randBytes(3, 4*c.BlockSize)
		iv1, iv2 := randBytes(4, c.IVSize), randBytes(5, c.IVSize)
		a, b, a2 := make([]byte, len(src)), make([]byte, len(src)), make([]byte, len(src))
		err := s.Do([]ocf.Request{
			{Op: ocf.Encrypt, IV: iv1, Src: src, Dst: a},
			{Op: ocf.Encrypt, IV: iv2, Src: src, Dst: b},
			{Op: ocf.Encrypt, IV: iv1, Src: src, Dst: a2},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, a2) {
			t.Errorf("%s: same IV and data gave different ciphertexts", name)
		}
		if bytes.Equal(a[:c.BlockSize], b[:c.BlockSize]) {
			t.Errorf("%s: different IVs gave the same first block", name)
		}
	}
}

// The fallback chaining code must agree with the standard library modes,
// in place and out of place.
func TestChainMatchesStandardModes(t *testing.T) {
	ab, _ := aes.NewCipher(randBytes(6, 16))
	db, _ := des.NewTripleDESCipher(randBytes(7, 24))
	for _, b := range []interface {
		BlockSize() int
		Encrypt(dst, src []byte)
		Decrypt(dst, src []byte)
	}{ab, db} {
		n := b.BlockSize()
		stdEnc, stdDec := newCBC(b)
		if _, ok := stdEnc.(*chain); ok {
			t.Skip("the standard CBC modes lack SetIV; nothing to compare with")
		}
		myEnc, myDec := newChain(b, false), newChain(b, true)
		for _, blocks := range []int{1, 2, 7} {
			src, iv := randBytes(uint64(blocks), blocks*n), randBytes(9, n)
			want, got := make([]byte, len(src)), bytes.Clone(src)
			stdEnc.SetIV(iv)
			stdEnc.CryptBlocks(want, src)
			myEnc.SetIV(iv)
			myEnc.CryptBlocks(got, got) // in place
			if !bytes.Equal(got, want) {
				t.Fatalf("block size %d, %d blocks: chain encryption differs", n, blocks)
			}
			stdDec.SetIV(iv)
			stdDec.CryptBlocks(want, want)
			myDec.SetIV(iv)
			myDec.CryptBlocks(got, got)
			if !bytes.Equal(got, src) || !bytes.Equal(want, src) {
				t.Fatalf("block size %d, %d blocks: decryption does not give the plaintext back", n, blocks)
			}
		}
	}
}

func TestCapsCoverCatalog(t *testing.T) {
	caps := New().Caps()
	for _, c := range catalog.Ciphers() {
		if !caps.Supports(c.Name, c.KeySize) {
			t.Errorf("caps miss %s with a %d-byte key", c.Name, c.KeySize)
		}
	}
	if caps.Supports("aes-128-cbc", 24) {
		t.Error("caps accept a 24-byte key for aes-128-cbc")
	}
}

func TestOpenErrors(t *testing.T) {
	changed := *lookup(t, "aes-128-cbc")
	changed.IVSize = 8
	for _, tc := range []struct {
		name   string
		cipher *ocf.Cipher
		key    []byte
		want   error
	}{
		{"nil cipher", nil, nil, ocf.ErrUnknownCipher},
		{"unknown cipher", &ocf.Cipher{Name: "rot13"}, nil, ocf.ErrUnknownCipher},
		{"changed catalog entry", &changed, make([]byte, 16), ocf.ErrUnsupported},
		{"short aes key", lookup(t, "aes-128-cbc"), make([]byte, 15), ocf.ErrKeySize},
		{"aes-192 key for aes-128", lookup(t, "aes-128-cbc"), make([]byte, 24), ocf.ErrKeySize},
		{"nil des key", lookup(t, "des-cbc"), nil, ocf.ErrKeySize},
		{"two-key 3des", lookup(t, "des-ede3-cbc"), make([]byte, 16), ocf.ErrKeySize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New().Open(tc.cipher, tc.key)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got session %v, error %v; want error %v", s, err, tc.want)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	buf := make([]byte, 64)
	iv16 := make([]byte, 16)
	for _, tc := range []struct {
		cipher string
		req    ocf.Request
		want   error
	}{
		{"aes-128-cbc", ocf.Request{Op: ocf.Encrypt, IV: iv16[:8], Src: buf[:16]}, ocf.ErrIVSize},
		{"aes-128-cbc", ocf.Request{Op: ocf.Encrypt, IV: nil, Src: buf[:16]}, ocf.ErrIVSize},
		{"aes-128-cbc", ocf.Request{Op: ocf.Decrypt, IV: iv16, Src: buf[:15]}, ocf.ErrLength},
		{"aes-128-cbc", ocf.Request{Op: ocf.Encrypt, IV: iv16, Src: buf[:32], Dst: make([]byte, 16)}, ocf.ErrLength},
		{"aes-128-cbc", ocf.Request{Op: ocf.Encrypt, IV: iv16, Src: buf[:32], Dst: buf[16:48]}, ocf.ErrLength},
		{"aes-128-cbc", ocf.Request{Op: ocf.Encrypt, IV: iv16, Src: buf[16:48], Dst: buf[:32]}, ocf.ErrLength},
		{"aes-128-cbc", ocf.Request{Op: ocf.MAC, Src: buf, Dst: buf}, ocf.ErrOp},
		{"aes-128-cbc", ocf.Request{Op: 0, IV: iv16, Src: buf}, ocf.ErrOp},
		{"des-cbc", ocf.Request{Op: ocf.Encrypt, IV: iv16, Src: buf[:8]}, ocf.ErrIVSize},
		{"des-cbc", ocf.Request{Op: ocf.Encrypt, IV: iv16[:8], Src: buf[:12]}, ocf.ErrLength},
		{"hmac-sha1", ocf.Request{Op: ocf.Encrypt, Src: buf}, ocf.ErrOp},
		{"hmac-sha1", ocf.Request{Op: ocf.MAC, Src: buf, Dst: make([]byte, 19)}, ocf.ErrLength},
		{"hmac-sha256", ocf.Request{Op: ocf.MAC, Src: buf}, ocf.ErrLength},
		{"null", ocf.Request{Op: ocf.Encrypt, Src: buf[:10], Dst: buf[1:11]}, ocf.ErrLength},
		{"null", ocf.Request{Op: ocf.Op(9), Src: buf}, ocf.ErrOp},
	} {
		t.Run(fmt.Sprintf("%s/%s/%v", tc.cipher, tc.req.Op, tc.want), func(t *testing.T) {
			c := lookup(t, tc.cipher)
			s := open(t, tc.cipher, make([]byte, c.KeySize))
			// A good request after the bad one must still be served.
			good := make([]byte, c.BlockSize)
			okReq := ocf.Request{Op: ocf.Encrypt, IV: make([]byte, c.IVSize), Src: good}
			if c.Kind == catalog.KindMAC {
				okReq = ocf.Request{Op: ocf.MAC, Src: good, Dst: make([]byte, c.DigestSize)}
			}
			reqs := []ocf.Request{tc.req, okReq}
			err := s.Do(reqs)
			if !errors.Is(err, tc.want) || !errors.Is(reqs[0].Err, tc.want) {
				t.Fatalf("Do = %v, request error %v; want %v", err, reqs[0].Err, tc.want)
			}
			if reqs[1].Err != nil {
				t.Fatalf("good request after a bad one failed: %v", reqs[1].Err)
			}
		})
	}
}

func TestClosedSession(t *testing.T) {
	s := open(t, "aes-128-cbc", make([]byte, 16))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reqs := []ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16), Src: make([]byte, 16)}}
	if err := s.Do(reqs); !errors.Is(err, ocf.ErrClosed) || !errors.Is(reqs[0].Err, ocf.ErrClosed) {
		t.Fatalf("Do after Close = %v, want %v", err, ocf.ErrClosed)
	}
}

// The request path must not allocate, for any cipher, in either direction.
func TestNoAllocations(t *testing.T) {
	for _, c := range catalog.Ciphers() {
		s := open(t, c.Name, randBytes(10, c.KeySize))
		src := randBytes(11, 1024)
		out := make([]byte, len(src))
		iv := make([]byte, c.IVSize)
		var reqs []ocf.Request
		if c.Kind == catalog.KindMAC {
			reqs = []ocf.Request{{Op: ocf.MAC, Src: src, Dst: out}}
		} else {
			reqs = []ocf.Request{
				{Op: ocf.Encrypt, IV: iv, Src: src, Dst: out},
				{Op: ocf.Decrypt, IV: iv, Src: out, Dst: out},
			}
		}
		allocs := testing.AllocsPerRun(100, func() {
			if err := s.Do(reqs); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per batch, want 0", c.Name, allocs)
		}
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x6f6366))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
