package ike

import (
	"encoding/binary"
	"fmt"
)

const (
	// HeaderLen is the IKE header's length (RFC 7296 3.1).
	HeaderLen = 28
	// genericLen is a payload's generic header (3.2).
	genericLen = 4
	// MaxMessage bounds a message: IKE runs over UDP, so no datagram is
	// larger, and it is the upper bound of any allocation while decoding.
	MaxMessage = 65535
	// MaxPayloads bounds the payloads in one message (or inside one SK
	// payload); real exchanges carry around a dozen.
	MaxPayloads = 64
	// Version is IKEv2: major 2, minor 0.
	Version = 0x20
)

// Header is the IKE header (RFC 7296 3.1). NextPayload and Length are
// computed on Encode and filled in on Decode.
type Header struct {
	SPIi, SPIr  uint64
	NextPayload PayloadType
	Version     uint8 // major in the high nibble; 0x20 for IKEv2
	Exchange    ExchangeType
	Flags       Flags
	MessageID   uint32
	Length      uint32
}

// Initiator reports the I flag: the sender is the original initiator.
func (h *Header) Initiator() bool { return h.Flags&FlagInitiator != 0 }

// Response reports the R flag.
func (h *Header) Response() bool { return h.Flags&FlagResponse != 0 }

func (h *Header) encode(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, h.SPIi)
	b = binary.BigEndian.AppendUint64(b, h.SPIr)
	b = append(b, byte(h.NextPayload), h.Version, byte(h.Exchange), byte(h.Flags))
	b = binary.BigEndian.AppendUint32(b, h.MessageID)
	return binary.BigEndian.AppendUint32(b, h.Length)
}

// DecodeHeader reads the IKE header alone, checking the version and that the
// length field is the packet's length: enough to find the IKE SA before
// anything else.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderLen {
		return h, syntaxErr(PayloadNone, "message of %d bytes is shorter than the %d-byte header", len(b), HeaderLen)
	}
	h.SPIi = binary.BigEndian.Uint64(b[0:])
	h.SPIr = binary.BigEndian.Uint64(b[8:])
	h.NextPayload = PayloadType(b[16])
	h.Version = b[17]
	h.Exchange = ExchangeType(b[18])
	h.Flags = Flags(b[19])
	h.MessageID = binary.BigEndian.Uint32(b[20:])
	h.Length = binary.BigEndian.Uint32(b[24:])
	if h.Version>>4 != 2 {
		return h, &ParseError{Notify: INVALID_MAJOR_VERSION, Reason: fmt.Sprintf("major version %d, want 2", h.Version>>4)}
	}
	if len(b) > MaxMessage {
		return h, syntaxErr(PayloadNone, "message of %d bytes is longer than %d", len(b), MaxMessage)
	}
	if uint64(h.Length) != uint64(len(b)) {
		return h, syntaxErr(PayloadNone, "length field %d but the datagram holds %d bytes", h.Length, len(b))
	}
	return h, nil
}

// Message is a decoded IKE message. When the last payload is *Encrypted its
// contents are still sealed; Open them with the IKE SA's keys.
type Message struct {
	Header
	Payloads []Payload
}

// Decode parses one IKE message. The message keeps one copy of b; no other
// allocation grows with the packet beyond the bounded payload lists.
func Decode(b []byte) (*Message, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, len(b)-HeaderLen)
	copy(buf, b[HeaderLen:])
	ps, err := decodeChain(h.NextPayload, buf, true)
	if err != nil {
		return nil, err
	}
	return &Message{Header: h, Payloads: ps}, nil
}

// DecodePayloads parses a chain of payloads starting with type first, as
// found inside a decrypted SK payload. It keeps references into b.
func DecodePayloads(first PayloadType, b []byte) ([]Payload, error) {
	return decodeChain(first, b, false)
}

