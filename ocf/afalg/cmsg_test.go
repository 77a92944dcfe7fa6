package afalg

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// unhex decodes hex written with spaces and '|' between fields for reading.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

var (
	layout386   = cmsgLayout{word: 4, order: binary.LittleEndian}
	layoutARM   = cmsgLayout{word: 4, order: binary.LittleEndian}
	layoutAMD64 = cmsgLayout{word: 8, order: binary.LittleEndian}
)

func TestEncodeControl(t *testing.T) {
	iv16 := []byte{0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f}
	iv8 := []byte{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7}
	tests := []struct {
		name   string
		layout cmsgLayout
		op     uint32
		iv     []byte
		want   string // len | level | type | data (| padding)
	}{
		{"386 aes encrypt", layout386, unix.ALG_OP_ENCRYPT, iv16, `
			10000000 | 17010000 | 03000000 | 01000000
			20000000 | 17010000 | 02000000 | 10000000 | 000102030405060708090a0b0c0d0e0f`},
		{"386 des decrypt", layout386, unix.ALG_OP_DECRYPT, iv8, `
			10000000 | 17010000 | 03000000 | 00000000
			18000000 | 17010000 | 02000000 | 08000000 | a0a1a2a3a4a5a6a7`},
		{"386 null (no IV)", layout386, unix.ALG_OP_ENCRYPT, nil, `
			10000000 | 17010000 | 03000000 | 01000000`},
		{"arm aes decrypt", layoutARM, unix.ALG_OP_DECRYPT, iv16, `
			10000000 | 17010000 | 03000000 | 00000000
			20000000 | 17010000 | 02000000 | 10000000 | 000102030405060708090a0b0c0d0e0f`},
		// amd64: 16-byte headers, the 4-byte op padded to 8, the 20-byte
		// af_alg_iv padded to 24.
		{"amd64 aes encrypt", layoutAMD64, unix.ALG_OP_ENCRYPT, iv16, `
			1400000000000000 | 17010000 | 03000000 | 01000000 | 00000000
			2400000000000000 | 17010000 | 02000000 | 10000000 | 000102030405060708090a0b0c0d0e0f | 00000000`},
		{"amd64 des decrypt", layoutAMD64, unix.ALG_OP_DECRYPT, iv8, `
			1400000000000000 | 17010000 | 03000000 | 00000000 | 00000000
			1c00000000000000 | 17010000 | 02000000 | 08000000 | a0a1a2a3a4a5a6a7 | 00000000`},
		{"amd64 null (no IV)", layoutAMD64, unix.ALG_OP_DECRYPT, nil, `
			1400000000000000 | 17010000 | 03000000 | 00000000 | 00000000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.want)
			if got := tt.layout.controlLen(len(tt.iv)); got != len(want) {
				t.Fatalf("controlLen = %d, want %d", got, len(want))
			}
			// A dirty reused buffer must come out identical: padding
			// is cleared.
			buf := bytes.Repeat([]byte{0xff}, len(want)+8)
			n := tt.layout.encodeControl(buf, tt.op, tt.iv)
			if n != len(want) || !bytes.Equal(buf[:n], want) {
				t.Errorf("encodeControl =\n%x (%d bytes)\nwant\n%x (%d bytes)", buf[:n], n, want, len(want))
			}
			if !bytes.Equal(buf[n:], bytes.Repeat([]byte{0xff}, 8)) {
				t.Errorf("encodeControl wrote past its %d bytes: %x", n, buf[n:])
			}
		})
	}
}

// The host layout must agree with x/sys's own idea of CMSG_LEN/CMSG_SPACE
// and of the header, and the host's parsing must read back what we wrote.
func TestHostLayoutMatchesUnix(t *testing.T) {
	l := hostLayout
	if l.hdrLen() != unix.SizeofCmsghdr {
		t.Errorf("header %d bytes, unix.SizeofCmsghdr %d", l.hdrLen(), unix.SizeofCmsghdr)
	}
	for _, n := range []int{0, 1, 4, 12, 20, 28} {
		if l.cmsgLen(n) != unix.CmsgLen(n) || l.cmsgSpace(n) != unix.CmsgSpace(n) {
			t.Errorf("data %d: len/space %d/%d, unix %d/%d", n, l.cmsgLen(n), l.cmsgSpace(n), unix.CmsgLen(n), unix.CmsgSpace(n))
		}
	}
	iv := []byte("0123456789abcdef")
	buf := make([]byte, l.controlLen(len(iv)))
	n := l.encodeControl(buf, unix.ALG_OP_DECRYPT, iv)
	msgs, err := unix.ParseSocketControlMessage(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 {
		t.Fatalf("parsed %d messages, want 2", len(msgs))
	}
	if h := msgs[0].Header; h.Level != unix.SOL_ALG || h.Type != unix.ALG_SET_OP || !bytes.Equal(msgs[0].Data[:4], []byte{0, 0, 0, 0}) {
		t.Errorf("first message %+v %x, want SOL_ALG ALG_SET_OP decrypt", h, msgs[0].Data)
	}
	h := msgs[1].Header
	if h.Level != unix.SOL_ALG || h.Type != unix.ALG_SET_IV || int(h.Len) != unix.CmsgLen(4+len(iv)) {
		t.Errorf("second message header %+v, want SOL_ALG ALG_SET_IV len %d", h, unix.CmsgLen(4+len(iv)))
	}
	if got := msgs[1].Data; binary.NativeEndian.Uint32(got) != uint32(len(iv)) || !bytes.Equal(got[4:4+len(iv)], iv) {
		t.Errorf("IV message data %x, want length %d and %q", got, len(iv), iv)
	}
}
