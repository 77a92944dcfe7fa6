package afalg

import (
	"fmt"
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/soft"
)

// BenchmarkGoSoft is Go's software engine on the same ciphers and sizes as
// BenchmarkAFALG, so one guest boot (bench/run) gives AF_ALG-to-Go ratios
// measured on the same emulated CPU; absolute numbers under QEMU mean
// nothing. It needs no AF_ALG and runs anywhere.
func BenchmarkGoSoft(b *testing.B) {
	for _, c := range kernelCiphers() {
		b.Run(c.Name, func(b *testing.B) {
			s, err := soft.New().Open(&c, testKey(b, &c))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for _, size := range benchSizes {
				b.Run(fmt.Sprint(size), func(b *testing.B) {
					req := []ocf.Request{{Op: ocf.Encrypt, IV: random(b, c.IVSize), Src: random(b, size)}}
					if c.Kind == catalog.KindMAC {
						req[0] = ocf.Request{Op: ocf.MAC, Src: random(b, size), Dst: make([]byte, c.DigestSize)}
					}
					b.SetBytes(int64(size))
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
