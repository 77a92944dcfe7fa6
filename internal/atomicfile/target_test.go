package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestCheckTarget(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := func(name, to string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	toNull, toFile, dangling := link("null", "/dev/null"), link("tofile", file), link("dangling", filepath.Join(dir, "none"))
	for _, tc := range []struct {
		path    string
		replace bool
		want    error  // nil: allowed
		to      string // the path to write, when allowed
	}{
		{filepath.Join(dir, "new"), false, nil, filepath.Join(dir, "new")},
		{file, false, ErrExists, ""},
		{file, true, nil, file},
		{toFile, true, nil, file},
		{toFile, false, ErrExists, ""},
		{fifo, true, ErrNotRegular, ""},
		{toNull, true, ErrNotRegular, ""},
		{dir, true, ErrNotRegular, ""},
		{dangling, true, errors.New("any"), ""},
	} {
		got, err := CheckTarget(tc.path, "-o "+tc.path, tc.replace)
		switch {
		case tc.want == nil && (err != nil || got != tc.to):
			t.Errorf("%s (replace %v): %q, %v; want %q", tc.path, tc.replace, got, err, tc.to)
		case tc.want != nil && err == nil:
			t.Errorf("%s (replace %v): allowed, want refused", tc.path, tc.replace)
		case tc.want == ErrExists || tc.want == ErrNotRegular:
			if !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.path, err, tc.want)
			}
		}
	}
}
