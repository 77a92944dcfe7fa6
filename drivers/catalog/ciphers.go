package catalog

// CipherKind says how a cipher is used: a block cipher in CBC mode, a MAC,
// or the null cipher (copies data; useful for measuring framework overhead).
type CipherKind string

const (
	KindCipher CipherKind = "cipher"
	KindMAC    CipherKind = "mac"
	KindNull   CipherKind = "null"
)

// Cipher is one algorithm ocfw knows, named as OpenSSL and OCF name it.
// Sizes are in bytes.
type Cipher struct {
	Name       string     `json:"name"`
	Kind       CipherKind `json:"kind"`
	KeySize    int        `json:"key_size"`              // cipher: exact key size; MAC: the natural key size (HMAC takes any length)
	BlockSize  int        `json:"block_size"`            // data must be a multiple of this (1 for MACs and null)
	IVSize     int        `json:"iv_size"`               // 0 when no IV
	DigestSize int        `json:"digest_size,omitempty"` // MAC output size
	// Kernel is the Linux crypto API generic name and KernelType the AF_ALG
	// socket type that reaches it.
	Kernel     string `json:"kernel"`
	KernelType string `json:"kernel_type"`
	// CryptodevAlg is the /dev/crypto algorithm id (CRYPTO_*). Ids 1-14,
	// 16 and 18-20 agree between cryptodev-linux and OCF-linux; 16 is the
	// null cipher in both (CRYPTO_NULL / CRYPTO_NULL_CBC). 15 and 17 differ
	// (cryptodev-linux: DEFLATE_COMP, LZS_COMP; OCF: NULL_HMAC,
	// DEFLATE_COMP), as do ids above 20.
	CryptodevAlg uint32 `json:"cryptodev_alg"`
}

// KeyBits is the key size in bits, as hardware capabilities are quoted.
func (c *Cipher) KeyBits() int { return c.KeySize * 8 }

var ciphers = []Cipher{
	{Name: "des-cbc", Kind: KindCipher, KeySize: 8, BlockSize: 8, IVSize: 8, Kernel: "cbc(des)", KernelType: "skcipher", CryptodevAlg: 1},
	{Name: "des-ede3-cbc", Kind: KindCipher, KeySize: 24, BlockSize: 8, IVSize: 8, Kernel: "cbc(des3_ede)", KernelType: "skcipher", CryptodevAlg: 2},
	{Name: "aes-128-cbc", Kind: KindCipher, KeySize: 16, BlockSize: 16, IVSize: 16, Kernel: "cbc(aes)", KernelType: "skcipher", CryptodevAlg: 11},
	{Name: "aes-192-cbc", Kind: KindCipher, KeySize: 24, BlockSize: 16, IVSize: 16, Kernel: "cbc(aes)", KernelType: "skcipher", CryptodevAlg: 11},
	{Name: "aes-256-cbc", Kind: KindCipher, KeySize: 32, BlockSize: 16, IVSize: 16, Kernel: "cbc(aes)", KernelType: "skcipher", CryptodevAlg: 11},
	{Name: "hmac-md5", Kind: KindMAC, KeySize: 16, BlockSize: 1, DigestSize: 16, Kernel: "hmac(md5)", KernelType: "hash", CryptodevAlg: 6},
	{Name: "hmac-sha1", Kind: KindMAC, KeySize: 20, BlockSize: 1, DigestSize: 20, Kernel: "hmac(sha1)", KernelType: "hash", CryptodevAlg: 7},
	{Name: "hmac-sha256", Kind: KindMAC, KeySize: 32, BlockSize: 1, DigestSize: 32, Kernel: "hmac(sha256)", KernelType: "hash", CryptodevAlg: 18},
	{Name: "null", Kind: KindNull, KeySize: 0, BlockSize: 1, Kernel: "ecb(cipher_null)", KernelType: "skcipher", CryptodevAlg: 16},
}

// Ciphers returns every cipher in catalog order (a copy).
func Ciphers() []Cipher { return append([]Cipher(nil), ciphers...) }

// CipherNames returns the catalog's cipher names in catalog order.
func CipherNames() []string {
	names := make([]string, len(ciphers))
	for i := range ciphers {
		names[i] = ciphers[i].Name
	}
	return names
}

// LookupCipher finds a cipher by name.
func LookupCipher(name string) (*Cipher, bool) {
	for i := range ciphers {
		if ciphers[i].Name == name {
			c := ciphers[i]
			return &c, true
		}
	}
	return nil, false
}
