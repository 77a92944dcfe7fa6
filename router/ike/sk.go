package ike

import (
	"crypto/cipher"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
)

// SKCipher seals or opens Encrypted payloads in one direction of an IKE SA
// (3.14). It prints no key.
type SKCipher struct {
	encr     Encr
	integ    Integ
	block    cipher.Block
	integKey []byte
}

func (c *SKCipher) String() string { return fmt.Sprintf("SK cipher (%s, %s)", c.encr, c.integ) }

// Format keeps every verb from printing the keys.
func (c *SKCipher) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// NewSKCipher keys one direction.
func NewSKCipher(s *Suite, encrKey, integKey []byte) (*SKCipher, error) {
	b, err := s.Encr.block(encrKey)
	if err != nil {
		return nil, err
	}
	if len(integKey) != s.Integ.KeyLen {
		return nil, fmt.Errorf("ike: %s key of %d bytes, want %d", s.Integ, len(integKey), s.Integ.KeyLen)
	}
	return &SKCipher{encr: s.Encr, integ: s.Integ, block: b, integKey: append([]byte(nil), integKey...)}, nil
}

// Directions returns the cipher for what this side sends and the one for
// what it receives: the initiator sends with SK_ei/SK_ai.
func (s *Suite) Directions(k *IKEKeys, initiator bool) (out, in *SKCipher, err error) {
	ei, ai, er, ar := k.Ei, k.Ai, k.Er, k.Ar
	if !initiator {
		ei, ai, er, ar = er, ar, ei, ai
	}
	if out, err = NewSKCipher(s, ei, ai); err != nil {
		return nil, nil, err
	}
	in, err = NewSKCipher(s, er, ar)
	return out, in, err
}

// Overhead is what the SK payload adds around its plaintext at most: IV,
// a full block of padding with the pad length, ICV.
func (c *SKCipher) Overhead() int { return 2*c.encr.BlockSize() + c.integ.ICVLen }

// Seal builds a whole message: h with the unencrypted payloads outer (none
// in RFC 7296's exchanges but allowed), then an SK payload holding inner,
// its ICV over everything before it. rand supplies the IV.
func (c *SKCipher) Seal(h Header, outer, inner []Payload, rand io.Reader) ([]byte, error) {
	first, pt, err := EncodePayloads(inner)
	if err != nil {
		return nil, err
	}
	bs := c.encr.BlockSize()
	pad := bs - 1 - len(pt)%bs // plaintext, padding and pad length fill whole blocks
	data := make([]byte, bs, bs+len(pt)+pad+1+c.integ.ICVLen)
	if _, err := io.ReadFull(rand, data); err != nil {
		return nil, fmt.Errorf("ike: IV: %w", err)
	}
	data = append(data, pt...)
	data = append(data, make([]byte, pad)...)
	data = append(data, byte(pad))
	cipher.NewCBCEncrypter(c.block, data[:bs]).CryptBlocks(data[bs:], data[bs:])
	data = append(data, make([]byte, c.integ.ICVLen)...)
	m := &Message{Header: h, Payloads: append(append([]Payload(nil), outer...), &Encrypted{First: first, Data: data})}
	b, err := m.Encode()
	if err != nil {
		return nil, err
	}
	icv := len(b) - c.integ.ICVLen
	copy(b[icv:], c.integ.mac(c.integKey, b[:icv]))
	return b, nil
}

// Open checks the ICV of pkt, the datagram m was decoded from, then decrypts
// its SK payload and decodes the payloads inside. A wrong ICV is
// ErrIntegrity, checked in constant time before anything is decrypted;
// what fails to parse after it verified is an *AuthenticError.
func (c *SKCipher) Open(pkt []byte, m *Message) ([]Payload, error) {
	if len(m.Payloads) == 0 {
		return nil, errors.New("ike: message has no encrypted payload")
	}
	sk, ok := m.Payloads[len(m.Payloads)-1].(*Encrypted)
	if !ok {
		return nil, errors.New("ike: message has no encrypted payload")
	}
	if uint64(len(pkt)) != uint64(m.Length) || len(pkt) < len(sk.Data) {
		return nil, errors.New("ike: the packet is not the one the message was decoded from")
	}
	bs, icvLen := c.encr.BlockSize(), c.integ.ICVLen
	d := sk.Data
	if len(d) < bs+bs+icvLen || (len(d)-bs-icvLen)%bs != 0 {
		return nil, syntaxErr(PayloadSK, "%d bytes do not hold an IV, whole %d-byte blocks and a %d-byte ICV", len(d), bs, icvLen)
	}
	icv := len(pkt) - icvLen
	if subtle.ConstantTimeCompare(c.integ.mac(c.integKey, pkt[:icv]), pkt[icv:]) != 1 {
		return nil, ErrIntegrity
	}
	ct := d[bs : len(d)-icvLen]
	pt := make([]byte, len(ct))
	cipher.NewCBCDecrypter(c.block, d[:bs]).CryptBlocks(pt, ct)
	pad := int(pt[len(pt)-1])
	if pad+1 > len(pt) {
		return nil, authentic(syntaxErr(PayloadSK, "pad length %d in %d bytes", pad, len(pt)))
	}
	ps, err := DecodePayloads(sk.First, pt[:len(pt)-1-pad])
	if err != nil {
		return nil, authentic(err)
	}
	return ps, nil
}
