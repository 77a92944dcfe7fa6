package testengine

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/afalg"
	"github.com/ocfw/ocfw/ocf/probe"
	"github.com/ocfw/ocfw/ocf/selftest"
)

// TestKernelInTheLoop boots Debian's 686 kernel once with both stand-ins:
// QEMU's virtio-crypto device (options from the catalog) with its driver,
// and the test module built for that kernel; with /dev/crypto
// (cryptodev-linux's cryptodev.ko, built for it too) in front of them.
// The TestGuest* tests run inside against them.
func TestKernelInTheLoop(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("inside the guest: this test only starts it")
	}
	if testing.Short() {
		t.Skip("builds the test module and boots the kernel in QEMU; skipped with -short")
	}
	if err := qemu.Installed("i386"); err != nil {
		labtest.SkipOrFail(t, "stand-in engines not booted: %v", err)
	}
	mod := buildOrSkip(t, Options{Log: t.Logf})
	devCrypto := devCryptoModule(t)
	vc, _ := catalog.LookupEngine(catalog.VirtioCrypto)
	kerneltest.Run(t, kerneltest.Options{
		Modules:     guestModules(),
		ModuleFiles: []string{mod.Path, devCrypto},
		QEMUArgs:    vc.QEMU,
		Run:         "TestGuest",
	})
}

func guestOnly(t *testing.T) {
	t.Helper()
	if !kerneltest.InGuest() {
		t.Skip("runs inside the kerneltest guest (TestKernelInTheLoop)")
	}
}

// procEntry finds a driver's skcipher entry in /proc/crypto.
func procEntry(t *testing.T, driver string) afalg.Entry {
	t.Helper()
	entries, err := afalg.ReadProcCrypto("/proc/crypto")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Driver == driver {
			return e
		}
	}
	var have []string
	for _, e := range entries {
		if e.Name == "cbc(aes)" {
			have = append(have, e.Driver)
		}
	}
	t.Fatalf("%s not in /proc/crypto (cbc(aes) there: %s)", driver, strings.Join(have, ", "))
	return afalg.Entry{}
}

// Both stand-ins register cbc(aes) as the catalog says: asynchronous,
// AES's key sizes, above kernel software, passed the kernel's self-test;
// the virtio-crypto device is on the PCI bus with the catalog's id.
func TestGuestProcCrypto(t *testing.T) {
	guestOnly(t)
	for _, tc := range []struct {
		driver, module string
		prio           int
	}{
		{Driver, Module, Priority},
		{catalog.VirtioCryptoAESDriver, "virtio_crypto", 150},
	} {
		e := procEntry(t, tc.driver)
		if e.Name != "cbc(aes)" || e.Module != tc.module || e.Priority != tc.prio || e.Type != "skcipher" || !e.Async ||
			e.MinKeySize != 16 || e.MaxKeySize != 32 || e.IVSize != 16 || e.SelfTest != "passed" {
			t.Errorf("%s: %+v", tc.driver, e)
		}
	}
	vc, _ := catalog.LookupEngine(catalog.VirtioCrypto)
	var ids []string
	devs, _ := filepath.Glob("/sys/bus/pci/devices/*")
	for _, d := range devs {
		v, _ := os.ReadFile(filepath.Join(d, "vendor"))
		id, _ := os.ReadFile(filepath.Join(d, "device"))
		ids = append(ids, strings.TrimPrefix(strings.TrimSpace(string(v)), "0x")+":"+strings.TrimPrefix(strings.TrimSpace(string(id)), "0x"))
	}
	if want := vc.Match.PCI[0].String(); !strings.Contains(strings.Join(ids, " "), want) {
		t.Errorf("no PCI device %s; the bus has %s", want, strings.Join(ids, " "))
	}
	for _, p := range []string{ParamDelay, ParamCorrupt, ParamPriority} {
		if v, err := Param(p); err != nil || (p == ParamPriority && v != Priority) || (p != ParamPriority && v != 0) {
			t.Errorf("parameter %s = %d, %v", p, v, err)
		}
	}
}

// goCBC is the reference: Go's AES-CBC.
func goCBC(t *testing.T, key, iv, src []byte) []byte {
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(src))
	cipher.NewCBCEncrypter(b, iv).CryptBlocks(out, src)
	return out
}

