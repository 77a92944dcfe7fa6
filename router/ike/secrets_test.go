package ike

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// leaks reports whether s shows any of the secrets, in hex (either case),
// as Go's byte-slice formatting prints them, or raw.
func leaks(s string, secrets ...[]byte) bool {
	for _, k := range secrets {
		if len(k) < 4 {
			continue
		}
		part := k[:8]
		dec := strings.Trim(strings.ReplaceAll(fmt.Sprint(part), " ", ","), "[]")
		gosyntax := strings.ReplaceAll(strings.TrimPrefix(fmt.Sprintf("%#v", part), "[]byte{"), " ", ",")
		gosyntax = gosyntax[:strings.LastIndex(gosyntax, ",")]
		for _, form := range []string{hex.EncodeToString(part), strings.ToUpper(hex.EncodeToString(part)), dec, gosyntax, string(part)} {
			if strings.Contains(strings.ReplaceAll(s, " ", ","), form) {
				return true
			}
		}
	}
	return false
}

func TestNoSecretWhenPrinted(t *testing.T) {
	s := testSuite(t, ENCR_AES_CBC, 256, AUTH_HMAC_SHA2_256_128)
	k := testKeys(t, s)
	out, in, err := s.Directions(k, true)
	if err != nil {
		t.Fatal(err)
	}
	child, err := DeriveChild(s.PRF, k.D, s, nil, bytes.Repeat([]byte{5}, 16), bytes.Repeat([]byte{6}, 16))
	if err != nil {
		t.Fatal(err)
	}
	dh, err := GenerateDH(MODP2048, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	nonce := &Nonce{Data: bytes.Repeat([]byte{0x9c}, 32)}
	auth := &Auth{Method: AuthSharedKeyMIC, Data: bytes.Repeat([]byte{0x7d}, 32)}
	secrets := [][]byte{k.D, k.Ai, k.Ar, k.Ei, k.Er, k.Pi, k.Pr, child.EncrI, child.IntegI, child.EncrR, child.IntegR,
		dh.x.Bytes(), nonce.Data, auth.Data}
	for _, v := range []any{k, out, in, child, dh, nonce, auth, s,
		&Message{Header: Header{Version: Version}, Payloads: []Payload{nonce, auth}}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q", "%d"} {
			if str := fmt.Sprintf(verb, v); leaks(str, secrets...) {
				t.Errorf("%T printed with %s shows key material: %s", v, verb, str)
			}
		}
	}
	// Errors carry no secret either: a wrong PSK, a bad public value.
	psk := []byte("the pre-shared key itself")
	if err := VerifyPSK(s.PRF, psk, []byte("signed"), []byte("wrong")); err == nil || leaks(err.Error(), psk) {
		t.Errorf("VerifyPSK error %v", err)
	}
	peer := bytes.Repeat([]byte{0xff}, 256)
	if _, err := dh.Shared(peer); !errors.Is(err, ErrBadPublic) || leaks(err.Error(), peer, dh.x.Bytes()) {
		t.Errorf("Shared error %v", err)
	}
}

func TestLeakCheckerFindsKeys(t *testing.T) {
	// The check above must be able to fail: a plain struct of the same keys
	// printed with %x does show them.
	k := testKeys(t, testSuite(t, ENCR_AES_CBC, 128, AUTH_HMAC_SHA1_96))
	plain := struct{ D, Ei []byte }{k.D, k.Ei}
	for _, verb := range []string{"%x", "%v", "%#v"} {
		if !leaks(fmt.Sprintf(verb, plain), k.D) {
			t.Errorf("the leak check misses keys printed with %s", verb)
		}
	}
}
