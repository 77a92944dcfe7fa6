package kbuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
)

// tgz makes a gzipped tar of name -> content (a "/" suffix is a
// directory, a "->" in the content a symlink).
func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, data := range files {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		} else if target, ok := strings.CutPrefix(data, "->"); ok {
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, target
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(data))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// The pinned content hash is the shared copy's; a tarball of the same
// files under another top directory and compression matches it, and any
// change of a file's bytes or name does not; bad archives are refused.
func TestReadSource(t *testing.T) {
	shared, err := os.ReadFile(labtest.SharedDep(t, CryptodevSource))
	if err != nil {
		t.Fatal(err)
	}
	files, sum, err := readSource(shared)
	if err != nil || sum != CryptodevContent {
		t.Fatalf("the shared copy: %s, %v (want %s)", sum, err, CryptodevContent)
	}
	if len(files["Makefile"]) == 0 || len(files["crypto/cryptodev.h"]) == 0 {
		t.Fatalf("files: Makefile %d bytes, crypto/cryptodev.h %d", len(files["Makefile"]), len(files["crypto/cryptodev.h"]))
	}
	same := map[string]string{}
	for n, b := range files {
		same["other-top/"+n] = string(b)
	}
	if _, s, err := readSource(tgz(t, same)); err != nil || s != CryptodevContent {
		t.Errorf("same files, another archive: %s, %v", s, err)
	}
	same["other-top/Makefile"] += "\n"
	if _, s, _ := readSource(tgz(t, same)); s == CryptodevContent {
		t.Error("a changed Makefile hashes as the pinned source")
	}
	for name, arch := range map[string][]byte{
		"not gzip":    []byte("plain text"),
		"empty":       tgz(t, map[string]string{"top/": ""}),
		"no top dir":  tgz(t, map[string]string{"Makefile": "x"}),
		"escapes top": tgz(t, map[string]string{"top/../../etc/passwd": "x"}),
		"absolute":    tgz(t, map[string]string{"/top/Makefile": "x"}),
	} {
		if _, _, err := readSource(arch); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
	// Symlinks are skipped, not followed or written.
	if f, _, err := readSource(tgz(t, map[string]string{"top/a": "x", "top/l": "->/etc/passwd"})); err != nil || len(f) != 1 {
		t.Errorf("symlink: %v, %v", f, err)
	}
}

// StoreSource takes only the pinned source into the cache.
func TestStoreSource(t *testing.T) {
	cache := t.TempDir()
	bad := filepath.Join(t.TempDir(), CryptodevSource)
	os.WriteFile(bad, tgz(t, map[string]string{"top/Makefile": "x"}), 0o644)
	if err := StoreSource(cache, bad); err == nil || !strings.Contains(err.Error(), "want cryptodev-linux 1.14's") {
		t.Errorf("another source stored: %v", err)
	}
	if _, err := os.Stat(SourcePath(cache)); err == nil {
		t.Error("the refused source is in the cache")
	}
	if err := StoreSource(cache, labtest.SharedDep(t, CryptodevSource)); err != nil {
		t.Fatal(err)
	}
	if _, err := cachedSource(context.Background(), CryptodevOptions{Options: Options{CacheDir: cache}, NoDownload: true}); err != nil {
		t.Errorf("stored source not found: %v", err)
	}
	if _, err := cachedSource(context.Background(), CryptodevOptions{Options: Options{CacheDir: t.TempDir()}, NoDownload: true}); !errors.Is(err, ErrNoSource) {
		t.Errorf("empty cache without download: %v", err)
	}
}

// buildOrSkip builds cryptodev.ko from the shared source, skipping
// (failing with OCFW_REQUIRE_KERNEL=1) without the kernel or the tools.
func buildOrSkip(t *testing.T, opt CryptodevOptions) *Module {
	t.Helper()
	m, err := Cryptodev(context.Background(), opt)
	if errors.Is(err, ErrNoKernel) || errors.Is(err, ErrNoTools) {
		labtest.SkipOrFail(t, "cryptodev.ko not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// cryptodev.ko builds for the cached Debian kernel into a stripped i386
// module for that release; two builds in different directories give the
// same bytes; the cached build is that module, and a second call takes
// it from the cache.
func TestCryptodevBuildReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles cryptodev-linux twice (and fetches the kernel's headers once); skipped with -short")
	}
	src := labtest.SharedDep(t, CryptodevSource)
	var kos [][]byte
	for i := 0; i < 2; i++ {
		dir := t.TempDir()
		start := time.Now()
		m := buildOrSkip(t, CryptodevOptions{Source: src, OutDir: dir, Options: Options{Log: t.Logf}})
		t.Logf("build %d: %v", i+1, time.Since(start).Round(time.Millisecond))
		if !m.Built {
			t.Errorf("build %d into %s came from nowhere", i+1, dir)
		}
		if err := CheckModule(m.Path); err != nil {
			t.Fatal(err)
		}
		info, err := debian.Modinfo(m.Path)
		if err != nil {
			t.Fatal(err)
		}
		if v := strings.Fields(info["vermagic"]); len(v) == 0 || v[0] != m.Release {
			t.Errorf("vermagic %q, want %s", info["vermagic"], m.Release)
		}
		b, err := os.ReadFile(m.Path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(dir)) || bytes.Contains(b, []byte(".debug_info")) {
			t.Errorf("build %d names its build directory or keeps debug information", i+1)
		}
		if len(b) > 200<<10 {
			t.Errorf("build %d: %d bytes, want it stripped (about 60 KB)", i+1, len(b))
		}
		kos = append(kos, b)
	}
	if !bytes.Equal(kos[0], kos[1]) {
		t.Fatal("two builds of the same source for the same kernel differ")
	}

	cache, err := debian.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := StoreSource(cache, src); err != nil {
		t.Fatal(err)
	}
	first := buildOrSkip(t, CryptodevOptions{NoDownload: true})
	again := buildOrSkip(t, CryptodevOptions{NoDownload: true})
	if again.Built || again.Path != first.Path || !strings.HasPrefix(first.Path, cache) {
		t.Errorf("cached build: %s built %v, then %s built %v", first.Path, first.Built, again.Path, again.Built)
	}
	if b, _ := os.ReadFile(first.Path); !bytes.Equal(b, kos[0]) {
		t.Error("the cached module differs from the fresh builds")
	}
}
