package cryptodev

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
	"unsafe"

	"github.com/ocfw/ocfw/internal/cabi"
)

// The numbers below were worked out by hand from the headers' struct
// declarations (see layout.go) with _IOWR = 3<<30 | size<<16 | 'c'<<8 | nr.
// cryptodev-linux CIOCGSESSION is the pair FACTS.md records; FreeBSD's
// amd64 CIOCGSESSION/CIOCCRYPT/CRIOGET (0xc0306365, 0xc0306367,
// 0xc0046364, seen in public code) agree with the OCF amd64 column (_IOWR
// is encoded the same way on BSD).
func TestIoctlNumbers(t *testing.T) {
	type row struct {
		dialect Dialect
		arch    cabi.Arch
		want    Ioctls
	}
	linux32 := Ioctls{CRIOGET: 0xc0046365, CIOCGSESSION: 0xc01c6366, CIOCFSESSION: 0x40046367,
		CIOCCRYPT: 0xc01c6368, CIOCASYMFEAT: 0x8004636a, CIOCGSESSINFO: 0xc10c636b}
	linux64 := linux32
	linux64.CIOCGSESSION, linux64.CIOCCRYPT = 0xc0306366, 0xc0306368
	ocf32 := Ioctls{CRIOGET: 0xc0046364, CIOCGSESSION: 0xc01c6365, CIOCFSESSION: 0x40046366,
		CIOCCRYPT: 0xc01c6367, CIOCASYMFEAT: 0x80046369, CIOCGSESSION2: 0xc030636a, CIOCFINDDEV: 0xc024636c}
	ocf64 := ocf32
	ocf64.CIOCGSESSION, ocf64.CIOCCRYPT, ocf64.CIOCGSESSION2 = 0xc0306365, 0xc0306367, 0xc040636a
	rows := []row{
		{Linux, cabi.Arch386, linux32}, {Linux, cabi.ArchARM, linux32}, {Linux, cabi.ArchAMD64, linux64},
		{OCF, cabi.Arch386, ocf32}, {OCF, cabi.ArchARM, ocf32}, {OCF, cabi.ArchAMD64, ocf64},
	}
	for _, r := range rows {
		got, err := IoctlNumbers(r.dialect, r.arch)
		if err != nil {
			t.Fatal(err)
		}
		if got != r.want {
			t.Errorf("%v on %s:\n got %#x\nwant %#x", r.dialect, r.arch.Name, got, r.want)
		}
	}
	if _, err := IoctlNumbers(Auto, cabi.Arch386); err == nil {
		t.Error("IoctlNumbers(Auto) should fail: Auto is not a dialect")
	}
}

// Detection relies on no request number meaning different things in the
// two dialects.
func TestDialectsShareNoNumber(t *testing.T) {
	list := func(n Ioctls) []uint32 {
		return []uint32{n.CRIOGET, n.CIOCGSESSION, n.CIOCFSESSION, n.CIOCCRYPT, n.CIOCASYMFEAT, n.CIOCGSESSINFO, n.CIOCGSESSION2, n.CIOCFINDDEV}
	}
	for _, a := range append(Arches, cabi.ArchARM64) {
		lin, _ := IoctlNumbers(Linux, a)
		bsd, _ := IoctlNumbers(OCF, a)
		seen := map[uint32]bool{}
		for _, n := range list(lin) {
			if n != 0 {
				seen[n] = true
			}
		}
		for _, n := range list(bsd) {
			if seen[n] {
				t.Errorf("%s: %#x is a request number in both dialects", a.Name, n)
			}
		}
	}
}

func TestLayoutSizes(t *testing.T) {
	defs := []*cabi.Struct{sessionOpDef, session2OpDef, cryptOpDef, sessionInfoOpDef, cryptFindOpDef}
	want := map[string][3]int{ // 386, arm, amd64
		"session_op":      {28, 28, 48},
		"session2_op":     {48, 48, 64},
		"crypt_op":        {28, 28, 48},
		"session_info_op": {268, 268, 268},
		"crypt_find_op":   {36, 36, 36},
	}
	for _, d := range defs {
		for i, a := range Arches {
			if got := d.Layout(a).Size; got != want[d.Name][i] {
				t.Errorf("sizeof(%s) on %s = %d, want %d", d.Name, a.Name, got, want[d.Name][i])
			}
		}
	}
	// crid follows ses directly: a nested session_op would put it at 48
	// on amd64.
	if off := session2OpDef.Layout(cabi.ArchAMD64).At["crid"].Off; off != 44 {
		t.Errorf("session2_op.crid on amd64 at %d, want 44", off)
	}
}

