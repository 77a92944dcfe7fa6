package boot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
)

func testPlan(t *testing.T) *plan.Plan {
	t.Helper()
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Resolve(boards.Request{Board: "alix2d13", Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func write(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fatSector makes a FAT boot sector with mkfs.fat, or skips.
func fatSector(t *testing.T, label string, fat32 bool) []byte {
	t.Helper()
	if _, err := exec.LookPath("mkfs.fat"); err != nil {
		t.Skip("mkfs.fat not installed (dosfstools)")
	}
	img := filepath.Join(t.TempDir(), "fat.img")
	args := []string{"-C", "-n", label, img, "40000"}
	if fat32 {
		args = append([]string{"-F", "32"}, args...)
	}
	if out, err := exec.Command("mkfs.fat", args...).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.fat: %v\n%s", err, out)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	return b[:512]
}

func TestFATLabel(t *testing.T) {
	for _, fat32 := range []bool{false, true} {
		got, ok := FATLabel(fatSector(t, "OCFWDATA", fat32))
		if !ok || got != "OCFWDATA" {
			t.Errorf("fat32=%v: label %q, %v; want OCFWDATA", fat32, got, ok)
		}
	}
	mbr := make([]byte, 512)
	mbr[510], mbr[511] = 0x55, 0xaa
	copy(mbr[0x1be:], []byte{0x80, 0, 0, 0, 0x0e})
	for name, s := range map[string][]byte{"MBR": mbr, "zeros": make([]byte, 512), "short": {1, 2}} {
		if l, ok := FATLabel(s); ok {
			t.Errorf("%s read as FAT with label %q", name, l)
		}
	}
}

// FindLabel reads boot sectors through a fake /sys/class/block and /dev.
func TestFindLabel(t *testing.T) {
	root := t.TempDir()
	sys, dev := filepath.Join(root, "sys"), filepath.Join(root, "dev")
	mbr := make([]byte, 512)
	mbr[510], mbr[511] = 0x55, 0xaa
	write(t, filepath.Join(dev, "sda"), mbr)
	write(t, filepath.Join(dev, "sda1"), fatSector(t, "OCFWBOOT", false))
	write(t, filepath.Join(dev, "sda2"), fatSector(t, "ocfwdata", false))
	for _, n := range []string{"sda", "sda1", "sda2"} {
		if err := os.MkdirAll(filepath.Join(sys, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if n != "sda" {
			write(t, filepath.Join(sys, n, "partition"), []byte("1\n"))
		}
	}
	got, err := FindLabel(sys, dev, "OCFWDATA")
	if err != nil || got != filepath.Join(dev, "sda2") {
		t.Errorf("FindLabel = %q, %v; want sda2", got, err)
	}
	_, err = FindLabel(sys, dev, "NOSUCH")
	if err == nil || !strings.Contains(err.Error(), "sda1=OCFWBOOT") {
		t.Errorf("missing label: %v; want the labels found listed", err)
	}
}

func readReport(t *testing.T, name string) *report.Report {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Boot numbers grow by one, survive a lost counter, and only the last
// ten reports stay.
func TestWriteReports(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ocfw")
	for i := 1; i <= 12; i++ {
		n, name, err := WriteReports(dir, &report.Report{Version: report.Version}, Keep)
		if err != nil {
			t.Fatal(err)
		}
		if n != i || name != fmt.Sprintf("report-%04d.json", i) {
			t.Fatalf("boot %d: got %d %s", i, n, name)
		}
		if r := readReport(t, filepath.Join(dir, name)); r.Boot != i {
			t.Errorf("report %s says boot %d", name, r.Boot)
		}
	}
	nums, err := reportNumbers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(nums) != Keep || nums[0] != 3 || nums[len(nums)-1] != 12 {
		t.Errorf("kept reports %v, want 3..12", nums)
	}
	for _, f := range []string{"report-0002.json", "report-0002.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed", f)
		}
	}
	for _, f := range []string{"report-0012.txt", "policy.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// A damaged counter never makes a boot reuse a report's number.
	write(t, filepath.Join(dir, "bootcount"), []byte("garbage"))
	n, _, err := WriteReports(dir, &report.Report{Version: report.Version}, Keep)
	if err != nil || n != 13 {
		t.Errorf("after a damaged counter: boot %d, %v; want 13", n, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// fakeLoader records loads; listed names are missing, fail or panic.
type fakeLoader struct {
	mu      sync.Mutex
	loaded  []string
	missing map[string]bool
	fail    map[string]bool
	panics  map[string]bool
	hang    map[string]bool
}

func (f *fakeLoader) Load(name string) error {
	if f.panics[name] {
		panic("loader exploded on " + name)
	}
	if f.hang[name] {
		select {}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.missing[name]:
		return fmt.Errorf("%w: %s", ErrModuleNotFound, name)
	case f.fail[name]:
		return errors.New("init_module: no such device")
	}
	f.loaded = append(f.loaded, name)
	return nil
}

// fakeRoot lays out /etc/ocfw with the plan and boot options.
func fakeRoot(t *testing.T, p *plan.Plan, opts string) string {
	t.Helper()
	root := t.TempDir()
	pj, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, plan.File), pj)
	write(t, filepath.Join(root, plan.OptionsFile), []byte(opts))
	write(t, filepath.Join(root, plan.StorageModulesFile), []byte("ata_piix\nvfat\n"))
	write(t, filepath.Join(root, "proc/crypto"), []byte(""))
	if err := os.MkdirAll(filepath.Join(root, "sys/class/block"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// The whole sequence on a fake root: reports on a data directory, every
// marker printed, a missing or failing module reported but not fatal.
func TestRunWithData(t *testing.T) {
	p := testPlan(t)
	root := fakeRoot(t, p, `{"speed_budget": "0s", "inject": ["corrupt:4096"]}`)
	data := filepath.Join(root, "data")
	var con bytes.Buffer
	loader := &fakeLoader{missing: map[string]bool{"geode_aes": true, "vfat": true}, fail: map[string]bool{"algif_skcipher": true}}
	out := Run(context.Background(), Config{Root: root, Console: &con, DataDir: data, Loader: loader})
	c := con.String()
	for _, want := range []string{
		plan.MarkReportWritten + "/ocfw/report-0001.json",
		plan.MarkSelfTest,
		plan.MarkDone,
		"module geode_aes        missing",
		"module vfat             not in this kernel (optional)",
		"module af_alg           loaded",
		"test-corrupt", // the injected engine is tested and fails
	} {
		if !strings.Contains(c, want) {
			t.Errorf("console lacks %q:\n%s", want, c)
		}
	}
	if strings.Index(c, plan.MarkSelfTest) > strings.Index(c, plan.MarkDone) {
		t.Error("the done marker comes before the self-test summary")
	}
	if out.Boot != 1 || out.InRAM != "" {
		t.Errorf("outcome: boot %d, in RAM %q", out.Boot, out.InRAM)
	}
	r := readReport(t, filepath.Join(data, plan.ReportDir, "report-0001.json"))
	if !r.Failed() {
		t.Error("the corrupting test engine did not fail the report")
	}
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "geode_aes missing") || !strings.Contains(notes, "algif_skcipher failed") {
		t.Errorf("report notes lack the module problems:\n%s", notes)
	}
	if _, err := os.Stat(filepath.Join(root, plan.RunDir, "policy.json")); err != nil {
		t.Errorf("no RAM policy for `ocf policy`: %v", err)
	}
	if strings.Join(loader.loaded[:2], " ") != "ata_piix af_alg" {
		t.Errorf("load order %v: storage modules first, then the plan's in order", loader.loaded)
	}
}

// Without a data partition the report stays in RAM, and says why.
func TestRunWithoutData(t *testing.T) {
	root := fakeRoot(t, testPlan(t), `{"speed_budget": "0s"}`)
	var con bytes.Buffer
	out := Run(context.Background(), Config{Root: root, Console: &con, DataWait: time.Millisecond, Loader: &fakeLoader{}})
	c := con.String()
	if !strings.Contains(c, plan.MarkReportRAM+"no FAT file system labelled OCFWDATA") || !strings.Contains(c, plan.MarkDone) {
		t.Errorf("console:\n%s", c)
	}
	if out.InRAM == "" || out.Boot != 0 {
		t.Errorf("outcome %+v", out)
	}
	readReport(t, filepath.Join(root, plan.RunDir, "report.json"))
}

// Whatever fails — no plan, bad options, a panicking or hanging module
// loader — the sequence ends with the done marker.
func TestRunSurvivesFailures(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(root string)
		loader *fakeLoader
		want   string
	}{
		{"no plan", func(root string) { os.Remove(filepath.Join(root, plan.File)) }, &fakeLoader{}, "reading the plan"},
		{"bad options", func(root string) { write(t, filepath.Join(root, plan.OptionsFile), []byte(`{"speed_budgt": 1}`)) }, &fakeLoader{}, "unknown field"},
		{"panicking loader", nil, &fakeLoader{panics: map[string]bool{"af_alg": true}}, "panic: loader exploded on af_alg"},
		{"hanging loader", nil, &fakeLoader{hang: map[string]bool{"af_alg": true}}, "still running after"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeRoot(t, testPlan(t), `{"speed_budget": "0s"}`)
			if tc.setup != nil {
				tc.setup(root)
			}
			var con syncBuffer
			done := make(chan *Outcome, 1)
			go func() {
				done <- Run(context.Background(), Config{Root: root, Console: &con, DataWait: time.Millisecond,
					StepTimeout: 2 * time.Second, Loader: tc.loader})
			}()
			select {
			case out := <-done:
				if !strings.Contains(strings.Join(out.Problems, "\n"), tc.want) {
					t.Errorf("problems %q lack %q", out.Problems, tc.want)
				}
			case <-time.After(time.Minute):
				t.Fatalf("Run did not return:\n%s", con.String())
			}
			if c := con.String(); !strings.Contains(c, plan.MarkDone) || !strings.Contains(c, plan.MarkSelfTest) {
				t.Errorf("console lacks the markers:\n%s", c)
			}
		})
	}
}

// syncBuffer is a console shared with a step left running.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
