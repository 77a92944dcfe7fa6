package ike

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// TransformType is a transform's type (3.3.2).
type TransformType uint8

const (
	TransformENCR  TransformType = 1
	TransformPRF   TransformType = 2
	TransformINTEG TransformType = 3
	TransformDH    TransformType = 4
	TransformESN   TransformType = 5
)

func (t TransformType) String() string {
	switch t {
	case TransformENCR:
		return "ENCR"
	case TransformPRF:
		return "PRF"
	case TransformINTEG:
		return "INTEG"
	case TransformDH:
		return "DH"
	case TransformESN:
		return "ESN"
	}
	return fmt.Sprintf("transform-type(%d)", uint8(t))
}

// AttrKeyLength is the one transform attribute RFC 7296 defines (3.3.5).
const AttrKeyLength = 14

// Attribute is a transform attribute: Value for the TV format, Data for TLV.
type Attribute struct {
	Type  uint16 // without the AF bit
	TV    bool
	Value uint16
	Data  []byte
}

// Transform is one transform substructure (3.3.2).
type Transform struct {
	Type  TransformType
	ID    uint16
	Attrs []Attribute
}

// KeyLength returns the Key Length attribute in bits, if present.
func (t Transform) KeyLength() (uint16, bool) {
	for _, a := range t.Attrs {
		if a.Type == AttrKeyLength && a.TV {
			return a.Value, true
		}
	}
	return 0, false
}

// T makes a transform, with a key length attribute when bits is nonzero.
func T(typ TransformType, id uint16, bits uint16) Transform {
	t := Transform{Type: typ, ID: id}
	if bits != 0 {
		t.Attrs = []Attribute{{Type: AttrKeyLength, TV: true, Value: bits}}
	}
	return t
}

func (t Transform) String() string {
	if k, ok := t.KeyLength(); ok {
		return fmt.Sprintf("%s:%d/%d", t.Type, t.ID, k)
	}
	return fmt.Sprintf("%s:%d", t.Type, t.ID)
}

// Proposal is one proposal substructure (3.3.1).
type Proposal struct {
	Num        uint8
	Protocol   ProtocolID
	SPI        []byte
	Transforms []Transform
}

func (p Proposal) String() string {
	ts := make([]string, len(p.Transforms))
	for i, t := range p.Transforms {
		ts[i] = t.String()
	}
	return fmt.Sprintf("#%d proto %d [%s]", p.Num, p.Protocol, strings.Join(ts, " "))
}

// SA is the Security Association payload (3.3).
type SA struct{ Proposals []Proposal }

func (*SA) Type() PayloadType { return PayloadSA }

const (
	maxProposals  = 64
	maxTransforms = 64
	maxAttrs      = 8
)

func (p *SA) appendBody(b []byte) ([]byte, error) {
	if len(p.Proposals) == 0 || len(p.Proposals) > maxProposals {
		return nil, fmt.Errorf("ike: %d proposals, want 1..%d", len(p.Proposals), maxProposals)
	}
	for i, pr := range p.Proposals {
		last := byte(2)
		if i+1 == len(p.Proposals) {
			last = 0
		}
		if len(pr.Transforms) > maxTransforms || len(pr.SPI) > 255 {
			return nil, fmt.Errorf("ike: proposal %d: %d transforms, SPI of %d bytes", pr.Num, len(pr.Transforms), len(pr.SPI))
		}
		start := len(b)
		b = append(b, last, 0, 0, 0, pr.Num, byte(pr.Protocol), byte(len(pr.SPI)), byte(len(pr.Transforms)))
		b = append(b, pr.SPI...)
		for j, t := range pr.Transforms {
			tl := byte(3)
			if j+1 == len(pr.Transforms) {
				tl = 0
			}
			ts := len(b)
			b = append(b, tl, 0, 0, 0, byte(t.Type), 0)
			b = binary.BigEndian.AppendUint16(b, t.ID)
			if len(t.Attrs) > maxAttrs {
				return nil, fmt.Errorf("ike: transform %s: %d attributes", t, len(t.Attrs))
			}
			for _, a := range t.Attrs {
				if a.Type&0x8000 != 0 {
					return nil, fmt.Errorf("ike: attribute type %d has the format bit set", a.Type)
				}
				if a.TV {
					b = binary.BigEndian.AppendUint16(b, a.Type|0x8000)
					b = binary.BigEndian.AppendUint16(b, a.Value)
					continue
				}
				b = binary.BigEndian.AppendUint16(b, a.Type)
				b = binary.BigEndian.AppendUint16(b, uint16(len(a.Data)))
				b = append(b, a.Data...)
			}
			if len(b)-ts > 0xffff {
				return nil, fmt.Errorf("ike: transform too long")
			}
			binary.BigEndian.PutUint16(b[ts+2:], uint16(len(b)-ts))
		}
		if len(b)-start > 0xffff {
			return nil, fmt.Errorf("ike: proposal too long")
		}
		binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	}
	return b, nil
}

