package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Plans written before the version field read as version 1; a newer
// version is refused with what to do.
func TestReadVersions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, json string
		version    int
		err        string
	}{
		{"before versions", `{"board":"alix2d13","boot":"bios-cf"}`, 1, ""},
		{"version 1", `{"version":1,"board":"alix2d13"}`, 1, ""},
		{"newer", `{"version":2,"board":"alix2d13"}`, 0, "plan version 2 is newer than this ocfw reads (up to 1)"},
	} {
		p := filepath.Join(dir, "plan.json")
		if err := os.WriteFile(p, []byte(tc.json), 0o644); err != nil {
			t.Fatal(err)
		}
		pl, err := Read(p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || pl.Version != tc.version || pl.Board != "alix2d13" {
			t.Errorf("%s: %+v, %v", tc.name, pl, err)
		}
	}
	// What the host writes carries the version.
	b, err := (&Plan{Version: Version, Board: "x"}).JSON()
	if err != nil || !strings.HasPrefix(string(b), "{\n  \"version\": 1,") {
		t.Errorf("JSON: %s %v", b, err)
	}
}
