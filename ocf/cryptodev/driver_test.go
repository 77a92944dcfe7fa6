package cryptodev

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/ocftest"
)

// geodeHifn is a cryptodev-linux fake as on an ALIX with a Hifn card:
// AES on the Geode, DES/3DES on the Hifn, HMACs and null in software.
func geodeHifn(t *testing.T) *fakeState {
	st := newFake(t, Linux)
	st.drivers = map[uint32]string{1: "cbc-des-hifn0", 2: "cbc-3des-hifn0", 11: "cbc-aes-geode",
		6: "hmac(md5-generic)", 7: "hmac(sha1-generic)", 18: "hmac(sha256-generic)", 16: "ecb-cipher_null"}
	st.hw = map[uint32]bool{1: true, 2: true, 11: true}
	return st
}

// safeCard is an OCF-linux fake with the SafeNet driver: ciphers, MD5 and
// SHA1 in hardware, SHA256 in cryptosoft.
func safeCard(t *testing.T) *fakeState {
	st := newFake(t, OCF)
	st.session2 = true
	st.hw = map[uint32]bool{1: true, 2: true, 11: true, 6: true, 7: true, 16: true}
	return st
}

func mustNew(t *testing.T, st *fakeState, opts Options) *Driver {
	t.Helper()
	d, err := New(st.device(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

func cipherOf(t *testing.T, name string) *ocf.Cipher {
	t.Helper()
	c, err := ocf.LookupCipher(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDetect(t *testing.T) {
	a, err := HostArch()
	if err != nil {
		t.Skip(err)
	}
	lin, _ := IoctlNumbers(Linux, a)
	bsd, _ := IoctlNumbers(OCF, a)
	cases := []struct {
		device  Dialect // Auto: answers nothing
		want    Dialect
		result  Dialect // 0: error
		probes  []uint32
		cloneFD bool
	}{
		{Linux, Auto, Linux, []uint32{bsd.CRIOGET, lin.CIOCASYMFEAT}, false},
		{OCF, Auto, OCF, []uint32{bsd.CRIOGET}, true},
		{Auto, Auto, 0, []uint32{bsd.CRIOGET, lin.CIOCASYMFEAT}, false},
		{Linux, Linux, Linux, []uint32{lin.CIOCASYMFEAT}, false},
		{OCF, OCF, OCF, []uint32{bsd.CRIOGET}, true},
		{OCF, Linux, 0, []uint32{lin.CIOCASYMFEAT}, false},
		{Linux, OCF, 0, []uint32{bsd.CRIOGET}, false},
	}
	for _, c := range cases {
		name := c.device.String() + "/asked-" + c.want.String()
		t.Run(name, func(t *testing.T) {
			st := newFake(t, c.device)
			st.session2 = true
			d, err := New(st.device(), Options{Dialect: c.want})
			if !slices.Equal(st.calls[:min(len(c.probes), len(st.calls))], c.probes) {
				t.Errorf("first requests %#x, want %#x", st.calls, c.probes)
			}
			if c.result == 0 {
				if !errors.Is(err, ErrDialect) {
					t.Fatalf("err = %v, want ErrDialect", err)
				}
				if !st.closedFD[3] {
					t.Error("device not closed after a failed New")
				}
				if len(st.calls) != len(c.probes) {
					t.Errorf("requests after a failed probe: %#x", st.calls)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.Dialect() != c.result {
				t.Errorf("dialect %v, want %v", d.Dialect(), c.result)
			}
			if c.cloneFD && !st.closedFD[3] {
				t.Error("OCF: original descriptor still open after CRIOGET")
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			fd := 3
			if c.cloneFD {
				fd = fakeCloneFD
			}
			if !st.closedFD[fd] {
				t.Errorf("Close left fd %d open", fd)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	all := []string{"des-cbc", "des-ede3-cbc", "aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "hmac-md5", "hmac-sha1", "hmac-sha256", "null"}
	cases := []struct {
		name     string
		st       func(*testing.T) *fakeState
		opts     Options
		wantName string
		wantHW   bool
		ciphers  []string
		macKeys  []int // Caps key sizes for hmac-sha1
		maxReq   int
	}{
		{"linux", geodeHifn, Options{}, "cryptodev:cbc-des-hifn0+cbc-3des-hifn0+cbc-aes-geode", true, all, nil, 0},
		{"linux/hardware-only", geodeHifn, Options{HardwareOnly: true}, "cryptodev:cbc-des-hifn0+cbc-3des-hifn0+cbc-aes-geode", true,
			[]string{"des-cbc", "des-ede3-cbc", "aes-128-cbc", "aes-192-cbc", "aes-256-cbc"}, nil, 0},
		{"linux/software", func(t *testing.T) *fakeState {
			st := newFake(t, Linux)
			st.drivers = map[uint32]string{11: "cbc(aes-generic)", 1: "cbc(des-generic)"}
			st.refuse = map[uint32]bool{2: true, 6: true, 7: true, 18: true, 16: true}
			return st
		}, Options{}, "cryptodev:cbc(des-generic)+cbc(aes-generic)", false,
			[]string{"des-cbc", "aes-128-cbc", "aes-192-cbc", "aes-256-cbc"}, nil, 0},
		{"linux/no-session-info", func(t *testing.T) *fakeState {
			st := geodeHifn(t)
			st.noInfo = true
			return st
		}, Options{}, "cryptodev:cryptodev-linux", true, all, nil, 0},
		{"ocf/safe", safeCard, Options{}, "cryptodev:safe0", true, all, []int{20}, 65535},
		{"ocf/safe/hardware-only", safeCard, Options{HardwareOnly: true}, "cryptodev:safe0", true,
			[]string{"des-cbc", "des-ede3-cbc", "aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "hmac-md5", "hmac-sha1", "null"}, []int{20}, 65535},
		// The first cipher probed has no hardware engine: CIOCGSESSION2
		// refuses it, which must not be taken for a missing request.
		{"ocf/hardware-only/no-hardware-des", func(t *testing.T) *fakeState {
			st := safeCard(t)
			delete(st.hw, 1)
			return st
		}, Options{HardwareOnly: true}, "cryptodev:safe0", true,
			[]string{"des-ede3-cbc", "aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "hmac-md5", "hmac-sha1", "null"}, []int{20}, 65535},
		{"ocf/without-session2/hardware-only", func(t *testing.T) *fakeState {
			st := safeCard(t)
			st.session2 = false
			return st
		}, Options{HardwareOnly: true}, "cryptodev:ocf", true, all, []int{20}, 65535},
		{"ocf/without-session2", func(t *testing.T) *fakeState {
			st := safeCard(t)
			st.session2 = false
			return st
		}, Options{}, "cryptodev:ocf", true, all, []int{20}, 65535},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := c.st(t)
			d := mustNew(t, st, c.opts)
			defer d.Close()
			if d.Name() != c.wantName || d.Hardware() != c.wantHW {
				t.Errorf("Name %q Hardware %v, want %q %v", d.Name(), d.Hardware(), c.wantName, c.wantHW)
			}
			caps := d.Caps()
			var got []string
			for _, n := range all {
				if _, ok := caps.Ciphers[n]; ok {
					got = append(got, n)
				}
			}
			if !slices.Equal(got, c.ciphers) {
				t.Errorf("ciphers %v, want %v", got, c.ciphers)
			}
			if ks, ok := caps.Ciphers["hmac-sha1"]; ok && !slices.Equal(ks, c.macKeys) {
				t.Errorf("hmac-sha1 key sizes %v, want %v", ks, c.macKeys)
			}
			if ks := caps.Ciphers["aes-192-cbc"]; !slices.Equal(ks, []int{24}) {
				t.Errorf("aes-192-cbc key sizes %v, want [24]", ks)
			}
			if caps.MaxRequest != c.maxReq {
				t.Errorf("MaxRequest %d, want %d", caps.MaxRequest, c.maxReq)
			}
			if len(st.sessions) != 0 {
				t.Errorf("probe left %d sessions open", len(st.sessions))
			}
			if len(d.Engines()) != len(c.ciphers) {
				t.Errorf("%d engines for %d ciphers", len(d.Engines()), len(c.ciphers))
			}
		})
	}
	t.Run("nothing", func(t *testing.T) {
		st := newFake(t, Linux)
		for _, id := range []uint32{1, 2, 6, 7, 11, 16, 18} {
			st.refuse[id] = true
		}
		_, err := New(st.device(), Options{})
		if !errors.Is(err, ocf.ErrUnsupported) || !st.closedFD[3] {
			t.Errorf("err = %v (closed %v), want ErrUnsupported and the device closed", err, st.closedFD[3])
		}
	})
}

func dialects(t *testing.T) map[string]*Driver {
	return map[string]*Driver{
		"linux": mustNew(t, geodeHifn(t), Options{}),
		"ocf":   mustNew(t, safeCard(t), Options{}),
	}
}

// Standard vectors pin the op codes and pointers end to end: the fake
// computes with Go's crypto, so a swapped encrypt/decrypt code or a wrong
// IV would not give the published answer.
func TestVectors(t *testing.T) {
	type vec struct {
		cipher, key, iv, in, out string
	}
	vecs := []vec{
		// NIST SP 800-38A F.2.1 CBC-AES128.Encrypt
		{"aes-128-cbc", "2b7e151628aed2a6abf7158809cf4f3c", "000102030405060708090a0b0c0d0e0f",
			"6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
			"7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b273bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7"},
		// NIST SP 800-38A F.2.5 CBC-AES256.Encrypt
		{"aes-256-cbc", "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", "000102030405060708090a0b0c0d0e0f",
			"6bc1bee22e409f96e93d7e117393172a", "f58c4c04d6e5f1ba779eabfb5f7bfbd6"},
		// RFC 2202 test 1 (HMAC-MD5 and HMAC-SHA1)
		{"hmac-md5", "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "", "4869205468657265", "9294727a3638bb1c13f48ef8158bfc9d"},
		{"hmac-sha1", "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "", "4869205468657265", "b617318655057264e28bc0b6fb378c8ef146be00"},
		// RFC 2202 test 2: a 4-byte key, which OCF refuses (see TestBadInput)
		{"hmac-md5/linux", "4a656665", "", "7768617420646f2079612077616e7420666f72206e6f7468696e673f", "750c783e6ab0b503eaa86e310a5db738"},
		// RFC 4231 test 2, 4-byte key; and HMAC-SHA256 of "Hi There" with a 32-byte key of 0x0b
		{"hmac-sha256/linux", "4a656665", "", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
			"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
	}
	for dn, d := range dialects(t) {
		for _, v := range vecs {
			name, only, _ := strings.Cut(v.cipher, "/")
			if only != "" && only != dn {
				continue
			}
			t.Run(dn+"/"+v.cipher, func(t *testing.T) {
				c := cipherOf(t, name)
				s, err := d.Open(c, unhex(t, v.key))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				in, want := unhex(t, v.in), unhex(t, v.out)
				if c.Kind == "mac" {
					dst := make([]byte, c.DigestSize+4)
					if err := s.Do([]ocf.Request{{Op: ocf.MAC, Src: in, Dst: dst}}); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(dst[:c.DigestSize], want) || !bytes.Equal(dst[c.DigestSize:], []byte{0, 0, 0, 0}) {
						t.Errorf("MAC %x, want %x and 4 untouched bytes", dst, want)
					}
					return
				}
				iv := unhex(t, v.iv)
				dst := make([]byte, len(in))
				back := make([]byte, len(in))
				reqs := []ocf.Request{
					{Op: ocf.Encrypt, IV: iv, Src: in, Dst: dst},
					{Op: ocf.Decrypt, IV: iv, Src: want, Dst: back},
				}
				if err := s.Do(reqs); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dst, want) || !bytes.Equal(back, in) {
					t.Errorf("encrypt %x, want %x; decrypt %x, want %x", dst, want, back, in)
				}
			})
		}
		d.Close()
	}
}

// Every cipher of the catalog round-trips and agrees with Go's crypto, in
// place and out of place, and the crypt_op carries what the request said.
func TestRoundTripAndEncoding(t *testing.T) {
	for dn, d := range dialects(t) {
		st := d.dev.(*fakeFD).st
		enc, dec := uint16(0), uint16(1) // COP_ENCRYPT, COP_DECRYPT
		if dn == "ocf" {
			enc, dec = 1, 2
		}
		for _, name := range []string{"des-cbc", "des-ede3-cbc", "aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "null"} {
			t.Run(dn+"/"+name, func(t *testing.T) {
				c := cipherOf(t, name)
				key := make([]byte, c.KeySize)
				for i := range key {
					key[i] = byte(i*7 + 1)
				}
				s, err := d.Open(c, key)
				if err != nil {
					t.Fatal(err)
				}
				iv := bytes.Repeat([]byte{0xa5}, c.IVSize)
				plain := make([]byte, 64)
				for i := range plain {
					plain[i] = byte(i)
				}
				want, err := ocftest.Reference(c, key, ocf.Request{Op: ocf.Encrypt, IV: iv, Src: plain})
				if err != nil {
					t.Fatal(err)
				}
				out := make([]byte, len(plain))
				inPlace := slices.Clone(plain)
				n0 := len(st.crypts)
				reqs := []ocf.Request{
					{Op: ocf.Encrypt, IV: iv, Src: plain, Dst: out},
					{Op: ocf.Encrypt, IV: iv, Src: inPlace}, // Dst nil: in place
				}
				if err := s.Do(reqs); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out, want) || !bytes.Equal(inPlace, want) {
					t.Fatalf("out %x, in place %x, want %x", out, inPlace, want)
				}
				back := slices.Clone(out)
				if err := s.Do([]ocf.Request{{Op: ocf.Decrypt, IV: iv, Src: back, Dst: back}}); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(back, plain) {
					t.Fatalf("decrypt %x, want %x", back, plain)
				}
				ops := st.crypts[n0:]
				if len(ops) != 3 {
					t.Fatalf("%d CIOCCRYPT for 3 requests", len(ops))
				}
				wantIV := ptr(iv)
				if wantIV == nil && dn == "ocf" {
					wantIV = ops[0].iv // a session-owned zero block, checked below
					if wantIV == nil || *wantIV != 0 {
						t.Error("OCF null request without a zero IV block")
					}
				}
				sess := s.(*session).ses
				for i, w := range []hostCryptOp{
					{ses: sess, op: enc, len: 64, src: &plain[0], dst: &out[0], iv: wantIV},
					{ses: sess, op: enc, len: 64, src: &inPlace[0], dst: &inPlace[0], iv: wantIV},
					{ses: sess, op: dec, len: 64, src: &back[0], dst: &back[0], iv: wantIV},
				} {
					if ops[i] != w {
						t.Errorf("crypt_op %d = %+v, want %+v", i, ops[i], w)
					}
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if st.freed[len(st.freed)-1] != sess {
					t.Errorf("Close freed %#x, want %#x", st.freed[len(st.freed)-1], sess)
				}
			})
		}
		d.Close()
	}
}

func TestMACRequest(t *testing.T) {
	for dn, d := range dialects(t) {
		st := d.dev.(*fakeFD).st
		c := cipherOf(t, "hmac-sha1")
		s, err := d.Open(c, bytes.Repeat([]byte{0x0b}, 20))
		if err != nil {
			t.Fatal(err)
		}
		// Empty message: HMAC-SHA1 with this key, computed with Go's hmac
		// by the fake; the request must still reach the device.
		dst := make([]byte, 20)
		n0 := len(st.crypts)
		if err := s.Do([]ocf.Request{{Op: ocf.MAC, Dst: dst}}); err != nil {
			t.Fatalf("%s: %v", dn, err)
		}
		h := macFor(7, bytes.Repeat([]byte{0x0b}, 20))
		if !bytes.Equal(dst, h.Sum(nil)) {
			t.Errorf("%s: MAC of nothing %x, want %x", dn, dst, h.Sum(nil))
		}
		op := st.crypts[n0]
		if op.len != 0 || op.src == nil || op.mac == nil || op.dst != nil || op.iv != nil {
			t.Errorf("%s: MAC crypt_op %+v: want len 0, src and mac set, no dst or iv", dn, op)
		}
		if op.mac == &dst[0] {
			t.Errorf("%s: the kernel writes the digest straight into caller memory", dn)
		}
		s.Close()
		d.Close()
	}
}

func TestBadInput(t *testing.T) {
	aes128 := func(t *testing.T) *ocf.Cipher { return cipherOf(t, "aes-128-cbc") }
	k16 := make([]byte, 16)
	iv16 := make([]byte, 16)
	cases := []struct {
		name    string
		dialect string // "" both
		cipher  string
		key     []byte
		req     ocf.Request
		openErr error
		doErr   error
	}{
		{"short key", "", "aes-128-cbc", make([]byte, 15), ocf.Request{}, ocf.ErrKeySize, nil},
		{"long key", "", "aes-256-cbc", make([]byte, 33), ocf.Request{}, ocf.ErrKeySize, nil},
		{"ocf hmac key not natural size", "ocf", "hmac-sha256", make([]byte, 20), ocf.Request{}, ocf.ErrKeySize, nil},
		{"hmac key too long", "linux", "hmac-sha1", make([]byte, 513), ocf.Request{}, ocf.ErrKeySize, nil},
		{"short iv", "", "aes-128-cbc", k16, ocf.Request{Op: ocf.Encrypt, IV: iv16[:8], Src: make([]byte, 16)}, nil, ocf.ErrIVSize},
		{"no iv", "", "aes-128-cbc", k16, ocf.Request{Op: ocf.Encrypt, Src: make([]byte, 16)}, nil, ocf.ErrIVSize},
		{"partial block", "", "aes-128-cbc", k16, ocf.Request{Op: ocf.Encrypt, IV: iv16, Src: make([]byte, 17)}, nil, ocf.ErrLength},
		{"short dst", "", "aes-128-cbc", k16, ocf.Request{Op: ocf.Encrypt, IV: iv16, Src: make([]byte, 32), Dst: make([]byte, 16)}, nil, ocf.ErrLength},
		{"mac on cipher", "", "aes-128-cbc", k16, ocf.Request{Op: ocf.MAC, Src: make([]byte, 16), Dst: make([]byte, 32)}, nil, ocf.ErrOp},
		{"bad op", "", "aes-128-cbc", k16, ocf.Request{Op: 0, IV: iv16, Src: make([]byte, 16)}, nil, ocf.ErrOp},
		{"encrypt on mac", "", "hmac-md5", k16, ocf.Request{Op: ocf.Encrypt, Src: make([]byte, 16)}, nil, ocf.ErrOp},
		{"short mac dst", "", "hmac-md5", k16, ocf.Request{Op: ocf.MAC, Src: make([]byte, 16), Dst: make([]byte, 15)}, nil, ocf.ErrLength},
		{"too large for ocf", "ocf", "aes-128-cbc", k16, ocf.Request{Op: ocf.Encrypt, IV: iv16, Src: make([]byte, 65536)}, nil, ocf.ErrTooLarge},
		{"too large mac for ocf", "ocf", "hmac-md5", k16, ocf.Request{Op: ocf.MAC, Src: make([]byte, 65536), Dst: make([]byte, 16)}, nil, ocf.ErrTooLarge},
	}
	// A shifted overlap between Src and Dst.
	buf := make([]byte, 48)
	cases = append(cases, struct {
		name    string
		dialect string
		cipher  string
		key     []byte
		req     ocf.Request
		openErr error
		doErr   error
	}{"overlap", "", "aes-128-cbc", k16, ocf.Request{Op: ocf.Encrypt, IV: iv16, Src: buf[:32], Dst: buf[16:]}, nil, ocf.ErrLength})

	for dn, d := range dialects(t) {
		st := d.dev.(*fakeFD).st
		for _, c := range cases {
			if c.dialect != "" && c.dialect != dn {
				continue
			}
			t.Run(dn+"/"+c.name, func(t *testing.T) {
				s, err := d.Open(cipherOf(t, c.cipher), c.key)
				if c.openErr != nil {
					if !errors.Is(err, c.openErr) {
						t.Fatalf("Open: %v, want %v", err, c.openErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				n0 := len(st.crypts)
				reqs := []ocf.Request{c.req}
				err = s.Do(reqs)
				if !errors.Is(err, c.doErr) || !errors.Is(reqs[0].Err, c.doErr) {
					t.Errorf("Do: %v (request: %v), want %v", err, reqs[0].Err, c.doErr)
				}
				if len(st.crypts) != n0 {
					t.Error("a request that fails the checks reached the device")
				}
			})
		}
		t.Run(dn+"/nil cipher", func(t *testing.T) {
			if _, err := d.Open(nil, nil); !errors.Is(err, ocf.ErrUnknownCipher) {
				t.Errorf("Open(nil): %v", err)
			}
		})
		t.Run(dn+"/foreign cipher", func(t *testing.T) {
			c := *aes128(t)
			c.Name = "aes-128-ctr"
			if _, err := d.Open(&c, k16); !errors.Is(err, ocf.ErrUnsupported) {
				t.Errorf("Open(%s): %v", c.Name, err)
			}
		})
		d.Close()
	}
	t.Run("device refuses", func(t *testing.T) {
		st := geodeHifn(t)
		d := mustNew(t, st, Options{})
		defer d.Close()
		st.refuse[11] = true // e.g. the module was unloaded after the probe
		if _, err := d.Open(aes128(t), k16); !errors.Is(err, ocf.ErrUnsupported) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Open: %v, want ErrUnsupported wrapping EINVAL", err)
		}
	})
}

func TestDeviceErrors(t *testing.T) {
	cases := []struct {
		errno syscall.Errno
		want  error
	}{
		{syscall.E2BIG, ocf.ErrTooLarge},
		{syscall.ETIMEDOUT, ocf.ErrTimeout},
		{syscall.EIO, ErrDevice},
		{syscall.EINVAL, ErrDevice},
		{syscall.EBADF, ocf.ErrClosed},
	}
	for _, c := range cases {
		t.Run(c.errno.Error(), func(t *testing.T) {
			st := safeCard(t)
			d := mustNew(t, st, Options{})
			defer d.Close()
			s, err := d.Open(cipherOf(t, "des-cbc"), []byte("8bytekey"))
			if err != nil {
				t.Fatal(err)
			}
			st.cryptErrs = []error{nil, c.errno, nil}
			iv := make([]byte, 8)
			reqs := []ocf.Request{
				{Op: ocf.Encrypt, IV: iv, Src: make([]byte, 8)},
				{Op: ocf.Encrypt, IV: iv, Src: make([]byte, 8)},
				{Op: ocf.Encrypt, IV: iv, Src: make([]byte, 8)},
			}
			err = s.Do(reqs)
			if !errors.Is(err, c.want) || !errors.Is(err, c.errno) {
				t.Errorf("Do: %v, want %v wrapping %v", err, c.want, c.errno)
			}
			if reqs[0].Err != nil || reqs[1].Err != err || reqs[2].Err != nil {
				t.Errorf("per-request errors %v, %v, %v: want only the second", reqs[0].Err, reqs[1].Err, reqs[2].Err)
			}
		})
	}
}

// An interrupted request is redone only when its input is still intact.
func TestEINTR(t *testing.T) {
	st := geodeHifn(t)
	d := mustNew(t, st, Options{})
	defer d.Close()
	s, err := d.Open(cipherOf(t, "aes-128-cbc"), make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	iv := make([]byte, 16)
	src, dst := make([]byte, 32), make([]byte, 32)

	st.cryptErrs = []error{syscall.EINTR}
	n0 := len(st.crypts)
	if err := s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: iv, Src: src, Dst: dst}}); err != nil {
		t.Errorf("out of place after EINTR: %v", err)
	}
	if len(st.crypts)-n0 != 2 {
		t.Errorf("out of place: %d CIOCCRYPT, want 2 (one retry)", len(st.crypts)-n0)
	}

	st.cryptErrs = []error{syscall.EINTR}
	n0 = len(st.crypts)
	if err := s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: iv, Src: src}}); !errors.Is(err, syscall.EINTR) {
		t.Errorf("in place after EINTR: %v, want EINTR", err)
	}
	if len(st.crypts)-n0 != 1 {
		t.Errorf("in place: %d CIOCCRYPT, want 1 (no retry)", len(st.crypts)-n0)
	}
}

func TestEmptyCipherRequest(t *testing.T) {
	st := geodeHifn(t)
	d := mustNew(t, st, Options{})
	defer d.Close()
	s, err := d.Open(cipherOf(t, "aes-128-cbc"), make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	n0 := len(st.crypts)
	if err := s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16)}}); err != nil {
		t.Errorf("empty request: %v", err)
	}
	if len(st.crypts) != n0 {
		t.Error("an empty cipher request reached the device")
	}
}

func TestClose(t *testing.T) {
	st := safeCard(t)
	d := mustNew(t, st, Options{})
	c := cipherOf(t, "aes-128-cbc")
	s1, err := d.Open(c, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := d.Open(c, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	if s1.Driver() != "cryptodev:safe0" || s1.Cipher().Name != c.Name {
		t.Errorf("session Driver %q Cipher %q", s1.Driver(), s1.Cipher().Name)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	reqs := []ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16), Src: make([]byte, 16)}, {Op: ocf.Encrypt}}
	if err := s1.Do(reqs); !errors.Is(err, ocf.ErrClosed) || !errors.Is(reqs[1].Err, ocf.ErrClosed) {
		t.Errorf("Do after Close: %v / %v", err, reqs[1].Err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	calls := len(st.calls)
	if err := s2.Do(reqs); !errors.Is(err, ocf.ErrClosed) {
		t.Errorf("Do after driver Close: %v", err)
	}
	if err := s2.Close(); err != nil {
		t.Errorf("session Close after driver Close: %v", err)
	}
	if _, err := d.Open(c, make([]byte, 16)); !errors.Is(err, ocf.ErrClosed) {
		t.Errorf("Open after Close: %v", err)
	}
	if len(st.calls) != calls {
		t.Errorf("requests after the driver closed: %#x", st.calls[calls:])
	}
	if err := d.Close(); err != nil {
		t.Errorf("second driver Close: %v", err)
	}
}

func TestInexactOverlap(t *testing.T) {
	b := make([]byte, 64)
	cases := []struct {
		x, y []byte
		want bool
	}{
		{b[:32], b[:32], false},
		{b[:32], b[32:], false},
		{b[:32], b[16:48], true},
		{b[16:48], b[:32], true},
		{b[:32], make([]byte, 32), false},
		{nil, b, false},
	}
	for i, c := range cases {
		if got := inexactOverlap(c.x, c.y); got != c.want {
			t.Errorf("case %d: %v, want %v", i, got, c.want)
		}
	}
}

func TestCString(t *testing.T) {
	var a [8]byte
	copy(a[:], "safe0")
	if cString(a[:]) != "safe0" || cString([]byte("full")) != "full" || cString(nil) != "" {
		t.Error("cString")
	}
	var p *byte
	if addr(p) != 0 || unsafe.Pointer(ptr(nil)) != nil {
		t.Error("nil pointers must encode as 0")
	}
}

// WriteEngines names, per cipher, the kernel driver that answers through
// the device and whether it is hardware, as `ocf engines` prints it.
func TestWriteEngines(t *testing.T) {
	if _, err := HostArch(); err != nil {
		t.Skip(err)
	}
	d := mustNew(t, geodeHifn(t), Options{Dialect: Linux})
	defer d.Close()
	var b strings.Builder
	if err := WriteEngines(&b, "/dev/crypto", d); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"through /dev/crypto (cryptodev-linux):\n",
		"  aes-128-cbc    cbc-aes-geode  hardware\n",
		"  des-ede3-cbc   cbc-3des-hifn0  hardware\n",
		"  hmac-sha1      hmac(sha1-generic)  software\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}
