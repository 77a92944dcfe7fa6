package ocftest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/soft"
)

// The reference agrees with the software driver on every catalog cipher,
// and decrypting its ciphertext gives the plaintext back.
func TestReferenceMatchesSoft(t *testing.T) {
	for _, c := range catalog.Ciphers() {
		key := bytes.Repeat([]byte{0x5a}, c.KeySize)
		s, err := soft.New().Open(&c, key)
		if err != nil {
			t.Fatal(err)
		}
		src := bytes.Repeat([]byte("0123456789abcdef"), 4)
		r := ocf.Request{Op: ocf.Encrypt, IV: bytes.Repeat([]byte{7}, c.IVSize), Src: src, Dst: make([]byte, len(src))}
		if c.Kind == catalog.KindMAC {
			r = ocf.Request{Op: ocf.MAC, Src: src, Dst: make([]byte, c.DigestSize)}
		}
		want, err := Reference(&c, key, r)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if err := s.Do([]ocf.Request{r}); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if !bytes.Equal(r.Dst, want) {
			t.Errorf("%s: soft gives %x, reference %x", c.Name, r.Dst, want)
		}
		s.Close()
		if c.Kind != catalog.KindCipher {
			continue
		}
		back, err := Reference(&c, key, ocf.Request{Op: ocf.Decrypt, IV: r.IV, Src: want})
		if err != nil || !bytes.Equal(back, src) {
			t.Errorf("%s: decrypting the reference ciphertext: %v", c.Name, err)
		}
	}
}

func TestReferenceRefuses(t *testing.T) {
	aes, err := ocf.LookupCipher("aes-128-cbc")
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 16)
	for _, tc := range []struct {
		r    ocf.Request
		want string
	}{
		{ocf.Request{Op: ocf.Encrypt, IV: make([]byte, 8), Src: make([]byte, 16)}, "16-byte IV"},
		{ocf.Request{Op: ocf.Encrypt, IV: make([]byte, 16), Src: make([]byte, 17)}, "whole blocks"},
		{ocf.Request{Op: ocf.MAC, IV: make([]byte, 16), Src: make([]byte, 16)}, "neither encrypt nor decrypt"},
	} {
		if _, err := Reference(aes, key, tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.r, err, tc.want)
		}
	}
	if _, err := Block("rot13", key); err == nil {
		t.Error("Block(rot13) gave no error")
	}
	if _, err := MAC("hmac-crc32", key); err == nil {
		t.Error("MAC(hmac-crc32) gave no error")
	}
}
