package vmtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file that is no disk image, or one without a data partition, is an
// error naming the file, not an empty store.
func TestReadStoreNotAnImage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty.img", nil},
		{"zeros.img", make([]byte, 1<<20)},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := ReadStore(p)
		if err == nil {
			t.Errorf("%s: read a store %+v, want an error", tc.name, c)
			continue
		}
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not name the image", tc.name, err)
		}
	}
	if _, err := ReadStore(filepath.Join(dir, "missing.img")); err == nil {
		t.Error("a missing image read as a store")
	}
}
