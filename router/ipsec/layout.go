package ipsec

import (
	"encoding/binary"
	"fmt"
	"runtime"
)

// Arch is what decides an XFRM struct's layout on one target. The XFRM
// structs hold no pointers or longs; the only thing that differs between
// the targets is where a __u64 may sit: i386 aligns 64-bit integers to 4
// bytes inside structs, ARM EABI and amd64 to 8. That moves
// xfrm_lifetime_cfg inside xfrm_usersa_info and changes the tail padding
// of every struct that holds one. All targets are little-endian (__u*
// fields in host order, __be* fields in network order).
type Arch struct {
	Name     string
	U64Align int // alignof(__u64) inside a struct
}

// The targets ocfw builds for, plus the development host.
var (
	Arch386   = Arch{Name: "386", U64Align: 4}
	ArchARM   = Arch{Name: "arm", U64Align: 8}
	ArchAMD64 = Arch{Name: "amd64", U64Align: 8}
	ArchARM64 = Arch{Name: "arm64", U64Align: 8}
)

// HostArch is the layout of the running kernel's ABI, taken from GOARCH:
// a GOARCH=386 binary runs on an i386 kernel (a 64-bit kernel's
// compat layer for 32-bit XFRM messages is optional and not relied on).
// Other GOARCH values are refused rather than guessed.
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
	return Arch{}, fmt.Errorf("ipsec: GOARCH %s is not supported (XFRM struct layout unchecked)", runtime.GOARCH)
}

type kind uint8

const (
	kU8 kind = iota
	kU16
	kU32 // also C int and unsigned int
	kU64
	kBE16
	kBE32
	kAddr   // xfrm_address_t: a union of __be32 a4, __be32 a6[4], in6_addr
	kBytes  // char[n]
	kStruct // a nested struct
)

type field struct {
	name string
	kind kind
	n    int        // byte count for kBytes
	sub  *structDef // for kStruct
}

// structDef is a C struct as a list of fields, so that its layout can be
// computed for any Arch, not only the one the tests run on.
type structDef struct {
	name   string
	fields []field
}

// Layout is a struct's layout on one Arch. Offsets are keyed by field
// name, nested fields by their dotted path ("sel.daddr").
type Layout struct {
	Size    int
	Align   int
	Offsets map[string]int
	kinds   map[string]kind
	sizes   map[string]int
}

func alignUp(off, align int) int { return (off + align - 1) / align * align }

func (f field) sizeAlign(a Arch) (size, align int) {
	switch f.kind {
	case kU8:
		return 1, 1
	case kU16, kBE16:
		return 2, 2
	case kU32, kBE32:
		return 4, 4
	case kU64:
		return 8, a.U64Align
	case kAddr:
		return 16, 4
	case kBytes:
		return f.n, 1
	default:
		l := f.sub.layout(a)
		return l.Size, l.Align
	}
}

// layout applies the C rules: each field at the next multiple of its
// alignment, the struct aligned to its strictest field and padded to a
// multiple of that.
func (s *structDef) layout(a Arch) Layout {
	l := Layout{Align: 1, Offsets: map[string]int{}, kinds: map[string]kind{}, sizes: map[string]int{}}
	off := 0
	for _, f := range s.fields {
		size, align := f.sizeAlign(a)
		off = alignUp(off, align)
		l.Offsets[f.name] = off
		l.kinds[f.name] = f.kind
		l.sizes[f.name] = size
		if f.kind == kStruct {
			sub := f.sub.layout(a)
			for name, o := range sub.Offsets {
				l.Offsets[f.name+"."+name] = off + o
				l.kinds[f.name+"."+name] = sub.kinds[name]
				l.sizes[f.name+"."+name] = sub.sizes[name]
			}
		}
		off += size
		if align > l.Align {
			l.Align = align
		}
	}
	l.Size = alignUp(off, l.Align)
	return l
}

// record is one struct's bytes on one Arch, read and written by field
// path. A wrong path or a value of the wrong kind is a programming error:
// it is kept in err (the first one) for the caller to return, so that
// every message builder ends with one check.
type record struct {
	def *structDef
	l   Layout
	b   []byte
	err error
}

func (s *structDef) newRecord(a Arch) *record {
	l := s.layout(a)
	return &record{def: s, l: l, b: make([]byte, l.Size)}
}

