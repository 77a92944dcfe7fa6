package ike

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Payload is one decoded payload. appendBody writes what follows the
// generic payload header.
type Payload interface {
	Type() PayloadType
	appendBody(b []byte) ([]byte, error)
}

// KE is the Key Exchange payload (3.4).
type KE struct {
	Group DHGroup
	Data  []byte
}

func (*KE) Type() PayloadType { return PayloadKE }
func (p *KE) appendBody(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, uint16(p.Group))
	return append(append(b, 0, 0), p.Data...), nil
}
func (p *KE) String() string { return fmt.Sprintf("KE(group %d, %d bytes)", p.Group, len(p.Data)) }

func decodeKE(b []byte) (*KE, error) {
	if len(b) < 4 {
		return nil, syntaxErr(PayloadKE, "body of %d bytes, need at least 4", len(b))
	}
	return &KE{Group: DHGroup(binary.BigEndian.Uint16(b)), Data: b[4:]}, nil
}

// Identity is the body of an IDi or IDr payload (3.5).
type Identity struct {
	IDType IDType
	Data   []byte
}

// Body is the payload after its generic header, the RestOfIDPayload that
// PSK AUTH signs (2.15).
func (id Identity) Body() []byte {
	return append([]byte{byte(id.IDType), 0, 0, 0}, id.Data...)
}

// AddrIdentity is an address as an ID payload: ID_IPV4_ADDR or, for an
// IPv6 address, ID_IPV6_ADDR (RFC 7296 3.5).
func AddrIdentity(a netip.Addr) Identity {
	a = a.Unmap()
	if a.Is6() {
		return Identity{IDType: ID_IPV6_ADDR, Data: a.AsSlice()}
	}
	return Identity{IDType: ID_IPV4_ADDR, Data: a.AsSlice()}
}

func (id Identity) String() string {
	switch id.IDType {
	case ID_IPV4_ADDR, ID_IPV6_ADDR:
		if a, ok := netip.AddrFromSlice(id.Data); ok {
			return a.String()
		}
	case ID_FQDN, ID_RFC822_ADDR:
		return fmt.Sprintf("%q", id.Data)
	case ID_KEY_ID:
		return fmt.Sprintf("keyid:%x", id.Data)
	}
	return fmt.Sprintf("id type %d (%d bytes)", id.IDType, len(id.Data))
}

func decodeIdentity(t PayloadType, b []byte) (Identity, error) {
	if len(b) < 5 {
		return Identity{}, syntaxErr(t, "body of %d bytes, need at least 5", len(b))
	}
	id := Identity{IDType: IDType(b[0]), Data: b[4:]}
	switch {
	case id.IDType == ID_IPV4_ADDR && len(id.Data) != 4:
		return id, syntaxErr(t, "ID_IPV4_ADDR of %d bytes, want 4", len(id.Data))
	case id.IDType == ID_IPV6_ADDR && len(id.Data) != 16:
		return id, syntaxErr(t, "ID_IPV6_ADDR of %d bytes, want 16", len(id.Data))
	}
	return id, nil
}

// IDi is the initiator's identification; IDr the responder's.
type IDi struct{ Identity }
type IDr struct{ Identity }

func (*IDi) Type() PayloadType { return PayloadIDi }
func (*IDr) Type() PayloadType { return PayloadIDr }
func (p *IDi) appendBody(b []byte) ([]byte, error) {
	return append(b, p.Body()...), nil
}
func (p *IDr) appendBody(b []byte) ([]byte, error) {
	return append(b, p.Body()...), nil
}

// Auth is the Authentication payload (3.8). Its data is not printed.
type Auth struct {
	Method AuthMethod
	Data   []byte
}

func (*Auth) Type() PayloadType { return PayloadAUTH }
func (p *Auth) appendBody(b []byte) ([]byte, error) {
	return append(append(b, byte(p.Method), 0, 0, 0), p.Data...), nil
}
func (p *Auth) String() string {
	return fmt.Sprintf("AUTH(method %d, %d bytes)", p.Method, len(p.Data))
}

