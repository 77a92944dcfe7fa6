package vmtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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

// TestStampWriter: every console line gets the seconds since the start,
// however the emulator's output is cut into writes, without its
// carriage returns.
func TestStampWriter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   []string
	}{
		{"whole lines", []string{"one\r\ntwo\n"}, []string{"one", "two"}},
		{"a line in pieces", []string{"SeaB", "IOS\r", "\nnext"}, []string{"SeaBIOS", "next"}},
		{"empty lines", []string{"\n\n", "x\n"}, []string{"", "", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			w := &stampWriter{w: &b, start: time.Now(), bol: true}
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%q: %d lines, want %d", b.String(), len(lines), len(tc.want))
			}
			stamp := regexp.MustCompile(`^ +\d+\.\d\d (.*)$`)
			for i, l := range lines {
				m := stamp.FindStringSubmatch(l)
				if m == nil || m[1] != tc.want[i] {
					t.Errorf("line %d: %q, want the seconds and %q", i+1, l, tc.want[i])
				}
			}
		})
	}
}
