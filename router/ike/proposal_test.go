package ike

import (
	"errors"
	"reflect"
	"testing"
)

func ikeProposal(num uint8, ts ...Transform) Proposal {
	return Proposal{Num: num, Protocol: ProtoIKE, Transforms: ts}
}

var (
	aes256   = T(TransformENCR, ENCR_AES_CBC, 256)
	aes128   = T(TransformENCR, ENCR_AES_CBC, 128)
	tdes     = T(TransformENCR, ENCR_3DES, 0)
	integ256 = T(TransformINTEG, AUTH_HMAC_SHA2_256_128, 0)
	sha1i    = T(TransformINTEG, AUTH_HMAC_SHA1_96, 0)
	prf256   = T(TransformPRF, PRF_HMAC_SHA2_256, 0)
	prf1     = T(TransformPRF, PRF_HMAC_SHA1, 0)
	dh31     = T(TransformDH, uint16(Curve25519), 0)
	dh19     = T(TransformDH, uint16(ECP256), 0)
	dh14     = T(TransformDH, uint16(MODP2048), 0)
)

func TestChooseOurPreference(t *testing.T) {
	ours := []Proposal{ikeProposal(1, aes256, aes128, integ256, sha1i, prf256, prf1, dh31, dh19, dh14)}
	// The peer lists AES-128 first and offers SHA-1 before SHA-256: we pick
	// by our order, from what the peer offers, and answer with its number.
	theirs := []Proposal{
		ikeProposal(1, tdes, sha1i, prf1, dh14),
		ikeProposal(2, aes128, aes256, sha1i, integ256, prf1, prf256, dh14, dh19),
	}
	got, err := Choose(ours, theirs)
	if err != nil {
		t.Fatal(err)
	}
	want := ikeProposal(2, aes256, integ256, prf256, dh19)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chose %v, want %v", got, want)
	}
	if _, err := CheckChosen(theirs, []Proposal{got}); err != nil {
		t.Errorf("the initiator refuses a valid answer: %v", err)
	}
	s, err := SuiteFrom(got)
	if err != nil || s.String() != "AES-CBC-256/HMAC-SHA2-256-128/PRF-HMAC-SHA2-256/ECP-256" {
		t.Errorf("suite %v, %v", s, err)
	}
}

func TestChooseKeyLengths(t *testing.T) {
	ours := []Proposal{ikeProposal(1, aes256, integ256, prf256, dh19)}
	// AES at another key length, or with no key length, is another transform.
	for _, enc := range []Transform{aes128, T(TransformENCR, ENCR_AES_CBC, 0), T(TransformENCR, ENCR_AES_CBC, 192)} {
		if _, err := Choose(ours, []Proposal{ikeProposal(1, enc, integ256, prf256, dh19)}); !errors.Is(err, ErrNoProposal) {
			t.Errorf("peer offers %v: %v, want ErrNoProposal", enc, err)
		}
	}
	// An extra attribute we do not know makes the transform unacceptable.
	odd := aes256
	odd.Attrs = append(append([]Attribute(nil), odd.Attrs...), Attribute{Type: 99, TV: true, Value: 1})
	if _, err := Choose(ours, []Proposal{ikeProposal(1, odd, integ256, prf256, dh19)}); !errors.Is(err, ErrNoProposal) {
		t.Errorf("unknown attribute: %v, want ErrNoProposal", err)
	}
}

func TestChooseTransformTypes(t *testing.T) {
	esp := func(num uint8, ts ...Transform) Proposal {
		return Proposal{Num: num, Protocol: ProtoESP, SPI: []byte{1, 2, 3, 4}, Transforms: ts}
	}
	esnYes, esnNo := T(TransformESN, ESN_YES, 0), T(TransformESN, ESN_NO, 0)
	none := T(TransformDH, 0, 0)
	// Without PFS the peer sends no DH: fine when we list NONE.
	ours := []Proposal{esp(1, aes128, integ256, dh19, none, esnYes, esnNo)}
	got, err := Choose(ours, []Proposal{esp(1, aes128, integ256, esnNo)})
	if err != nil || !reflect.DeepEqual(got.Transforms, []Transform{aes128, integ256, esnNo}) || string(got.SPI) != "\x01\x02\x03\x04" {
		t.Errorf("no-PFS peer: %v, %v", got, err)
	}
	// We require PFS (no NONE): a peer without DH is refused.
	if _, err := Choose([]Proposal{esp(1, aes128, integ256, dh19, esnNo)}, []Proposal{esp(1, aes128, integ256, esnNo)}); !errors.Is(err, ErrNoProposal) {
		t.Errorf("PFS required, peer has none: %v", err)
	}
	// The peer sends a type we do not list (ESN): we cannot choose for it.
	if _, err := Choose([]Proposal{esp(1, aes128, integ256)}, []Proposal{esp(1, aes128, integ256, esnYes)}); !errors.Is(err, ErrNoProposal) {
		t.Errorf("peer has ESN, we list none: %v", err)
	}
	// Another protocol never matches.
	if _, err := Choose(ours, []Proposal{{Num: 1, Protocol: ProtoAH, Transforms: []Transform{integ256, esnNo}}}); !errors.Is(err, ErrNoProposal) {
		t.Errorf("AH proposal: %v", err)
	}
}