func decodeSA(b []byte) (*SA, error) {
	sa := &SA{}
	for len(b) > 0 {
		if len(sa.Proposals) == maxProposals {
			return nil, syntaxErr(PayloadSA, "more than %d proposals", maxProposals)
		}
		if len(b) < 8 {
			return nil, syntaxErr(PayloadSA, "proposal header truncated")
		}
		last, n := b[0], int(binary.BigEndian.Uint16(b[2:]))
		if n < 8 || n > len(b) {
			return nil, syntaxErr(PayloadSA, "proposal length %d outside 8..%d", n, len(b))
		}
		if (last == 0) != (n == len(b)) || (last != 0 && last != 2) {
			return nil, syntaxErr(PayloadSA, "proposal 'last substructure' %d does not match its position", last)
		}
		pr, err := decodeProposal(b[:n])
		if err != nil {
			return nil, err
		}
		sa.Proposals = append(sa.Proposals, pr)
		b = b[n:]
	}
	if len(sa.Proposals) == 0 {
		return nil, syntaxErr(PayloadSA, "no proposal")
	}
	return sa, nil
}

func decodeProposal(b []byte) (Proposal, error) {
	pr := Proposal{Num: b[4], Protocol: ProtocolID(b[5])}
	spi, nt := int(b[6]), int(b[7])
	b = b[8:]
	if spi > len(b) {
		return pr, syntaxErr(PayloadSA, "proposal %d: SPI size %d beyond the proposal", pr.Num, spi)
	}
	pr.SPI, b = b[:spi], b[spi:]
	// Each transform takes 8 bytes at least: the count cannot outgrow them.
	if nt == 0 || nt*8 > len(b) {
		return pr, syntaxErr(PayloadSA, "proposal %d: %d transforms in %d bytes", pr.Num, nt, len(b))
	}
	pr.Transforms = make([]Transform, 0, nt)
	for i := range nt {
		if len(b) < 8 {
			return pr, syntaxErr(PayloadSA, "proposal %d: transform header truncated", pr.Num)
		}
		last, n := b[0], int(binary.BigEndian.Uint16(b[2:]))
		if n < 8 || n > len(b) {
			return pr, syntaxErr(PayloadSA, "proposal %d: transform length %d outside 8..%d", pr.Num, n, len(b))
		}
		if want := i+1 == nt; (last == 0) != want || (last != 0 && last != 3) {
			return pr, syntaxErr(PayloadSA, "proposal %d: transform 'last substructure' %d does not match its position", pr.Num, last)
		}
		t := Transform{Type: TransformType(b[4]), ID: binary.BigEndian.Uint16(b[6:])}
		attrs := b[8:n]
		for len(attrs) > 0 {
			if len(t.Attrs) == maxAttrs {
				return pr, syntaxErr(PayloadSA, "transform %s: more than %d attributes", t, maxAttrs)
			}
			if len(attrs) < 4 {
				return pr, syntaxErr(PayloadSA, "transform %s: attribute truncated", t)
			}
			at := binary.BigEndian.Uint16(attrs)
			v := binary.BigEndian.Uint16(attrs[2:])
			if at&0x8000 != 0 {
				t.Attrs = append(t.Attrs, Attribute{Type: at &^ 0x8000, TV: true, Value: v})
				attrs = attrs[4:]
				continue
			}
			if 4+int(v) > len(attrs) {
				return pr, syntaxErr(PayloadSA, "transform %s: attribute of %d bytes beyond the transform", t, v)
			}
			t.Attrs = append(t.Attrs, Attribute{Type: at, Data: attrs[4 : 4+int(v)]})
			attrs = attrs[4+int(v):]
		}
		pr.Transforms = append(pr.Transforms, t)
		b = b[n:]
	}
	if len(b) != 0 {
		return pr, syntaxErr(PayloadSA, "proposal %d: %d bytes after its transforms", pr.Num, len(b))
	}
	return pr, nil
}
