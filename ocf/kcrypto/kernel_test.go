package kcrypto

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/afalg"
)

// guestModules: the crypto user API, AF_ALG for skciphers, aes_ti (a
// second software AES, aes-fixed-time at priority 101, above the built-in
// aes-generic's 100: Debian's 686 kernel has no assembler AES for i586)
// and virtio-crypto, QEMU's PCI crypto accelerator, as the hardware
// engine (virtio_crypto_aes_cbc, 150). cbc and aes-generic are built in.
var guestModules = []string{"crypto_user", "af_alg", "algif_skcipher", "aes_ti", "virtio_pci", "virtio_crypto"}

// TestKernelInTheLoop boots Debian's i386 686 kernel with a virtio-crypto
// device and runs TestGuestEngineChoice inside it.
func TestKernelInTheLoop(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("inside the guest: this test only starts it")
	}
	kerneltest.Run(t, kerneltest.Options{
		Modules:  guestModules,
		Run:      "^TestGuest",
		QEMUArgs: []string{"-object", "cryptodev-backend-builtin,id=c0", "-device", "virtio-crypto-pci,cryptodev=c0"},
		Timeout:  4 * time.Minute,
	})
}

var virtio = []HWEngine{{ID: "virtio-crypto", Module: "virtio_crypto", Drivers: map[string]string{"aes-128-cbc": "virtio_crypto_aes_cbc"}}}

// encrypts checks that a session bound by the generic name (whatever the
// kernel resolves it to) encrypts as Go's AES-CBC does, and returns the
// implementation that served it.
func encrypts(t *testing.T) string {
	t.Helper()
	d, err := afalg.New(afalg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ocf.LookupCipher("aes-128-cbc")
	key, iv, src := make([]byte, 16), make([]byte, 16), make([]byte, 1024)
	rand.Read(key)
	rand.Read(iv)
	rand.Read(src)
	s, err := d.Open(c, key)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dst := make([]byte, len(src))
	if err := s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: iv, Src: src, Dst: dst}}); err != nil {
		t.Fatalf("encrypt on %s: %v", s.Driver(), err)
	}
	blk, _ := aes.NewCipher(key)
	want := make([]byte, len(src))
	cipher.NewCBCEncrypter(blk, iv).CryptBlocks(want, src)
	if !bytes.Equal(dst, want) {
		t.Fatalf("cbc(aes) on %s differs from Go's AES-CBC", s.Driver())
	}
	return s.Driver()
}

func resolves(t *testing.T, want string) {
	t.Helper()
	r, err := Resolve("cbc(aes)", "skcipher")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cbc(aes) resolves to %s (priority %d, by %s)", r.Driver, r.Priority, r.How)
	if r.Driver != want {
		t.Fatalf("cbc(aes) resolves to %s, want %s", r.Driver, want)
	}
	if r.How != "refcount" {
		t.Errorf("resolved by %s; want the use count to show it", r.How)
	}
	if got := encrypts(t); got != want {
		t.Errorf("a session bound by cbc(aes) is served by %s, want %s", got, want)
	}
}

func priority(t *testing.T, driver string) int {
	t.Helper()
	a, err := Get(driver)
	if err != nil {
		t.Fatal(err)
	}
	algs, err := List("")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := Find(algs, driver); !ok || l.Priority != a.Priority || l.Name != a.Name || l.Module != a.Module {
		t.Errorf("GETALG says %+v, /proc/crypto %+v", a, l)
	}
	return a.Priority
}

