package ike

import (
	"crypto/ecdh"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"math/big"
)

// DHGroup is a Diffie-Hellman group number (transform type 4).
type DHGroup uint16

const (
	MODP2048   DHGroup = 14 // RFC 3526
	ECP256     DHGroup = 19 // RFC 5903
	Curve25519 DHGroup = 31 // RFC 8031
)

func (g DHGroup) String() string {
	switch g {
	case MODP2048:
		return "MODP-2048"
	case ECP256:
		return "ECP-256"
	case Curve25519:
		return "Curve25519"
	}
	return fmt.Sprintf("dh-group(%d)", uint16(g))
}

// PublicLen is the KE payload's data length for the group.
func (g DHGroup) PublicLen() int {
	switch g {
	case MODP2048:
		return 256
	case ECP256:
		return 64
	case Curve25519:
		return 32
	}
	return 0
}

// modp2048 is RFC 3526's 2048-bit MODP group, generator 2.
var modp2048, _ = new(big.Int).SetString(
	"FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74"+
		"020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437"+
		"4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"+
		"EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05"+
		"98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB"+
		"9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"+
		"E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718"+
		"3995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF", 16)

// modpExponentBits is the private exponent's size: at least twice the
// group's 112-bit strength (SP 800-56A 5.6.1.1.1), far cheaper than a full
// 2048-bit exponent on a 266 MHz board.
const modpExponentBits = 256

// DHKey is one side's ephemeral Diffie-Hellman key. Its String hides the
// private part.
type DHKey struct {
	group DHGroup
	x     *big.Int // MODP private exponent
	ec    *ecdh.PrivateKey
	pub   []byte
}

func (k *DHKey) String() string { return fmt.Sprintf("DH key (%s)", k.group) }

// Format keeps every verb (%#v too) from printing the private part.
func (k *DHKey) Format(f fmt.State, _ rune) { fmt.Fprint(f, k.String()) }

// Group is the key's group.
func (k *DHKey) Group() DHGroup { return k.group }

// Public is the KE payload's data: g^x padded to the modulus (MODP), x||y
// (ECP, RFC 5903 7), or the 32-byte u-coordinate (RFC 8031).
func (k *DHKey) Public() []byte { return append([]byte(nil), k.pub...) }

// GenerateDH makes an ephemeral key in the group.
func GenerateDH(g DHGroup, rand io.Reader) (*DHKey, error) {
	k := &DHKey{group: g}
	switch g {
	case MODP2048:
		buf := make([]byte, modpExponentBits/8)
		for {
			if _, err := io.ReadFull(rand, buf); err != nil {
				return nil, fmt.Errorf("ike: random exponent: %w", err)
			}
			k.x = new(big.Int).SetBytes(buf)
			if k.x.BitLen() > 1 {
				break
			}
		}
		k.pub = new(big.Int).Exp(big.NewInt(2), k.x, modp2048).FillBytes(make([]byte, 256))
		return k, nil
	case ECP256, Curve25519:
		var err error
		if k.ec, err = curve(g).GenerateKey(rand); err != nil {
			return nil, fmt.Errorf("ike: %s key: %w", g, err)
		}
		k.pub = k.ec.PublicKey().Bytes()
		if g == ECP256 {
			k.pub = k.pub[1:] // drop SEC 1's 0x04: RFC 5903 sends x||y
		}
		return k, nil
	}
	return nil, fmt.Errorf("%w: Diffie-Hellman group %d", ErrUnsupported, uint16(g))
}

func curve(g DHGroup) ecdh.Curve {
	if g == ECP256 {
		return ecdh.P256()
	}
	return ecdh.X25519()
}

// ErrBadPublic is a peer's KE data that fails the group's checks.
var ErrBadPublic = errors.New("ike: the peer's Diffie-Hellman public value is invalid")

// Shared computes g^ir from the peer's KE data, after checking it: for
// MODP 1 < y < p-1 and y^q = 1 (SP 800-56A 5.6.2.3.1), for ECP a point on
// the curve, for Curve25519 a nonzero result (RFC 8031 2.3).
func (k *DHKey) Shared(peer []byte) ([]byte, error) {
	if len(peer) != k.group.PublicLen() {
		return nil, fmt.Errorf("%w: %d bytes for %s, want %d", ErrBadPublic, len(peer), k.group, k.group.PublicLen())
	}
	switch k.group {
	case MODP2048:
		y := new(big.Int).SetBytes(peer)
		pm1 := new(big.Int).Sub(modp2048, big.NewInt(1))
		if y.Cmp(big.NewInt(1)) <= 0 || y.Cmp(pm1) >= 0 {
			return nil, fmt.Errorf("%w: outside 2..p-2", ErrBadPublic)
		}
		q := new(big.Int).Rsh(modp2048, 1)
		if new(big.Int).Exp(y, q, modp2048).Cmp(big.NewInt(1)) != 0 {
			return nil, fmt.Errorf("%w: not in the prime-order subgroup", ErrBadPublic)
		}
		return new(big.Int).Exp(y, k.x, modp2048).FillBytes(make([]byte, 256)), nil
	case ECP256, Curve25519:
		in := peer
		if k.group == ECP256 {
			in = append([]byte{4}, peer...)
		}
		pub, err := curve(k.group).NewPublicKey(in)
		if err != nil {
			return nil, fmt.Errorf("%w: not a point of %s", ErrBadPublic, k.group)
		}
		s, err := k.ec.ECDH(pub)
		if err != nil {
			return nil, fmt.Errorf("%w: %s rejects it", ErrBadPublic, k.group)
		}
		if subtle.ConstantTimeCompare(s, make([]byte, len(s))) == 1 {
			return nil, fmt.Errorf("%w: all-zero shared secret", ErrBadPublic)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%w: Diffie-Hellman group %d", ErrUnsupported, uint16(k.group))
}

// dhFromPrivate builds a key from known private bytes, for the published
// test vectors.
func dhFromPrivate(g DHGroup, priv []byte) (*DHKey, error) {
	k := &DHKey{group: g}
	switch g {
	case MODP2048:
		k.x = new(big.Int).SetBytes(priv)
		k.pub = new(big.Int).Exp(big.NewInt(2), k.x, modp2048).FillBytes(make([]byte, 256))
		return k, nil
	case ECP256, Curve25519:
		var err error
		if k.ec, err = curve(g).NewPrivateKey(priv); err != nil {
			return nil, err
		}
		k.pub = k.ec.PublicKey().Bytes()
		if g == ECP256 {
			k.pub = k.pub[1:]
		}
		return k, nil
	}
	return nil, ErrUnsupported
}
