package debian

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readAll(t *testing.T, deb []byte) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := WalkData(bytes.NewReader(deb), func(h *tar.Header, r io.Reader) error {
		b, err := io.ReadAll(r)
		got[h.Name] = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("WalkData: %v", err)
	}
	return got
}

func TestWalkDataCompressions(t *testing.T) {
	entries := []entry{
		{name: "./boot/", typ: tar.TypeDir, mode: 0o755},
		{name: "./boot/vmlinuz-1", body: "kernel image"},
		{name: "./odd", body: "odd-sized member padding"},
	}
	for _, ext := range []string{"", ".gz", ".xz", ".zst", ".lzma"} {
		t.Run("data.tar"+ext, func(t *testing.T) {
			got := readAll(t, debOf(t, ext, entries))
			if got["./boot/vmlinuz-1"] != "kernel image" || got["./odd"] != "odd-sized member padding" {
				t.Errorf("contents = %q", got)
			}
		})
	}
	t.Run("data.tar.bz2", func(t *testing.T) {
		bz, err := os.ReadFile("testdata/data.tar.bz2")
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, arOf([2]string{"debian-binary", "2.0\n"}, [2]string{"data.tar.bz2", string(bz)}))
		if got["./boot/hello"] != "bz2 body\n" {
			t.Errorf("contents = %q", got)
		}
	})
}

