package cryptodev

import (
	"bytes"
	"unsafe"
)

// Host-arch structs: what the ioctls really receive. They hold typed Go
// pointers (not uintptr) on purpose: the garbage collector then sees the
// buffers as referenced for as long as the struct lives, and if a buffer
// were on a goroutine stack that gets copied, the pointer would be updated
// with it. The kernel reads these pointers only during the ioctl, while
// the goroutine sits in the system call; Go neither moves heap objects nor
// copies the stack of a goroutine in a system call, so the addresses the
// kernel sees stay valid until it returns. Tests check that these structs
// have exactly the layout the pure description computes for the host Arch
// (sizes and every offset), so there are no 64-bit fields here: Go aligns
// uint64 to 4 on arm, C EABI to 8.

// hostSessionOp is session_op of both dialects.
type hostSessionOp struct {
	cipher    uint32
	mac       uint32
	keylen    uint32
	key       *byte
	mackeylen uint32
	mackey    *byte
	ses       uint32
}

// hostSession2Op is OCF's session2_op, flattened (see session2OpDef).
type hostSession2Op struct {
	cipher    uint32
	mac       uint32
	keylen    uint32
	key       *byte
	mackeylen uint32
	mackey    *byte
	ses       uint32
	crid      uint32
	pad       [4]uint32
}

// hostCryptOp is crypt_op of both dialects.
type hostCryptOp struct {
	ses   uint32
	op    uint16
	flags uint16
	len   uint32
	src   *byte
	dst   *byte
	mac   *byte
	iv    *byte
}

// hostSessionInfoOp is cryptodev-linux's session_info_op.
type hostSessionInfoOp struct {
	ses          uint32
	cipherName   [algNameLen]byte
	cipherDriver [algNameLen]byte
	hashName     [algNameLen]byte
	hashDriver   [algNameLen]byte
	alignmask    uint16
	flags        uint32
}

// hostCryptFindOp is OCF's crypt_find_op.
type hostCryptFindOp struct {
	crid int32
	name [findNameLen]byte
}

// cString returns the NUL-terminated string at the start of b.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// ptr returns the address of b's first byte, or nil for an empty slice.
func ptr(b []byte) *byte {
	if len(b) == 0 {
		return nil
	}
	return &b[0]
}

// addr is a pointer as a number, for comparing with the pure encoding.
func addr(p *byte) uint64 { return uint64(uintptr(unsafe.Pointer(p))) }
