package ocftest

// Reference answers for driver tests, from Go's standard library alone
// (no ocf driver): what a request must produce, to compare an engine's
// output with.

import (
	"bytes"
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

// Block returns the standard library's block cipher for the catalog
// cipher name (des-cbc, des-ede3-cbc, aes-*-cbc) under key.
func Block(name string, key []byte) (cipher.Block, error) {
	switch name {
	case "des-cbc":
		return des.NewCipher(key)
	case "des-ede3-cbc":
		return des.NewTripleDESCipher(key)
	case "aes-128-cbc", "aes-192-cbc", "aes-256-cbc":
		return aes.NewCipher(key)
	}
	return nil, fmt.Errorf("ocftest: no reference block cipher for %s", name)
}

// MAC returns the standard library's HMAC for the catalog MAC name
// (hmac-md5, hmac-sha1, hmac-sha256) under key.
func MAC(name string, key []byte) (hash.Hash, error) {
	var h func() hash.Hash
	switch name {
	case "hmac-md5":
		h = md5.New
	case "hmac-sha1":
		h = sha1.New
	case "hmac-sha256":
		h = sha256.New
	default:
		return nil, fmt.Errorf("ocftest: no reference MAC for %s", name)
	}
	return hmac.New(h, key), nil
}

// Reference computes what r must produce for cipher c under key: the
// full MAC of r.Src for a MAC, r.Src's CBC encryption or decryption under
// r.IV for a cipher (r.Op says which), a copy of r.Src for null. r.Dst is
// ignored and nothing in r is changed.
func Reference(c *ocf.Cipher, key []byte, r ocf.Request) ([]byte, error) {
	switch c.Kind {
	case catalog.KindNull:
		return bytes.Clone(r.Src), nil
	case catalog.KindMAC:
		m, err := MAC(c.Name, key)
		if err != nil {
			return nil, err
		}
		m.Write(r.Src)
		return m.Sum(nil), nil
	}
	b, err := Block(c.Name, key)
	if err != nil {
		return nil, err
	}
	if len(r.IV) != b.BlockSize() || len(r.Src)%b.BlockSize() != 0 {
		return nil, fmt.Errorf("ocftest: %s reference needs a %d-byte IV and whole blocks (IV %d bytes, data %d)",
			c.Name, b.BlockSize(), len(r.IV), len(r.Src))
	}
	out := make([]byte, len(r.Src))
	switch r.Op {
	case ocf.Encrypt:
		cipher.NewCBCEncrypter(b, r.IV).CryptBlocks(out, r.Src)
	case ocf.Decrypt:
		cipher.NewCBCDecrypter(b, r.IV).CryptBlocks(out, r.Src)
	default:
		return nil, fmt.Errorf("ocftest: %s reference: op %v is neither encrypt nor decrypt", c.Name, r.Op)
	}
	return out, nil
}
