package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within fails the test if f has not returned after d: the readers must
// never wait on a FIFO's writer.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still blocked after %v", d)
	}
}

func TestReadFileRefusals(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "a.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		is         error
		want       string
	}{
		{"fifo", fifo, ErrNotRegular, fifo + ": not a regular file but a named pipe (FIFO)"},
		{"device", "/dev/zero", ErrNotRegular, "/dev/zero: not a regular file but a character device"},
		{"directory", dir, ErrNotRegular, "but a directory"},
		{"too large", big, ErrTooLarge, big + ": the file is 1000 bytes, over the limit of 999 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			within(t, 5*time.Second, func() { _, err = ReadFile(tc.path, 999) })
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %v containing %q", err, tc.is, tc.want)
			}
		})
	}
	b, err := ReadFile(big, 1000)
	if err != nil || len(b) != 1000 {
		t.Errorf("a file at the limit: %d bytes, %v", len(b), err)
	}
	// A reader that does not end (a growing file, a pipe) stops at the limit.
	_, err = ReadAll("/dev/zero", zeros{}, 4096)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 4 KiB") {
		t.Errorf("endless reader: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{100: "100 bytes", 256 << 10: "256 KiB", 4 << 20: "4 MiB", 3 << 29: "1.5 GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
