package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/store"
)

// partDev is an image file's data partition as the board's store sees
// its block device.
type partDev struct {
	f   *os.File
	off int64
}

func (d partDev) ReadAt(p []byte, off int64) (int, error)  { return d.f.ReadAt(p, d.off+off) }
func (d partDev) WriteAt(p []byte, off int64) (int, error) { return d.f.WriteAt(p, d.off+off) }
func (d partDev) Sync() error                              { return d.f.Sync() }

// TestInspectStoreDamage: every damaged store is a non-zero exit that
// says what was found — both state copies lost, the newest or the older
// copy bad, a report whose bytes changed — while the three boots' store
// itself is clean.
func TestInspectStoreDamage(t *testing.T) {
	img, m := smallImage(t)
	data := m.Layout[2]
	// Three boots' store, written into the image as the board does.
	booted := copyImage(t, img)
	must(t, os.Remove(firmware.ManifestPath(booted))) // the image changes: its sidecar no longer describes it
	f, err := os.OpenFile(booted, os.O_RDWR, 0)
	must(t, err)
	st, err := store.Open(partDev{f, data.Offset}, data.Size, store.Options{})
	must(t, err)
	for boot := 1; boot <= 3; boot++ {
		n, err := st.BeginBoot()
		must(t, err)
		_, err = st.PutReport(n, []byte(fmt.Sprintf(`{"version":%d,"boot":%d}`, report.Version, n)))
		must(t, err)
	}
	c := st.Contents()
	f.Close()
	at := func(name string) int64 {
		for _, e := range m.Store {
			if strings.HasSuffix(e.Path, "/"+name) {
				return e.Offset
			}
		}
		t.Fatalf("no %s in the manifest's store", name)
		return 0
	}
	newest, older := c.From, store.StateA
	if newest == store.StateA {
		older = store.StateB
	}
	// A failing card: a payload byte changes, the header still checks.
	hurt := func(name string) func(t *testing.T, p string) {
		return func(t *testing.T, p string) { patch(t, p, at(name)+40, []byte{0xa5}) }
	}
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, p string)
		want    []string // in the output; none = a clean store, exit 0
	}{
		{"three boots", func(*testing.T, string) {}, nil},
		{"both state copies damaged", func(t *testing.T, p string) {
			hurt(store.StateA)(t, p)
			hurt(store.StateB)(t, p)
		}, []string{"problem: partition 2: store: THE CARD'S STATE WAS LOST", "3 report(s) found in the report slots are kept (boots 1 to 3)", "/ocfw/" + c.Reports[0].File + ": boot 3"}},
		{"newest state copy damaged", hurt(newest), []string{
			fmt.Sprintf("problem: partition 2: store: %s: its record %d, the newest, is torn or damaged", newest, c.Seq),
			fmt.Sprintf("record %d in %s is used", c.Seq-1, older)}},
		{"older state copy damaged", hurt(older), []string{fmt.Sprintf("%s: its record %d, older than record %d", older, c.Seq-1, c.Seq), "the card may be failing"}},
		{"report bytes changed", func(t *testing.T, p string) {
			patch(t, p, at(c.Reports[1].File)+12, []byte("X"))
		}, []string{fmt.Sprintf("problem: partition 2: store: %s (boot 2): contents changed since it was written", c.Reports[1].File)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(booted)
			must(t, err)
			p := filepath.Join(t.TempDir(), "alix.img")
			must(t, os.WriteFile(p, b, 0o644))
			tc.corrupt(t, p)
			out, errs, code := ocfw(t, "inspect", p)
			if tc.want == nil {
				if code != 0 || strings.Contains(out, "problem:") || !strings.Contains(out, "3 boots") {
					t.Fatalf("a clean store: exit %d\n%s%s", code, out, errs)
				}
				return
			}
			if code == 0 {
				t.Errorf("exit 0 for a damaged store\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