func TestWalkDataBadInput(t *testing.T) {
	good := debOf(t, ".xz", []entry{{name: "./boot/vmlinuz-1", body: strings.Repeat("k", 5000)}})
	tests := []struct {
		name string
		deb  []byte
		want string
	}{
		{"empty", nil, "ar signature"},
		{"not ar", []byte("PK\x03\x04 zip file, not a package"), "no ar signature"},
		{"no data member", arOf([2]string{"debian-binary", "2.0\n"}), "no data.tar member"},
		{"unknown compression", arOf([2]string{"data.tar.rar", "x"}), "unsupported data member"},
		{"bad size", []byte(arMagic + "data.tar.xz     0           0     0     100644  -5        `\n"), "bad size"},
		{"garbage xz", arOf([2]string{"data.tar.xz", "this is not xz"}), "data.tar.xz"},
		{"cut in header", good[:len(arMagic)+30], "truncated ar member header"},
		{"cut in data", good[:len(good)-200], "truncated"},
		{"cut at end", good[:len(good)-1], "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WalkData(bytes.NewReader(tt.deb), func(h *tar.Header, r io.Reader) error {
				_, err := io.Copy(io.Discard, r)
				return err
			})
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

// Every truncation of a valid package is an error, never a panic or a
// silently shorter file list.
func TestWalkDataEveryTruncation(t *testing.T) {
	for _, ext := range []string{"", ".gz", ".xz", ".zst"} {
		good := debOf(t, ext, []entry{{name: "./a", body: "alpha"}, {name: "./b", body: strings.Repeat("b", 700)}})
		for n := 0; n < len(good); n++ {
			err := WalkData(bytes.NewReader(good[:n]), func(h *tar.Header, r io.Reader) error {
				_, err := io.Copy(io.Discard, r)
				return err
			})
			if err == nil {
				t.Fatalf("data.tar%s cut to %d of %d bytes: no error", ext, n, len(good))
			}
		}
	}
}

func TestWalkDataStop(t *testing.T) {
	deb := debOf(t, ".gz", []entry{{name: "./a", body: "1"}, {name: "./b", body: "2"}})
	var seen []string
	err := WalkData(bytes.NewReader(deb), func(h *tar.Header, r io.Reader) error {
		seen = append(seen, h.Name)
		return ErrStop
	})
	if err != nil || len(seen) != 1 {
		t.Errorf("err=%v seen=%v, want nil and one entry", err, seen)
	}
	// A callback's own error comes back unchanged, not as a format error.
	mine := errors.New("disk full")
	err = WalkData(bytes.NewReader(deb), func(*tar.Header, io.Reader) error { return mine })
	if !errors.Is(err, mine) || errors.Is(err, ErrFormat) {
		t.Errorf("err = %v, want the callback's error", err)
	}
}

func TestCleanName(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"./boot/vmlinuz-1", "boot/vmlinuz-1", true},
		{"/lib/modules/", "lib/modules", true},
		{"a//b/./c", "a/b/c", true},
		{"./", "", false},
		{"../etc/passwd", "", false},
		{"lib/../../x", "", false},
		{"a\x00b", "", false},
	}
	for _, tt := range tests {
		got, ok := CleanName(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("CleanName(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func writeDeb(t *testing.T, entries []entry) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "test.deb")
	if err := os.WriteFile(p, debOf(t, ".xz", entries), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExtract(t *testing.T) {
	deb := writeDeb(t, []entry{
		{name: "./", typ: tar.TypeDir},
		{name: "./boot/", typ: tar.TypeDir},
		{name: "./boot/vmlinuz-1", body: "kernel", mode: 0o4755},
		{name: "./boot/skip-me", body: "x"},
		{name: "./boot/vmlinuz", typ: tar.TypeSymlink, link: "vmlinuz-1"},
		{name: "./boot/hard", typ: tar.TypeLink, link: "./boot/vmlinuz-1"},
		{name: "./dev/null", typ: tar.TypeChar},
	})
	dir := t.TempDir()
	names, err := Extract(deb, dir, func(n string) bool { return n != "boot/skip-me" })
	if err != nil {
		t.Fatal(err)
	}
	if want := "boot boot/vmlinuz-1 boot/vmlinuz boot/hard"; strings.Join(names, " ") != want {
		t.Errorf("names = %q, want %q", names, want)
	}
	for _, p := range []string{"boot/vmlinuz", "boot/hard", "boot/vmlinuz-1"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(b) != "kernel" {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "boot/vmlinuz-1"))
	if err != nil || fi.Mode() != 0o755 {
		t.Errorf("mode = %v, %v; want 0755 without set-id", fi.Mode(), err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "boot/skip-me")); !os.IsNotExist(err) {
		t.Errorf("filtered entry was extracted: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dev/null")); !os.IsNotExist(err) {
		t.Errorf("device node was extracted: %v", err)
	}
}

// A regular file with the pre-POSIX type flag '\x00' (deprecated
// tar.TypeRegA) is extracted like one flagged '0': archive/tar reports it
// as TypeReg.
func TestExtractOldRegularFile(t *testing.T) {
	raw := tarOf(t, []entry{{name: "./old", body: "x"}})
	raw[156] = 0 // typeflag
	for i := 148; i < 156; i++ {
		raw[i] = ' ' // the checksum counts its own field as spaces
	}
	sum := 0
	for _, b := range raw[:512] {
		sum += int(b)
	}
	copy(raw[148:156], fmt.Sprintf("%06o\x00 ", sum))
	control := compress(t, ".xz", tarOf(t, []entry{{name: "./control", body: "Package: test\n"}}))
	deb := filepath.Join(t.TempDir(), "old.deb")
	if err := os.WriteFile(deb, arOf(
		[2]string{"debian-binary", "2.0\n"},
		[2]string{"control.tar.xz", string(control)},
		[2]string{"data.tar", string(raw)},
	), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Extract(deb, dir, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "old")); err != nil || string(b) != "x" {
		t.Errorf("old-style regular file: %q, %v", b, err)
	}
}

func TestExtractRefusesEscapes(t *testing.T) {
	tests := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"dotdot", []entry{{name: "../evil", body: "x"}}, "leaves the extraction directory"},
		{"deep dotdot", []entry{{name: "./a/../../evil", body: "x"}}, "leaves the extraction directory"},
		{"absolute symlink", []entry{{name: "./l", typ: tar.TypeSymlink, link: "/etc"}}, "points outside"},
		{"climbing symlink", []entry{{name: "./a/l", typ: tar.TypeSymlink, link: "../../evil"}}, "points outside"},
		{"write through symlink", []entry{
			{name: "./sub/", typ: tar.TypeDir},
			{name: "./l", typ: tar.TypeSymlink, link: "sub"},
			{name: "./l/evil", body: "x"},
		}, "through symlink"},
		{"hard link out", []entry{{name: "./h", typ: tar.TypeLink, link: "../../etc/passwd"}}, "outside"},
		{"hard link to nothing", []entry{{name: "./h", typ: tar.TypeLink, link: "./missing"}}, "not extracted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "root")
			_, err := Extract(writeDeb(t, tt.entries), dir, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if _, err := os.Lstat(filepath.Join(parent, "evil")); !os.IsNotExist(err) {
				t.Errorf("a file was written outside the root")
			}
		})
	}
}

// FuzzWalkData: arbitrary bytes give entries or an error, never a panic.
func FuzzWalkData(f *testing.F) {
	entries := []entry{{name: "./boot/vmlinuz-1", body: "k"}, {name: "./lib/modules/1/x.ko", body: "m"}}
	for _, ext := range []string{"", ".gz", ".xz", ".zst", ".lzma"} {
		deb := debOf(f, ext, entries)
		f.Add(deb)
		f.Add(deb[:len(deb)/2])
	}
	if bz, err := os.ReadFile("testdata/data.tar.bz2"); err == nil {
		f.Add(arOf([2]string{"data.tar.bz2", string(bz)}))
	}
	f.Add([]byte(arMagic))
	f.Fuzz(func(t *testing.T, deb []byte) {
		const limit = 1 << 20 // decompression bombs are not the point here
		total := int64(0)
		_ = WalkData(bytes.NewReader(deb), func(h *tar.Header, r io.Reader) error {
			n, err := io.Copy(io.Discard, io.LimitReader(r, limit-total))
			total += n
			if total >= limit {
				return ErrStop
			}
			return err
		})
	})
}