func TestCheckChosen(t *testing.T) {
	offered := []Proposal{ikeProposal(1, aes256, aes128, integ256, prf256, dh19, dh14)}
	for name, answer := range map[string][]Proposal{
		"two proposals":      {ikeProposal(1, aes256, integ256, prf256, dh19), ikeProposal(1, aes256, integ256, prf256, dh19)},
		"unknown number":     {ikeProposal(2, aes256, integ256, prf256, dh19)},
		"not offered":        {ikeProposal(1, tdes, integ256, prf256, dh19)},
		"two of a type":      {ikeProposal(1, aes256, aes128, integ256, prf256, dh19)},
		"a type missing":     {ikeProposal(1, aes256, integ256, dh19)},
		"another key length": {ikeProposal(1, T(TransformENCR, ENCR_AES_CBC, 192), integ256, prf256, dh19)},
	} {
		if _, err := CheckChosen(offered, answer); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSuiteFromRejects(t *testing.T) {
	for name, p := range map[string]Proposal{
		"AES without key length": ikeProposal(1, T(TransformENCR, ENCR_AES_CBC, 0), integ256, prf256, dh19),
		"3DES with key length":   ikeProposal(1, T(TransformENCR, ENCR_3DES, 192), integ256, prf256, dh19),
		"unknown integrity":      ikeProposal(1, aes128, T(TransformINTEG, 5, 0), prf256, dh19),
		"unknown group":          ikeProposal(1, aes128, integ256, prf256, T(TransformDH, 2, 0)),
		"IKE without DH":         ikeProposal(1, aes128, integ256, prf256),
		"two ENCR":               ikeProposal(1, aes128, aes256, integ256, prf256, dh19),
	} {
		if _, err := SuiteFrom(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckOffer(t *testing.T) {
	esp := Proposal{Num: 1, Protocol: ProtoESP, SPI: []byte{1, 2, 3, 4}, Transforms: []Transform{aes128, integ256}}
	esp2 := esp
	esp2.Num = 2
	if err := CheckOffer([]Proposal{esp, esp2}, false); err != nil {
		t.Errorf("valid ESP offer: %v", err)
	}
	if err := CheckOffer([]Proposal{ikeProposal(1, aes128, integ256, prf256, dh19)}, false); err != nil {
		t.Errorf("valid IKE offer: %v", err)
	}
	rekey := ikeProposal(1, aes128, integ256, prf256, dh19)
	rekey.SPI = make([]byte, 8)
	if err := CheckOffer([]Proposal{rekey}, true); err != nil {
		t.Errorf("valid IKE rekey offer: %v", err)
	}
	shortSPI := esp
	shortSPI.SPI = []byte{1}
	for name, c := range map[string]struct {
		ps    []Proposal
		rekey bool
	}{
		"none":                  {nil, false},
		"starts at 2":           {[]Proposal{esp2}, false},
		"numbers repeat":        {[]Proposal{esp, esp}, false},
		"ESP SPI of 1 byte":     {[]Proposal{shortSPI}, false},
		"new IKE SA with SPI":   {[]Proposal{rekey}, false},
		"IKE rekey without SPI": {[]Proposal{ikeProposal(1, aes128, integ256, prf256, dh19)}, true},
		"no transform":          {[]Proposal{{Num: 1, Protocol: ProtoIKE}}, false},
	} {
		if err := CheckOffer(c.ps, c.rekey); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
