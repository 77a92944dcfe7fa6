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

	"github.com/ocfw/ocfw/internal/kbuild"
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
	if err := kbuild.CheckModule(first.Path); err != nil {
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
	if err := kbuild.CheckModule(changed.Path); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(first.Path); err != nil {
		t.Errorf("the first build's module went away: %v", err)
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
