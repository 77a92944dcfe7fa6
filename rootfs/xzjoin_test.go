package rootfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/ocfw/ocfw/rootfs/usercache"
)

// The split xz initramfs is one stream whose bytes are the archive's, the
// same with the first block from the cache as compressed anew, and xz(1)
// agrees when it is installed.
func TestCompressXZSplit(t *testing.T) {
	data := make([]byte, 300000)
	rand.Read(data[:100000])                                         // incompressible
	copy(data[100000:], bytes.Repeat([]byte("userland "), 200000/9)) // compressible
	dir := t.TempDir()
	cache := &usercache.Cache{Dir: filepath.Join(dir, "cache")}
	var log []string
	logf := func(f string, a ...any) { log = append(log, f) }
	out := func(name string, split int, c *usercache.Cache) []byte {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := compressXZSplit(context.Background(), data, split, p, c, dir, logf); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := xz.ReaderConfig{SingleStream: true}.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s decompresses to %d bytes, not the %d given", name, len(got), len(data))
		}
		if x, err := exec.LookPath("xz"); err == nil {
			if o, err := exec.Command(x, "-t", "-v", p).CombinedOutput(); err != nil {
				t.Fatalf("xz -t %s: %v\n%s", name, err, o)
			}
		} else {
			t.Logf("no xz command: checked with Go's reader only")
		}
		return b
	}
	cold := out("cold.xz", 150000, nil)
	stored := out("stored.xz", 150000, cache)
	if !bytes.Equal(cold, stored) {
		t.Fatal("compressing with a cache gives other bytes")
	}
	log = nil
	warm := out("warm.xz", 150000, cache)
	if !bytes.Equal(cold, warm) {
		t.Fatal("the first block from the cache gives other bytes")
	}
	if !strings.Contains(strings.Join(log, "\n"), "reused from cache") {
		t.Errorf("the second compression did not take the block from the cache: %q", log)
	}
	whole := out("whole.xz", 0, cache)
	if bytes.Equal(whole, cold) {
		t.Error("split and unsplit compressions are the same bytes")
	}
	out("other-split.xz", 299999, nil)
}