// TestGuestEngineChoice walks the boot sequence's two phases and the
// by-hand commands on a real kernel, checking after each change which
// implementation a new cbc(aes) user gets and that it encrypts right.
func TestGuestEngineChoice(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("runs inside the QEMU guest started by TestKernelInTheLoop")
	}
	// virtio-crypto registers once the device is probed.
	deadline := time.Now().Add(20 * time.Second)
	for {
		algs, err := List("")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := Find(algs, "virtio_crypto_aes_cbc"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("virtio_crypto_aes_cbc never appeared in /proc/crypto")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for drv, prio := range map[string]int{"virtio_crypto_aes_cbc": 150, "aes-fixed-time": 101, "aes-generic": 100} {
		if got := priority(t, drv); got != prio {
			t.Errorf("%s registered at %d, want %d", drv, got, prio)
		}
	}

	// As the kernel comes up: the hardware engine is its choice.
	resolves(t, "virtio_crypto_aes_cbc")

	// Boot, before the network: hardware below software. Only the
	// virtio driver is registered under cbc(aes), so the kernel would
	// keep returning it at priority 1: a software instance is built.
	start := time.Now()
	o, err := DemoteHardware(virtio, []string{"aes-128-cbc"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("DemoteHardware took %v: %+v", time.Since(start), o)
	// virtio-crypto also registers RSA: the whole engine goes down.
	if ch := byDriver(o.Changes); ch["virtio_crypto_aes_cbc"].To != Demoted || ch["virtio-crypto-rsa"].To != Demoted {
		t.Errorf("demote changes: %v", o.Changes)
	}
	if o.Failed() || o.Ciphers[0].Driver != "cbc(aes-fixed-time)" || o.Ciphers[0].Hardware {
		t.Fatalf("demote: %+v", o)
	}
	if len(o.Notes) == 0 || !strings.Contains(o.Notes[0], "built the software") {
		t.Errorf("expected a note about the software instance built: %v", o.Notes)
	}
	resolves(t, "cbc(aes-fixed-time)")

	// By hand: demote the better software AES below aes-generic.
	o, err = Demote("aes-fixed-time", virtio)
	if err != nil {
		t.Fatal(err)
	}
	if got := priority(t, "aes-fixed-time"); got != Demoted {
		t.Errorf("aes-fixed-time at %d after demote", got)
	}
	resolves(t, "cbc(aes-generic)")
	if o.Failed() {
		t.Errorf("demote: %+v", o)
	}

	// And back: prefer it. The cbc(aes-generic) instance must go too,
	// or the kernel keeps returning it.
	if _, err := Prefer("aes-fixed-time", virtio); err != nil {
		t.Fatal(err)
	}
	if got := priority(t, "aes-fixed-time"); got != 101 {
		t.Errorf("aes-fixed-time at %d after prefer, want 101 (one above aes-generic)", got)
	}
	resolves(t, "cbc(aes-fixed-time)")

	// After the self-test: the policy chose virtio for 1400-byte packets.
	p := ocf.Policy{Trusted: []string{"virtio_crypto_aes_cbc"},
		Ciphers: map[string]ocf.CipherPolicy{"aes-128-cbc": {Driver: "virtio_crypto_aes_cbc", MinHardware: 1024}}}
	o, err = Promote(Input{Engines: virtio, Policy: p, Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Promote: %+v", o)
	if o.Failed() || o.Ciphers[0].Driver != "virtio_crypto_aes_cbc" || !o.Ciphers[0].Hardware {
		t.Fatalf("promote: %+v", o)
	}
	if got := priority(t, "virtio_crypto_aes_cbc"); got != 101+Step {
		t.Errorf("virtio at %d after promote, want %d", got, 101+Step)
	}
	resolves(t, "virtio_crypto_aes_cbc")

	// A failed engine after all: the promote phase puts it back down.
	p.Failed = map[string]string{"virtio_crypto_aes_cbc": "aes-128-cbc: wrong output"}
	p.Trusted = nil
	p.Ciphers["aes-128-cbc"] = ocf.CipherPolicy{SoftwareOnly: true}
	if o, err = Promote(Input{Engines: virtio, Policy: p, Ciphers: []string{"aes-128-cbc"}}); err != nil || o.Failed() {
		t.Fatalf("promote with virtio failed: %+v %v", o, err)
	}
	resolves(t, "cbc(aes-fixed-time)")

	// Refusals explain.
	err = SetPriority("no-such-driver", 5)
	var kerr *Error
	if !errors.As(err, &kerr) || !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "no algorithm with driver name") {
		t.Errorf("unknown driver: %v", err)
	}
	if err := unix.DeleteModule("crypto_user", 0); err != nil {
		t.Fatalf("unloading crypto_user: %v", err)
	}
	if err := SetPriority("aes-generic", 100); !errors.Is(err, ErrNoCryptoUser) {
		t.Errorf("without crypto_user: %v, want ErrNoCryptoUser", err)
	}
}
