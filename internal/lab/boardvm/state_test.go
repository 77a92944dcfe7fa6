package boardvm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The card kept beside an image is written from it once and then booted
// as it is, whatever the board wrote anywhere on it; a card of another
// build, or an older ocfw's data partition alone, becomes a new card from
// the image carrying that data partition; anything else is refused,
// naming --fresh. The image is never written.
func TestCardKeptBetweenRuns(t *testing.T) {
	const size, off, part = 8 << 20, 1 << 20, 4 << 20
	g := cardGeometry{size: size, dataOff: off, dataSize: part}
	imageBytes := func(seed int) []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte((i + seed) % 251)
		}
		return b
	}
	dir := t.TempDir()
	image := filepath.Join(dir, "x.img")
	img := imageBytes(0)
	if err := os.WriteFile(image, img, 0o644); err != nil {
		t.Fatal(err)
	}
	state := StatePath(image)
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// First run: a new card, the image's bytes.
	c, err := openCard(image, state, "sum1", g)
	if err != nil || c.Kept || c.Path != state || len(c.Notes) != 0 {
		t.Fatalf("no card yet: %+v, %v", c, err)
	}
	if !bytes.Equal(read(state), img) {
		t.Fatal("the new card is not the image's bytes")
	}
	// The board writes a slot on the boot partition and a host key on
	// the data partition.
	f, err := os.OpenFile(state, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("slot b: new system"), 4096)
	f.WriteAt([]byte("host key AAAA"), off+4096)
	f.Close()
	booted := read(state)

	// Second run of the same image: the card as the board left it.
	if c, err = openCard(image, state, "sum1", g); err != nil || !c.Kept {
		t.Fatalf("card kept: %+v, %v", c, err)
	}
	if !bytes.Equal(read(state), booted) {
		t.Error("the second run's card differs from what the first run left")
	}

	// The image rebuilt: a new card from it, with the old data partition.
	img2 := imageBytes(7)
	if err := os.WriteFile(image, img2, 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = openCard(image, state, "sum2", g); err != nil || c.Kept || len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "another build") {
		t.Fatalf("rebuilt image: %+v, %v", c, err)
	}
	want := append(append(append([]byte(nil), img2[:off]...), booted[off:off+part]...), img2[off+part:]...)
	if !bytes.Equal(read(state), want) {
		t.Error("the card after a rebuild is not the new image with the old data partition")
	}
	if !bytes.Equal(read(image), img2) {
		t.Error("the image itself changed")
	}

	// An older ocfw's IMAGE.state: the data partition alone.
	old := bytes.Repeat([]byte("old state "), part/10+1)[:part]
	if err := os.WriteFile(state, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = openCard(image, state, "sum2", g); err != nil || c.Kept || len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "older ocfw") {
		t.Fatalf("old state: %+v, %v", c, err)
	}
	want = append(append(append([]byte(nil), img2[:off]...), old...), img2[off+part:]...)
	if !bytes.Equal(read(state), want) {
		t.Error("the card from an old state is not the image with that data partition")
	}
	if c, err = openCard(image, state, "sum2", g); err != nil || !c.Kept {
		t.Errorf("the migrated card is not kept on the next run: %+v, %v", c, err)
	}

	// Neither a card nor a data partition: refused, naming --fresh.
	if err := os.WriteFile(state, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = openCard(image, state, "sum2", g)
	var me *StateMismatchError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "--fresh") {
		t.Errorf("a state that fits nothing: %v", err)
	}
	if b := read(state); string(b) != "junk" {
		t.Error("a refused state was changed")
	}

	// --fresh: both files go.
	if err := removeCard(image); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{state, SourcePath(state)} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after removeCard: %v", f, err)
		}
	}
}

// Two runs of one image cannot boot its card at once: the second is
// refused, naming --keep-copy, until the first lets go.
func TestCardLocked(t *testing.T) {
	image := filepath.Join(t.TempDir(), "x.img")
	if err := os.WriteFile(image, []byte("image"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := lockImage(image)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := lockImage(image); err == nil || !strings.Contains(err.Error(), "another ocfw run") || !strings.Contains(err.Error(), "--keep-copy") {
		if f != nil {
			f.Close()
		}
		t.Errorf("a second lock while the first is held: %v", err)
	}
	c := &Card{lock: first}
	c.Close()
	second, err := lockImage(image)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	second.Close()
}
