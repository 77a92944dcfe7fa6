package soft

import (
	"fmt"
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
)

// benchSizes are the request sizes of the project's speed tables (the
// openssl speed sizes plus 8192 and 16384).
var benchSizes = []int{16, 64, 256, 1024, 8192, 16384}

// BenchmarkSoft encrypts in place (or MACs) one request per Do call, as
// openssl speed -evp does one EVP update per block.
func BenchmarkSoft(b *testing.B) {
	for _, c := range catalog.Ciphers() {
		b.Run(c.Name, func(b *testing.B) {
			s := open(b, c.Name, randBytes(1, c.KeySize))
			for _, n := range benchSizes {
				b.Run(fmt.Sprint(n), func(b *testing.B) {
					req := []ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, c.IVSize), Src: make([]byte, n)}}
					if c.Kind == catalog.KindMAC {
						req[0] = ocf.Request{Op: ocf.MAC, Src: make([]byte, n), Dst: make([]byte, c.DigestSize)}
					}
					b.SetBytes(int64(n))
					b.ReportAllocs()
					for b.Loop() {
						if err := s.Do(req); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
