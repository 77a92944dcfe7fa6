package afalg

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cmsgLayout is what the control-message encoding depends on: struct
// cmsghdr is {size_t len; int level; int type}, so its size and the
// alignment of every part (CMSG_ALIGN rounds to sizeof(long)) follow the
// word size — 12-byte headers on 386 and arm, 16 on amd64.
type cmsgLayout struct {
	word  int
	order binary.ByteOrder
}

// hostLayout is the layout of the running process, the one the kernel
// expects from it (a 32-bit process on a 64-bit kernel is converted by the
// kernel's compat code).
var hostLayout = cmsgLayout{word: int(unsafe.Sizeof(uintptr(0))), order: binary.NativeEndian}

func (l cmsgLayout) align(n int) int { return (n + l.word - 1) &^ (l.word - 1) }
func (l cmsgLayout) hdrLen() int     { return l.align(l.word + 8) }

// cmsgLen is CMSG_LEN: header plus data, unpadded.
func (l cmsgLayout) cmsgLen(data int) int { return l.hdrLen() + data }

// cmsgSpace is CMSG_SPACE: header plus data padded to the next header.
func (l cmsgLayout) cmsgSpace(data int) int { return l.hdrLen() + l.align(data) }

// controlLen is the size of the control buffer for one skcipher request:
// ALG_SET_OP (a u32) and, when the cipher has an IV, ALG_SET_IV (struct
// af_alg_iv: u32 ivlen followed by the IV).
func (l cmsgLayout) controlLen(ivSize int) int {
	n := l.cmsgSpace(4)
	if ivSize > 0 {
		n += l.cmsgSpace(4 + ivSize)
	}
	return n
}

// putHeader writes a cmsghdr at b[0:] for dataLen bytes of data.
func (l cmsgLayout) putHeader(b []byte, typ uint32, dataLen int) {
	n := l.cmsgLen(dataLen)
	if l.word == 8 {
		l.order.PutUint64(b[0:], uint64(n))
	} else {
		l.order.PutUint32(b[0:], uint32(n))
	}
	l.order.PutUint32(b[l.word:], unix.SOL_ALG)
	l.order.PutUint32(b[l.word+4:], typ)
}

// encodeControl writes the control messages for one request into b, which
// must hold controlLen(len(iv)) bytes, and returns the bytes used. Padding
// is zeroed so that the buffer can be reused without clearing. An empty iv
// sends no ALG_SET_IV (ciphers without an IV).
func (l cmsgLayout) encodeControl(b []byte, op uint32, iv []byte) int {
	n := l.controlLen(len(iv))
	b = b[:n]
	clear(b)
	l.putHeader(b, unix.ALG_SET_OP, 4)
	h := l.hdrLen()
	l.order.PutUint32(b[h:], op)
	if len(iv) == 0 {
		return n
	}
	b = b[l.cmsgSpace(4):]
	l.putHeader(b, unix.ALG_SET_IV, 4+len(iv))
	l.order.PutUint32(b[h:], uint32(len(iv)))
	copy(b[h+4:], iv)
	return n
}
