package cryptodev

import (
	"encoding/binary"
	"fmt"
	"runtime"
)

// Arch is what decides a C struct's layout on one target: the size (and
// alignment) of pointers, long and size_t, and the alignment of 64-bit
// integers. All three targets are little-endian and use the generic Linux
// _IOC encoding (mips, powerpc, sparc and alpha encode differently and are
// not supported).
type Arch struct {
	Name     string
	PtrSize  int // sizeof(void *) == sizeof(long) == sizeof(size_t)
	U64Align int // alignof(uint64_t) inside structs
}

// The targets ocfw builds for, plus the development host.
var (
	Arch386   = Arch{Name: "386", PtrSize: 4, U64Align: 4}
	ArchARM   = Arch{Name: "arm", PtrSize: 4, U64Align: 8} // EABI aligns 64-bit fields to 8
	ArchAMD64 = Arch{Name: "amd64", PtrSize: 8, U64Align: 8}
	ArchARM64 = Arch{Name: "arm64", PtrSize: 8, U64Align: 8}
)

// Arches are the descriptions the tests pin ioctl numbers for.
var Arches = []Arch{Arch386, ArchARM, ArchAMD64}

// HostArch describes the architecture this binary runs on. Other GOARCH
// values are refused rather than guessed: their ioctl encoding or byte order
// may differ.
func HostArch() (Arch, error) {
	switch runtime.GOARCH {
	case "386":
		return Arch386, nil
	case "arm":
		return ArchARM, nil
	case "amd64":
		return ArchAMD64, nil
	case "arm64":
		return ArchARM64, nil
	}
	return Arch{}, fmt.Errorf("cryptodev: GOARCH %s is not supported (struct layout and ioctl encoding unchecked)", runtime.GOARCH)
}

type kind uint8

const (
	kU16 kind = iota
	kU32      // also C int and unsigned int: 4 bytes on every target here
	kU64
	kPtr   // pointers, long, size_t
	kBytes // char[n]
)

type field struct {
	name string
	kind kind
	n    int // byte count for kBytes
}

// structDef is a C struct as a list of fields, so that its layout can be
// computed for any Arch rather than only for the host.
type structDef struct {
	name   string
	fields []field
}

// Layout is a struct's layout on one Arch.
type Layout struct {
	Size    int
	Align   int
	Offsets map[string]int
}

func (k kind) sizeAlign(a Arch, n int) (size, align int) {
	switch k {
	case kU16:
		return 2, 2
	case kU32:
		return 4, 4
	case kU64:
		return 8, a.U64Align
	case kPtr:
		return a.PtrSize, a.PtrSize
	default:
		return n, 1
	}
}

func alignUp(off, align int) int { return (off + align - 1) / align * align }

// layout applies the C rules: each field at the next multiple of its
// alignment, the struct aligned to its strictest field and padded to a
// multiple of that.
func (s structDef) layout(a Arch) Layout {
	l := Layout{Align: 1, Offsets: make(map[string]int, len(s.fields))}
	off := 0
	for _, f := range s.fields {
		size, align := f.kind.sizeAlign(a, f.n)
		off = alignUp(off, align)
		l.Offsets[f.name] = off
		off += size
		if align > l.Align {
			l.Align = align
		}
	}
	l.Size = alignUp(off, l.Align)
	return l
}