// 386 aligns 64-bit fields to 4, arm EABI and amd64 to 8. None of the
// /dev/crypto structs used has one, but the layout engine must get it
// right for the next struct that does.
func TestU64Alignment(t *testing.T) {
	def := &cabi.Struct{Name: "t", Fields: []cabi.Field{{Name: "a", Kind: cabi.U32}, {Name: "b", Kind: cabi.U64}}}
	for _, c := range []struct {
		arch       cabi.Arch
		off, size  int
		encodedHex string
	}{
		{cabi.Arch386, 4, 12, "01000000" + "0200000000000000"},
		{cabi.ArchARM, 8, 16, "01000000" + "00000000" + "0200000000000000"},
		{cabi.ArchAMD64, 8, 16, "01000000" + "00000000" + "0200000000000000"},
	} {
		l := def.Layout(c.arch)
		if l.At["b"].Off != c.off || l.Size != c.size {
			t.Errorf("%s: b at %d size %d, want %d and %d", c.arch.Name, l.At["b"].Off, l.Size, c.off, c.size)
		}
		b, err := encode(def, c.arch, map[string]uint64{"a": 1, "b": 2})
		if err != nil || hex.EncodeToString(b) != c.encodedHex {
			t.Errorf("%s: encode = %x, %v; want %s", c.arch.Name, b, err, c.encodedHex)
		}
	}
}

