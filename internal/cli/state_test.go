package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/store"
)

// After ocfw run (or try), ocfw report IMAGE finds the reports in the
// state kept beside the image, whose own data partition holds none.
func TestReportReadsTheKeptState(t *testing.T) {
	card := cardWithReports(t, 2)
	dir := t.TempDir()
	image := filepath.Join(dir, "x.img")
	data, err := os.ReadFile(card)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(image, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, code := ocfw(t, "report", image, "--list"); code == 0 {
		t.Fatal("an image without reports and no state listed reports")
	}
	if err := os.WriteFile(image+".state", data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := ocfw(t, "report", image, "--list")
	if code != 0 || !strings.Contains(out, "2 boots, 2 reports kept") || !strings.Contains(out, "reading the card that ocfw run kept in "+image+".state") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
}

// offsetDev is a partition of a file, for the store.
type offsetDev struct {
	f   *os.File
	off int64
}

func (d offsetDev) ReadAt(p []byte, off int64) (int, error)  { return d.f.ReadAt(p, d.off+off) }
func (d offsetDev) WriteAt(p []byte, off int64) (int, error) { return d.f.WriteAt(p, d.off+off) }
func (d offsetDev) Sync() error                              { return d.f.Sync() }

// run names the card it keeps, and says on its first line when the card
// holds a pushed config, which the router runs instead of the image's own
// site config (issue 29 point 9), and how to start from the image's own;
// --fresh deletes the card. --keep-copy says it boots the image as built.
func TestBoardStateFile(t *testing.T) {
	image, _ := smallImage(t)
	state := image + ".state"
	var w bytes.Buffer
	c, err := boardState(&w, image, &runFlags{})
	if err != nil || c == nil || c.Path != state || c.Kept || !strings.HasPrefix(w.String(), "ocfw run: booting a card written from the image to "+state) || !strings.Contains(w.String(), "--fresh") {
		t.Fatalf("no card yet: %+v, %v, %q", c, err, w.String())
	}
	if strings.Contains(w.String(), "pushed config") {
		t.Errorf("a new card said it holds a pushed config: %q", w.String())
	}
	// While a run has the card, another run of the image is refused.
	if _, err := boardState(&w, image, &runFlags{}); err == nil || !strings.Contains(err.Error(), "another ocfw run") {
		t.Errorf("a second run while the first has the card: %v", err)
	}
	c.Close()

	// The board confirmed pushed config 3 on the card.
	info, err := firmware.Inspect(state)
	must(t, err)
	var data *firmware.PartitionInfo
	for i, p := range info.Partitions {
		if p.FS != nil && strings.EqualFold(strings.TrimSpace(p.FS.Label), plan.DataLabel) {
			data = &info.Partitions[i]
		}
	}
	if data == nil {
		t.Fatalf("no data partition on %s", state)
	}
	f, err := os.OpenFile(state, os.O_RDWR, 0)
	must(t, err)
	st, err := store.Open(offsetDev{f, data.Offset}, data.Size, store.Options{})
	must(t, err)
	pushed := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	must(t, st.SetValue(config.ValueName, config.Record{State: config.StateConfirmed, Confirmed: &config.Gen{N: 3, Site: "{}", Time: pushed}}))
	f.Close()

	w.Reset()
	c, err = boardState(&w, image, &runFlags{})
	first, _, _ := strings.Cut(w.String(), "\n")
	if err != nil || c == nil || !c.Kept || !strings.Contains(first, "booting the card kept in "+state) ||
		!strings.Contains(first, "pushed config 3 (ocfw push, 2026-12-04 21:00:00 UTC), which the router runs instead of the image's own site config") ||
		!strings.Contains(first, "--fresh starts over from the image's own") {
		t.Errorf("card with a pushed config: %+v, %v, first line %q", c, err, first)
	}
	if c != nil {
		c.Close()
	}

	w.Reset()
	if c, err = boardState(&w, image, &runFlags{keepCopy: "k.img"}); c != nil || err != nil || !strings.Contains(w.String(), "neither booted nor changed") {
		t.Errorf("--keep-copy: %+v, %v, %q", c, err, w.String())
	}
	if c, _ := boardState(&w, image, &runFlags{persist: true}); c != nil {
		t.Errorf("--persist: card %+v, want none", c)
	}

	w.Reset()
	c, err = boardState(&w, image, &runFlags{fresh: true})
	if err != nil || c == nil || c.Kept || c.Pushed != nil || strings.Contains(w.String(), "pushed config") {
		t.Errorf("--fresh: %+v, %v, %q", c, err, w.String())
	}
}
