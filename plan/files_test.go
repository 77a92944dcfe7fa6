package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// boot.json's durations have one parser: the host's check and the
// board's reading agree, default when unset, an error naming the field.
func TestOptionDurations(t *testing.T) {
	for _, tc := range []struct {
		opts       Options
		speed, esp time.Duration
		write      time.Duration
		err        string
	}{
		{Options{}, 15 * time.Second, 8 * time.Second, 0, ""},
		{Options{SpeedBudget: "20s", ESPBudget: "0s", TestWriteTime: "2s"}, 20 * time.Second, 0, 2 * time.Second, ""},
		{Options{SpeedBudget: "soon"}, 15 * time.Second, 8 * time.Second, 0, `speed_budget "soon": want a duration such as 20s`},
		{Options{ESPBudget: "-1s"}, 15 * time.Second, 8 * time.Second, 0, `esp_budget "-1s": want a duration`},
		{Options{TestWriteTime: "x"}, 15 * time.Second, 8 * time.Second, 0, `test_write_time "x": want a duration`},
	} {
		speed, _ := tc.opts.SpeedBudgetOr(15 * time.Second)
		esp, _ := tc.opts.ESPBudgetOr(8 * time.Second)
		err := tc.opts.CheckDurations()
		if speed != tc.speed || esp != tc.esp || tc.opts.TestWriteTimeOrZero() != tc.write ||
			(tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: speed %v esp %v write %v, check %v; want %v %v %v, %q", tc.opts, speed, esp, tc.opts.TestWriteTimeOrZero(), err, tc.speed, tc.esp, tc.write, tc.err)
		}
	}
}