// Format keeps every verb from printing the data.
func (p *Auth) Format(f fmt.State, _ rune) { fmt.Fprint(f, p.String()) }

func decodeAuth(b []byte) (*Auth, error) {
	if len(b) < 5 {
		return nil, syntaxErr(PayloadAUTH, "body of %d bytes, need at least 5", len(b))
	}
	return &Auth{Method: AuthMethod(b[0]), Data: b[4:]}, nil
}

// Nonce bounds (3.9).
const (
	MinNonce = 16
	MaxNonce = 256
)

// Nonce is the Ni or Nr payload; its data is not printed.
type Nonce struct{ Data []byte }

func (*Nonce) Type() PayloadType { return PayloadNonce }
func (p *Nonce) appendBody(b []byte) ([]byte, error) {
	if len(p.Data) < MinNonce || len(p.Data) > MaxNonce {
		return nil, fmt.Errorf("ike: nonce of %d bytes, want %d..%d", len(p.Data), MinNonce, MaxNonce)
	}
	return append(b, p.Data...), nil
}
func (p *Nonce) String() string { return fmt.Sprintf("Nonce(%d bytes)", len(p.Data)) }

// Format keeps every verb from printing the nonce, which keys derive from.
func (p *Nonce) Format(f fmt.State, _ rune) { fmt.Fprint(f, p.String()) }

func decodeNonce(b []byte) (*Nonce, error) {
	if len(b) < MinNonce || len(b) > MaxNonce {
		return nil, syntaxErr(PayloadNonce, "nonce of %d bytes, want %d..%d", len(b), MinNonce, MaxNonce)
	}
	return &Nonce{Data: b}, nil
}

// Notify is the Notify payload (3.10).
type Notify struct {
	Protocol ProtocolID // 0 when no SPI
	SPI      []byte
	Notify   NotifyType
	Data     []byte
}

func (*Notify) Type() PayloadType { return PayloadNotify }
func (p *Notify) appendBody(b []byte) ([]byte, error) {
	if len(p.SPI) > 255 {
		return nil, fmt.Errorf("ike: notify SPI of %d bytes", len(p.SPI))
	}
	b = append(b, byte(p.Protocol), byte(len(p.SPI)))
	b = binary.BigEndian.AppendUint16(b, uint16(p.Notify))
	return append(append(b, p.SPI...), p.Data...), nil
}
func (p *Notify) String() string { return fmt.Sprintf("N(%s)", p.Notify) }

// InvalidKE is the INVALID_KE_PAYLOAD answer naming the group we want
// (RFC 7296 1.2).
func InvalidKE(g DHGroup) *Notify {
	return &Notify{Notify: INVALID_KE_PAYLOAD, Data: []byte{byte(g >> 8), byte(g)}}
}

// Group reads the group an INVALID_KE_PAYLOAD asks for.
func (p *Notify) Group() (DHGroup, error) {
	if p.Notify != INVALID_KE_PAYLOAD || len(p.Data) != 2 {
		return 0, syntaxErr(PayloadNotify, "%s with %d bytes of data is not INVALID_KE_PAYLOAD's group", p.Notify, len(p.Data))
	}
	return DHGroup(binary.BigEndian.Uint16(p.Data)), nil
}

// MaxCookie bounds a COOKIE notification's data (RFC 7296 2.6: 1..64 bytes).
const MaxCookie = 64

// Cookie reads a COOKIE notification's data.
func (p *Notify) Cookie() ([]byte, error) {
	if p.Notify != COOKIE || len(p.Data) == 0 || len(p.Data) > MaxCookie {
		return nil, syntaxErr(PayloadNotify, "%s with %d bytes of data is not a COOKIE of 1..%d bytes", p.Notify, len(p.Data), MaxCookie)
	}
	return p.Data, nil
}

