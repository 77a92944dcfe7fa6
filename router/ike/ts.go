package ike

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// TrafficSelector is one selector (3.13.1): an address range, a port range
// and an IP protocol (0 for any).
type TrafficSelector struct {
	IPProtocol         uint8
	StartPort, EndPort uint16
	Start, End         netip.Addr
}

func (s TrafficSelector) String() string {
	return fmt.Sprintf("%s-%s proto %d ports %d-%d", s.Start, s.End, s.IPProtocol, s.StartPort, s.EndPort)
}

// maxSelectors bounds one TS payload's list.
const maxSelectors = 64

// Selectors is the body of a TSi or TSr payload.
type Selectors []TrafficSelector

// TSi and TSr are the traffic selector payloads (3.13).
type TSi struct{ Selectors }
type TSr struct{ Selectors }

func (*TSi) Type() PayloadType                     { return PayloadTSi }
func (*TSr) Type() PayloadType                     { return PayloadTSr }
func (p *TSi) appendBody(b []byte) ([]byte, error) { return p.Selectors.append(b) }
func (p *TSr) appendBody(b []byte) ([]byte, error) { return p.Selectors.append(b) }

func (ss Selectors) append(b []byte) ([]byte, error) {
	if len(ss) == 0 || len(ss) > maxSelectors {
		return nil, fmt.Errorf("ike: %d traffic selectors, want 1..%d", len(ss), maxSelectors)
	}
	b = append(b, byte(len(ss)), 0, 0, 0)
	for _, s := range ss {
		if !s.Start.IsValid() || s.Start.Is4() != s.End.Is4() || s.Start.Zone() != "" || s.End.Zone() != "" {
			return nil, fmt.Errorf("ike: traffic selector %s: addresses of one family", s)
		}
		t, n := TS_IPV4_ADDR_RANGE, 16
		if !s.Start.Is4() {
			t, n = TS_IPV6_ADDR_RANGE, 40
		}
		b = append(b, byte(t), s.IPProtocol)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
		b = binary.BigEndian.AppendUint16(b, s.StartPort)
		b = binary.BigEndian.AppendUint16(b, s.EndPort)
		b = append(b, s.Start.AsSlice()...)
		b = append(b, s.End.AsSlice()...)
	}
	return b, nil
}

func decodeTS(t PayloadType, b []byte) (Selectors, error) {
	if len(b) < 4 {
		return nil, syntaxErr(t, "body of %d bytes, need at least 4", len(b))
	}
	n := int(b[0])
	if n == 0 || n > maxSelectors {
		return nil, syntaxErr(t, "%d selectors, want 1..%d", n, maxSelectors)
	}
	b = b[4:]
	// The smallest selector is 16 bytes: the count cannot exceed the bytes.
	if n*16 > len(b) {
		return nil, syntaxErr(t, "%d selectors in %d bytes", n, len(b))
	}
	ss := make(Selectors, 0, n)
	for range n {
		if len(b) < 8 {
			return nil, syntaxErr(t, "selector header truncated")
		}
		typ, size := TSType(b[0]), int(binary.BigEndian.Uint16(b[2:]))
		alen := 4
		switch typ {
		case TS_IPV4_ADDR_RANGE:
		case TS_IPV6_ADDR_RANGE:
			alen = 16
		default:
			return nil, syntaxErr(t, "selector type %d not supported", typ)
		}
		if size != 8+2*alen || size > len(b) {
			return nil, syntaxErr(t, "selector of type %d with length %d", typ, size)
		}
		s := TrafficSelector{IPProtocol: b[1], StartPort: binary.BigEndian.Uint16(b[4:]), EndPort: binary.BigEndian.Uint16(b[6:])}
		s.Start, _ = netip.AddrFromSlice(b[8 : 8+alen])
		s.End, _ = netip.AddrFromSlice(b[8+alen : 8+2*alen])
		ss = append(ss, s)
		b = b[size:]
	}
	if len(b) != 0 {
		return nil, syntaxErr(t, "%d bytes after the selectors", len(b))
	}
	return ss, nil
}
