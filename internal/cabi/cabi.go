// Package cabi computes where the fields of a C struct sit on each target
// ocfw builds for, so that the bytes handed to the kernel (/dev/crypto
// ioctls in ocf/cryptodev, XFRM netlink messages in router/ipsec) can be
// built and tested for every target from any host, not only with the
// host's own compiler.
//
// All targets are little-endian. What differs between them is the size of
// pointers (and long, size_t) and where a 64-bit integer may sit inside a
// struct: i386 aligns it to 4, ARM EABI and amd64 to 8.
package cabi

import "runtime"

// Arch is what decides a C struct's layout on one target.
type Arch struct {
	Name     string
	PtrSize  int // sizeof(void *) == sizeof(long) == sizeof(size_t)
	U64Align int // alignof(uint64_t) inside structs
}

// The targets ocfw builds for, plus the development hosts.
var (
	Arch386   = Arch{Name: "386", PtrSize: 4, U64Align: 4}
	ArchARM   = Arch{Name: "arm", PtrSize: 4, U64Align: 8} // EABI aligns 64-bit fields to 8
	ArchAMD64 = Arch{Name: "amd64", PtrSize: 8, U64Align: 8}
	ArchARM64 = Arch{Name: "arm64", PtrSize: 8, U64Align: 8}
)

// Host is the Arch of GOARCH; false for any other GOARCH, whose layout is
// left unguessed (callers say what else they would get wrong there).
func Host() (Arch, bool) {
	for _, a := range []Arch{Arch386, ArchARM, ArchAMD64, ArchARM64} {
		if a.Name == runtime.GOARCH {
			return a, true
		}
	}
	return Arch{}, false
}

// Kind is a field's C type as far as layout (and byte order) goes.
type Kind uint8

const (
	U8 Kind = iota
	U16
	U32 // also C int and unsigned int: 4 bytes on every target here
	U64
	BE16 // __be16: network byte order
	BE32
	Ptr    // pointers, long, size_t
	Bytes  // char[N], or a union of N bytes aligned to Align
	Nested // a nested struct, Sub
)

// Field is one member of a C struct.
type Field struct {
	Name  string
	Kind  Kind
	N     int     // Bytes: the byte count
	Align int     // Bytes: the alignment when not 1 (a union's strictest member)
	Sub   *Struct // Nested: the nested struct
}

// Struct is a C struct as a list of fields, as its header declares them.
type Struct struct {
	Name   string
	Fields []Field
}

// Place is where a field sits in a struct on one Arch.
type Place struct {
	Off, Size int
	Kind      Kind
}

// Layout is a struct's layout on one Arch. At is keyed by field name,
// nested fields by their dotted path ("sel.daddr").
type Layout struct {
	Size  int
	Align int
	At    map[string]Place
}

// Layout applies the C rules: each field at the next multiple of its
// alignment, the struct aligned to its strictest field and padded to a
// multiple of that.
func (s *Struct) Layout(a Arch) Layout {
	l := Layout{Align: 1, At: make(map[string]Place, len(s.Fields))}
	off := 0
	for _, f := range s.Fields {
		size, align := f.sizeAlign(a)
		off = alignUp(off, align)
		l.At[f.Name] = Place{Off: off, Size: size, Kind: f.Kind}
		if f.Kind == Nested {
			for path, p := range f.Sub.Layout(a).At {
				p.Off += off
				l.At[f.Name+"."+path] = p
			}
		}
		off += size
		l.Align = max(l.Align, align)
	}
	l.Size = alignUp(off, l.Align)
	return l
}

func (f Field) sizeAlign(a Arch) (size, align int) {
	switch f.Kind {
	case U8:
		return 1, 1
	case U16, BE16:
		return 2, 2
	case U32, BE32:
		return 4, 4
	case U64:
		return 8, a.U64Align
	case Ptr:
		return a.PtrSize, a.PtrSize
	case Bytes:
		return f.N, max(f.Align, 1)
	default:
		l := f.Sub.Layout(a)
		return l.Size, l.Align
	}
}

func alignUp(off, align int) int { return (off + align - 1) / align * align }
