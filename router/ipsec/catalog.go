package ipsec

import (
	"fmt"
	"sort"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// The algorithms a tunnel may use: the catalog's CBC ciphers and HMACs
// that the boards' engines do. Kernel names and key sizes come from the
// catalog (package drivers); ESP adds the ICV truncation (RFC 2404:
// HMAC-SHA1-96; RFC 4868: HMAC-SHA256-128).
var (
	espCiphers = []string{"aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "des-ede3-cbc"}
	espAuths   = map[string]uint32{"hmac-sha1": 96, "hmac-sha256": 128} // truncation in bits
)

// Ciphers returns the cipher names a tunnel may use.
func Ciphers() []string { return append([]string(nil), espCiphers...) }

// Auths returns the authentication (integrity) names a tunnel may use.
func Auths() []string {
	names := make([]string, 0, len(espAuths))
	for n := range espAuths {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Algorithm is what the kernel gets for one catalog name.
type Algorithm struct {
	Name      string // catalog name, e.g. aes-128-cbc
	Kernel    string // kernel crypto name, e.g. cbc(aes)
	KeySize   int    // bytes; the key must be exactly this long
	TruncBits uint32 // ICV length in bits (authentication only)
}

// CipherAlgorithm looks up a tunnel cipher.
func CipherAlgorithm(name string) (Algorithm, error) {
	for _, n := range espCiphers {
		if n == name {
			c, ok := catalog.LookupCipher(name)
			if !ok || c.Kind != catalog.KindCipher {
				break
			}
			return Algorithm{Name: name, Kernel: c.Kernel, KeySize: c.KeySize}, nil
		}
	}
	return Algorithm{}, fmt.Errorf("cipher %q is not one a tunnel can use (want one of %v)%s", name, espCiphers, catalog.Suggest(name, espCiphers))
}

// AuthAlgorithm looks up a tunnel authentication algorithm. HMAC takes
// keys of any length; ocfw uses the hash's output size (RFC 2104's
// recommendation), and Validate insists on it so that both ends agree.
func AuthAlgorithm(name string) (Algorithm, error) {
	trunc, ok := espAuths[name]
	c, found := catalog.LookupCipher(name)
	if !ok || !found || c.Kind != catalog.KindMAC {
		return Algorithm{}, fmt.Errorf("authentication %q is not one a tunnel can use (want one of %v)%s", name, Auths(), catalog.Suggest(name, Auths()))
	}
	return Algorithm{Name: name, Kernel: c.Kernel, KeySize: c.KeySize, TruncBits: trunc}, nil
}
