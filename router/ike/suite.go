package ike

import "fmt"

// Suite is a negotiated set of algorithms. For an IKE SA all of Encr, Integ,
// PRF and DH are set; for a CHILD SA (ESP) Encr and Integ, with DH only
// under PFS and ESN when the proposal chose extended sequence numbers.
type Suite struct {
	Encr  Encr
	Integ Integ
	PRF   PRF
	DH    DHGroup
	ESN   bool
}

func (s *Suite) String() string {
	str := s.Encr.String() + "/" + s.Integ.String()
	if s.PRF.ID != 0 {
		str += "/" + s.PRF.String()
	}
	if s.DH != 0 {
		str += "/" + s.DH.String()
	}
	if s.ESN {
		str += "/ESN"
	}
	return str
}

// SuiteFrom reads a chosen proposal: exactly one transform of each type
// present (3.3.6), each one this package implements.
func SuiteFrom(p Proposal) (*Suite, error) {
	s := &Suite{}
	seen := map[TransformType]bool{}
	for _, t := range p.Transforms {
		if seen[t.Type] {
			return nil, fmt.Errorf("ike: chosen proposal has two %s transforms", t.Type)
		}
		seen[t.Type] = true
		for _, a := range t.Attrs {
			if a.Type != AttrKeyLength || !a.TV {
				return nil, fmt.Errorf("%w: transform %s has attribute %d", ErrUnsupported, t, a.Type)
			}
		}
		var err error
		switch t.Type {
		case TransformENCR:
			s.Encr, err = encrFromTransform(t)
		case TransformINTEG:
			s.Integ, err = integFromID(t.ID)
		case TransformPRF:
			s.PRF, err = prfFromID(t.ID)
		case TransformDH:
			if t.ID != 0 { // NONE: no PFS
				if DHGroup(t.ID).PublicLen() == 0 {
					err = fmt.Errorf("%w: Diffie-Hellman group %d", ErrUnsupported, t.ID)
				}
				s.DH = DHGroup(t.ID)
			}
		case TransformESN:
			if t.ID > ESN_YES {
				err = fmt.Errorf("%w: ESN transform %d", ErrUnsupported, t.ID)
			}
			s.ESN = t.ID == ESN_YES
		default:
			err = fmt.Errorf("%w: transform type %d", ErrUnsupported, t.Type)
		}
		if err != nil {
			return nil, err
		}
	}
	if !seen[TransformENCR] || !seen[TransformINTEG] {
		return nil, fmt.Errorf("ike: chosen proposal lacks an encryption or integrity transform")
	}
	if p.Protocol == ProtoIKE && (!seen[TransformPRF] || s.DH == 0) {
		return nil, fmt.Errorf("ike: chosen IKE proposal lacks a PRF or a Diffie-Hellman group")
	}
	return s, nil
}
