package cryptodev

import (
	"fmt"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ocfw/ocfw/ocf"
)

// copyDevice is the cheapest possible cryptodev-linux device: the null
// cipher as a copy. Benchmarks over it measure the driver's own cost per
// request (checks, crypt_op fill, one interface call), not the kernel's.
type copyDevice struct{ nr Ioctls }

func (d *copyDevice) Ioctl(req uint32, arg unsafe.Pointer) error {
	switch req {
	case d.nr.CIOCASYMFEAT, d.nr.CIOCFSESSION, d.nr.CIOCGSESSINFO:
		return nil
	case d.nr.CIOCGSESSION:
		(*hostSessionOp)(arg).ses = 1
		return nil
	case d.nr.CIOCCRYPT:
		op := (*hostCryptOp)(arg)
		if op.len > 0 {
			copy(unsafe.Slice(op.dst, op.len), unsafe.Slice(op.src, op.len))
		}
		return nil
	}
	return syscall.EINVAL
}
func (d *copyDevice) Adopt(int) (Device, error) { return nil, syscall.EINVAL }
func (d *copyDevice) Close() error              { return nil }

var benchLens = []int{16, 64, 256, 1024, 8192, 16384}

func benchSizes(b *testing.B, s ocf.Session, c *ocf.Cipher) {
	for _, n := range benchLens {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			iv := make([]byte, c.IVSize)
			src, dst := make([]byte, n), make([]byte, n)
			reqs := []ocf.Request{{Op: ocf.Encrypt, IV: iv, Src: src, Dst: dst}}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Do(reqs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDriverOverhead: per-request cost of the driver above the
// ioctl, with the null cipher on copyDevice. Expect 0 allocs/op.
func BenchmarkDriverOverhead(b *testing.B) {
	a, err := HostArch()
	if err != nil {
		b.Skip(err)
	}
	nr, _ := IoctlNumbers(Linux, a)
	d, err := New(&copyDevice{nr: nr}, Options{Dialect: Linux})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	c, err := ocf.LookupCipher("null")
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.Open(c, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchSizes(b, s, c)
}
