// Package ocf is the crypto framework of the firmware: one API through which
// self-tests, benchmarks and users reach every engine (Go software, the
// kernel crypto API over AF_ALG, OCF-style /dev/crypto), plus a dispatcher
// that picks an engine per request.
//
// A Driver opens Sessions for a cipher and key. A Session processes batches
// of Requests so that drivers can amortise per-request cost; errors are
// values, and nothing panics on bad sizes, keys or IVs.
package ocf

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// Cipher is the catalog's cipher description (key, IV and block sizes).
type Cipher = catalog.Cipher

// LookupCipher finds a catalog cipher by its OpenSSL-style name.
func LookupCipher(name string) (*Cipher, error) {
	c, ok := catalog.LookupCipher(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q (known: %v)", ErrUnknownCipher, name, catalog.CipherNames())
	}
	return c, nil
}

// Op is what a request asks for.
type Op uint8

const (
	Encrypt Op = iota + 1
	Decrypt
	MAC // compute a MAC over Src into Dst (DigestSize bytes)
)

func (o Op) String() string {
	switch o {
	case Encrypt:
		return "encrypt"
	case Decrypt:
		return "decrypt"
	case MAC:
		return "mac"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Request is one unit of work. For Encrypt and Decrypt, Dst receives
// len(Src) bytes; Dst may be Src itself (in place) or nil, which means in
// place. For MAC, Dst receives DigestSize bytes. IV is per request and must
// be IVSize bytes for ciphers that have one. Err is set per request by
// Session.Do.
type Request struct {
	Op  Op
	IV  []byte
	Src []byte
	Dst []byte
	Err error
}

// Caps describes what a driver can do.
type Caps struct {
	// Ciphers maps a cipher name to the key sizes (bytes) the driver
	// accepts for it. For MACs an empty list means any key length.
	Ciphers map[string][]int
	// MaxRequest is the largest Src in bytes one request may carry; 0 means
	// no limit.
	MaxRequest int
}

// Supports reports whether caps cover cipher c with a key of keyLen bytes.
func (c Caps) Supports(cipher string, keyLen int) bool {
	sizes, ok := c.Ciphers[cipher]
	if !ok {
		return false
	}
	if len(sizes) == 0 {
		return true
	}
	for _, s := range sizes {
		if s == keyLen {
			return true
		}
	}
	return false
}

// Driver is one crypto engine as the framework sees it.
type Driver interface {
	// Name identifies the driver (for kernel engines the kernel driver
	// name, e.g. "cbc-aes-geode"; for Go software "go").
	Name() string
	// Hardware is true for engines that offload work from the CPU.
	Hardware() bool
	Caps() Caps
	// Open starts a session for cipher c with key. The driver copies key.
	Open(c *Cipher, key []byte) (Session, error)
}

// Session is an open cipher+key on one driver. A session is not safe for
// concurrent use; open one per goroutine.
type Session interface {
	Cipher() *Cipher
	// Driver is the name of the implementation actually serving the
	// session (may be more specific than the Driver's Name).
	Driver() string
	// Do processes reqs, setting each request's Err. It returns the first
	// request error, or an error that affected the whole batch. Requests
	// in one batch must not depend on each other's output: drivers may
	// run them in any order or in parallel (the dispatcher splits a batch
	// between an engine and software).
	Do(reqs []Request) error
	Close() error
}

// Errors callers can test for with errors.Is.
var (
	ErrUnknownCipher = errors.New("ocf: unknown cipher")
	ErrUnsupported   = errors.New("ocf: not supported by this driver")
	ErrKeySize       = errors.New("ocf: bad key size")
	ErrIVSize        = errors.New("ocf: bad IV size")
	ErrLength        = errors.New("ocf: bad data length")
	ErrOp            = errors.New("ocf: bad operation for this cipher")
	ErrClosed        = errors.New("ocf: session closed")
	ErrTooLarge      = errors.New("ocf: request larger than the driver accepts")
	ErrTimeout       = errors.New("ocf: request timed out")
)

// CheckKey validates key length for c against the catalog. HMAC keys may
// have any length.
func CheckKey(c *Cipher, key []byte) error {
	switch c.Kind {
	case catalog.KindCipher:
		if len(key) != c.KeySize {
			return fmt.Errorf("%w: %s needs a %d-byte key, got %d", ErrKeySize, c.Name, c.KeySize, len(key))
		}
	case catalog.KindNull:
		// any key, ignored
	}
	return nil
}

// CheckRequest validates one request against c without touching data. It
// is what every driver calls first, so that bad sizes are errors, never
// panics or short writes.
func CheckRequest(c *Cipher, r *Request) error {
	switch c.Kind {
	case catalog.KindMAC:
		if r.Op != MAC {
			return fmt.Errorf("%w: %s computes a MAC, not %s", ErrOp, c.Name, r.Op)
		}
		if len(r.Dst) < c.DigestSize {
			return fmt.Errorf("%w: %s needs a %d-byte Dst for the MAC, got %d", ErrLength, c.Name, c.DigestSize, len(r.Dst))
		}
		return nil
	case catalog.KindCipher, catalog.KindNull:
		if r.Op != Encrypt && r.Op != Decrypt {
			return fmt.Errorf("%w: %s encrypts or decrypts, not %s", ErrOp, c.Name, r.Op)
		}
	default:
		return fmt.Errorf("%w: kind %q", ErrUnsupported, c.Kind)
	}
	if len(r.IV) != c.IVSize {
		return fmt.Errorf("%w: %s needs a %d-byte IV, got %d", ErrIVSize, c.Name, c.IVSize, len(r.IV))
	}
	if c.BlockSize > 1 && len(r.Src)%c.BlockSize != 0 {
		return fmt.Errorf("%w: %s needs a multiple of %d bytes, got %d", ErrLength, c.Name, c.BlockSize, len(r.Src))
	}
	if r.Dst != nil && len(r.Dst) < len(r.Src) {
		return fmt.Errorf("%w: Dst has %d bytes, Src %d", ErrLength, len(r.Dst), len(r.Src))
	}
	if r.Dst != nil && inexactOverlap(r.Dst[:len(r.Src)], r.Src) {
		// In place means Dst == Src; a shifted overlap has no defined
		// result (Go's CBC modes panic on it).
		return fmt.Errorf("%w: Dst overlaps Src without starting at the same byte", ErrLength)
	}
	return nil
}

// inexactOverlap reports whether x and y share memory but do not start at
// the same byte.
func inexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 {
		return false
	}
	px := uintptr(unsafe.Pointer(unsafe.SliceData(x)))
	py := uintptr(unsafe.Pointer(unsafe.SliceData(y)))
	return px != py && px < py+uintptr(len(y)) && py < px+uintptr(len(x))
}

// Out returns where a cipher request's output goes: Dst, or Src when Dst is
// nil (in place).
func (r *Request) Out() []byte {
	if r.Dst == nil {
		return r.Src
	}
	return r.Dst[:len(r.Src)]
}
