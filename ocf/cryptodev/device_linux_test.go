//go:build linux

package cryptodev

import (
	"bytes"
	"os"
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/ocftest"
)

// realDevice opens the machine's /dev/crypto (or $OCFW_CRYPTODEV). Neither
// the development host nor the Debian kernel the QEMU tests boot has one
// (cryptodev-linux and OCF are out-of-tree modules), so these tests skip
// unless OCFW_REQUIRE_CRYPTODEV=1 says the device must be there (on a
// board, or a kernel built with the module).
func realDevice(tb testing.TB) *Driver {
	tb.Helper()
	path := os.Getenv("OCFW_CRYPTODEV")
	if path == "" {
		path = "/dev/crypto"
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("OCFW_REQUIRE_CRYPTODEV") == "1" {
			tb.Fatalf("OCFW_REQUIRE_CRYPTODEV=1 but %v", err)
		}
		tb.Skipf("no %s here (needs the cryptodev-linux or OCF cryptodev module; OCFW_REQUIRE_CRYPTODEV=1 makes this a failure)", path)
	}
	d, err := Open(path, Auto)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// TestRealDevice cross-checks every cipher the device offers against Go's
// crypto over several sizes, in the manner of FreeBSD's cryptocheck.
func TestRealDevice(t *testing.T) {
	d := realDevice(t)
	t.Logf("%s (%v), hardware %v, engines %+v", d.Name(), d.Dialect(), d.Hardware(), d.Engines())
	for _, e := range d.Engines() {
		c, err := ocf.LookupCipher(e.Cipher)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(c.Name, func(t *testing.T) {
			key := make([]byte, c.KeySize)
			for i := range key {
				key[i] = byte(0x31 + i*13)
			}
			s, err := d.Open(c, key)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			iv := bytes.Repeat([]byte{0x5c}, c.IVSize)
			for _, n := range []int{16, 64, 256, 1024, 4096, 16384} {
				in := make([]byte, n)
				for i := range in {
					in[i] = byte(i * 3)
				}
				ops := []ocf.Op{ocf.Encrypt, ocf.Decrypt}
				if c.Kind == catalog.KindMAC {
					ops = []ocf.Op{ocf.MAC}
				}
				for _, op := range ops {
					want, err := ocftest.Reference(c, key, ocf.Request{Op: op, IV: iv, Src: in})
					if err != nil {
						t.Fatal(err)
					}
					dst := make([]byte, max(n, c.DigestSize))
					if err := s.Do([]ocf.Request{{Op: op, IV: iv, Src: in, Dst: dst}}); err != nil {
						t.Fatalf("%s %d bytes: %v", op, n, err)
					}
					if !bytes.Equal(dst[:len(want)], want) {
						t.Errorf("%s %d bytes on %s: device and Go disagree", op, n, s.Driver())
					}
				}
			}
		})
	}
}

func BenchmarkRealDevice(b *testing.B) {
	d := realDevice(b)
	c, err := ocf.LookupCipher("aes-128-cbc")
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.Open(c, make([]byte, 16))
	if err != nil {
		b.Skip(err)
	}
	defer s.Close()
	benchSizes(b, s, c)
}
