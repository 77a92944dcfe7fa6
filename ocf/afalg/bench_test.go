package afalg

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
)

var benchSizes = []int{16, 64, 256, 1024, 8192, 16384}

// benchDepth is the batch mode's requests per Do and operation sockets.
const benchDepth = 8

// BenchmarkAFALG measures each catalog cipher through the kernel's
// generic implementation, one request per Do ("one") and benchDepth
// requests per Do with AIO ("batch"). One op is one request; hashes run
// their batch one request at a time in the kernel, so there "batch" only
// saves Go-side calls.
func BenchmarkAFALG(b *testing.B) {
	if err := Available(); err != nil {
		if kernelRequired() {
			b.Fatalf("AF_ALG required but unavailable: %v", err)
		}
		b.Skipf("no AF_ALG in this kernel (%v); run inside QEMU", err)
	}
	for _, c := range kernelCiphers() {
		b.Run(c.Name, func(b *testing.B) {
			for _, mode := range []struct {
				name  string
				depth int
			}{{"one", 1}, {"batch", benchDepth}} {
				b.Run(mode.name, func(b *testing.B) {
					for _, size := range benchSizes {
						b.Run(fmt.Sprint(size), func(b *testing.B) { benchCipher(b, &c, Options{Depth: mode.depth}, size) })
					}
				})
			}
		})
	}
}

// BenchmarkAFALGAsync runs aes-128-cbc through cryptd, an asynchronous
// software engine standing in for the Hifn: the case batching is for.
func BenchmarkAFALGAsync(b *testing.B) {
	if err := Available(); err != nil {
		b.Skipf("no AF_ALG in this kernel (%v); run inside QEMU", err)
	}
	c, _ := ocf.LookupCipher("aes-128-cbc")
	for _, mode := range []struct {
		name  string
		depth int
	}{{"one", 1}, {"batch", benchDepth}} {
		b.Run(mode.name, func(b *testing.B) {
			for _, size := range benchSizes {
				b.Run(fmt.Sprint(size), func(b *testing.B) {
					benchCipher(b, c, Options{Depth: mode.depth, Names: map[string]string{c.Name: asyncStandIn}}, size)
				})
			}
		})
	}
}

func benchCipher(b *testing.B, c *ocf.Cipher, opts Options, size int) {
	depth := max(opts.Depth, 1)
	d, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.Open(c, testKey(b, c))
	if errors.Is(err, unix.ENOENT) {
		b.Skipf("kernel does not offer %s: %v", c.Kernel, err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	reqs := make([]ocf.Request, depth)
	for i := range reqs {
		if c.Kind == catalog.KindMAC {
			reqs[i] = ocf.Request{Op: ocf.MAC, Src: random(b, size), Dst: make([]byte, c.DigestSize)}
		} else {
			reqs[i] = ocf.Request{Op: ocf.Encrypt, IV: random(b, c.IVSize), Src: random(b, size)}
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		n := min(depth, b.N-i)
		if err := s.Do(reqs[:n]); err != nil {
			b.Fatal(err)
		}
	}
}