// encode writes values (by field name; missing fields are zero) into the
// struct's bytes for Arch a. Byte-array fields are not encoded (they are
// output-only here). It fails when a value does not fit its field, e.g. a
// 64-bit address on a 32-bit target.
func (s structDef) encode(a Arch, values map[string]uint64) ([]byte, error) {
	l := s.layout(a)
	b := make([]byte, l.Size)
	for _, f := range s.fields {
		v, ok := values[f.name]
		if !ok {
			continue
		}
		size, _ := f.kind.sizeAlign(a, f.n)
		off := l.Offsets[f.name]
		switch {
		case f.kind == kBytes:
			return nil, fmt.Errorf("cryptodev: %s.%s is a byte array, not a number", s.name, f.name)
		case size < 8 && v>>(8*size) != 0:
			return nil, fmt.Errorf("cryptodev: %s.%s = %#x does not fit %d bytes on %s", s.name, f.name, v, size, a.Name)
		}
		switch size {
		case 2:
			binary.LittleEndian.PutUint16(b[off:], uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(b[off:], uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(b[off:], v)
		}
	}
	for name := range values {
		if _, ok := l.Offsets[name]; !ok {
			return nil, fmt.Errorf("cryptodev: %s has no field %q", s.name, name)
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
	sessionOpDef = structDef{name: "session_op", fields: []field{
		{name: "cipher", kind: kU32},
		{name: "mac", kind: kU32},
		{name: "keylen", kind: kU32},
		{name: "key", kind: kPtr},
		{name: "mackeylen", kind: kU32},
		{name: "mackey", kind: kPtr},
		{name: "ses", kind: kU32},
	}}
	// OCF's session2_op: session_op plus the crypto device id and room
	// for growth. The fields follow ses directly (not a nested struct,
	// whose tail padding would move crid on 64-bit targets).
	session2OpDef = structDef{name: "session2_op", fields: append(append([]field(nil), sessionOpDef.fields...),
		field{name: "crid", kind: kU32},
		field{name: "pad", kind: kBytes, n: 16},
	)}
	// crypt_op is the same in both dialects: u32 ses, u16 op, u16 flags,
	// u32 len, then four pointers.
	cryptOpDef = structDef{name: "crypt_op", fields: []field{
		{name: "ses", kind: kU32},
		{name: "op", kind: kU16},
		{name: "flags", kind: kU16},
		{name: "len", kind: kU32},
		{name: "src", kind: kPtr},
		{name: "dst", kind: kPtr},
		{name: "mac", kind: kPtr},
		{name: "iv", kind: kPtr},
	}}
	// cryptodev-linux's session_info_op: two struct alg_info of
	// char cra_name[64], cra_driver_name[64].
	sessionInfoOpDef = structDef{name: "session_info_op", fields: []field{
		{name: "ses", kind: kU32},
		{name: "cipher_name", kind: kBytes, n: algNameLen},
		{name: "cipher_driver", kind: kBytes, n: algNameLen},
		{name: "hash_name", kind: kBytes, n: algNameLen},
		{name: "hash_driver", kind: kBytes, n: algNameLen},
		{name: "alignmask", kind: kU16},
		{name: "flags", kind: kU32},
	}}
	// OCF's crypt_find_op: int crid; char name[32].
	cryptFindOpDef = structDef{name: "crypt_find_op", fields: []field{
		{name: "crid", kind: kU32},
		{name: "name", kind: kBytes, n: findNameLen},
	}}
	u32Def = structDef{name: "uint32_t", fields: []field{{name: "v", kind: kU32}}}
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

func iowr(nr uint8, s structDef, a Arch) uint32 {
	return ioc(iocRead|iocWrite, 'c', nr, s.layout(a).Size)
}
func iow(nr uint8, s structDef, a Arch) uint32 { return ioc(iocWrite, 'c', nr, s.layout(a).Size) }
func ior(nr uint8, s structDef, a Arch) uint32 { return ioc(iocRead, 'c', nr, s.layout(a).Size) }

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
func IoctlNumbers(d Dialect, a Arch) (Ioctls, error) {
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
func EncodeSessionOp(a Arch, f SessionFields, session2 bool) ([]byte, error) {
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
		return sessionOpDef.encode(a, v)
	}
	v["crid"] = uint64(f.CRID)
	return session2OpDef.encode(a, v)
}

// EncodeCryptOp returns the bytes of a crypt_op as the kernel reads them
// on Arch a.
func EncodeCryptOp(a Arch, f CryptFields) ([]byte, error) {
	return cryptOpDef.encode(a, map[string]uint64{
		"ses": uint64(f.Ses), "op": uint64(f.Op), "flags": uint64(f.Flags),
		"len": uint64(f.Len), "src": f.Src, "dst": f.Dst, "mac": f.MAC, "iv": f.IV,
	})
}