// readRecord wraps b, which must hold at least the struct's size.
func (s *structDef) readRecord(a Arch, b []byte) (*record, error) {
	l := s.layout(a)
	if len(b) < l.Size {
		return nil, fmt.Errorf("ipsec: %s is %d bytes on %s, message has %d", s.name, l.Size, a.Name, len(b))
	}
	return &record{def: s, l: l, b: b[:l.Size]}, nil
}

func (r *record) at(path string, want ...kind) int {
	off, ok := r.l.Offsets[path]
	if !ok {
		r.fail(fmt.Errorf("ipsec: %s has no field %q", r.def.name, path))
		return -1
	}
	k := r.l.kinds[path]
	for _, w := range want {
		if k == w {
			return off
		}
	}
	r.fail(fmt.Errorf("ipsec: %s.%s is not of the kind used", r.def.name, path))
	return -1
}

func (r *record) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *record) putU8(path string, v uint8) {
	if off := r.at(path, kU8); off >= 0 {
		r.b[off] = v
	}
}

func (r *record) putU16(path string, v uint16) {
	if off := r.at(path, kU16); off >= 0 {
		binary.LittleEndian.PutUint16(r.b[off:], v)
	}
}

func (r *record) putU32(path string, v uint32) {
	if off := r.at(path, kU32); off >= 0 {
		binary.LittleEndian.PutUint32(r.b[off:], v)
	}
}

func (r *record) putU64(path string, v uint64) {
	if off := r.at(path, kU64); off >= 0 {
		binary.LittleEndian.PutUint64(r.b[off:], v)
	}
}

func (r *record) putBE32(path string, v uint32) {
	if off := r.at(path, kBE32); off >= 0 {
		binary.BigEndian.PutUint32(r.b[off:], v)
	}
}

// putBytes copies v into an address or char[n] field; it must fit.
func (r *record) putBytes(path string, v []byte) {
	off := r.at(path, kAddr, kBytes)
	if off < 0 {
		return
	}
	size := r.l.sizes[path]
	if len(v) > size {
		r.fail(fmt.Errorf("ipsec: %s.%s: %d bytes do not fit in %d", r.def.name, path, len(v), size))
		return
	}
	copy(r.b[off:off+size], v)
}

func (r *record) u8(path string) uint8 {
	if off := r.at(path, kU8); off >= 0 {
		return r.b[off]
	}
	return 0
}

func (r *record) u16(path string) uint16 {
	if off := r.at(path, kU16); off >= 0 {
		return binary.LittleEndian.Uint16(r.b[off:])
	}
	return 0
}

func (r *record) u32(path string) uint32 {
	if off := r.at(path, kU32); off >= 0 {
		return binary.LittleEndian.Uint32(r.b[off:])
	}
	return 0
}

func (r *record) u64(path string) uint64 {
	if off := r.at(path, kU64); off >= 0 {
		return binary.LittleEndian.Uint64(r.b[off:])
	}
	return 0
}

func (r *record) be32(path string) uint32 {
	if off := r.at(path, kBE32); off >= 0 {
		return binary.BigEndian.Uint32(r.b[off:])
	}
	return 0
}

// bytes returns a copy of an address or char[n] field.
func (r *record) bytes(path string) []byte {
	if off := r.at(path, kAddr, kBytes); off >= 0 {
		return append([]byte(nil), r.b[off:off+r.l.sizes[path]]...)
	}
	return nil
}

