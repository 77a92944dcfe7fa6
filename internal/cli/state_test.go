package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if code != 0 || !strings.Contains(out, "2 boots, 2 reports kept") || !strings.Contains(out, "reading the board's state that ocfw run kept in "+image+".state") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
}

// run names the state file it keeps, and --fresh deletes it.
func TestBoardStateFile(t *testing.T) {
	dir := t.TempDir()
	image := filepath.Join(dir, "x.img")
	state := image + ".state"
	var w bytes.Buffer
	got, err := boardState(&w, image, &runFlags{})
	if err != nil || got != state || !strings.Contains(w.String(), "keeping the board's state") || !strings.Contains(w.String(), state) {
		t.Errorf("no state yet: %q, %v, %q", got, err, w.String())
	}
	os.WriteFile(state, []byte("kept"), 0o644)
	w.Reset()
	if got, _ := boardState(&w, image, &runFlags{}); got != state || !strings.Contains(w.String(), "booting with it") {
		t.Errorf("state kept: %q, %q", got, w.String())
	}
	if _, err := os.Stat(state); err != nil {
		t.Errorf("the state went without --fresh: %v", err)
	}
	w.Reset()
	if got, err := boardState(&w, image, &runFlags{fresh: true}); err != nil || got != state || !strings.Contains(w.String(), "keeping") {
		t.Errorf("--fresh: %q, %v, %q", got, err, w.String())
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("--fresh left the state: %v", err)
	}
	for _, f := range []runFlags{{persist: true}, {keepCopy: "k.img"}} {
		if got, _ := boardState(&w, image, &f); got != "" {
			t.Errorf("%+v: state %q, want none", f, got)
		}
	}
}
