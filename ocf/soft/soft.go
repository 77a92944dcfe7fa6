// Package soft is the Go standard library crypto as an ocf driver: the
// reference every engine is checked against and the fallback the
// dispatcher redoes failed hardware requests with.
//
// Sessions keep their cipher state (expanded key, CBC mode, HMAC) and reuse
// it for every request, so the request path does not allocate.
package soft

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"fmt"
	"hash"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
)

// Name is the driver name of Go software crypto.
const Name = "go"

// Driver is Go software crypto. The zero value is ready to use.
type Driver struct{}

// New returns the software driver.
func New() Driver { return Driver{} }

func (Driver) Name() string   { return Name }
func (Driver) Hardware() bool { return false }

// Caps lists every catalog cipher with its one key size; HMAC takes any
// key length.
func (Driver) Caps() ocf.Caps {
	caps := ocf.Caps{Ciphers: map[string][]int{}}
	for _, c := range catalog.Ciphers() {
		switch c.Kind {
		case catalog.KindCipher:
			caps.Ciphers[c.Name] = []int{c.KeySize}
		default:
			caps.Ciphers[c.Name] = nil
		}
	}
	return caps
}

// Open starts a session for c and key; the key is expanded once here.
func (Driver) Open(c *ocf.Cipher, key []byte) (ocf.Session, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil cipher", ocf.ErrUnknownCipher)
	}
	cat, err := ocf.LookupCipher(c.Name)
	if err != nil {
		return nil, err
	}
	if *cat != *c {
		return nil, fmt.Errorf("%w: %s with sizes other than the catalog's", ocf.ErrUnsupported, c.Name)
	}
	if err := ocf.CheckKey(cat, key); err != nil {
		return nil, err
	}
	s := &session{c: cat}
	switch cat.Kind {
	case catalog.KindNull:
		return s, nil
	case catalog.KindMAC:
		var h func() hash.Hash
		switch cat.Name {
		case "hmac-md5":
			h = md5.New
		case "hmac-sha1":
			h = sha1.New
		case "hmac-sha256":
			h = sha256.New
		default:
			return nil, fmt.Errorf("%w: %s", ocf.ErrUnsupported, cat.Name)
		}
		s.mac = hmac.New(h, key)
		return s, nil
	}
	var b cipher.Block
	switch cat.Name {
	case "des-cbc":
		b, err = des.NewCipher(key)
	case "des-ede3-cbc":
		b, err = des.NewTripleDESCipher(key)
	case "aes-128-cbc", "aes-192-cbc", "aes-256-cbc":
		b, err = aes.NewCipher(key)
	default:
		return nil, fmt.Errorf("%w: %s", ocf.ErrUnsupported, cat.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ocf.ErrKeySize, cat.Name, err)
	}
	s.enc, s.dec = newCBC(b)
	return s, nil
}

// ivMode is a CBC mode whose IV can be reset without building a new mode.
type ivMode interface {
	CryptBlocks(dst, src []byte)
	SetIV(iv []byte)
}

// newCBC returns CBC encrypter and decrypter over b. The standard
// library's modes have a SetIV method (crypto/tls relies on it) and use
// the platform's fastest path, so they are preferred; should a Go release
// drop the method, the small chaining code below takes over.
func newCBC(b cipher.Block) (enc, dec ivMode) {
	zero := make([]byte, b.BlockSize())
	e, eok := cipher.NewCBCEncrypter(b, zero).(ivMode)
	d, dok := cipher.NewCBCDecrypter(b, zero).(ivMode)
	if eok && dok {
		return e, d
	}
	return newChain(b, false), newChain(b, true)
}

// chain is CBC over a cipher.Block, used only when the standard modes lack
// SetIV. Its buffers live in the struct so that requests do not allocate.
type chain struct {
	b       cipher.Block
	decrypt bool
	iv      []byte
	save    []byte // the ciphertext block a decryption in place overwrites
}

func newChain(b cipher.Block, decrypt bool) *chain {
	n := b.BlockSize()
	return &chain{b: b, decrypt: decrypt, iv: make([]byte, n), save: make([]byte, n)}
}

func (c *chain) SetIV(iv []byte) { copy(c.iv, iv) }

func (c *chain) CryptBlocks(dst, src []byte) {
	n := len(c.iv)
	for i := 0; i+n <= len(src); i += n {
		in, out := src[i:i+n], dst[i:i+n]
		if c.decrypt {
			copy(c.save, in)
			c.b.Decrypt(out, in)
			for j := range out {
				out[j] ^= c.iv[j]
			}
			copy(c.iv, c.save)
			continue
		}
		for j := range out {
			out[j] = in[j] ^ c.iv[j]
		}
		c.b.Encrypt(out, out)
		copy(c.iv, out)
	}
}

type session struct {
	c      *ocf.Cipher
	enc    ivMode
	dec    ivMode
	mac    hash.Hash
	closed bool
}

func (s *session) Cipher() *ocf.Cipher { return s.c }
func (s *session) Driver() string      { return Name }

func (s *session) Close() error {
	s.closed = true
	return nil
}

// Do runs each request; a bad request gets its own error and the rest
// still run.
func (s *session) Do(reqs []ocf.Request) error {
	var first error
	for i := range reqs {
		r := &reqs[i]
		r.Err = s.do(r)
		if r.Err != nil && first == nil {
			first = r.Err
		}
	}
	return first
}

func (s *session) do(r *ocf.Request) error {
	if s.closed {
		return ocf.ErrClosed
	}
	if err := ocf.CheckRequest(s.c, r); err != nil {
		return err
	}
	if s.mac != nil {
		s.mac.Reset()
		s.mac.Write(r.Src)
		// Sum appends; Dst has room for the digest (CheckRequest), so
		// appending to Dst[:0] writes in place without allocating.
		s.mac.Sum(r.Dst[:0])
		return nil
	}
	out := r.Out()
	if len(r.Src) == 0 {
		return nil
	}
	switch {
	case s.enc == nil: // null cipher
		copy(out, r.Src)
	case r.Op == ocf.Encrypt:
		s.enc.SetIV(r.IV)
		s.enc.CryptBlocks(out, r.Src)
	default:
		s.dec.SetIV(r.IV)
		s.dec.CryptBlocks(out, r.Src)
	}
	return nil
}