// The structs of include/uapi/linux/xfrm.h, field for field as declared
// there (unchanged since Linux 2.6.x; xfrm_replay_state_esn since 2.6.39).
// Flexible array members (alg_key[], bmp[]) are not part of the struct:
// their bytes follow it in the attribute.
var (
	selectorDef = &structDef{name: "xfrm_selector", fields: []field{
		{name: "daddr", kind: kAddr},
		{name: "saddr", kind: kAddr},
		{name: "dport", kind: kBE16},
		{name: "dport_mask", kind: kBE16},
		{name: "sport", kind: kBE16},
		{name: "sport_mask", kind: kBE16},
		{name: "family", kind: kU16},
		{name: "prefixlen_d", kind: kU8},
		{name: "prefixlen_s", kind: kU8},
		{name: "proto", kind: kU8},
		{name: "ifindex", kind: kU32},
		{name: "user", kind: kU32},
	}}
	idDef = &structDef{name: "xfrm_id", fields: []field{
		{name: "daddr", kind: kAddr},
		{name: "spi", kind: kBE32},
		{name: "proto", kind: kU8},
	}}
	lifetimeCfgDef = &structDef{name: "xfrm_lifetime_cfg", fields: []field{
		{name: "soft_byte_limit", kind: kU64},
		{name: "hard_byte_limit", kind: kU64},
		{name: "soft_packet_limit", kind: kU64},
		{name: "hard_packet_limit", kind: kU64},
		{name: "soft_add_expires_seconds", kind: kU64},
		{name: "hard_add_expires_seconds", kind: kU64},
		{name: "soft_use_expires_seconds", kind: kU64},
		{name: "hard_use_expires_seconds", kind: kU64},
	}}
	lifetimeCurDef = &structDef{name: "xfrm_lifetime_cur", fields: []field{
		{name: "bytes", kind: kU64},
		{name: "packets", kind: kU64},
		{name: "add_time", kind: kU64},
		{name: "use_time", kind: kU64},
	}}
	statsDef = &structDef{name: "xfrm_stats", fields: []field{
		{name: "replay_window", kind: kU32},
		{name: "replay", kind: kU32},
		{name: "integrity_failed", kind: kU32},
	}}
	usersaInfoDef = &structDef{name: "xfrm_usersa_info", fields: []field{
		{name: "sel", kind: kStruct, sub: selectorDef},
		{name: "id", kind: kStruct, sub: idDef},
		{name: "saddr", kind: kAddr},
		{name: "lft", kind: kStruct, sub: lifetimeCfgDef},
		{name: "curlft", kind: kStruct, sub: lifetimeCurDef},
		{name: "stats", kind: kStruct, sub: statsDef},
		{name: "seq", kind: kU32},
		{name: "reqid", kind: kU32},
		{name: "family", kind: kU16},
		{name: "mode", kind: kU8},
		{name: "replay_window", kind: kU8},
		{name: "flags", kind: kU8},
	}}
	usersaIDDef = &structDef{name: "xfrm_usersa_id", fields: []field{
		{name: "daddr", kind: kAddr},
		{name: "spi", kind: kBE32},
		{name: "family", kind: kU16},
		{name: "proto", kind: kU8},
	}}
	userpolicyInfoDef = &structDef{name: "xfrm_userpolicy_info", fields: []field{
		{name: "sel", kind: kStruct, sub: selectorDef},
		{name: "lft", kind: kStruct, sub: lifetimeCfgDef},
		{name: "curlft", kind: kStruct, sub: lifetimeCurDef},
		{name: "priority", kind: kU32},
		{name: "index", kind: kU32},
		{name: "dir", kind: kU8},
		{name: "action", kind: kU8},
		{name: "flags", kind: kU8},
		{name: "share", kind: kU8},
	}}
	userpolicyIDDef = &structDef{name: "xfrm_userpolicy_id", fields: []field{
		{name: "sel", kind: kStruct, sub: selectorDef},
		{name: "index", kind: kU32},
		{name: "dir", kind: kU8},
	}}
	userTmplDef = &structDef{name: "xfrm_user_tmpl", fields: []field{
		{name: "id", kind: kStruct, sub: idDef},
		{name: "family", kind: kU16},
		{name: "saddr", kind: kAddr},
		{name: "reqid", kind: kU32},
		{name: "mode", kind: kU8},
		{name: "share", kind: kU8},
		{name: "optional", kind: kU8},
		{name: "aalgos", kind: kU32},
		{name: "ealgos", kind: kU32},
		{name: "calgos", kind: kU32},
	}}
	algoDef = &structDef{name: "xfrm_algo", fields: []field{
		{name: "alg_name", kind: kBytes, n: algNameLen},
		{name: "alg_key_len", kind: kU32}, // bits
	}}
	algoAuthDef = &structDef{name: "xfrm_algo_auth", fields: []field{
		{name: "alg_name", kind: kBytes, n: algNameLen},
		{name: "alg_key_len", kind: kU32},   // bits
		{name: "alg_trunc_len", kind: kU32}, // bits
	}}
	replayESNDef = &structDef{name: "xfrm_replay_state_esn", fields: []field{
		{name: "bmp_len", kind: kU32}, // in __u32 words
		{name: "oseq", kind: kU32},
		{name: "seq", kind: kU32},
		{name: "oseq_hi", kind: kU32},
		{name: "seq_hi", kind: kU32},
		{name: "replay_window", kind: kU32},
	}}
)

const algNameLen = 64
