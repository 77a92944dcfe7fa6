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
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"

	"golang.org/x/sys/unix"
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

// dataPartition is a data partition image as the build makes it.
func dataPartition(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data.img")
	if err := firmware.DataPartition(context.Background(), p, 12<<20, plan.DataLabel, 1700000000); err != nil {
		labtest.SkipOrFail(t, "no data partition to boot with: %v", err)
	}
	return p
}

// loadStore reads the store on a data partition image as the host does.
func loadStore(t *testing.T, img string) *store.Contents {
	t.Helper()
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := fat.Open(bytes.NewReader(b), 0, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Load(func(name string) ([]byte, error) { return fsys.ReadFile(store.Dir+"/"+name, 4<<20) })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeLoader records loads; listed names are missing, fail or panic.
type fakeLoader struct {
	mu      sync.Mutex
	loaded  []string
	params  map[string]string
	missing map[string]bool
	fail    map[string]bool
	panics  map[string]bool
	hang    map[string]bool
	nodev   map[string]bool // finit_module's ENODEV: the driver found no device
}

func (f *fakeLoader) Load(name, params string) error {
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
	case f.nodev[name]:
		return unix.ENODEV
	}
	f.loaded = append(f.loaded, name)
	if params != "" {
		if f.params == nil {
			f.params = map[string]string{}
		}
		f.params[name] = params
	}
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
	write(t, filepath.Join(root, plan.StorageModulesFile), []byte("ata_piix\nsd_mod\n"))
	write(t, filepath.Join(root, "proc/crypto"), []byte(""))
	if err := os.MkdirAll(filepath.Join(root, "sys/class/block"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// The whole sequence on a fake root: reports in the store on a data
// partition image, every marker printed, a missing or failing module
// reported but not fatal; a second boot takes the next number.
func TestRunWithData(t *testing.T) {
	p := testPlan(t)
	root := fakeRoot(t, p, `{"speed_budget": "0s", "inject": ["corrupt:4096"]}`)
	data := dataPartition(t)
	var con bytes.Buffer
	loader := &fakeLoader{missing: map[string]bool{"geode_aes": true, "sd_mod": true}, fail: map[string]bool{"algif_skcipher": true}}
	out := Run(context.Background(), Config{Root: root, Console: &con, DataDevice: data, Loader: loader})
	c := con.String()
	for _, want := range []string{
		plan.MarkReportWritten + "/ocfw/report-01.json (boot 1)",
		"ocfw: boot 1;",
		plan.MarkSelfTest,
		plan.MarkDone,
		"module geode_aes        missing",
		"module sd_mod           not in this kernel (optional)",
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
	c1 := loadStore(t, data)
	if len(c1.Reports) != 1 || c1.State.Boot != 1 || len(c1.Problems) != 0 {
		t.Fatalf("store after one boot: %d reports, boot %d, problems %v", len(c1.Reports), c1.State.Boot, c1.Problems)
	}
	if _, ok := c1.State.Values["policy"]; !ok {
		t.Error("no policy in the store")
	}
	r, err := report.Read(bytes.NewReader(c1.Reports[0].JSON))
	if err != nil {
		t.Fatal(err)
	}
	if r.Boot != 1 || !r.Failed() {
		t.Error("the corrupting test engine did not fail the report")
	}
	if r.Env.Board != p.Board || !strings.HasPrefix(r.Summary(), p.Board+", ") {
		t.Errorf("the report names board %q (summary %q), want %q", r.Env.Board, r.Summary(), p.Board)
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

	con.Reset()
	out = Run(context.Background(), Config{Root: root, Console: &con, DataDevice: data, Loader: &fakeLoader{}})
	if out.Boot != 2 || !strings.Contains(con.String(), plan.MarkReportWritten+"/ocfw/report-02.json (boot 2)") {
		t.Errorf("second boot: %+v\n%s", out, con.String())
	}
	if c2 := loadStore(t, data); len(c2.Reports) != 2 || !bytes.Equal(c2.Reports[1].JSON, c1.Reports[0].JSON) {
		t.Errorf("after two boots: %d reports; the first changed: %v", len(c2.Reports), len(c2.Reports) == 2)
	}
}

// A data partition that is not as the build made it is left exactly as
// it was found, and the report stays in RAM saying why.
func TestRunRefusesAChangedDataPartition(t *testing.T) {
	data := dataPartition(t)
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	copy(b, make([]byte, 512)) // boot sector zeroed
	write(t, data, b)
	root := fakeRoot(t, testPlan(t), `{"speed_budget": "0s"}`)
	var con bytes.Buffer
	out := Run(context.Background(), Config{Root: root, Console: &con, DataDevice: data, Loader: &fakeLoader{}})
	if out.InRAM == "" || !strings.Contains(con.String(), plan.MarkReportRAM) || !strings.Contains(out.InRAM, "not a FAT file system") {
		t.Errorf("outcome %+v\n%s", out, con.String())
	}
	after, err := os.ReadFile(data)
	if err != nil || !bytes.Equal(after, b) {
		t.Error("the refused data partition was changed")
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

// A watchdog driver that finds no device (the Geode's under QEMU) is
// "no such device here", not a problem; another module that does so
// failed.
func TestModuleNoDevice(t *testing.T) {
	p := testPlan(t)
	var con bytes.Buffer
	cfg := &Config{Root: t.TempDir(), Console: &con, Loader: &fakeLoader{nodev: map[string]bool{"geodewdt": true, "geode_aes": true}}}
	rs := loadModules(cfg, []string{"geode_aes", "cs5535_mfd", "geodewdt", "i6300esb"}, p)
	got := map[string]string{}
	for _, r := range rs {
		got[r.Name] = r.Status
	}
	want := map[string]string{"geode_aes": ModFailed, "cs5535_mfd": ModLoaded, "geodewdt": ModNoDevice, "i6300esb": ModLoaded}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: %q, want %q", n, got[n], w)
		}
	}
	if notes := strings.Join(rs.Notes(), "\n"); strings.Contains(notes, "geodewdt") || !strings.Contains(notes, "geode_aes failed") {
		t.Errorf("notes:\n%s", notes)
	}
}
