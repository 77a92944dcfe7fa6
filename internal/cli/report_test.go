package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"
)

// cardWithReports is a data partition (what a card reader shows as
// /dev/sdc2) on which a board kept reports of boots 1..n.
func cardWithReports(t *testing.T, n int) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "card.img")
	if err := firmware.DataPartition(context.Background(), img, 12<<20, plan.DataLabel, 1700000000); err != nil {
		labtest.SkipOrFail(t, "no data partition: %v", err)
	}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	for i := 1; i <= n; i++ {
		st, err := store.Open(f, fi.Size(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := st.BeginBoot()
		if err != nil {
			t.Fatal(err)
		}
		r := &report.Report{Version: report.Version, Boot: b, Env: report.Environment{Board: "alix2d13", Kernel: "6.1.0-57-686", Machine: "QEMU Standard PC"}}
		r.SelfTest = []selftest.Result{{Engine: "go", Cipher: "aes-128-cbc", Status: selftest.Pass}}
		r.Speed = []speed.Row{{Engine: "go", Cipher: "aes-128-cbc", Cells: []speed.Cell{{Size: 16, KBps: float64(1000 * b)}, {Size: 1024, KBps: float64(2000 * b)}}}}
		j, err := r.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutReport(b, j); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

func TestReportFromACard(t *testing.T) {
	card := cardWithReports(t, 3)
	dir := t.TempDir()

	out, errs, code := ocfw(t, "report", card, "--list")
	if code != 0 || !strings.Contains(out, "3 boots, 3 reports kept") || strings.Index(out, "boot 3") > strings.Index(out, "boot 1 ") {
		t.Fatalf("--list: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "alix2d13, kernel 6.1.0-57-686: self-test 1 passed, 0 failed, 0 absent (QEMU)") {
		t.Errorf("list line:\n%s", out)
	}

	// One boot chosen, exported and charted; the legend names the board,
	// the boot and QEMU.
	svg := filepath.Join(dir, "c.svg")
	exp := filepath.Join(dir, "exported")
	out, errs, code = ocfw(t, "report", card, "--boot", "2", "--export", exp, "-o", svg)
	if code != 0 || !strings.Contains(out, "ocfw crypto report, alix2d13, boot 2") {
		t.Fatalf("--boot 2: exit %d\n%s%s", code, out, errs)
	}
	b, err := os.ReadFile(filepath.Join(exp, "alix2d13-boot-2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil || r.Boot != 2 {
		t.Errorf("exported report: %v boot %d", err, r.Boot)
	}
	chart, _ := os.ReadFile(svg)
	if !strings.Contains(string(chart), "alix2d13 boot 2 (QEMU): go") || strings.Contains(string(chart), "boot 3") {
		t.Errorf("chart legend does not name the one chosen report")
	}

	// The same card mounted on a PC: its folder.
	mnt := t.TempDir()
	raw, _ := os.ReadFile(card)
	fsys, err := fat.Open(strings.NewReader(string(raw)), 0, int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(mnt, "ocfw"), 0o755)
	for _, f := range store.Files() {
		b, err := fsys.ReadFile(store.Dir+"/"+f.Name, 4<<20)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(mnt, "ocfw", f.Name), b, 0o644)
	}
	out, errs, code = ocfw(t, "report", mnt, "--all", "-q", "-o", svg, "--force")
	if code != 0 || !strings.Contains(out, "3 reports kept") {
		t.Fatalf("card folder: exit %d\n%s%s", code, out, errs)
	}
	chart, _ = os.ReadFile(svg)
	for _, b := range []string{"boot 1", "boot 2", "boot 3"} {
		if !strings.Contains(string(chart), "alix2d13 "+b) {
			t.Errorf("--all chart lacks %s", b)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", card, "--boot", "9"}, "--boot 9: "},
		{[]string{"report", card, "--all", "--boot", "1"}, "--all and --boot"},
		{[]string{"report", t.TempDir()}, "no ocfw reports here"},
		{[]string{"report"}, "report needs at least one SOURCE"},
		{[]string{"report", card, "--reference=,"}, "--reference"},
	} {
		_, errs, code := ocfw(t, tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error with %q", tc.args, code, errs, tc.want)
		}
	}
}
