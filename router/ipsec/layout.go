package ipsec

import (
	"encoding/binary"
	"fmt"
	"runtime"

	"github.com/ocfw/ocfw/internal/cabi"
)

// HostArch is the layout of the running kernel's ABI, taken from GOARCH:
// a GOARCH=386 binary runs on an i386 kernel (a 64-bit kernel's
// compat layer for 32-bit XFRM messages is optional and not relied on).
// Other GOARCH values are refused rather than guessed.
//
// The XFRM structs hold no pointers or longs; the only thing that differs
// between the targets is where a __u64 may sit (cabi.Arch.U64Align). That
// moves xfrm_lifetime_cfg inside xfrm_usersa_info and changes the tail
// padding of every struct that holds one. __u* fields are in host order
// (little-endian on every target), __be* fields in network order.
func HostArch() (cabi.Arch, error) {
	if a, ok := cabi.Host(); ok {
		return a, nil
	}
	return cabi.Arch{}, fmt.Errorf("ipsec: GOARCH %s is not supported (XFRM struct layout unchecked)", runtime.GOARCH)
}

// record is one struct's bytes on one Arch, read and written by field
// path. A wrong path or a value of the wrong kind is a programming error:
// it is kept in err (the first one) for the caller to return, so that
// every message builder ends with one check.
type record struct {
	def *cabi.Struct
	l   cabi.Layout
	b   []byte
	err error
}

func newRecord(s *cabi.Struct, a cabi.Arch) *record {
	l := s.Layout(a)
	return &record{def: s, l: l, b: make([]byte, l.Size)}
}

// readRecord wraps b, which must hold at least the struct's size.
func readRecord(s *cabi.Struct, a cabi.Arch, b []byte) (*record, error) {
	l := s.Layout(a)
	if len(b) < l.Size {
		return nil, fmt.Errorf("ipsec: %s is %d bytes on %s, message has %d", s.Name, l.Size, a.Name, len(b))
	}
	return &record{def: s, l: l, b: b[:l.Size]}, nil
}

func (r *record) at(path string, want cabi.Kind) int {
	p, ok := r.l.At[path]
	if !ok {
		r.fail(fmt.Errorf("ipsec: %s has no field %q", r.def.Name, path))
		return -1
	}
	if p.Kind != want {
		r.fail(fmt.Errorf("ipsec: %s.%s is not of the kind used", r.def.Name, path))
		return -1
	}
	return p.Off
}

func (r *record) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// put writes v into the number field at path, which must be of kind k:
// __u* in host order (little-endian on every target), __be* in network
// order.
func (r *record) put(path string, k cabi.Kind, v uint64) {
	off := r.at(path, k)
	if off < 0 {
		return
	}
	b, o := r.b[off:], byteOrder(k)
	switch r.l.At[path].Size {
	case 1:
		b[0] = uint8(v)
	case 2:
		o.PutUint16(b, uint16(v))
	case 4:
		o.PutUint32(b, uint32(v))
	case 8:
		o.PutUint64(b, v)
	}
}

// get reads the number field at path, which must be of kind k; 0 if not.
func (r *record) get(path string, k cabi.Kind) uint64 {
	off := r.at(path, k)
	if off < 0 {
		return 0
	}
	b, o := r.b[off:], byteOrder(k)
	switch r.l.At[path].Size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(o.Uint16(b))
	case 4:
		return uint64(o.Uint32(b))
	}
	return o.Uint64(b)
}

