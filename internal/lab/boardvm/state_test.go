package boardvm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What one run's board wrote on its data partition is what the next
// run's copy boots with; the rest of the copy is the image's.
func TestStateKeptBetweenRuns(t *testing.T) {
	dir := t.TempDir()
	const size, off, part = 8 << 20, 1 << 20, 4 << 20
	image := filepath.Join(dir, "x.img")
	img := make([]byte, size)
	for i := range img {
		img[i] = byte(i % 251)
	}
	if err := os.WriteFile(image, img, 0o644); err != nil {
		t.Fatal(err)
	}
	state := StatePath(image)

	// First run: no state yet, so the copy keeps the image's partition.
	run1, remove, err := copyForBoot(image, "")
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if loaded, err := loadState(run1, state, off, part); err != nil || loaded {
		t.Fatalf("no state yet: loaded %v, %v", loaded, err)
	}
	// The board writes a host key and a report, and zeroes a region.
	f, err := os.OpenFile(run1, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("host key AAAA"), off+4096)
	f.WriteAt([]byte("report of boot 1"), off+part-100)
	f.WriteAt(make([]byte, 1<<20), off+(2<<20))
	f.Close()
	if err := saveState(run1, state, off, part); err != nil {
		t.Fatal(err)
	}
	booted1, _ := os.ReadFile(run1)

	// Second run: a fresh copy of the image, with the state loaded.
	run2, remove2, err := copyForBoot(image, "")
	if err != nil {
		t.Fatal(err)
	}
	defer remove2()
	if loaded, err := loadState(run2, state, off, part); err != nil || !loaded {
		t.Fatalf("state kept: loaded %v, %v", loaded, err)
	}
	got, _ := os.ReadFile(run2)
	if !bytes.Equal(got, booted1) {
		t.Error("the second run's disk differs from what the first run left")
	}
	if now, _ := os.ReadFile(image); !bytes.Equal(now, img) {
		t.Error("the image itself changed")
	}
	if fi, err := os.Stat(state); err != nil || fi.Size() != part {
		t.Errorf("state file: %v, %v; want %d bytes", fi, err, part)
	}

	// A state that does not fit the image's data partition is refused,
	// naming --fresh.
	_, err = loadState(run2, state, off, part/2)
	var me *StateMismatchError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "--fresh") {
		t.Errorf("mismatched state: %v", err)
	}
}
