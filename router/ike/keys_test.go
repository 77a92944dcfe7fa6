package ike

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

func mustPRF(t testing.TB, id uint16) PRF {
	t.Helper()
	p, err := prfFromID(id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// RFC 2202 and RFC 4231 test case 2: the PRFs are plain HMAC.
func TestPRFKnownAnswers(t *testing.T) {
	key, data := []byte("Jefe"), []byte("what do ya want for nothing?")
	if got := mustPRF(t, PRF_HMAC_SHA1).Apply(key, data); !bytes.Equal(got, unhex(t, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")) {
		t.Errorf("PRF_HMAC_SHA1 %x", got)
	}
	if got := mustPRF(t, PRF_HMAC_SHA2_256).Apply(key, data[:10], data[10:]); !bytes.Equal(got,
		unhex(t, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")) {
		t.Errorf("PRF_HMAC_SHA2_256 %x", got)
	}
}

// prfPlusByHand writes out RFC 7296 2.13's T1..T4 one call at a time.
func prfPlusByHand(key, s []byte) []byte {
	h := func(parts ...[]byte) []byte {
		m := hmac.New(sha256.New, key)
		for _, p := range parts {
			m.Write(p)
		}
		return m.Sum(nil)
	}
	t1 := h(s, []byte{1})
	t2 := h(t1, s, []byte{2})
	t3 := h(t2, s, []byte{3})
	t4 := h(t3, s, []byte{4})
	return append(append(append(t1, t2...), t3...), t4...)
}

func TestPRFPlus(t *testing.T) {
	p := mustPRF(t, PRF_HMAC_SHA2_256)
	key, seed := []byte("key material"), []byte("seed: Ni | Nr | SPIi | SPIr")
	want := prfPlusByHand(key, seed)
	got, err := p.PlusN(key, seed, 80)
	if err != nil || !bytes.Equal(got, want[:80]) {
		t.Errorf("prf+ 80 bytes: %v\n got %x\nwant %x", err, got, want[:80])
	}
	if _, err := p.PlusN(key, seed, 255*32); err != nil {
		t.Errorf("prf+ at its 255-block limit: %v", err)
	}
	if _, err := p.PlusN(key, seed, 255*32+1); err == nil {
		t.Error("prf+ beyond 255 blocks: no error")
	}
}

func TestDeriveIKE(t *testing.T) {
	s, err := SuiteFrom(Proposal{Protocol: ProtoIKE, Transforms: []Transform{
		T(TransformENCR, ENCR_AES_CBC, 128), T(TransformPRF, PRF_HMAC_SHA1, 0),
		T(TransformINTEG, AUTH_HMAC_SHA2_256_128, 0), T(TransformDH, uint16(MODP2048), 0)}})
	if err != nil {
		t.Fatal(err)
	}
	ni, nr, gir := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 256)
	skeyseed := s.SKEYSEED(ni, nr, gir)
	m := hmac.New(sha1.New, append(append([]byte{}, ni...), nr...))
	m.Write(gir)
	if !bytes.Equal(skeyseed, m.Sum(nil)) {
		t.Fatal("SKEYSEED is not prf(Ni | Nr, g^ir)")
	}
	k, err := s.DeriveIKE(skeyseed, ni, nr, 0x1111, 0x2222)
	if err != nil {
		t.Fatal(err)
	}
	// Independently: prf+ by hand over HMAC-SHA1, then cut 20|32|32|16|16|20|20.
	seed := append(append(append([]byte{}, ni...), nr...), binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 0x1111), 0x2222)...)
	var stream, prev []byte
	for i := byte(1); len(stream) < 156; i++ {
		m := hmac.New(sha1.New, skeyseed)
		m.Write(prev)
		m.Write(seed)
		m.Write([]byte{i})
		prev = m.Sum(nil)
		stream = append(stream, prev...)
	}
	off := 0
	for _, f := range []struct {
		name string
		got  []byte
		n    int
	}{{"SK_d", k.D, 20}, {"SK_ai", k.Ai, 32}, {"SK_ar", k.Ar, 32}, {"SK_ei", k.Ei, 16}, {"SK_er", k.Er, 16}, {"SK_pi", k.Pi, 20}, {"SK_pr", k.Pr, 20}} {
		if !bytes.Equal(f.got, stream[off:off+f.n]) {
			t.Errorf("%s is not bytes %d..%d of prf+", f.name, off, off+f.n)
		}
		off += f.n
	}
	// Rekeying (2.18) keys the new SKEYSEED with the old SK_d.
	m = hmac.New(sha1.New, k.D)
	m.Write(gir)
	m.Write(ni)
	m.Write(nr)
	if !bytes.Equal(RekeySKEYSEED(s.PRF, k.D, gir, ni, nr), m.Sum(nil)) {
		t.Error("rekey SKEYSEED is not prf(SK_d, g^ir | Ni | Nr)")
	}
}

func TestDeriveChild(t *testing.T) {
	prf := mustPRF(t, PRF_HMAC_SHA2_256)
	child, err := SuiteFrom(Proposal{Protocol: ProtoESP, Transforms: []Transform{
		T(TransformENCR, ENCR_AES_CBC, 256), T(TransformINTEG, AUTH_HMAC_SHA1_96, 0), T(TransformESN, ESN_YES, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	if !child.ESN {
		t.Error("ESN transform not read")
	}
	skd, ni, nr := bytes.Repeat([]byte{9}, 32), []byte("initiator nonce!"), []byte("responder nonce!")
	for _, gir := range [][]byte{nil, bytes.Repeat([]byte{7}, 32)} {
		k, err := DeriveChild(prf, skd, child, gir, ni, nr)
		if err != nil {
			t.Fatal(err)
		}
		seed := append(append(append([]byte{}, gir...), ni...), nr...)
		km := prfPlusByHand(skd, seed)[:2*(32+20)]
		want := [][]byte{km[:32], km[32:52], km[52:84], km[84:104]}
		for i, got := range [][]byte{k.EncrI, k.IntegI, k.EncrR, k.IntegR} {
			if !bytes.Equal(got, want[i]) {
				t.Errorf("PFS %v: key %d is not KEYMAT's bytes in RFC 7296 2.17's order", gir != nil, i)
			}
		}
	}
}