// The structs the ioctls really get must have the layout the pure
// description computes for this host.
func TestHostStructsMatchLayout(t *testing.T) {
	a, err := HostArch()
	if err != nil {
		t.Skip(err)
	}
	var so hostSessionOp
	var s2 hostSession2Op
	var co hostCryptOp
	var si hostSessionInfoOp
	var fo hostCryptFindOp
	cases := []struct {
		def     *cabi.Struct
		size    uintptr
		offsets map[string]uintptr
	}{
		{sessionOpDef, unsafe.Sizeof(so), map[string]uintptr{
			"cipher": unsafe.Offsetof(so.cipher), "mac": unsafe.Offsetof(so.mac), "keylen": unsafe.Offsetof(so.keylen),
			"key": unsafe.Offsetof(so.key), "mackeylen": unsafe.Offsetof(so.mackeylen), "mackey": unsafe.Offsetof(so.mackey),
			"ses": unsafe.Offsetof(so.ses)}},
		{session2OpDef, unsafe.Sizeof(s2), map[string]uintptr{
			"cipher": unsafe.Offsetof(s2.cipher), "mac": unsafe.Offsetof(s2.mac), "keylen": unsafe.Offsetof(s2.keylen),
			"key": unsafe.Offsetof(s2.key), "mackeylen": unsafe.Offsetof(s2.mackeylen), "mackey": unsafe.Offsetof(s2.mackey),
			"ses": unsafe.Offsetof(s2.ses), "crid": unsafe.Offsetof(s2.crid), "pad": unsafe.Offsetof(s2.pad)}},
		{cryptOpDef, unsafe.Sizeof(co), map[string]uintptr{
			"ses": unsafe.Offsetof(co.ses), "op": unsafe.Offsetof(co.op), "flags": unsafe.Offsetof(co.flags),
			"len": unsafe.Offsetof(co.len), "src": unsafe.Offsetof(co.src), "dst": unsafe.Offsetof(co.dst),
			"mac": unsafe.Offsetof(co.mac), "iv": unsafe.Offsetof(co.iv)}},
		{sessionInfoOpDef, unsafe.Sizeof(si), map[string]uintptr{
			"ses": unsafe.Offsetof(si.ses), "cipher_name": unsafe.Offsetof(si.cipherName),
			"cipher_driver": unsafe.Offsetof(si.cipherDriver), "hash_name": unsafe.Offsetof(si.hashName),
			"hash_driver": unsafe.Offsetof(si.hashDriver), "alignmask": unsafe.Offsetof(si.alignmask),
			"flags": unsafe.Offsetof(si.flags)}},
		{cryptFindOpDef, unsafe.Sizeof(fo), map[string]uintptr{
			"crid": unsafe.Offsetof(fo.crid), "name": unsafe.Offsetof(fo.name)}},
	}
	for _, c := range cases {
		l := c.def.Layout(a)
		if int(c.size) != l.Size {
			t.Errorf("%s on %s: Go struct is %d bytes, C layout %d", c.def.Name, a.Name, c.size, l.Size)
		}
		if len(c.offsets) != len(c.def.Fields) {
			t.Errorf("%s: test lists %d offsets for %d fields", c.def.Name, len(c.offsets), len(c.def.Fields))
		}
		for name, off := range c.offsets {
			if p, ok := l.At[name]; !ok || int(off) != p.Off {
				t.Errorf("%s.%s on %s: Go offset %d, C offset %d", c.def.Name, name, a.Name, off, p.Off)
			}
		}
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeSessionOp(t *testing.T) {
	cipher := SessionFields{Cipher: 11, KeyLen: 16, Key: 0x11223344, Ses: 0x01020304}
	cipher64 := cipher
	cipher64.Key = 0x1122334455667788
	mac := SessionFields{MAC: 7, MACKeyLen: 20, MACKey: 0xa0b0c0d0}
	s2 := SessionFields{Cipher: 2, KeyLen: 24, Key: 0x1000, CRID: 0x03000000}
	cases := []struct {
		name     string
		arch     cabi.Arch
		f        SessionFields
		session2 bool
		want     string
	}{
		{"aes/386", cabi.Arch386, cipher, false,
			"0b000000 00000000 10000000 44332211 00000000 00000000 04030201"},
		{"aes/arm", cabi.ArchARM, cipher, false,
			"0b000000 00000000 10000000 44332211 00000000 00000000 04030201"},
		{"aes/amd64", cabi.ArchAMD64, cipher64, false,
			"0b000000 00000000 10000000 00000000 8877665544332211 00000000 00000000 0000000000000000 04030201 00000000"},
		{"hmac/386", cabi.Arch386, mac, false,
			"00000000 07000000 00000000 00000000 14000000 d0c0b0a0 00000000"},
		{"hmac/amd64", cabi.ArchAMD64, mac, false,
			"00000000 07000000 00000000 00000000 0000000000000000 14000000 00000000 d0c0b0a000000000 00000000 00000000"},
		{"session2/386", cabi.Arch386, s2, true,
			"02000000 00000000 18000000 00100000 00000000 00000000 00000000 00000003" + strings.Repeat("00", 16)},
		{"session2/amd64", cabi.ArchAMD64, s2, true,
			"02000000 00000000 18000000 00000000 0010000000000000 00000000 00000000 0000000000000000 00000000 00000003" + strings.Repeat("00", 16)},
	}
	for _, c := range cases {
		got, err := EncodeSessionOp(c.arch, c.f, c.session2)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if want := unhex(t, c.want); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", c.name, got, want)
		}
	}
	if _, err := EncodeSessionOp(cabi.Arch386, cipher64, false); err == nil {
		t.Error("a 64-bit key address must not encode on 386")
	}
	if _, err := EncodeSessionOp(cabi.Arch386, s2, false); err == nil {
		t.Error("crid must not encode into a plain session_op")
	}
}

func TestEncodeCryptOp(t *testing.T) {
	f := CryptFields{Ses: 0x01020304, Op: 1, Len: 0x20, Src: 0x1000, Dst: 0x2000, IV: 0x3000}
	mac := CryptFields{Ses: 9, Op: 0, Flags: 0, Len: 8, Src: 0x1000, MAC: 0x4000}
	cases := []struct {
		name string
		arch cabi.Arch
		f    CryptFields
		want string
	}{
		{"cbc/386", cabi.Arch386, f, "04030201 0100 0000 20000000 00100000 00200000 00000000 00300000"},
		{"cbc/arm", cabi.ArchARM, f, "04030201 0100 0000 20000000 00100000 00200000 00000000 00300000"},
		{"cbc/amd64", cabi.ArchAMD64, f,
			"04030201 0100 0000 20000000 00000000 0010000000000000 0020000000000000 0000000000000000 0030000000000000"},
		{"mac/386", cabi.Arch386, mac, "09000000 0000 0000 08000000 00100000 00000000 00400000 00000000"},
		{"mac/amd64", cabi.ArchAMD64, mac,
			"09000000 0000 0000 08000000 00000000 0010000000000000 0000000000000000 0040000000000000 0000000000000000"},
	}
	for _, c := range cases {
		got, err := EncodeCryptOp(c.arch, c.f)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if want := unhex(t, c.want); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", c.name, got, want)
		}
	}
}
