package cryptodev

import "unsafe"

// Device is an open /dev/crypto descriptor: the only place the package
// touches the kernel, kept small so that tests can put a fake device behind
// the driver and check every struct it receives.
type Device interface {
	// Ioctl issues request req with arg pointing at a host-arch struct
	// (one of the host* types). It returns the errno as a syscall.Errno.
	Ioctl(req uint32, arg unsafe.Pointer) error
	// Adopt takes ownership of descriptor fd that the device handed back
	// (CRIOGET's clone) and returns it as a Device.
	Adopt(fd int) (Device, error)
	Close() error
}
