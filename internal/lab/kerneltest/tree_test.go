package kerneltest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/u-root/u-root/pkg/cpio"
)

func TestWriteTree(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "lib/i386-linux-gnu"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "usr/sbin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "lib/i386-linux-gnu/ld-linux.so.2"), []byte("loader"), 0o755))
	must(os.Symlink("i386-linux-gnu/ld-linux.so.2", filepath.Join(dir, "lib/ld-linux.so.2")))
	must(os.WriteFile(filepath.Join(dir, "usr/sbin/swanctl"), []byte("program"), 0o750))
	var buf bytes.Buffer
	if err := WriteTree(&buf, dir); err != nil {
		t.Fatal(err)
	}
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(buf.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]cpio.Record{}
	for _, r := range recs {
		got[r.Name] = r
	}
	content := func(r cpio.Record) string {
		b, _ := io.ReadAll(io.NewSectionReader(r.ReaderAt, 0, int64(r.FileSize)))
		return string(b)
	}
	if r := got["lib/ld-linux.so.2"]; r.Mode&cpio.S_IFMT != cpio.S_IFLNK || content(r) != "i386-linux-gnu/ld-linux.so.2" {
		t.Errorf("symlink: %+v", r.Info)
	}
	if r := got["usr/sbin/swanctl"]; r.Mode != cpio.S_IFREG|0o750 || content(r) != "program" || r.UID != 0 || r.MTime != 0 {
		t.Errorf("file: %+v", r.Info)
	}
	if r := got["usr/sbin"]; r.Mode != cpio.S_IFDIR|0o755 {
		t.Errorf("directory: %+v", r.Info)
	}
	var again bytes.Buffer
	if err := WriteTree(&again, dir); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Errorf("a second write differs (%v)", err)
	}

	for _, bad := range []string{"lib/modules/x.ko", "tmp/x", "init"} {
		d := t.TempDir()
		must(os.MkdirAll(filepath.Dir(filepath.Join(d, bad)), 0o755))
		must(os.WriteFile(filepath.Join(d, bad), nil, 0o644))
		if err := WriteTree(io.Discard, d); err == nil || !strings.Contains(err.Error(), "harness's") {
			t.Errorf("%s: %v, want it refused as the harness's", bad, err)
		}
	}
	d := t.TempDir()
	must(syscall.Mkfifo(filepath.Join(d, "fifo"), 0o644))
	if err := WriteTree(io.Discard, d); err == nil || !strings.Contains(err.Error(), "fifo") {
		t.Errorf("a FIFO: %v, want it refused by name", err)
	}
}

// Options.Trees reach the guest: the initramfs is the harness's archive
// followed by each tree's, in order.
func TestTreesInInitramfs(t *testing.T) {
	init := filepath.Join(t.TempDir(), "init")
	if err := os.WriteFile(init, []byte("\x7fELF test binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	var trees []string
	for _, prog := range []string{"usr/bin/openssl", "usr/local/bin/speed"} {
		d := t.TempDir()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(d, prog)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, prog), []byte(prog), 0o755); err != nil {
			t.Fatal(err)
		}
		trees = append(trees, d)
	}
	ir := &Initramfs{Init: init}
	var want bytes.Buffer
	if err := ir.Write(&want); err != nil {
		t.Fatal(err)
	}
	for _, d := range trees {
		if err := WriteTree(&want, d); err != nil {
			t.Fatal(err)
		}
	}
	name := filepath.Join(t.TempDir(), "initramfs.cpio")
	if err := writeInitrd(name, ir, trees); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("initramfs with trees: %d bytes, want the harness's archive and both trees' (%d bytes)", len(got), want.Len())
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "init"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeInitrd(name, ir, []string{bad}); err == nil || !strings.Contains(err.Error(), "harness's") {
		t.Errorf("a tree with its own /init: %v, want it refused", err)
	}
}