func byteOrder(k cabi.Kind) binary.ByteOrder {
	if k == cabi.BE16 || k == cabi.BE32 {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// The typed accessors keep each call site to its field's C type.
func (r *record) putU8(path string, v uint8)    { r.put(path, cabi.U8, uint64(v)) }
func (r *record) putU16(path string, v uint16)  { r.put(path, cabi.U16, uint64(v)) }
func (r *record) putU32(path string, v uint32)  { r.put(path, cabi.U32, uint64(v)) }
func (r *record) putU64(path string, v uint64)  { r.put(path, cabi.U64, v) }
func (r *record) putBE32(path string, v uint32) { r.put(path, cabi.BE32, uint64(v)) }
func (r *record) u8(path string) uint8          { return uint8(r.get(path, cabi.U8)) }
func (r *record) u16(path string) uint16        { return uint16(r.get(path, cabi.U16)) }
func (r *record) u32(path string) uint32        { return uint32(r.get(path, cabi.U32)) }
func (r *record) u64(path string) uint64        { return r.get(path, cabi.U64) }
func (r *record) be32(path string) uint32       { return uint32(r.get(path, cabi.BE32)) }

// putBytes copies v into an address or char[n] field; it must fit.
func (r *record) putBytes(path string, v []byte) {
	off := r.at(path, cabi.Bytes)
	if off < 0 {
		return
	}
	size := r.l.At[path].Size
	if len(v) > size {
		r.fail(fmt.Errorf("ipsec: %s.%s: %d bytes do not fit in %d", r.def.Name, path, len(v), size))
		return
	}
	copy(r.b[off:off+size], v)
}

// bytes returns a copy of an address or char[n] field.
func (r *record) bytes(path string) []byte {
	if off := r.at(path, cabi.Bytes); off >= 0 {
		return append([]byte(nil), r.b[off:off+r.l.At[path].Size]...)
	}
	return nil
}

// The structs of include/uapi/linux/xfrm.h, field for field as declared
// there (unchanged since Linux 2.6.x; xfrm_replay_state_esn since 2.6.39).
// Flexible array members (alg_key[], bmp[]) are not part of the struct:
// their bytes follow it in the attribute.
var (
	selectorDef = &cabi.Struct{Name: "xfrm_selector", Fields: []cabi.Field{
		addr("daddr"),
		addr("saddr"),
		{Name: "dport", Kind: cabi.BE16},
		{Name: "dport_mask", Kind: cabi.BE16},
		{Name: "sport", Kind: cabi.BE16},
		{Name: "sport_mask", Kind: cabi.BE16},
		{Name: "family", Kind: cabi.U16},
		{Name: "prefixlen_d", Kind: cabi.U8},
		{Name: "prefixlen_s", Kind: cabi.U8},
		{Name: "proto", Kind: cabi.U8},
		{Name: "ifindex", Kind: cabi.U32},
		{Name: "user", Kind: cabi.U32},
	}}
	idDef = &cabi.Struct{Name: "xfrm_id", Fields: []cabi.Field{
		addr("daddr"),
		{Name: "spi", Kind: cabi.BE32},
		{Name: "proto", Kind: cabi.U8},
	}}
	lifetimeCfgDef = &cabi.Struct{Name: "xfrm_lifetime_cfg", Fields: []cabi.Field{
		{Name: "soft_byte_limit", Kind: cabi.U64},
		{Name: "hard_byte_limit", Kind: cabi.U64},
		{Name: "soft_packet_limit", Kind: cabi.U64},
		{Name: "hard_packet_limit", Kind: cabi.U64},
		{Name: "soft_add_expires_seconds", Kind: cabi.U64},
		{Name: "hard_add_expires_seconds", Kind: cabi.U64},
		{Name: "soft_use_expires_seconds", Kind: cabi.U64},
		{Name: "hard_use_expires_seconds", Kind: cabi.U64},
	}}
	lifetimeCurDef = &cabi.Struct{Name: "xfrm_lifetime_cur", Fields: []cabi.Field{
		{Name: "bytes", Kind: cabi.U64},
		{Name: "packets", Kind: cabi.U64},
		{Name: "add_time", Kind: cabi.U64},
		{Name: "use_time", Kind: cabi.U64},
	}}
	statsDef = &cabi.Struct{Name: "xfrm_stats", Fields: []cabi.Field{
		{Name: "replay_window", Kind: cabi.U32},
		{Name: "replay", Kind: cabi.U32},
		{Name: "integrity_failed", Kind: cabi.U32},
	}}
	usersaInfoDef = &cabi.Struct{Name: "xfrm_usersa_info", Fields: []cabi.Field{
		{Name: "sel", Kind: cabi.Nested, Sub: selectorDef},
		{Name: "id", Kind: cabi.Nested, Sub: idDef},
		addr("saddr"),
		{Name: "lft", Kind: cabi.Nested, Sub: lifetimeCfgDef},
		{Name: "curlft", Kind: cabi.Nested, Sub: lifetimeCurDef},
		{Name: "stats", Kind: cabi.Nested, Sub: statsDef},
		{Name: "seq", Kind: cabi.U32},
		{Name: "reqid", Kind: cabi.U32},
		{Name: "family", Kind: cabi.U16},
		{Name: "mode", Kind: cabi.U8},
		{Name: "replay_window", Kind: cabi.U8},
		{Name: "flags", Kind: cabi.U8},
	}}
	usersaIDDef = &cabi.Struct{Name: "xfrm_usersa_id", Fields: []cabi.Field{
		addr("daddr"),
		{Name: "spi", Kind: cabi.BE32},
		{Name: "family", Kind: cabi.U16},
		{Name: "proto", Kind: cabi.U8},
	}}
	userpolicyInfoDef = &cabi.Struct{Name: "xfrm_userpolicy_info", Fields: []cabi.Field{
		{Name: "sel", Kind: cabi.Nested, Sub: selectorDef},
		{Name: "lft", Kind: cabi.Nested, Sub: lifetimeCfgDef},
		{Name: "curlft", Kind: cabi.Nested, Sub: lifetimeCurDef},
		{Name: "priority", Kind: cabi.U32},
		{Name: "index", Kind: cabi.U32},
		{Name: "dir", Kind: cabi.U8},
		{Name: "action", Kind: cabi.U8},
		{Name: "flags", Kind: cabi.U8},
		{Name: "share", Kind: cabi.U8},
	}}
	userpolicyIDDef = &cabi.Struct{Name: "xfrm_userpolicy_id", Fields: []cabi.Field{
		{Name: "sel", Kind: cabi.Nested, Sub: selectorDef},
		{Name: "index", Kind: cabi.U32},
		{Name: "dir", Kind: cabi.U8},
	}}
	userTmplDef = &cabi.Struct{Name: "xfrm_user_tmpl", Fields: []cabi.Field{
		{Name: "id", Kind: cabi.Nested, Sub: idDef},
		{Name: "family", Kind: cabi.U16},
		addr("saddr"),
		{Name: "reqid", Kind: cabi.U32},
		{Name: "mode", Kind: cabi.U8},
		{Name: "share", Kind: cabi.U8},
		{Name: "optional", Kind: cabi.U8},
		{Name: "aalgos", Kind: cabi.U32},
		{Name: "ealgos", Kind: cabi.U32},
		{Name: "calgos", Kind: cabi.U32},
	}}
	algoDef = &cabi.Struct{Name: "xfrm_algo", Fields: []cabi.Field{
		{Name: "alg_name", Kind: cabi.Bytes, N: algNameLen},
		{Name: "alg_key_len", Kind: cabi.U32}, // bits
	}}
	algoAuthDef = &cabi.Struct{Name: "xfrm_algo_auth", Fields: []cabi.Field{
		{Name: "alg_name", Kind: cabi.Bytes, N: algNameLen},
		{Name: "alg_key_len", Kind: cabi.U32},   // bits
		{Name: "alg_trunc_len", Kind: cabi.U32}, // bits
	}}
	replayESNDef = &cabi.Struct{Name: "xfrm_replay_state_esn", Fields: []cabi.Field{
		{Name: "bmp_len", Kind: cabi.U32}, // in __u32 words
		{Name: "oseq", Kind: cabi.U32},
		{Name: "seq", Kind: cabi.U32},
		{Name: "oseq_hi", Kind: cabi.U32},
		{Name: "seq_hi", Kind: cabi.U32},
		{Name: "replay_window", Kind: cabi.U32},
	}}
	encapTmplDef = &cabi.Struct{Name: "xfrm_encap_tmpl", Fields: []cabi.Field{
		{Name: "encap_type", Kind: cabi.U16},
		{Name: "encap_sport", Kind: cabi.BE16},
		{Name: "encap_dport", Kind: cabi.BE16},
		addr("encap_oa"),
	}}
)

const algNameLen = 64

// addr is an xfrm_address_t field: a union of __be32 a4, __be32 a6[4] and
// struct in6_addr, 16 bytes aligned to 4.
func addr(name string) cabi.Field { return cabi.Field{Name: name, Kind: cabi.Bytes, N: 16, Align: 4} }
