package ike

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

func testSuite(t testing.TB, encr uint16, bits uint16, integ uint16) *Suite {
	t.Helper()
	s, err := SuiteFrom(Proposal{Protocol: ProtoIKE, Transforms: []Transform{
		T(TransformENCR, encr, bits), T(TransformPRF, PRF_HMAC_SHA2_256, 0),
		T(TransformINTEG, integ, 0), T(TransformDH, uint16(ECP256), 0)}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testKeys(t testing.TB, s *Suite) *IKEKeys {
	t.Helper()
	k, err := s.DeriveIKE(bytes.Repeat([]byte{0x42}, 32), bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func innerPayloads() []Payload {
	return []Payload{
		&IDi{Identity{IDType: ID_FQDN, Data: []byte("left.example")}},
		&Auth{Method: AuthSharedKeyMIC, Data: bytes.Repeat([]byte{0xaa}, 32)},
		&TSi{Selectors{{EndPort: 0xffff, Start: netip.MustParseAddr("10.1.0.0"), End: netip.MustParseAddr("10.1.255.255")}}},
	}
}

func TestSKSealOpen(t *testing.T) {
	for _, c := range []struct {
		encr, bits, integ uint16
	}{
		{ENCR_AES_CBC, 128, AUTH_HMAC_SHA1_96}, {ENCR_AES_CBC, 192, AUTH_HMAC_SHA2_256_128},
		{ENCR_AES_CBC, 256, AUTH_HMAC_SHA2_256_128}, {ENCR_3DES, 0, AUTH_HMAC_SHA1_96},
	} {
		s := testSuite(t, c.encr, c.bits, c.integ)
		k := testKeys(t, s)
		iOut, iIn, err := s.Directions(k, true)
		if err != nil {
			t.Fatal(err)
		}
		rOut, rIn, err := s.Directions(k, false)
		if err != nil {
			t.Fatal(err)
		}
		h := Header{SPIi: 1, SPIr: 2, Version: Version, Exchange: IKE_AUTH, Flags: FlagInitiator, MessageID: 1}
		for _, pair := range [][3]*SKCipher{{iOut, rIn, iIn}, {rOut, iIn, rIn}} {
			pkt, err := pair[0].Seal(h, nil, innerPayloads(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(pkt)
			if err != nil {
				t.Fatal(s, err)
			}
			sk := m.Payloads[0].(*Encrypted)
			bs := s.Encr.BlockSize()
			if sk.First != PayloadIDi || (len(sk.Data)-bs-s.Integ.ICVLen)%bs != 0 {
				t.Errorf("%s: SK payload first %s, %d bytes", s, sk.First, len(sk.Data))
			}
			ps, err := pair[1].Open(pkt, m)
			if err != nil {
				t.Fatalf("%s: open: %v", s, err)
			}
			if !reflect.DeepEqual(ps, innerPayloads()) {
				t.Errorf("%s: opened %v", s, ps)
			}
			// The other direction's keys, and any flipped bit, fail the ICV.
			if _, err := pair[2].Open(pkt, m); !errors.Is(err, ErrIntegrity) {
				t.Errorf("%s: opened with the other direction's keys: %v", s, err)
			}
			for _, at := range []int{0, 20, HeaderLen + 4, len(pkt) - 1} {
				bad := append([]byte(nil), pkt...)
				bad[at] ^= 0x01
				bm, err := Decode(bad)
				if err != nil {
					continue
				}
				if _, err := pair[1].Open(bad, bm); !errors.Is(err, ErrIntegrity) {
					t.Errorf("%s: byte %d flipped: %v, want ErrIntegrity", s, at, err)
				}
			}
		}
	}
}

// TestSKLayoutByHand decrypts a sealed message with the standard library
// alone, following RFC 7296 3.14's layout: IV, then the CBC ciphertext of
// payloads | padding | pad length, then the ICV over everything before it.
func TestSKLayoutByHand(t *testing.T) {
	s := testSuite(t, ENCR_AES_CBC, 128, AUTH_HMAC_SHA2_256_128)
	k := testKeys(t, s)
	out, _, _ := s.Directions(k, true)
	pkt, err := out.Seal(Header{Version: Version, Exchange: INFORMATIONAL, Flags: FlagInitiator}, nil,
		[]Payload{&Notify{Notify: INITIAL_CONTACT}}, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	body := pkt[HeaderLen+4:]
	icv := body[len(body)-16:]
	m := hmac.New(sha256.New, k.Ai)
	m.Write(pkt[:len(pkt)-16])
	if !hmac.Equal(m.Sum(nil)[:16], icv) {
		t.Fatal("ICV is not HMAC-SHA-256-128 with SK_ai over the message")
	}
	blk, _ := aes.NewCipher(k.Ei)
	pt := make([]byte, len(body)-16-16)
	cipher.NewCBCDecrypter(blk, body[:16]).CryptBlocks(pt, body[16:len(body)-16])
	pad := int(pt[len(pt)-1])
	want := unhex(t, "00 00 0008 00 00 4000")
	if !bytes.Equal(pt[:len(pt)-1-pad], want) || len(pt) != 16 {
		t.Errorf("plaintext %x, want %x padded to one block", pt, want)
	}
}

func TestSKOpenRejectsBadLayout(t *testing.T) {
	s := testSuite(t, ENCR_AES_CBC, 128, AUTH_HMAC_SHA2_256_128)
	k := testKeys(t, s)
	_, in, _ := s.Directions(k, false)
	for _, n := range []int{0, 16, 16 + 16 + 15, 16 + 17 + 16} {
		pkt := sealRaw(t, s, k.Ei, k.Ai, PayloadNotify, make([]byte, n))
		m, err := Decode(pkt)
		if err != nil {
			t.Fatal(err)
		}
		var pe *ParseError
		if _, err := in.Open(pkt, m); !errors.As(err, &pe) {
			t.Errorf("SK data of %d bytes: %v, want a syntax error", n, err)
		}
	}
	// A pad length larger than the plaintext, with a valid ICV.
	pt := bytes.Repeat([]byte{0xff}, 16)
	pkt := sealRaw(t, s, k.Ei, k.Ai, PayloadNotify, encryptCBC(t, k.Ei, pt))
	m, _ := Decode(pkt)
	if _, err := in.Open(pkt, m); err == nil {
		t.Error("pad length 255 in 16 bytes accepted")
	}
}

// encryptCBC returns zero IV | CBC(pt) for pt of whole blocks.
func encryptCBC(t testing.TB, key, pt []byte) []byte {
	blk, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 16+len(pt))
	cipher.NewCBCEncrypter(blk, out[:16]).CryptBlocks(out[16:], pt)
	return out
}

// sealRaw builds header | SK(data | ICV) with a correct ICV over data of any
// shape, so that Open's checks after the ICV can be reached.
func sealRaw(t testing.TB, s *Suite, _, ai []byte, first PayloadType, data []byte) []byte {
	t.Helper()
	d := append(append([]byte(nil), data...), make([]byte, s.Integ.ICVLen)...)
	m := &Message{Header: Header{SPIi: 1, SPIr: 2, Version: Version, Exchange: INFORMATIONAL, Flags: FlagInitiator},
		Payloads: []Payload{&Encrypted{First: first, Data: d}}}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	icv := len(b) - s.Integ.ICVLen
	copy(b[icv:], s.Integ.mac(ai, b[:icv]))
	return b
}

func TestSKOpenCriticalAndAllocations(t *testing.T) {
	s := testSuite(t, ENCR_AES_CBC, 128, AUTH_HMAC_SHA2_256_128)
	k := testKeys(t, s)
	_, in, _ := s.Directions(k, false)
	// An unknown payload marked critical inside the SK payload is refused
	// with UNSUPPORTED_CRITICAL_PAYLOAD, as outside.
	pt := unhex(t, "00 80 0008 deadbeef 0000000000000007")
	pkt := sealRaw(t, s, k.Ei, k.Ai, 200, encryptCBC(t, k.Ei, pt))
	m, err := Decode(pkt)
	if err != nil {
		t.Fatal(err)
	}
	var pe *ParseError
	if _, err := in.Open(pkt, m); !errors.As(err, &pe) || pe.Notify != UNSUPPORTED_CRITICAL_PAYLOAD {
		t.Errorf("critical unknown inner payload: %v", err)
	}
	// Opening allocates a bounded multiple of the packet.
	out, _, _ := s.Directions(k, true)
	var inner []Payload
	for range MaxPayloads {
		inner = append(inner, &VendorID{Data: []byte("v")})
	}
	pkt, err = out.Seal(Header{Exchange: INFORMATIONAL, Flags: FlagInitiator}, nil, inner, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	m, err = Decode(pkt)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := in.Open(pkt, m); err != nil {
			t.Fatal(err)
		}
	})
	// HMAC, CBC and the plaintext copy, then a payload and its interface
	// slot per inner payload.
	if allocs > 20+3*MaxPayloads {
		t.Errorf("opening %d payloads takes %.0f allocations", MaxPayloads, allocs)
	}
	t.Logf("%d-byte message: %.0f allocations to open", len(pkt), allocs)
}
