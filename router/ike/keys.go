package ike

import (
	"encoding/binary"
	"fmt"
)

// IKEKeys are an IKE SA's keys (RFC 7296 2.14). Printing them with any verb
// shows only their lengths.
type IKEKeys struct {
	D, Ai, Ar, Ei, Er, Pi, Pr []byte
}

func (k *IKEKeys) String() string {
	return fmt.Sprintf("IKE keys (SK_d %d, SK_a %d, SK_e %d, SK_p %d bytes)", len(k.D), len(k.Ai), len(k.Ei), len(k.Pi))
}

// Format keeps %x, %v, %+v and %#v from printing the fields.
func (k *IKEKeys) Format(f fmt.State, _ rune) { fmt.Fprint(f, k.String()) }

func spiBytes(spii, spir uint64) []byte {
	b := binary.BigEndian.AppendUint64(nil, spii)
	return binary.BigEndian.AppendUint64(b, spir)
}

// SKEYSEED is prf(Ni | Nr, g^ir) for a new IKE SA (2.14).
func (s *Suite) SKEYSEED(ni, nr, gir []byte) []byte {
	return s.PRF.Apply(append(append([]byte(nil), ni...), nr...), gir)
}

// RekeySKEYSEED is prf(SK_d (old), g^ir (new) | Ni | Nr) for an IKE SA that
// replaces one (2.18). old is the old SA's PRF.
func RekeySKEYSEED(old PRF, oldSKd, gir, ni, nr []byte) []byte {
	return old.Apply(oldSKd, gir, ni, nr)
}

// DeriveIKE expands SKEYSEED into the seven keys:
// prf+(SKEYSEED, Ni | Nr | SPIi | SPIr).
func (s *Suite) DeriveIKE(skeyseed, ni, nr []byte, spii, spir uint64) (*IKEKeys, error) {
	p, a, e := s.PRF.Size(), s.Integ.KeyLen, s.Encr.KeyLen
	seed := append(append(append([]byte(nil), ni...), nr...), spiBytes(spii, spir)...)
	km, err := s.PRF.PlusN(skeyseed, seed, 3*p+2*a+2*e)
	if err != nil {
		return nil, err
	}
	k := &IKEKeys{}
	for _, f := range []struct {
		dst *[]byte
		n   int
	}{{&k.D, p}, {&k.Ai, a}, {&k.Ar, a}, {&k.Ei, e}, {&k.Er, e}, {&k.Pi, p}, {&k.Pr, p}} {
		*f.dst, km = km[:f.n:f.n], km[f.n:]
	}
	return k, nil
}

// ChildKeys are one CHILD SA's keys: I for the SA carrying initiator to
// responder traffic, R the other way (2.17).
type ChildKeys struct {
	EncrI, IntegI, EncrR, IntegR []byte
}

func (k *ChildKeys) String() string {
	return fmt.Sprintf("CHILD SA keys (encr %d, integ %d bytes)", len(k.EncrI), len(k.IntegI))
}

// Format keeps every verb from printing the fields.
func (k *ChildKeys) Format(f fmt.State, _ rune) { fmt.Fprint(f, k.String()) }

// DeriveChild computes KEYMAT = prf+(SK_d, [g^ir (new) |] Ni | Nr) (2.17):
// gir is nil without PFS. child is the CHILD SA's suite, prf the IKE SA's.
// Initiator-to-responder keys come first, encryption before integrity.
func DeriveChild(prf PRF, skd []byte, child *Suite, gir, ni, nr []byte) (*ChildKeys, error) {
	e, a := child.Encr.KeyLen, child.Integ.KeyLen
	seed := append(append(append([]byte(nil), gir...), ni...), nr...)
	km, err := prf.PlusN(skd, seed, 2*(e+a))
	if err != nil {
		return nil, err
	}
	return &ChildKeys{EncrI: km[:e:e], IntegI: km[e : e+a : e+a], EncrR: km[e+a : 2*e+a : 2*e+a], IntegR: km[2*e+a:]}, nil
}
