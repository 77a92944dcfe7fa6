package refspeed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/internal/kbuild"
	"github.com/ocfw/ocfw/internal/lab/labtest"
)

// elf32 is the smallest ELF header debug/elf reads: class 32, little
// endian, the given type and machine, no sections or segments.
func elf32(typ, machine uint16) []byte {
	h := make([]byte, 52)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = 1, 1, 1 // ELFCLASS32, little endian, EV_CURRENT
	binary.LittleEndian.PutUint16(h[16:], typ)
	binary.LittleEndian.PutUint16(h[18:], machine)
	binary.LittleEndian.PutUint32(h[20:], 1)
	binary.LittleEndian.PutUint16(h[40:], 52) // e_ehsize
	return h
}

// AFALGEngine finds libssl3's engines directory in a tree laid out as
// Debian's, and refuses trees without the engine or with one that is
// not an i386 shared object.
func TestAFALGEngine(t *testing.T) {
	const dyn, exec, i386, amd64 = 3, 2, 3, 62
	tests := []struct {
		name  string
		files map[string][]byte
		want  string
		err   string
	}{
		{"Debian's place", map[string][]byte{"usr/lib/i386-linux-gnu/engines-3/afalg.so": elf32(dyn, i386), "usr/lib/i386-linux-gnu/engines-3/padlock.so": elf32(dyn, i386)},
			"/usr/lib/i386-linux-gnu/engines-3", ""},
		{"in /lib", map[string][]byte{"lib/i386-linux-gnu/engines-3/afalg.so": elf32(dyn, i386)}, "/lib/i386-linux-gnu/engines-3", ""},
		{"no engine", map[string][]byte{"usr/lib/i386-linux-gnu/engines-3/padlock.so": elf32(dyn, i386)}, "", "no OpenSSL afalg engine"},
		{"elsewhere", map[string][]byte{"usr/lib/x86_64-linux-gnu/engines-3/afalg.so": elf32(dyn, amd64)}, "", "no OpenSSL afalg engine"},
		{"amd64", map[string][]byte{"usr/lib/i386-linux-gnu/engines-3/afalg.so": elf32(dyn, amd64)}, "", "want ELFCLASS32 EM_386 ET_DYN"},
		{"a program", map[string][]byte{"usr/lib/i386-linux-gnu/engines-3/afalg.so": elf32(exec, i386)}, "", "want ELFCLASS32 EM_386 ET_DYN"},
		{"not ELF", map[string][]byte{"usr/lib/i386-linux-gnu/engines-3/afalg.so": []byte("INPUT(afalg.so.3)")}, "", "not an ELF file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, data := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := AFALGEngine(root)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("AFALGEngine = %q, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("AFALGEngine = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// keep drops what the guest never reads and the links debian.Extract
// would refuse, and keeps the programs, libraries, engines and config.
func TestKeep(t *testing.T) {
	for name, want := range map[string]bool{
		"usr/bin/openssl": true, "usr/lib/i386-linux-gnu/engines-3/afalg.so": true, "etc/ssl/openssl.cnf": true,
		"lib/i386-linux-gnu/libc.so.6": true, "usr/lib/ssl": false, "usr/lib/ssl/openssl.cnf": false,
		"usr/share/doc/openssl/changelog.gz": false, "usr/lib/i386-linux-gnu/gconv/UTF-16.so": false,
	} {
		if keep(name) != want {
			t.Errorf("keep(%q) = %v, want %v", name, !want, want)
		}
	}
}

// tests/speed builds for i386 from the cryptodev-linux source, static,
// and twice from the same inputs into the same bytes; the second call
// without OutDir comes from the cache.
func TestBuildSpeed(t *testing.T) {
	src := labtest.SharedDep(t, kbuild.CryptodevSource)
	cache := t.TempDir()
	ctx := context.Background()
	var bins [][]byte
	for _, dir := range []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")} {
		out, err := BuildSpeed(ctx, SpeedOptions{Source: src, CacheDir: cache, OutDir: dir})
		if errors.Is(err, ErrNoToolchain) {
			labtest.SkipOrFail(t, "tests/speed not built: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckSpeed(out); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("Encrypting in chunks of %d bytes")) {
			t.Errorf("%s lacks tests/speed's format string: another program?", out)
		}
		bins = append(bins, b)
	}
	if !bytes.Equal(bins[0], bins[1]) {
		t.Errorf("two builds from the same inputs differ (%d and %d bytes)", len(bins[0]), len(bins[1]))
	}
	var logged []string
	cached, err := BuildSpeed(ctx, SpeedOptions{Source: src, CacheDir: cache, Log: func(f string, a ...any) { logged = append(logged, f) }})
	if err != nil {
		t.Fatal(err)
	}
	again, err := BuildSpeed(ctx, SpeedOptions{Source: src, CacheDir: cache, Log: func(f string, a ...any) { logged = append(logged, f) }})
	if err != nil || again != cached || len(logged) != 1 {
		t.Errorf("second cached build: %q (first %q), %v, %d builds logged; want the cached file and one build", again, cached, err, len(logged))
	}
	if b, _ := os.ReadFile(cached); !bytes.Equal(b, bins[0]) {
		t.Errorf("the cached build differs from the OutDir builds")
	}
	// A source that is not release 1.14 is refused before compiling.
	bad := filepath.Join(t.TempDir(), "bad.tar.gz")
	if err := os.WriteFile(bad, []byte("not a tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildSpeed(ctx, SpeedOptions{Source: bad, CacheDir: cache}); err == nil {
		t.Error("BuildSpeed accepted a broken source tarball")
	}
}

// CheckSpeed refuses what the guest could not run without a tree.
func TestCheckSpeed(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		data []byte
		err  string
	}{
		"i386 exec":  {elf32(2, 3), ""},
		"amd64 exec": {elf32(2, 62), "want ELFCLASS32 EM_386 ET_EXEC"},
		"shared":     {elf32(3, 3), "want ELFCLASS32 EM_386 ET_EXEC"},
		"text":       {[]byte("#!/bin/sh\n"), "not an ELF file"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(p, tc.data, 0o755); err != nil {
			t.Fatal(err)
		}
		err := CheckSpeed(p)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: CheckSpeed = %v, want %q", name, err, tc.err)
		}
	}
}
