package debian

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// entry is one file of a synthetic package.
type entry struct {
	name string
	body string
	typ  byte // tar.TypeReg when 0
	link string
	mode int64
}

func tarOf(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// compress returns data compressed for the data.tar member suffix ext.
func compress(t testing.TB, ext string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch ext {
	case "":
		return data
	case ".gz":
		w := gzip.NewWriter(&buf)
		w.Write(data)
		w.Close()
	case ".xz":
		w, err := xz.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		w.Close()
	case ".lzma":
		w, err := lzma.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		w.Close()
	case ".zst":
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		w.Close()
	default:
		t.Fatalf("no compressor for %q", ext)
	}
	return buf.Bytes()
}

// arOf builds an ar archive the way dpkg-deb does.
func arOf(members ...[2]string) []byte {
	var buf bytes.Buffer
	buf.WriteString(arMagic)
	for _, m := range members {
		fmt.Fprintf(&buf, "%-16s%-12s%-6s%-6s%-8s%-10d`\n", m[0], "0", "0", "0", "100644", len(m[1]))
		buf.WriteString(m[1])
		if len(m[1])%2 == 1 {
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes()
}

// debOf builds a .deb whose data member is data.tar+ext.
func debOf(t testing.TB, ext string, entries []entry) []byte {
	t.Helper()
	control := compress(t, ".xz", tarOf(t, []entry{{name: "./control", body: "Package: test\n"}}))
	return arOf(
		[2]string{"debian-binary", "2.0\n"},
		[2]string{"control.tar.xz", string(control)},
		[2]string{"data.tar" + ext, string(compress(t, ext, tarOf(t, entries)))},
	)
}

// fakeModule returns a minimal 32-bit little-endian ELF relocatable file
// with a .modinfo section holding depends=deps, like a kernel module.
func fakeModule(name, deps string) []byte {
	modinfo := []byte("license=GPL\x00depends=" + deps + "\x00name=" + name + "\x00")
	shstr := []byte("\x00.modinfo\x00.shstrtab\x00")
	const ehsize, shentsize = 52, 40
	modOff := ehsize
	strOff := modOff + len(modinfo)
	shOff := strOff + len(shstr)
	for shOff%4 != 0 {
		shOff++
	}
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 1, 1, 1, 0})
	b.Write(make([]byte, 8))
	binary.Write(&b, le, uint16(1)) // ET_REL
	binary.Write(&b, le, uint16(3)) // EM_386
	binary.Write(&b, le, uint32(1)) // version
	binary.Write(&b, le, uint32(0)) // entry
	binary.Write(&b, le, uint32(0)) // phoff
	binary.Write(&b, le, uint32(shOff))
	binary.Write(&b, le, uint32(0)) // flags
	binary.Write(&b, le, uint16(ehsize))
	binary.Write(&b, le, uint16(0)) // phentsize
	binary.Write(&b, le, uint16(0)) // phnum
	binary.Write(&b, le, uint16(shentsize))
	binary.Write(&b, le, uint16(3)) // shnum
	binary.Write(&b, le, uint16(2)) // shstrndx
	b.Write(modinfo)
	b.Write(shstr)
	for b.Len() < shOff {
		b.WriteByte(0)
	}
	sh := func(name, typ, off, size uint32) {
		for _, v := range []uint32{name, typ, 0, 0, off, size, 0, 0, 1, 0} {
			binary.Write(&b, le, v)
		}
	}
	sh(0, 0, 0, 0)
	sh(1, 1, uint32(modOff), uint32(len(modinfo))) // SHT_PROGBITS
	sh(10, 3, uint32(strOff), uint32(len(shstr)))  // SHT_STRTAB
	return b.Bytes()
}
