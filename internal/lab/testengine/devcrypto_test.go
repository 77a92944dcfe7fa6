package testengine

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"hash"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/kbuild"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/cryptodev"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/ocf/selftest"
)

// devCryptoModule builds cryptodev.ko (cryptodev-linux, from shared/deps:
// never downloaded) for the kernel TestKernelInTheLoop boots.
func devCryptoModule(t *testing.T) string {
	t.Helper()
	m, err := kbuild.Cryptodev(t.Context(), kbuild.CryptodevOptions{Source: labtest.SharedDep(t, kbuild.CryptodevSource), Options: kbuild.Options{Log: t.Logf}})
	if err != nil {
		labtest.SkipOrFail(t, "cryptodev.ko not built: %v", err)
	}
	return m.Path
}

// restorePriorities puts the stand-ins' cbc(aes) priorities back as
// they are now when t ends: the other guest tests expect the loaded ones.
func restorePriorities(t *testing.T, drivers ...string) {
	t.Helper()
	algs, err := kcrypto.List("")
	if err != nil {
		t.Fatal(err)
	}
	was := map[string]int{}
	for _, d := range drivers {
		a, ok := kcrypto.Find(algs, d)
		if !ok {
			t.Fatalf("%s not registered", d)
		}
		was[d] = a.Priority
	}
	t.Cleanup(func() {
		algs, err := kcrypto.List("")
		if err != nil {
			t.Error(err)
			return
		}
		var back []kcrypto.Change
		for _, a := range algs {
			if p, ok := was[a.Driver]; ok && a.Priority != p {
				back = append(back, kcrypto.Change{Driver: a.Driver, Name: a.Name, From: a.Priority, To: p, Reason: "back as loaded"})
			}
		}
		if err := kcrypto.Apply(back); err != nil {
			t.Errorf("restoring priorities: %v", err)
		}
	})
}

// prefer makes driver the kernel's choice for its name (crypto_user), as
// the boot's promotion does: the engine /dev/crypto's next session gets.
func prefer(t *testing.T, driver string) {
	t.Helper()
	algs, err := kcrypto.List("")
	if err != nil {
		t.Fatal(err)
	}
	changes, err := kcrypto.PreferChanges(algs, driver)
	if err != nil {
		t.Fatal(err)
	}
	if err := kcrypto.Apply(changes); err != nil {
		t.Fatalf("preferring %s: %v", driver, err)
	}
}

