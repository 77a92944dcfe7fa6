package cabi

import (
	"runtime"
	"testing"
)

// The offsets below were worked out by hand with the C rules: a u64 at
// the next multiple of 4 on 386 and of 8 on arm and amd64, a 16-byte
// union aligned to 4 after it, a nested struct {u16 x; u8 y} of 4 bytes
// aligned to 2, a pointer, 4 bytes on 386 and arm, 8 on amd64, and a
// char[3] that leaves tail padding to the struct's alignment.
func TestLayout(t *testing.T) {
	sub := &Struct{Name: "sub", Fields: []Field{{Name: "x", Kind: U16}, {Name: "y", Kind: U8}}}
	s := &Struct{Name: "t", Fields: []Field{
		{Name: "a", Kind: U8},
		{Name: "b", Kind: U64},
		{Name: "c", Kind: Bytes, N: 16, Align: 4},
		{Name: "d", Kind: Nested, Sub: sub},
		{Name: "p", Kind: Ptr},
		{Name: "e", Kind: Bytes, N: 3},
	}}
	for _, c := range []struct {
		arch        Arch
		size, align int
		at          map[string]int
	}{
		{Arch386, 40, 4, map[string]int{"a": 0, "b": 4, "c": 12, "d": 28, "d.x": 28, "d.y": 30, "p": 32, "e": 36}},
		{ArchARM, 48, 8, map[string]int{"a": 0, "b": 8, "c": 16, "d": 32, "d.x": 32, "d.y": 34, "p": 36, "e": 40}},
		{ArchAMD64, 56, 8, map[string]int{"a": 0, "b": 8, "c": 16, "d": 32, "d.x": 32, "d.y": 34, "p": 40, "e": 48}},
	} {
		l := s.Layout(c.arch)
		if l.Size != c.size || l.Align != c.align {
			t.Errorf("%s: size %d align %d, want %d and %d", c.arch.Name, l.Size, l.Align, c.size, c.align)
		}
		if len(l.At) != len(c.at) {
			t.Errorf("%s: %d places, want %d: %v", c.arch.Name, len(l.At), len(c.at), l.At)
		}
		for path, want := range c.at {
			if p, ok := l.At[path]; !ok || p.Off != want {
				t.Errorf("%s: %s at %d (known %v), want %d", c.arch.Name, path, p.Off, ok, want)
			}
		}
		if p := l.At["d"]; p.Size != 4 || p.Kind != Nested {
			t.Errorf("%s: d is %+v, want a 4-byte Nested", c.arch.Name, p)
		}
		if p := l.At["d.y"]; p.Size != 1 || p.Kind != U8 {
			t.Errorf("%s: d.y is %+v, want a 1-byte U8", c.arch.Name, p)
		}
	}
}

func TestHost(t *testing.T) {
	a, ok := Host()
	switch runtime.GOARCH {
	case "386", "arm", "amd64", "arm64":
		if !ok || a.Name != runtime.GOARCH {
			t.Errorf("Host() = %+v, %v on %s", a, ok, runtime.GOARCH)
		}
	default:
		if ok {
			t.Errorf("Host() = %+v on %s, want it refused", a, runtime.GOARCH)
		}
	}
}
