package ike

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// unhex reads hex written with spaces and line breaks between fields, as the
// vectors below are laid out after RFC 7296's diagrams.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// initRequest is an IKE_SA_INIT request written field by field from RFC
// 7296 3.1-3.12, not by this package's encoder.
const initRequest = `
0102030405060708 0000000000000000 21 20 22 08 00000000 000000ac
22 00 0030
  00 00 002c 01 01 00 04
    03 00 000c 01 00 000c 800e 0100
    03 00 0008 02 00 0005
    03 00 0008 03 00 000c
    00 00 0008 04 00 001f
28 00 0028 001f 0000
  000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
29 00 0014 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf
2b 00 001c 00 00 4004 0102030405060708090a0b0c0d0e0f1011121314
00 00 0008 6f636677
`

func TestDecodeInitRequest(t *testing.T) {
	b := unhex(t, initRequest)
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{SPIi: 0x0102030405060708, NextPayload: PayloadSA, Version: 0x20, Exchange: IKE_SA_INIT,
		Flags: FlagInitiator, Length: uint32(len(b))}
	if m.Header != want {
		t.Errorf("header %+v, want %+v", m.Header, want)
	}
	if !m.Initiator() || m.Response() {
		t.Error("flags: want I set, R clear")
	}
	if len(m.Payloads) != 5 {
		t.Fatalf("%d payloads, want 5", len(m.Payloads))
	}
	sa := m.Payloads[0].(*SA)
	wantSA := Proposal{Num: 1, Protocol: ProtoIKE, SPI: []byte{}, Transforms: []Transform{
		T(TransformENCR, ENCR_AES_CBC, 256), T(TransformPRF, PRF_HMAC_SHA2_256, 0),
		T(TransformINTEG, AUTH_HMAC_SHA2_256_128, 0), T(TransformDH, uint16(Curve25519), 0)}}
	if len(sa.Proposals) != 1 || !reflect.DeepEqual(sa.Proposals[0], wantSA) {
		t.Errorf("SA %v, want %v", sa.Proposals, wantSA)
	}
	ke := m.Payloads[1].(*KE)
	if ke.Group != Curve25519 || len(ke.Data) != 32 || ke.Data[31] != 0x1f {
		t.Errorf("KE %v", ke)
	}
	if n := m.Payloads[2].(*Nonce); len(n.Data) != 16 || n.Data[0] != 0xa0 {
		t.Errorf("nonce %v", n)
	}
	if n := m.Payloads[3].(*Notify); n.Notify != NAT_DETECTION_SOURCE_IP || len(n.Data) != 20 || len(n.SPI) != 0 {
		t.Errorf("notify %v", n)
	}
	if v := m.Payloads[4].(*VendorID); string(v.Data) != "ocfw" {
		t.Errorf("vendor %q", v.Data)
	}
	out, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, b) {
		t.Errorf("encode(decode(x)) differs:\n got %x\nwant %x", out, b)
	}
	// The message owns its bytes: changing the datagram changes nothing.
	b[HeaderLen+20] ^= 0xff
	if sa.Proposals[0].Transforms[0].ID != ENCR_AES_CBC {
		t.Error("decoded message aliases the caller's buffer")
	}
}

// authPayloads is an IKE_AUTH request's inner chain (what an SK payload
// holds), from RFC 7296 3.5-3.13; it starts with IDi.
const authPayloads = `
27 00 0011 02 000000 612e6578616d706c65
2c 00 0010 02 000000 5a5a5a5a5a5a5a5a
2d 00 0018 01 000000 07 00 0010 0000 ffff 0a000000 0a0000ff
29 00 0018 01 000000 07 11 0010 01f4 01f4 c0a80101 c0a80101
2a 00 0008 00 00 4000
00 00 0010 03 04 0002 c0ffee01 c0ffee02
`

