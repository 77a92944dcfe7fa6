package ike

import (
	"bytes"
	"crypto/rand"
	"net/netip"
	"reflect"
	"testing"
)

// TestPiecesMakeAnIKESA runs IKE_SA_INIT and IKE_AUTH between two sides
// built from this package's parts alone (no state machine): every message
// goes through Encode and Decode as bytes, the keys both sides derive
// agree, each side's AUTH verifies at the other, and both derive the same
// CHILD SA keys.
func TestPiecesMakeAnIKESA(t *testing.T) {
	for _, g := range []DHGroup{MODP2048, ECP256, Curve25519} {
		t.Run(g.String(), func(t *testing.T) { runExchange(t, g) })
	}
}

func runExchange(t *testing.T, g DHGroup) {
	psk := []byte("a long pre-shared key for both ends")
	const spii, spir = uint64(0x1111222233334444), uint64(0x5555666677778888)
	offer := []Proposal{
		ikeProposal(1, aes128, integ256, prf256, T(TransformDH, uint16(g), 0)),
		ikeProposal(2, tdes, sha1i, prf1, dh14),
	}
	ours := []Proposal{ikeProposal(1, aes256, aes128, integ256, sha1i, prf256, dh31, dh19, dh14)}

	// IKE_SA_INIT request.
	ki, err := GenerateDH(g, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ni := bytes.Repeat([]byte{0x1a}, 32)
	req := &Message{Header: Header{SPIi: spii, Exchange: IKE_SA_INIT, Flags: FlagInitiator},
		Payloads: []Payload{&SA{offer}, &KE{Group: g, Data: ki.Public()}, &Nonce{Data: ni}}}
	msg1, err := req.Encode()
	if err != nil {
		t.Fatal(err)
	}

	// The responder reads it, chooses, answers.
	in, err := Decode(msg1)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckOffer(in.Payloads[0].(*SA).Proposals, false); err != nil {
		t.Fatal(err)
	}
	chosen, err := Choose(ours, in.Payloads[0].(*SA).Proposals)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := SuiteFrom(chosen)
	if err != nil || rs.DH != g {
		t.Fatalf("responder suite %v, %v", rs, err)
	}
	kr, err := GenerateDH(g, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	nr := bytes.Repeat([]byte{0x2b}, 32)
	resp := &Message{Header: Header{SPIi: spii, SPIr: spir, Exchange: IKE_SA_INIT, Flags: FlagResponse},
		Payloads: []Payload{&SA{[]Proposal{chosen}}, &KE{Group: g, Data: kr.Public()}, &Nonce{Data: nr}}}
	msg2, err := resp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	girR, err := kr.Shared(in.Payloads[1].(*KE).Data)
	if err != nil {
		t.Fatal(err)
	}
	keysR, err := rs.DeriveIKE(rs.SKEYSEED(in.Payloads[2].(*Nonce).Data, nr, girR), in.Payloads[2].(*Nonce).Data, nr, spii, spir)
	if err != nil {
		t.Fatal(err)
	}

	// The initiator reads the answer.
	back, err := Decode(msg2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := CheckChosen(offer, back.Payloads[0].(*SA).Proposals)
	if err != nil {
		t.Fatal(err)
	}
	is, err := SuiteFrom(got)
	if err != nil {
		t.Fatal(err)
	}
	girI, err := ki.Shared(back.Payloads[1].(*KE).Data)
	if err != nil {
		t.Fatal(err)
	}
	nrI := back.Payloads[2].(*Nonce).Data
	keysI, err := is.DeriveIKE(is.SKEYSEED(ni, nrI, girI), ni, nrI, back.SPIi, back.SPIr)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keysI, keysR) {
		t.Fatal("the two sides derived different IKE SA keys")
	}

	// IKE_AUTH request, sealed by the initiator.
	idi := Identity{IDType: ID_FQDN, Data: []byte("left.example")}
	authI := PSKAuth(is.PRF, psk, SignedOctets(is.PRF, msg1, nrI, keysI.Pi, idi.Body()))
	espSPI := []byte{0xc1, 0, 0, 1}
	ts := Selectors{{EndPort: 0xffff, Start: netip.MustParseAddr("192.168.1.0"), End: netip.MustParseAddr("192.168.1.255")}}
	tsr := Selectors{{EndPort: 0xffff, Start: netip.MustParseAddr("192.168.2.0"), End: netip.MustParseAddr("192.168.2.255")}}
	espOffer := []Proposal{{Num: 1, Protocol: ProtoESP, SPI: espSPI, Transforms: []Transform{aes128, integ256, T(TransformESN, ESN_YES, 0)}}}
	outI, inI, err := is.Directions(keysI, true)
	if err != nil {
		t.Fatal(err)
	}
	msg3, err := outI.Seal(Header{SPIi: spii, SPIr: spir, Exchange: IKE_AUTH, Flags: FlagInitiator, MessageID: 1}, nil,
		[]Payload{&IDi{idi}, &Auth{Method: AuthSharedKeyMIC, Data: authI}, &SA{espOffer}, &TSi{ts}, &TSr{tsr}}, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	// The responder opens it and checks AUTH against the request it received.
	outR, inR, err := rs.Directions(keysR, false)
	if err != nil {
		t.Fatal(err)
	}
	m3, err := Decode(msg3)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := inR.Open(msg3, m3)
	if err != nil {
		t.Fatal(err)
	}
	gotID := inner[0].(*IDi).Identity
	if err := VerifyPSK(rs.PRF, psk, SignedOctets(rs.PRF, msg1, nr, keysR.Pi, gotID.Body()), inner[1].(*Auth).Data); err != nil {
		t.Fatal(err)
	}
	if err := VerifyPSK(rs.PRF, []byte("wrong key"), SignedOctets(rs.PRF, msg1, nr, keysR.Pi, gotID.Body()), inner[1].(*Auth).Data); err == nil {
		t.Fatal("AUTH verified with the wrong PSK")
	}
	childChosen, err := Choose([]Proposal{{Num: 1, Protocol: ProtoESP, Transforms: []Transform{aes256, aes128, integ256, T(TransformESN, ESN_YES, 0)}}},
		inner[2].(*SA).Proposals)
	if err != nil {
		t.Fatal(err)
	}
	childChosen.SPI = []byte{0xc2, 0, 0, 2}
	idr := Identity{IDType: ID_IPV4_ADDR, Data: []byte{203, 0, 113, 2}}
	authR := PSKAuth(rs.PRF, psk, SignedOctets(rs.PRF, msg2, ni, keysR.Pr, idr.Body()))
	msg4, err := outR.Seal(Header{SPIi: spii, SPIr: spir, Exchange: IKE_AUTH, Flags: FlagResponse, MessageID: 1}, nil,
		[]Payload{&IDr{idr}, &Auth{Method: AuthSharedKeyMIC, Data: authR}, &SA{[]Proposal{childChosen}}, &TSi{ts}, &TSr{tsr}}, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	// The initiator opens the answer, checks the responder's AUTH and the
	// CHILD SA it chose; both derive the same ESP keys.
	m4, err := Decode(msg4)
	if err != nil {
		t.Fatal(err)
	}
	inner4, err := inI.Open(msg4, m4)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyPSK(is.PRF, psk, SignedOctets(is.PRF, msg2, ni, keysI.Pr, inner4[0].(*IDr).Body()), inner4[1].(*Auth).Data); err != nil {
		t.Fatal(err)
	}
	childI, err := CheckChosen(espOffer, inner4[2].(*SA).Proposals)
	if err != nil {
		t.Fatal(err)
	}
	csI, err := SuiteFrom(childI)
	if err != nil || !csI.ESN {
		t.Fatalf("child suite %v, %v", csI, err)
	}
	csR, _ := SuiteFrom(childChosen)
	ckI, err := DeriveChild(is.PRF, keysI.D, csI, nil, ni, nrI)
	if err != nil {
		t.Fatal(err)
	}
	ckR, err := DeriveChild(rs.PRF, keysR.D, csR, nil, ni, nr)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ckI, ckR) || len(ckI.EncrI) != 16 || bytes.Equal(ckI.EncrI, ckI.EncrR) {
		t.Error("CHILD SA keys differ between the sides, or the directions share a key")
	}
}