func decodeChain(next PayloadType, b []byte, outer bool) ([]Payload, error) {
	var ps []Payload
	for next != PayloadNone {
		if len(ps) == MaxPayloads {
			return nil, syntaxErr(PayloadNone, "more than %d payloads", MaxPayloads)
		}
		if len(b) < genericLen {
			return nil, syntaxErr(next, "%d bytes left, shorter than a payload header", len(b))
		}
		following := PayloadType(b[0])
		critical := b[1]&0x80 != 0
		n := int(binary.BigEndian.Uint16(b[2:]))
		if n < genericLen || n > len(b) {
			return nil, syntaxErr(next, "length %d outside %d..%d", n, genericLen, len(b))
		}
		body := b[genericLen:n:n]
		b = b[n:]
		if next == PayloadSK {
			if !outer {
				return nil, syntaxErr(next, "an encrypted payload inside an encrypted payload")
			}
			if len(b) != 0 {
				return nil, syntaxErr(next, "not the last payload: %d bytes follow it", len(b))
			}
			// The SK payload's Next Payload names the first payload inside it.
			return append(ps, &Encrypted{First: following, Data: body}), nil
		}
		p, err := decodeBody(next, critical, body)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
		next = following
	}
	if len(b) != 0 {
		return nil, syntaxErr(PayloadNone, "%d bytes after the last payload", len(b))
	}
	return ps, nil
}

func decodeBody(t PayloadType, critical bool, body []byte) (Payload, error) {
	switch t {
	case PayloadSA:
		return decodeSA(body)
	case PayloadKE:
		return decodeKE(body)
	case PayloadIDi:
		id, err := decodeIdentity(t, body)
		return &IDi{id}, err
	case PayloadIDr:
		id, err := decodeIdentity(t, body)
		return &IDr{id}, err
	case PayloadAUTH:
		return decodeAuth(body)
	case PayloadNonce:
		return decodeNonce(body)
	case PayloadNotify:
		return decodeNotify(body)
	case PayloadDelete:
		return decodeDelete(body)
	case PayloadVendor:
		return &VendorID{Data: body}, nil
	case PayloadTSi:
		ts, err := decodeTS(t, body)
		return &TSi{ts}, err
	case PayloadTSr:
		ts, err := decodeTS(t, body)
		return &TSr{ts}, err
	}
	if critical && !t.known() {
		return nil, &ParseError{Notify: UNSUPPORTED_CRITICAL_PAYLOAD, Payload: t, Reason: "unknown payload marked critical"}
	}
	return &Raw{T: t, Critical: critical, Body: body}, nil
}

// Encode lays out the message: the header's NextPayload and Length are
// computed (and Version set to 2.0 when left zero), the payloads chained
// in order. An *Encrypted payload must be the last.
func (m *Message) Encode() ([]byte, error) {
	b := make([]byte, 0, 256)
	if m.Version == 0 {
		m.Version = Version
	}
	m.NextPayload = PayloadNone
	if len(m.Payloads) > 0 {
		m.NextPayload = m.Payloads[0].Type()
	}
	b = m.Header.encode(b)
	b, err := appendPayloads(b, m.Payloads)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxMessage {
		return nil, fmt.Errorf("ike: message of %d bytes exceeds %d", len(b), MaxMessage)
	}
	m.Length = uint32(len(b))
	binary.BigEndian.PutUint32(b[24:], m.Length)
	return b, nil
}

// EncodePayloads lays out a chain of payloads (the plaintext of an SK
// payload) and returns it with the first payload's type.
func EncodePayloads(ps []Payload) (PayloadType, []byte, error) {
	if len(ps) == 0 {
		return PayloadNone, nil, nil
	}
	b, err := appendPayloads(nil, ps)
	return ps[0].Type(), b, err
}

func appendPayloads(b []byte, ps []Payload) ([]byte, error) {
	if len(ps) > MaxPayloads {
		return nil, fmt.Errorf("ike: %d payloads, at most %d", len(ps), MaxPayloads)
	}
	for i, p := range ps {
		next := PayloadNone
		if i+1 < len(ps) {
			next = ps[i+1].Type()
		}
		flags := byte(0)
		if e, ok := p.(*Encrypted); ok {
			if i+1 != len(ps) {
				return nil, fmt.Errorf("ike: the encrypted payload must be the last")
			}
			next = e.First
		}
		if r, ok := p.(*Raw); ok && r.Critical {
			flags = 0x80
		}
		start := len(b)
		b = append(b, byte(next), flags, 0, 0)
		var err error
		if b, err = p.appendBody(b); err != nil {
			return nil, err
		}
		n := len(b) - start
		if n > 0xffff {
			return nil, fmt.Errorf("ike: %s payload of %d bytes exceeds 65535", p.Type(), n)
		}
		binary.BigEndian.PutUint16(b[start+2:], uint16(n))
	}
	return b, nil
}