func TestDecodeAuthPayloads(t *testing.T) {
	b := unhex(t, authPayloads)
	ps, err := DecodePayloads(PayloadIDi, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Payload{
		&IDi{Identity{IDType: ID_FQDN, Data: []byte("a.example")}},
		&Auth{Method: AuthSharedKeyMIC, Data: unhex(t, "5a5a5a5a5a5a5a5a")},
		&TSi{Selectors{{StartPort: 0, EndPort: 0xffff, Start: netip.MustParseAddr("10.0.0.0"), End: netip.MustParseAddr("10.0.0.255")}}},
		&TSr{Selectors{{IPProtocol: 17, StartPort: 500, EndPort: 500, Start: netip.MustParseAddr("192.168.1.1"), End: netip.MustParseAddr("192.168.1.1")}}},
		&Notify{Notify: INITIAL_CONTACT, SPI: []byte{}, Data: []byte{}},
		&Delete{Protocol: ProtoESP, SPISize: 4, SPIs: [][]byte{unhex(t, "c0ffee01"), unhex(t, "c0ffee02")}},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("payloads\n got %v\nwant %v", ps, want)
	}
	first, out, err := EncodePayloads(ps)
	if err != nil || first != PayloadIDi || !reflect.DeepEqual(out, b) {
		t.Errorf("encode: first %s err %v\n got %x\nwant %x", first, err, out, b)
	}
	if got := ps[0].(*IDi).Body(); !reflect.DeepEqual(got, b[4:17]) {
		t.Errorf("IDi body %x, want the payload after its generic header %x", got, b[4:17])
	}
}

func TestIdentityKinds(t *testing.T) {
	for _, id := range []Identity{
		{IDType: ID_IPV4_ADDR, Data: []byte{192, 0, 2, 1}},
		{IDType: ID_FQDN, Data: []byte("gw.example.org")},
		{IDType: ID_RFC822_ADDR, Data: []byte("owner@example.org")},
		{IDType: ID_KEY_ID, Data: []byte{1, 2, 3}},
	} {
		m := &Message{Header: Header{Version: Version, Exchange: IKE_AUTH}, Payloads: []Payload{&IDr{id}}}
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		d, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Payloads[0].(*IDr).Identity; !reflect.DeepEqual(got, id) {
			t.Errorf("%v decoded as %v", id, got)
		}
	}
	if s := (Identity{IDType: ID_IPV4_ADDR, Data: []byte{192, 0, 2, 1}}).String(); s != "192.0.2.1" {
		t.Errorf("ID_IPV4_ADDR prints %q", s)
	}
}

func TestUnknownPayloads(t *testing.T) {
	// A payload of unknown type 200 that is not critical is kept and
	// skipped; the same payload marked critical is refused with the
	// notification the responder must send.
	hdr := "0102030405060708 0000000000000000 c8 20 25 08 00000001 00000024 "
	ok := unhex(t, hdr+"00 00 0008 deadbeef")
	m, err := Decode(ok)
	if err != nil {
		t.Fatal(err)
	}
	if r, isRaw := m.Payloads[0].(*Raw); !isRaw || r.T != 200 || r.Critical {
		t.Errorf("unknown payload decoded as %#v", m.Payloads[0])
	}
	if out, _ := m.Encode(); !reflect.DeepEqual(out, ok) {
		t.Errorf("unknown payload not kept byte for byte: %x", out)
	}
	_, err = Decode(unhex(t, hdr+"00 80 0008 deadbeef"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Notify != UNSUPPORTED_CRITICAL_PAYLOAD || pe.Payload != 200 {
		t.Errorf("critical unknown payload: %v, want UNSUPPORTED_CRITICAL_PAYLOAD", err)
	}
	// A known payload type with the critical bit set is understood: no error.
	if _, err := Decode(unhex(t, "0102030405060708 0000000000000000 2b 20 25 08 00000001 00000024 00 80 0008 deadbeef")); err != nil {
		t.Errorf("critical Vendor ID: %v", err)
	}
}

func TestEncryptedPayloadLayout(t *testing.T) {
	// The SK payload's Next Payload names the first payload inside it, and
	// it must be the last.
	b := unhex(t, "0102030405060708 1112131415161718 2e 20 23 08 00000001 00000024 23 00 0008 01020304")
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	sk := m.Payloads[0].(*Encrypted)
	if sk.First != PayloadIDi || len(sk.Data) != 4 {
		t.Errorf("SK %+v", sk)
	}
	if out, _ := m.Encode(); !reflect.DeepEqual(out, b) {
		t.Errorf("SK round trip %x", out)
	}
}

func TestDecodeRejects(t *testing.T) {
	hdr := func(next string, length int) string {
		return "0102030405060708 0000000000000000 " + next + " 20 22 08 00000000 " + hex.EncodeToString([]byte{0, 0, byte(length >> 8), byte(length)}) + " "
	}
	many := strings.Repeat("2b 00 0004 ", MaxPayloads) + "00 00 0004"
	cases := []struct {
		name, hex string
		notify    NotifyType
	}{
		{"short header", "0102030405060708", INVALID_SYNTAX},
		{"IKEv1", "0102030405060708 0000000000000000 00 10 22 08 00000000 0000001c", INVALID_MAJOR_VERSION},
		{"length field too long", hdr("00", 29), INVALID_SYNTAX},
		{"trailing bytes", hdr("00", 29) + "00", INVALID_SYNTAX},
		{"payload longer than the message", hdr("2b", 36) + "00 00 0009 00000000", INVALID_SYNTAX},
		{"payload length below 4", hdr("2b", 36) + "00 00 0003 00000000", INVALID_SYNTAX},
		{"chain says more, bytes end", hdr("2b", 32) + "2b 00 0004", INVALID_SYNTAX},
		{"SK not last", hdr("2e", 40) + "2b 00 0008 00000000 0000 0004", INVALID_SYNTAX},
		{"short nonce", hdr("28", 47) + "00 00 0013 000102030405060708090a0b0c0d0e", INVALID_SYNTAX},
		{"transform count over the bytes", hdr("21", 48) + "00 00 0014 00 00 0010 01 01 00 02 00 00 0008 01 00 000c", INVALID_SYNTAX},
		{"proposal 'last' wrong", hdr("21", 48) + "00 00 0014 02 00 0010 01 01 00 01 00 00 0008 01 00 000c", INVALID_SYNTAX},
		{"transform 'last' wrong", hdr("21", 48) + "00 00 0014 00 00 0010 01 01 00 01 03 00 0008 01 00 000c", INVALID_SYNTAX},
		{"attribute beyond transform", hdr("21", 52) + "00 00 0018 00 00 0014 01 01 00 01 00 00 000c 01 00 000c 000e 0009", INVALID_SYNTAX},
		{"TS count over the bytes", hdr("2c", 52) + "00 00 0018 02 000000 07 00 0010 0000 ffff 0a000000 0a0000ff", INVALID_SYNTAX},
		{"TS of unknown type", hdr("2c", 52) + "00 00 0018 01 000000 09 00 0010 0000 ffff 0a000000 0a0000ff", INVALID_SYNTAX},
		{"IPv4 ID of 3 bytes", hdr("23", 39) + "00 00 000b 01 000000 0a0000", INVALID_SYNTAX},
		{"delete SPI count mismatch", hdr("2a", 40) + "00 00 000c 03 04 0002 c0ffee01", INVALID_SYNTAX},
		{"notify SPI beyond payload", hdr("29", 36) + "00 00 0008 03 04 4000", INVALID_SYNTAX},
		{"too many payloads", hdr("2b", HeaderLen+4*(MaxPayloads+1)) + many, INVALID_SYNTAX},
	}
	for _, c := range cases {
		_, err := Decode(unhex(t, c.hex))
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %v, want a *ParseError", c.name, err)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		if pe.Notify != c.notify {
			t.Errorf("%s: %v, want %s", c.name, err, c.notify)
		}
	}
}

func TestNotifyData(t *testing.T) {
	// INVALID_KE_PAYLOAD carries the wanted group in two bytes (1.2).
	m := &Message{Header: Header{Exchange: IKE_SA_INIT, Flags: FlagResponse}, Payloads: []Payload{InvalidKE(MODP2048)}}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, "00 00 000a 00 00 0011 000e"); !bytes.Equal(b[HeaderLen:], want) || b[17] != Version {
		t.Errorf("INVALID_KE_PAYLOAD encoded as %x (version %#x)", b[HeaderLen:], b[17])
	}
	d, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := d.Payloads[0].(*Notify).Group(); err != nil || g != MODP2048 {
		t.Errorf("group %v, %v", g, err)
	}
	if _, err := (&Notify{Notify: COOKIE, Data: make([]byte, 65)}).Cookie(); err == nil {
		t.Error("a 65-byte cookie accepted")
	}
	if c, err := (&Notify{Notify: COOKIE, Data: []byte{1, 2}}).Cookie(); err != nil || len(c) != 2 {
		t.Errorf("cookie %x, %v", c, err)
	}
	if s := SIGNATURE_HASH_ALGORITHMS.String(); s != "SIGNATURE_HASH_ALGORITHMS" {
		t.Errorf("16431 prints %q", s)
	}
}