func decodeNotify(b []byte) (*Notify, error) {
	if len(b) < 4 {
		return nil, syntaxErr(PayloadNotify, "body of %d bytes, need at least 4", len(b))
	}
	spi := int(b[1])
	if 4+spi > len(b) {
		return nil, syntaxErr(PayloadNotify, "SPI size %d beyond the payload", spi)
	}
	return &Notify{Protocol: ProtocolID(b[0]), Notify: NotifyType(binary.BigEndian.Uint16(b[2:])),
		SPI: b[4 : 4+spi], Data: b[4+spi:]}, nil
}

// Delete is the Delete payload (3.11): no SPIs for the IKE SA, 4-byte SPIs
// for ESP and AH.
type Delete struct {
	Protocol ProtocolID
	SPISize  uint8
	SPIs     [][]byte
}

// maxDeleteSPIs bounds the SPI list: a slice header per SPI must not
// outweigh the packet.
const maxDeleteSPIs = 1024

func (*Delete) Type() PayloadType { return PayloadDelete }
func (p *Delete) appendBody(b []byte) ([]byte, error) {
	if len(p.SPIs) > maxDeleteSPIs {
		return nil, fmt.Errorf("ike: %d SPIs in a delete, at most %d", len(p.SPIs), maxDeleteSPIs)
	}
	b = append(b, byte(p.Protocol), p.SPISize)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.SPIs)))
	for _, s := range p.SPIs {
		if len(s) != int(p.SPISize) {
			return nil, fmt.Errorf("ike: delete SPI of %d bytes, SPI size %d", len(s), p.SPISize)
		}
		b = append(b, s...)
	}
	return b, nil
}

func decodeDelete(b []byte) (*Delete, error) {
	if len(b) < 4 {
		return nil, syntaxErr(PayloadDelete, "body of %d bytes, need at least 4", len(b))
	}
	d := &Delete{Protocol: ProtocolID(b[0]), SPISize: b[1]}
	n := int(binary.BigEndian.Uint16(b[2:]))
	rest := b[4:]
	if n*int(d.SPISize) != len(rest) {
		return nil, syntaxErr(PayloadDelete, "%d SPIs of %d bytes in %d bytes", n, d.SPISize, len(rest))
	}
	if (d.SPISize != 0 && d.SPISize != 4 && d.SPISize != 8) || n > maxDeleteSPIs || (d.SPISize == 0 && n != 0) {
		return nil, syntaxErr(PayloadDelete, "%d SPIs of size %d", n, d.SPISize)
	}
	if n > 0 {
		d.SPIs = make([][]byte, n)
		for i := range d.SPIs {
			d.SPIs[i] = rest[i*int(d.SPISize) : (i+1)*int(d.SPISize)]
		}
	}
	return d, nil
}

// VendorID is a Vendor ID payload (3.12): kept, otherwise ignored.
type VendorID struct{ Data []byte }

func (*VendorID) Type() PayloadType { return PayloadVendor }
func (p *VendorID) appendBody(b []byte) ([]byte, error) {
	return append(b, p.Data...), nil
}

// Raw is a payload this package does not interpret (CERT, CP, EAP, an
// unknown non-critical one): kept as bytes.
type Raw struct {
	T        PayloadType
	Critical bool
	Body     []byte
}

func (p *Raw) Type() PayloadType { return p.T }
func (p *Raw) appendBody(b []byte) ([]byte, error) {
	return append(b, p.Body...), nil
}

// Encrypted is the Encrypted and Authenticated payload (3.14) as it travels:
// IV, ciphertext and ICV in Data, First naming the first payload inside.
type Encrypted struct {
	First PayloadType
	Data  []byte
}

func (*Encrypted) Type() PayloadType { return PayloadSK }
func (p *Encrypted) appendBody(b []byte) ([]byte, error) {
	return append(b, p.Data...), nil
}
func (p *Encrypted) String() string { return fmt.Sprintf("SK(%d bytes)", len(p.Data)) }
