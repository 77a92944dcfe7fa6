package cryptodev

import (
	"encoding/binary"
	"fmt"
	"maps"
	"runtime"
	"slices"

	"github.com/ocfw/ocfw/internal/cabi"
)

// Arches are the targets the tests pin ioctl numbers for.
var Arches = []cabi.Arch{cabi.Arch386, cabi.ArchARM, cabi.ArchAMD64}

// HostArch describes the architecture this binary runs on. Other GOARCH
// values are refused rather than guessed: their ioctl encoding or byte
// order may differ (all targets here are little-endian and use the
// generic Linux _IOC encoding; mips, powerpc, sparc and alpha encode
// differently).
func HostArch() (cabi.Arch, error) {
	if a, ok := cabi.Host(); ok {
		return a, nil
	}
	return cabi.Arch{}, fmt.Errorf("cryptodev: GOARCH %s is not supported (struct layout and ioctl encoding unchecked)", runtime.GOARCH)
}

// encode writes values (by field name; missing fields are zero) into the
// struct's bytes for Arch a. Byte-array fields are not encoded (they are
// output-only here). It fails when a value does not fit its field, e.g. a
// 64-bit address on a 32-bit target.
func encode(s *cabi.Struct, a cabi.Arch, values map[string]uint64) ([]byte, error) {
	l := s.Layout(a)
	b := make([]byte, l.Size)
	// Sorted, so that of several bad values the same one is named each time.
	for _, name := range slices.Sorted(maps.Keys(values)) {
		v := values[name]
		p, ok := l.At[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("cryptodev: %s has no field %q", s.Name, name)
		case p.Kind == cabi.Bytes:
			return nil, fmt.Errorf("cryptodev: %s.%s is a byte array, not a number", s.Name, name)
		case p.Size < 8 && v>>(8*p.Size) != 0:
			return nil, fmt.Errorf("cryptodev: %s.%s = %#x does not fit %d bytes on %s", s.Name, name, v, p.Size, a.Name)
		}
		switch p.Size {
		case 2:
			binary.LittleEndian.PutUint16(b[p.Off:], uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(b[p.Off:], uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(b[p.Off:], v)
		}
	}
	return b, nil
}

// The structs of both dialects, field for field as their headers declare
// them. cryptodev-linux: crypto/cryptodev.h of the released 1.x series (the
// unreleased compression branch added session_op.compr and crypt_op.dlen,
// which changes every size; it is not supported). OCF: OCF-linux's
// crypto/cryptodev.h (FreeBSD's opencrypto of 2007 ported to Linux).
var (
	// session_op is the same in both dialects (OCF declares mackeylen
	// as int, cryptodev-linux as __u32: same size and place).
	sessionOpDef = &cabi.Struct{Name: "session_op", Fields: []cabi.Field{
		{Name: "cipher", Kind: cabi.U32},
		{Name: "mac", Kind: cabi.U32},
		{Name: "keylen", Kind: cabi.U32},
		{Name: "key", Kind: cabi.Ptr},
		{Name: "mackeylen", Kind: cabi.U32},
		{Name: "mackey", Kind: cabi.Ptr},
		{Name: "ses", Kind: cabi.U32},
	}}
	// OCF's session2_op: session_op plus the crypto device id and room
	// for growth. The fields follow ses directly (not a nested struct,
	// whose tail padding would move crid on 64-bit targets).
	session2OpDef = &cabi.Struct{Name: "session2_op", Fields: append(append([]cabi.Field(nil), sessionOpDef.Fields...),
		cabi.Field{Name: "crid", Kind: cabi.U32},
		cabi.Field{Name: "pad", Kind: cabi.Bytes, N: 16},
	)}
	// crypt_op is the same in both dialects: u32 ses, u16 op, u16 flags,
	// u32 len, then four pointers.
	cryptOpDef = &cabi.Struct{Name: "crypt_op", Fields: []cabi.Field{
		{Name: "ses", Kind: cabi.U32},
		{Name: "op", Kind: cabi.U16},
		{Name: "flags", Kind: cabi.U16},
		{Name: "len", Kind: cabi.U32},
		{Name: "src", Kind: cabi.Ptr},
		{Name: "dst", Kind: cabi.Ptr},
		{Name: "mac", Kind: cabi.Ptr},
		{Name: "iv", Kind: cabi.Ptr},
	}}
	// cryptodev-linux's session_info_op: two struct alg_info of
	// char cra_name[64], cra_driver_name[64].
	sessionInfoOpDef = &cabi.Struct{Name: "session_info_op", Fields: []cabi.Field{
		{Name: "ses", Kind: cabi.U32},
		{Name: "cipher_name", Kind: cabi.Bytes, N: algNameLen},
		{Name: "cipher_driver", Kind: cabi.Bytes, N: algNameLen},
		{Name: "hash_name", Kind: cabi.Bytes, N: algNameLen},
		{Name: "hash_driver", Kind: cabi.Bytes, N: algNameLen},
		{Name: "alignmask", Kind: cabi.U16},
		{Name: "flags", Kind: cabi.U32},
	}}
	// OCF's crypt_find_op: int crid; char name[32].
	cryptFindOpDef = &cabi.Struct{Name: "crypt_find_op", Fields: []cabi.Field{
		{Name: "crid", Kind: cabi.U32},
		{Name: "name", Kind: cabi.Bytes, N: findNameLen},
	}}
	u32Def = &cabi.Struct{Name: "uint32_t", Fields: []cabi.Field{{Name: "v", Kind: cabi.U32}}}
)

const (
	algNameLen  = 64 // CRYPTODEV_MAX_ALG_NAME
	findNameLen = 32
)

// Linux _IOC encoding on x86 and arm: nr 8 bits, type 8 bits, size 14
// bits, direction 2 bits (write = 1, read = 2, as seen from user space).
const (
	iocWrite = 1
	iocRead  = 2
)

func ioc(dir uint32, typ byte, nr uint8, size int) uint32 {
	return dir<<30 | uint32(size)&0x3fff<<16 | uint32(typ)<<8 | uint32(nr)
}

func iowr(nr uint8, s *cabi.Struct, a cabi.Arch) uint32 {
	return ioc(iocRead|iocWrite, 'c', nr, s.Layout(a).Size)
}
func iow(nr uint8, s *cabi.Struct, a cabi.Arch) uint32 {
	return ioc(iocWrite, 'c', nr, s.Layout(a).Size)
}
func ior(nr uint8, s *cabi.Struct, a cabi.Arch) uint32 {
	return ioc(iocRead, 'c', nr, s.Layout(a).Size)
}

// Ioctls are one dialect's request numbers on one Arch. A zero number
// means the dialect has no such request.
type Ioctls struct {
	CRIOGET       uint32
	CIOCGSESSION  uint32
	CIOCFSESSION  uint32
	CIOCCRYPT     uint32
	CIOCASYMFEAT  uint32
	CIOCGSESSINFO uint32 // cryptodev-linux only
	CIOCGSESSION2 uint32 // OCF only
	CIOCFINDDEV   uint32 // OCF only
}

// IoctlNumbers derives dialect d's ioctl numbers from the struct layouts
// on Arch a.
func IoctlNumbers(d Dialect, a cabi.Arch) (Ioctls, error) {
	switch d {
	case Linux:
		return Ioctls{
			CRIOGET:       iowr(101, u32Def, a),
			CIOCGSESSION:  iowr(102, sessionOpDef, a),
			CIOCFSESSION:  iow(103, u32Def, a),
			CIOCCRYPT:     iowr(104, cryptOpDef, a),
			CIOCASYMFEAT:  ior(106, u32Def, a),
			CIOCGSESSINFO: iowr(107, sessionInfoOpDef, a),
		}, nil
	case OCF:
		return Ioctls{
			CRIOGET:       iowr(100, u32Def, a),
			CIOCGSESSION:  iowr(101, sessionOpDef, a),
			CIOCFSESSION:  iow(102, u32Def, a),
			CIOCCRYPT:     iowr(103, cryptOpDef, a),
			CIOCASYMFEAT:  ior(105, u32Def, a),
			CIOCGSESSION2: iowr(106, session2OpDef, a),
			CIOCFINDDEV:   iowr(108, cryptFindOpDef, a),
		}, nil
	}
	return Ioctls{}, fmt.Errorf("cryptodev: no ioctl numbers for dialect %v", d)
}

// SessionFields is the content of a session_op / session2_op with
// addresses as plain numbers, so that it can be encoded for any Arch.
type SessionFields struct {
	Cipher, MAC uint32
	KeyLen      uint32
	Key         uint64
	MACKeyLen   uint32
	MACKey      uint64
	Ses         uint32
	CRID        uint32 // session2_op only
}

// CryptFields is the content of a crypt_op.
type CryptFields struct {
	Ses       uint32
	Op, Flags uint16
	Len       uint32
	Src, Dst  uint64
	MAC, IV   uint64
}

// EncodeSessionOp returns the bytes of a session_op (session2 false) or
// OCF session2_op (session2 true) as the kernel reads them on Arch a.
func EncodeSessionOp(a cabi.Arch, f SessionFields, session2 bool) ([]byte, error) {
	v := map[string]uint64{
		"cipher": uint64(f.Cipher), "mac": uint64(f.MAC),
		"keylen": uint64(f.KeyLen), "key": f.Key,
		"mackeylen": uint64(f.MACKeyLen), "mackey": f.MACKey,
		"ses": uint64(f.Ses),
	}
	if !session2 {
		if f.CRID != 0 {
			return nil, fmt.Errorf("cryptodev: session_op has no crid (use session2_op)")
		}
		return encode(sessionOpDef, a, v)
	}
	v["crid"] = uint64(f.CRID)
	return encode(session2OpDef, a, v)
}

// EncodeCryptOp returns the bytes of a crypt_op as the kernel reads them
// on Arch a.
func EncodeCryptOp(a cabi.Arch, f CryptFields) ([]byte, error) {
	return encode(cryptOpDef, a, map[string]uint64{
		"ses": uint64(f.Ses), "op": uint64(f.Op), "flags": uint64(f.Flags),
		"len": uint64(f.Len), "src": f.Src, "dst": f.Dst, "mac": f.MAC, "iv": f.IV,
	})
}
