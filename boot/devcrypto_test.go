package boot

import (
	"reflect"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/ocf/selftest"
)

// TestDevCryptoTargets: the engines tested through /dev/crypto are the
// kernel's implementations of each planned cipher the AF_ALG self-test
// found (passed or failed), hardware flagged from the plan; Go's rows,
// absent engines, /dev/crypto's own rows, drivers /proc/crypto does not
// list under the cipher's generic name and internal ones are not.
func TestDevCryptoTargets(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := cat.Resolve(boards.Request{Board: "alix2d13", Cards: []string{"virtio-crypto", "testaes"}, Ciphers: []string{"aes-128-cbc", "hmac-sha1"}})
	if err != nil {
		t.Fatal(err)
	}
	algs := []kcrypto.Alg{
		{Name: "cbc(aes)", Driver: "cbc(aes-fixed-time)", Type: "skcipher"},
		{Name: "cbc(aes)", Driver: "virtio_crypto_aes_cbc", Type: "skcipher"},
		{Name: "cbc(aes)", Driver: "ocfw_testaes_cbc", Type: "skcipher"},
		{Name: "cbc(aes)", Driver: "__cbc-aes-internal", Type: "skcipher", Internal: true},
		{Name: "hmac(sha1)", Driver: "hmac(sha1-generic)", Type: "shash"},
		{Name: "sha1", Driver: "sha1-generic", Type: "shash"},
	}
	tests := []selftest.Result{
		{Engine: "cbc-aes-geode", Cipher: "aes-128-cbc", Status: selftest.Absent},
		{Engine: "cbc(aes-fixed-time)", Cipher: "aes-128-cbc", Status: selftest.Pass},
		{Engine: "virtio_crypto_aes_cbc", Cipher: "aes-128-cbc", Status: selftest.Pass},
		{Engine: "ocfw_testaes_cbc", Cipher: "aes-128-cbc", Status: selftest.Fail},
		{Engine: "__cbc-aes-internal", Cipher: "aes-128-cbc", Status: selftest.Pass},
		{Engine: "go", Cipher: "aes-128-cbc", Status: selftest.Pass},
		{Engine: DevCryptoEngine + "cbc(aes-fixed-time)", Cipher: "aes-128-cbc", Status: selftest.Pass},
		{Engine: "sha1-generic", Cipher: "hmac-sha1", Status: selftest.Pass}, // not under hmac(sha1)
		{Engine: "hmac(sha1-generic)", Cipher: "hmac-sha1", Status: selftest.Pass},
		{Engine: "go", Cipher: "hmac-sha1", Status: selftest.Pass},
	}
	want := []devCryptoEngine{
		{cipher: "aes-128-cbc", kernel: "cbc(aes)", typ: "skcipher", driver: "cbc(aes-fixed-time)", passed: true},
		{cipher: "aes-128-cbc", kernel: "cbc(aes)", typ: "skcipher", driver: "virtio_crypto_aes_cbc", hardware: true, passed: true},
		{cipher: "aes-128-cbc", kernel: "cbc(aes)", typ: "skcipher", driver: "ocfw_testaes_cbc", hardware: true},
		{cipher: "hmac-sha1", kernel: "hmac(sha1)", typ: "hash", driver: "hmac(sha1-generic)", passed: true},
	}
	if got := devCryptoTargets(pl, tests, algs); !reflect.DeepEqual(got, want) {
		t.Errorf("targets:\n got %+v\nwant %+v", got, want)
	}
}
