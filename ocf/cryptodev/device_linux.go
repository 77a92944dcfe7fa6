//go:build linux

package cryptodev

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileDevice is a real /dev/crypto descriptor.
type fileDevice struct {
	// mu makes Close wait for ioctls in flight and stops later ones:
	// after close(2) the number may name another file, and an ioctl with
	// our struct must never reach it.
	mu   sync.RWMutex
	fd   int
	path string
}

// OpenDevice opens path (normally /dev/crypto) read-write.
func OpenDevice(path string) (Device, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &fileDevice{fd: fd, path: path}, nil
}

func (d *fileDevice) Ioctl(req uint32, arg unsafe.Pointer) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.fd < 0 {
		return unix.EBADF
	}
	// The uintptr conversion of arg happens in the call expression, which
	// keeps the struct it points to alive for the call (unsafe.Pointer
	// rule 4); the struct's own pointers are typed Go pointers (host.go).
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

func (d *fileDevice) Adopt(fd int) (Device, error) {
	if fd < 0 {
		return nil, fmt.Errorf("cryptodev: device returned descriptor %d", fd)
	}
	// The clone comes without close-on-exec (OCF's header says to set it).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("cryptodev: F_SETFD on cloned descriptor: %w", err)
	}
	return &fileDevice{fd: fd, path: d.path}, nil
}

func (d *fileDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}