// crypt runs one request through driver (a driver name, or "" for the
// kernel's own choice for cbc(aes)).
func crypt(t *testing.T, driver, cipherName string, key, iv, src []byte, op ocf.Op) []byte {
	t.Helper()
	d, err := afalg.New(afalg.Options{Driver: driver})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ocf.LookupCipher(cipherName)
	s, err := d.Open(c, key)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dst := make([]byte, len(src))
	if err := s.Do([]ocf.Request{{Op: op, IV: iv, Src: src, Dst: dst}}); err != nil {
		t.Fatalf("%s %s %d bytes: %v", driver, cipherName, len(src), err)
	}
	return dst
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// A session bound by driver name encrypts as Go's AES-CBC does, for each
// key size and sizes from one block to a large request, and decrypts back.
func TestGuestEncryptsLikeGo(t *testing.T) {
	guestOnly(t)
	for _, driver := range []string{Driver, catalog.VirtioCryptoAESDriver} {
		for _, cn := range []string{"aes-128-cbc", "aes-192-cbc", "aes-256-cbc"} {
			c, _ := ocf.LookupCipher(cn)
			key, iv := pattern(c.KeySize, 1), pattern(16, 99)
			for _, n := range []int{16, 64, 1024, 4096, 65536} {
				src := pattern(n, byte(n))
				got := crypt(t, driver, cn, key, iv, src, ocf.Encrypt)
				if want := goCBC(t, key, iv, src); !bytes.Equal(got, want) {
					t.Errorf("%s %s %d bytes: differs from Go's AES-CBC", driver, cn, n)
				}
				if back := crypt(t, driver, cn, key, iv, got, ocf.Decrypt); !bytes.Equal(back, src) {
					t.Errorf("%s %s %d bytes: decrypts to something else", driver, cn, n)
				}
			}
		}
	}
}

// With corrupt_min set, requests of at least that size come out wrong and
// smaller ones right; the kernel's own choice for cbc(aes) is the test
// engine (the highest priority), so a generic bind shows the corruption
// too. Set back to 0, everything is right again.
func TestGuestCorrupt(t *testing.T) {
	guestOnly(t)
	if err := SetParam(ParamCorrupt, 1024); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { SetParam(ParamCorrupt, 0) })
	key, iv := pattern(16, 3), pattern(16, 4)
	for _, driver := range []string{Driver, ""} {
		for _, n := range []int{16, 512, 1008, 1024, 4096} {
			src := pattern(n, 5)
			got := crypt(t, driver, "aes-128-cbc", key, iv, src, ocf.Encrypt)
			if same := bytes.Equal(got, goCBC(t, key, iv, src)); same != (n < 1024) {
				t.Errorf("driver %q, %d bytes, corrupt_min 1024: equal to Go's %v", driver, n, same)
			}
		}
	}
	SetParam(ParamCorrupt, 0)
	src := pattern(4096, 6)
	if got := crypt(t, Driver, "aes-128-cbc", key, iv, src, ocf.Encrypt); !bytes.Equal(got, goCBC(t, key, iv, src)) {
		t.Error("corrupt_min 0: output still wrong")
	}
}

// delay_us makes even a one-block request take at least the delay.
func TestGuestDelay(t *testing.T) {
	guestOnly(t)
	const delay = 100 * time.Millisecond
	d, err := afalg.New(afalg.Options{Driver: Driver})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ocf.LookupCipher("aes-128-cbc")
	s, err := d.Open(c, pattern(16, 7))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Only the request is timed: binding and opening are slow under TCG.
	timeOne := func() time.Duration {
		dst := make([]byte, 16)
		start := time.Now()
		if err := s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: pattern(16, 8), Src: pattern(16, 9), Dst: dst}}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	var base []time.Duration
	for range 3 {
		base = append(base, timeOne())
	}
	sort.Slice(base, func(i, j int) bool { return base[i] < base[j] })
	if err := SetParam(ParamDelay, int(delay/time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { SetParam(ParamDelay, 0) })
	if v, _ := Param(ParamDelay); v != int(delay/time.Microsecond) {
		t.Errorf("delay_us reads back %d", v)
	}
	// The module sleeps in jiffies (fsleep → msleep) and the guest's
	// clock reads a TSC that QEMU's TCG lets drift against the tick, so a
	// 100 ms sleep may read as 99.6 ms (seen in CI): a tenth of slack,
	// still far above a request without the delay (checked below).
	var slow time.Duration
	for range 3 {
		if slow = timeOne(); slow < delay*9/10 {
			t.Errorf("a 16-byte request with delay_us=%d took %v", delay/time.Microsecond, slow)
		}
	}
	if base[1] >= delay/2 {
		t.Errorf("without a delay a 16-byte request took %v (median of 3): the delay test proves nothing", base[1])
	}
	t.Logf("16-byte request: %v without the delay (median of 3), %v with delay_us=%d", base[1], slow, delay/time.Microsecond)
}

// The firmware's own probe and self-test, as the boot report uses them,
// find both stand-ins of a plan that names them present, hardware, and
// passing; with the test engine corrupting, its self-test fails while
// virtio-crypto's still passes.
func TestGuestProbeAndSelfTest(t *testing.T) {
	guestOnly(t)
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := cat.Resolve(boards.Request{Board: "alix2d13", Cards: []string{"virtio-crypto", "testaes"}})
	if err != nil {
		t.Fatal(err)
	}
	wants, err := probe.Wants(pl, []string{"aes-128-cbc", "aes-256-cbc"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(corrupt bool) {
		got := map[string]string{}
		for _, tg := range probe.Find(wants, probe.Options{}) {
			if tg.Engine != catalog.VirtioCrypto && tg.Engine != catalog.TestAES {
				continue
			}
			key := tg.Engine + " " + tg.Cipher
			if !tg.Present() {
				got[key] = "absent: " + tg.Reason
				continue
			}
			if !tg.Driver.Hardware() {
				t.Errorf("%s: present but not counted as hardware", key)
			}
			res := selftest.Check(tg.Driver, tg.Cipher, selftest.Options{})
			got[key] = fmt.Sprintf("%s %s", tg.Name, res.Status)
		}
		testaes := selftest.Pass
		if corrupt {
			testaes = selftest.Fail
		}
		want := map[string]string{
			"virtio-crypto aes-128-cbc": catalog.VirtioCryptoAESDriver + " pass",
			"virtio-crypto aes-256-cbc": catalog.VirtioCryptoAESDriver + " pass",
			"testaes aes-128-cbc":       fmt.Sprintf("%s %s", Driver, testaes),
			"testaes aes-256-cbc":       fmt.Sprintf("%s %s", Driver, testaes),
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("corrupt %v: %s: %q, want %q", corrupt, k, got[k], w)
			}
		}
	}
	check(false)
	if err := SetParam(ParamCorrupt, 16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { SetParam(ParamCorrupt, 0) })
	check(true)
}