// devCryptoSession opens one session through /dev/crypto.
func devCryptoSession(t *testing.T, d *cryptodev.Driver, cipherName string, key []byte) ocf.Session {
	t.Helper()
	c, err := ocf.LookupCipher(cipherName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Open(c, key)
	if err != nil {
		t.Fatalf("/dev/crypto %s: %v", cipherName, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ocf's /dev/crypto driver against the real cryptodev-linux module:
// the dialect is found, each AES-CBC key size answered by the kernel
// driver preferred at the time (the test engine, then virtio-crypto) and
// named by the session, output equal to Go's from one block to 64 KiB
// and back; the plan's MACs equal to Go's HMAC; the self-test passes
// through it; and with the test engine corrupting, the self-test through
// /dev/crypto fails on it while virtio-crypto behind /dev/crypto passes.
func TestGuestDevCrypto(t *testing.T) {
	guestOnly(t)
	d, err := cryptodev.Open("/dev/crypto", cryptodev.Auto)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Dialect() != cryptodev.Linux {
		t.Fatalf("dialect %v, want cryptodev-linux", d.Dialect())
	}
	t.Logf("/dev/crypto engines: %+v", d.Engines())
	// What `ocf engines list` shows: the kernel's choice for each AES
	// key size (the test engine, highest priority as loaded).
	for _, e := range d.Engines() {
		if strings.HasPrefix(e.Cipher, "aes-") && (e.Driver != Driver || !e.Hardware) {
			t.Errorf("/dev/crypto %s: answered by %q (hardware %v), want %s", e.Cipher, e.Driver, e.Hardware, Driver)
		}
	}
	var list strings.Builder
	if err := cryptodev.WriteEngines(&list, "/dev/crypto", d); err != nil {
		t.Fatal(err)
	}
	if want := "  aes-128-cbc    " + Driver + "  hardware\n"; !strings.Contains(list.String(), want) {
		t.Errorf("ocf engines' /dev/crypto lines lack %q:\n%s", want, list.String())
	}
	restorePriorities(t, Driver, catalog.VirtioCryptoAESDriver)
	for _, driver := range []string{Driver, catalog.VirtioCryptoAESDriver} {
		prefer(t, driver)
		for _, cn := range []string{"aes-128-cbc", "aes-192-cbc", "aes-256-cbc"} {
			c, _ := ocf.LookupCipher(cn)
			key, iv := pattern(c.KeySize, 11), pattern(16, 12)
			s := devCryptoSession(t, d, cn, key)
			if s.Driver() != "cryptodev:"+driver {
				t.Errorf("%s with %s preferred: /dev/crypto answers with %q", cn, driver, s.Driver())
			}
			for _, n := range []int{16, 64, 1024, 4096, 65536} {
				src := pattern(n, byte(n))
				enc := make([]byte, n)
				if err := s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: iv, Src: src, Dst: enc}}); err != nil {
					t.Fatalf("%s %s %d bytes: %v", driver, cn, n, err)
				}
				if !bytes.Equal(enc, goCBC(t, key, iv, src)) {
					t.Errorf("%s %s %d bytes through /dev/crypto: differs from Go's AES-CBC", driver, cn, n)
				}
				dec := make([]byte, n)
				if err := s.Do([]ocf.Request{{Op: ocf.Decrypt, IV: iv, Src: enc, Dst: dec}}); err != nil || !bytes.Equal(dec, src) {
					t.Errorf("%s %s %d bytes through /dev/crypto: decrypts to something else (%v)", driver, cn, n, err)
				}
			}
			// Full: every NIST CAVP vector through the real module.
			if r := selftest.Check(d, cn, selftest.Options{Full: true}); r.Status != selftest.Pass || r.KATs < 500 {
				t.Errorf("full self-test through /dev/crypto on %s, %s: %s, %d known answers, %+v", driver, cn, r.Status, r.KATs, r.Failure)
			}
		}
	}

	// TDES's CAVP files through the kernel's software des3_ede.
	if r := selftest.Check(d, "des-ede3-cbc", selftest.Options{Full: true}); r.Status != selftest.Pass || r.KATs < 500 {
		t.Errorf("full self-test through /dev/crypto, des-ede3-cbc: %s, %d known answers, %+v", r.Status, r.KATs, r.Failure)
	}

	// The MACs (kernel software here: no stand-in registers one).
	for _, tc := range []struct {
		cipher string
		h      func() hash.Hash
	}{{"hmac-sha1", sha1.New}, {"hmac-sha256", sha256.New}} {
		key := pattern(20, 13)
		s := devCryptoSession(t, d, tc.cipher, key)
		for _, n := range []int{0, 64, 1000, 8192} {
			src := pattern(n, 14)
			mac := make([]byte, tc.h().Size())
			if err := s.Do([]ocf.Request{{Op: ocf.MAC, Src: src, Dst: mac}}); err != nil {
				t.Fatalf("%s %d bytes: %v", tc.cipher, n, err)
			}
			m := hmac.New(tc.h, key)
			m.Write(src)
			if !bytes.Equal(mac, m.Sum(nil)) {
				t.Errorf("%s %d bytes through /dev/crypto (%s): differs from Go's", tc.cipher, n, s.Driver())
			}
		}
		if r := selftest.Check(d, tc.cipher, selftest.Options{}); r.Status != selftest.Pass {
			t.Errorf("self-test through /dev/crypto, %s: %s %+v", tc.cipher, r.Status, r.Failure)
		}
	}

	// The corrupting engine behind /dev/crypto is caught; virtio-crypto
	// behind it is not blamed.
	if err := SetParam(ParamCorrupt, 16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { SetParam(ParamCorrupt, 0) })
	for _, tc := range []struct {
		driver string
		want   selftest.Status
	}{{Driver, selftest.Fail}, {catalog.VirtioCryptoAESDriver, selftest.Pass}} {
		prefer(t, tc.driver)
		if s := devCryptoSession(t, d, "aes-128-cbc", pattern(16, 15)); s.Driver() != "cryptodev:"+tc.driver {
			t.Errorf("corrupting: /dev/crypto answers with %q, want %s", s.Driver(), tc.driver)
		}
		if r := selftest.Check(d, "aes-128-cbc", selftest.Options{}); r.Status != tc.want {
			t.Errorf("corrupt_min 16, %s behind /dev/crypto: self-test %s, want %s", tc.driver, r.Status, tc.want)
		}
	}
}
