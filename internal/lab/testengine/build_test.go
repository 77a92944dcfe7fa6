package testengine

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/labtest"
)

// buildOrSkip builds the module for the cached kernel, skipping (failing
// with OCFW_REQUIRE_KERNEL=1) when the kernel package or the tools are
// missing.
func buildOrSkip(t *testing.T, opt Options) *Result {
	t.Helper()
	res, err := Build(context.Background(), opt)
	if errors.Is(err, ErrNoKernel) || errors.Is(err, ErrNoTools) {
		labtest.SkipOrFail(t, "test module not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The build step: the module builds from Debian's headers into a 32-bit
// i386 module, a second build comes from the cache without running make,
// and a changed source builds anew into another file.
func TestBuild(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("host only")
	}
	if testing.Short() {
		t.Skip("downloads the kernel's headers (once) and compiles; skipped with -short")
	}
	start := time.Now()
	first := buildOrSkip(t, Options{Log: t.Logf})
	t.Logf("first build: %v (built %v, headers fetched %v): %s", time.Since(start).Round(time.Millisecond), first.Built, first.HeadersFetched, first.Path)
	if err := checkModule(first.Path); err != nil {
		t.Fatal(err)
	}
	ko, err := os.ReadFile(first.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{Driver, "vermagic=" + first.KernelRelease + " ", "delay_us", "corrupt_min", "license=GPL"} {
		if !bytes.Contains(ko, []byte(want)) {
			t.Errorf("%s lacks %q", first.Path, want)
		}
	}

	again := buildOrSkip(t, Options{})
	if again.Built || again.Path != first.Path {
		t.Errorf("second build: built %v, %s (want the cached %s)", again.Built, again.Path, first.Path)
	}

	// A changed source (a new comment, different on every run, so that
	// this run really builds it) is a new build with its own file.
	src := fstest.MapFS{}
	err = fs.WalkDir(Source(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Source(), p)
		src[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c := src[Module+".c"]
	c.Data = append(append([]byte(nil), c.Data...), []byte("/* "+t.TempDir()+" */\n")...)
	changed := buildOrSkip(t, Options{Source: src})
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(changed.Path)) })
	if !changed.Built || changed.Path == first.Path || changed.HeadersFetched {
		t.Errorf("changed source: built %v headers fetched %v, %s", changed.Built, changed.HeadersFetched, changed.Path)
	}
	if err := checkModule(changed.Path); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(first.Path); err != nil {
		t.Errorf("the first build's module went away: %v", err)
	}
}

func TestPatchMakefile(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"include /usr/src/linux-headers-6.1.0-57-common/Makefile\n", "include /c/usr/src/linux-headers-6.1.0-57-common/Makefile\n", ""},
		// Patched before, and the cache moved since.
		{"include /old/usr/src/linux-headers-6.1.0-57-common/Makefile\n", "include /c/usr/src/linux-headers-6.1.0-57-common/Makefile\n", ""},
		{"include /c/usr/src/linux-headers-6.1.0-57-common/Makefile\n", "include /c/usr/src/linux-headers-6.1.0-57-common/Makefile\n", ""},
		{"obj-m := x.o\n", "", "no \"include"},
	} {
		dir := t.TempDir()
		mk := filepath.Join(dir, "Makefile")
		os.WriteFile(mk, []byte(tc.in), 0o644)
		err := patchMakefile(dir, "/c/usr/src/linux-headers-6.1.0-57-common")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v", tc.in, err)
			}
			continue
		}
		b, _ := os.ReadFile(mk)
		if err != nil || string(b) != tc.want {
			t.Errorf("%q: %q, %v", tc.in, b, err)
		}
	}
}

func TestCompiler(t *testing.T) {
	for _, tc := range []struct{ vars, want string }{
		{"override ARCH = x86\nCC = $(if $(DEBIAN_KERNEL_USE_CCACHE),$(CCACHE)) $(CROSS_COMPILE)gcc-12\n", "gcc-12"},
		{"CC = gcc-13\n", "gcc-13"},
		{"CC = clang\n", ""},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ".kernelvariables"), []byte(tc.vars), 0o644)
		got, err := compiler(dir)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%q: %q, %v", tc.vars, got, err)
		}
	}
}

// The source hash changes with any file's name or content, not with the
// order files are listed in.
func TestHashSource(t *testing.T) {
	base := fstest.MapFS{"Kbuild": {Data: []byte("obj-m := a.o\n")}, "a.c": {Data: []byte("int x;\n")}}
	h0, files, err := hashSource(base)
	if err != nil || strings.Join(files, " ") != "Kbuild a.c" || len(h0) != 16 {
		t.Fatalf("%s %v %v", h0, files, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"content": {"Kbuild": {Data: []byte("obj-m := a.o\n")}, "a.c": {Data: []byte("int y;\n")}},
		"name":    {"Kbuild": {Data: []byte("obj-m := a.o\n")}, "b.c": {Data: []byte("int x;\n")}},
		"added":   {"Kbuild": {Data: []byte("obj-m := a.o\n")}, "a.c": {Data: []byte("int x;\n")}, "b.h": {Data: []byte{}}},
	} {
		if h, _, _ := hashSource(fsys); h == h0 {
			t.Errorf("%s changed, hash did not", name)
		}
	}
	if _, _, err := hashSource(fstest.MapFS{}); err == nil {
		t.Error("empty source hashed")
	}
	if h, _, _ := hashSource(Source()); h == "" {
		t.Error("the embedded source does not hash")
	}
}

func TestCleanEnv(t *testing.T) {
	got := cleanEnv([]string{"PATH=/bin", "ARCH=arm", "CROSS_COMPILE=arm-linux-", "HOME=/root", "CC=clang", "M=x"})
	if strings.Join(got, " ") != "PATH=/bin HOME=/root" {
		t.Errorf("%q", got)
	}
}
