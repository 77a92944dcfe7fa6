package ike

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"net/netip"
	"testing"
)

func TestPSKAuth(t *testing.T) {
	prf := mustPRF(t, PRF_HMAC_SHA2_256)
	psk := []byte("correct horse battery staple, a long one")
	msg1 := []byte("the initiator's IKE_SA_INIT request, as sent")
	nr := bytes.Repeat([]byte{0x22}, 32)
	skpi := bytes.Repeat([]byte{0x33}, 32)
	id := Identity{IDType: ID_FQDN, Data: []byte("left.example")}

	signed := SignedOctets(prf, msg1, nr, skpi, id.Body())
	// By hand, RFC 7296 2.15: msg1 | Nr | prf(SK_pi, IDType | RESERVED | data).
	mac := func(key []byte, parts ...[]byte) []byte {
		m := hmac.New(sha256.New, key)
		for _, p := range parts {
			m.Write(p)
		}
		return m.Sum(nil)
	}
	want := append(append(append([]byte{}, msg1...), nr...), mac(skpi, []byte{2, 0, 0, 0}, []byte("left.example"))...)
	if !bytes.Equal(signed, want) {
		t.Fatal("signed octets differ from RFC 7296 2.15")
	}
	auth := PSKAuth(prf, psk, signed)
	if !bytes.Equal(auth, mac(mac(psk, []byte("Key Pad for IKEv2")), signed)) {
		t.Fatal("AUTH is not prf(prf(PSK, \"Key Pad for IKEv2\"), signed octets)")
	}
	if err := VerifyPSK(prf, psk, signed, auth); err != nil {
		t.Errorf("matching AUTH: %v", err)
	}
	if err := VerifyPSK(prf, []byte("another key"), signed, auth); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong PSK: %v, want ErrAuth", err)
	}
	other := SignedOctets(prf, msg1, nr, skpi, Identity{IDType: ID_FQDN, Data: []byte("right.example")}.Body())
	if err := VerifyPSK(prf, psk, other, auth); !errors.Is(err, ErrAuth) {
		t.Errorf("other identity: %v, want ErrAuth", err)
	}
	if err := VerifyPSK(prf, psk, signed, auth[:16]); !errors.Is(err, ErrAuth) {
		t.Errorf("truncated AUTH: %v, want ErrAuth", err)
	}
}

func TestNATDetectionHash(t *testing.T) {
	// SHA-1 over SPIi | SPIr | address | port, checked against a value
	// computed independently (Python's hashlib): sha1(0000000000000001 0000000000000000 c0000201 01f4).
	got := NATDetectionHash(1, 0, mustAddrPort(t, "192.0.2.1:500"))
	if want := unhex(t, "0934223bb4f4d438722fa2188be64e95136198be"); !bytes.Equal(got, want) {
		t.Errorf("NAT detection hash %x, want %x", got, want)
	}
	if bytes.Equal(got, NATDetectionHash(1, 0, mustAddrPort(t, "192.0.2.1:4500"))) {
		t.Error("the port does not enter the hash")
	}
	if !bytes.Equal(got, NATDetectionHash(1, 0, mustAddrPort(t, "[::ffff:192.0.2.1]:500"))) {
		t.Error("a v4-mapped address hashes differently from the IPv4 one")
	}
}

func mustAddrPort(t testing.TB, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}
