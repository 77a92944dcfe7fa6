package ike

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"fmt"
	"hash"
)

// Transform IDs this package implements (IANA IKEv2 registries).
const (
	ENCR_3DES    uint16 = 3
	ENCR_AES_CBC uint16 = 12

	PRF_HMAC_SHA1     uint16 = 2
	PRF_HMAC_SHA2_256 uint16 = 5

	AUTH_HMAC_SHA1_96      uint16 = 2
	AUTH_HMAC_SHA2_256_128 uint16 = 12

	ESN_NO  uint16 = 0
	ESN_YES uint16 = 1
)

// Encr is an encryption transform with its key length chosen.
type Encr struct {
	ID     uint16
	KeyLen int // bytes
}

func (e Encr) String() string {
	switch e.ID {
	case ENCR_AES_CBC:
		return fmt.Sprintf("AES-CBC-%d", e.KeyLen*8)
	case ENCR_3DES:
		return "3DES"
	}
	return fmt.Sprintf("encr(%d)", e.ID)
}

// BlockSize is the cipher's block, which is also its IV length (3.14).
func (e Encr) BlockSize() int {
	if e.ID == ENCR_3DES {
		return des.BlockSize
	}
	return aes.BlockSize
}

func (e Encr) block(key []byte) (cipher.Block, error) {
	if len(key) != e.KeyLen {
		return nil, fmt.Errorf("ike: %s key of %d bytes, want %d", e, len(key), e.KeyLen)
	}
	if e.ID == ENCR_3DES {
		return des.NewTripleDESCipher(key)
	}
	return aes.NewCipher(key)
}

// encrFromTransform checks the transform's ID and key length.
func encrFromTransform(t Transform) (Encr, error) {
	bits, has := t.KeyLength()
	switch t.ID {
	case ENCR_AES_CBC:
		if !has || (bits != 128 && bits != 192 && bits != 256) {
			return Encr{}, fmt.Errorf("%w: AES-CBC needs a key length of 128, 192 or 256 bits", ErrUnsupported)
		}
		return Encr{ID: t.ID, KeyLen: int(bits) / 8}, nil
	case ENCR_3DES:
		if has {
			return Encr{}, fmt.Errorf("%w: 3DES takes no key length", ErrUnsupported)
		}
		return Encr{ID: t.ID, KeyLen: 24}, nil
	}
	return Encr{}, fmt.Errorf("%w: encryption transform %d", ErrUnsupported, t.ID)
}

// Integ is an integrity transform.
type Integ struct {
	ID     uint16
	KeyLen int // bytes
	ICVLen int // truncated output, bytes
	hash   func() hash.Hash
}

func (i Integ) String() string {
	switch i.ID {
	case AUTH_HMAC_SHA1_96:
		return "HMAC-SHA1-96"
	case AUTH_HMAC_SHA2_256_128:
		return "HMAC-SHA2-256-128"
	}
	return fmt.Sprintf("integ(%d)", i.ID)
}

func integFromID(id uint16) (Integ, error) {
	switch id {
	case AUTH_HMAC_SHA1_96:
		return Integ{ID: id, KeyLen: 20, ICVLen: 12, hash: sha1.New}, nil
	case AUTH_HMAC_SHA2_256_128:
		return Integ{ID: id, KeyLen: 32, ICVLen: 16, hash: sha256.New}, nil
	}
	return Integ{}, fmt.Errorf("%w: integrity transform %d", ErrUnsupported, id)
}

// mac returns the truncated ICV over data.
func (i Integ) mac(key, data []byte) []byte {
	m := hmac.New(i.hash, key)
	m.Write(data)
	return m.Sum(nil)[:i.ICVLen]
}

// PRF is a pseudorandom function transform (HMAC-based here: its key may
// be any length, its preferred key length is its output length).
type PRF struct {
	ID   uint16
	hash func() hash.Hash
	size int
}

func (p PRF) String() string {
	switch p.ID {
	case PRF_HMAC_SHA1:
		return "PRF-HMAC-SHA1"
	case PRF_HMAC_SHA2_256:
		return "PRF-HMAC-SHA2-256"
	}
	return fmt.Sprintf("prf(%d)", p.ID)
}

// Size is the output length, and the length of SK_d, SK_pi and SK_pr.
func (p PRF) Size() int { return p.size }

func prfFromID(id uint16) (PRF, error) {
	switch id {
	case PRF_HMAC_SHA1:
		return PRF{ID: id, hash: sha1.New, size: sha1.Size}, nil
	case PRF_HMAC_SHA2_256:
		return PRF{ID: id, hash: sha256.New, size: sha256.Size}, nil
	}
	return PRF{}, fmt.Errorf("%w: PRF transform %d", ErrUnsupported, id)
}

// Apply is prf(key, data...).
func (p PRF) Apply(key []byte, data ...[]byte) []byte {
	m := hmac.New(p.hash, key)
	for _, d := range data {
		m.Write(d)
	}
	return m.Sum(nil)
}

// maxPRFPlusBlocks is prf+'s limit: the counter is one octet (2.13).
const maxPRFPlusBlocks = 255

// PlusN is prf+(K, S) cut to n bytes (RFC 7296 2.13):
// T1 = prf(K, S | 0x01), Tk = prf(K, Tk-1 | S | k).
func (p PRF) PlusN(key, seed []byte, n int) ([]byte, error) {
	if n > maxPRFPlusBlocks*p.size {
		return nil, fmt.Errorf("ike: prf+ asked for %d bytes, at most %d", n, maxPRFPlusBlocks*p.size)
	}
	out := make([]byte, 0, n+p.size)
	var t []byte
	for i := 1; len(out) < n; i++ {
		t = p.Apply(key, t, seed, []byte{byte(i)})
		out = append(out, t...)
	}
	return out[:n], nil
}
