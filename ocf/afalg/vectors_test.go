package afalg

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/ocftest"
)

// vector is a published known answer: for ciphers, CBC encryption of in
// under key and iv gives out; for MACs, out is the MAC of in.
type vector struct {
	source           string
	cipher           string
	key, iv, in, out string
}

func h(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic("bad hex in vector table: " + s)
	}
	return b
}

const sp80038aPlain = "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51 30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710"

var standardVectors = []vector{
	{"SP 800-38A F.2.1", "aes-128-cbc", "2b7e151628aed2a6abf7158809cf4f3c", "000102030405060708090a0b0c0d0e0f", sp80038aPlain,
		"7649abac8119b246cee98e9b12e9197d 5086cb9b507219ee95db113a917678b2 73bed6b8e3c1743b7116e69e22229516 3ff1caa1681fac09120eca307586e1a7"},
	{"SP 800-38A F.2.3", "aes-192-cbc", "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b", "000102030405060708090a0b0c0d0e0f", sp80038aPlain,
		"4f021db243bc633d7178183a9fa071e8 b4d9ada9ad7dedf4e5e738763f69145a 571b242012fb7ae07fa9baac3df102e0 08b0e27988598881d920a9e64f5615cd"},
	{"SP 800-38A F.2.5", "aes-256-cbc", "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", "000102030405060708090a0b0c0d0e0f", sp80038aPlain,
		"f58c4c04d6e5f1ba779eabfb5f7bfbd6 9cfc4e967edb808d679f777bc6702c7d 39f23369a9d9bacfa530e26304231461 b2eb05e2c39be9fcda6c19078c6a9d1b"},
	{"FIPS 81 CBC example", "des-cbc", "0123456789abcdef", "1234567890abcdef", hex.EncodeToString([]byte("Now is the time for all ")),
		"e5c7cdde872bf27c 43e934008c389c0f 683788499a7c05f6"},
	{"RFC 2202 case 1", "hmac-md5", "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "", hex.EncodeToString([]byte("Hi There")), "9294727a3638bb1c13f48ef8158bfc9d"},
	{"RFC 2202 case 2", "hmac-md5", hex.EncodeToString([]byte("Jefe")), "", hex.EncodeToString([]byte("what do ya want for nothing?")), "750c783e6ab0b503eaa86e310a5db738"},
	{"RFC 2202 case 1", "hmac-sha1", "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "", hex.EncodeToString([]byte("Hi There")), "b617318655057264e28bc0b6fb378c8ef146be00"},
	{"RFC 2202 case 2", "hmac-sha1", hex.EncodeToString([]byte("Jefe")), "", hex.EncodeToString([]byte("what do ya want for nothing?")), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"},
	{"RFC 4231 case 1", "hmac-sha256", "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "", hex.EncodeToString([]byte("Hi There")),
		"b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
	{"RFC 4231 case 2", "hmac-sha256", hex.EncodeToString([]byte("Jefe")), "", hex.EncodeToString([]byte("what do ya want for nothing?")),
		"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
}

// The vector table and the reference must agree, or the kernel tests that
// rely on both would prove nothing.
func TestStandardVectorsAgreeWithGo(t *testing.T) {
	for _, v := range standardVectors {
		t.Run(v.cipher+"/"+v.source, func(t *testing.T) {
			c, err := ocf.LookupCipher(v.cipher)
			if err != nil {
				t.Fatal(err)
			}
			r := ocf.Request{Op: ocf.Encrypt, IV: h(v.iv), Src: h(v.in)}
			if c.Kind == catalog.KindMAC {
				r = ocf.Request{Op: ocf.MAC, Src: h(v.in)}
			}
			got, err := ocftest.Reference(c, h(v.key), r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, h(v.out)) {
				t.Errorf("Go gives %x, vector says %s", got, v.out)
			}
		})
	}
}
