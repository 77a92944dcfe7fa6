package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/boardvm"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"
)

// needEndToEnd skips with -short, and skips (or, under
// OCFW_REQUIRE_KERNEL=1 as in CI, fails) when what the whole chain needs
// is missing, naming all of it.
func needEndToEnd(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the firmware with its userland and boots it in QEMU; skipped with -short")
	}
	var missing []string
	if err := qemu.Installed("i386"); err != nil {
		missing = append(missing, err.Error())
	}
	if err := firmware.CheckTools(plan.BootBIOSCF); err != nil {
		missing = append(missing, err.Error())
	}
	if _, err := debian.CachedKernel("linux-image-686", "i386", ""); err != nil {
		missing = append(missing, "the linux-image-686 (i386) package in the cache (ocfw kernel fetch --board alix2d13)")
	}
	if len(missing) == 0 {
		return
	}
	labtest.SkipOrFail(t, "end-to-end test needs: %s", strings.Join(missing, "; "))
}

// dataFile reads a file from the image's data partition (partition 2)
// with go-diskfs, an implementation independent of ocfw's own reader.
func dataFile(t *testing.T, image, path string) []byte {
	t.Helper()
	d, err := diskfs.Open(image, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fs, err := d.GetFilesystem(2)
	if err != nil {
		t.Fatalf("data partition of %s: %v", image, err)
	}
	f, err := fs.OpenFile(path, os.O_RDONLY)
	if err != nil {
		t.Fatalf("%s on the data partition: %v", path, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dataStore reads the firmware's store (package store) on the image's
// data partition through go-diskfs, a FAT reader independent of ocfw's.
func dataStore(t *testing.T, image string) *store.Contents {
	t.Helper()
	c, err := store.Load(func(name string) ([]byte, error) { return dataFile(t, image, store.Dir+"/"+name), nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) > 0 {
		t.Errorf("store on %s: %v", image, c.Problems)
	}
	return c
}

func buildImage(t *testing.T, image string, args ...string) {
	t.Helper()
	out, errs, code := ocfw(t, append([]string{"build", "-o", image, "--speed-budget", "10s"}, args...)...)
	if code != 0 {
		t.Fatalf("ocfw build %v: exit %d\n%s\n%s", args, code, out, errs)
	}
}

func boot(t *testing.T, image string, flags ...string) (console, summary string, code int) {
	t.Helper()
	out, errs, code := ocfw(t, append(append([]string{"run", "--poweroff-after-report", "--timeout", "8m"}, flags...), image)...)
	return out, errs, code
}

// unchanged asserts that image is still byte for byte what was built:
// its sha256 is its manifest's and the one in sha256sums.
func unchanged(t *testing.T, image string) {
	t.Helper()
	b, err := os.ReadFile(firmware.ManifestPath(image))
	if err != nil {
		t.Fatal(err)
	}
	m, err := firmware.ReadManifest(b)
	if err != nil || m.Image == nil {
		t.Fatalf("manifest of %s: %v", image, err)
	}
	f, err := os.Open(image)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != m.Image.SHA256 {
		t.Errorf("%s changed: sha256 %s, its manifest says %s", image, got, m.Image.SHA256)
	}
	sums, err := os.ReadFile(firmware.SumsPath(image))
	if err != nil || !strings.Contains(string(sums), got+"  "+filepath.Base(image)+"\n") {
		t.Errorf("sha256sums does not list %s with sha256 %s: %v\n%s", image, got, err, sums)
	}
}

// checkReport asserts what a good boot leaves on the card.
func checkReport(t *testing.T, name string, raw []byte, boot int) *report.Report {
	t.Helper()
	r, err := report.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if r.Boot != boot {
		t.Errorf("%s: boot %d, want %d", name, r.Boot, boot)
	}
	present := map[string]bool{}
	for _, st := range r.SelfTest {
		switch st.Status {
		case selftest.Fail:
			t.Errorf("%s: %s on %s failed: %v", name, st.Cipher, st.Engine, st.Failure)
		case selftest.Absent:
			// In QEMU the Geode and Hifn engines are absent, never failed.
			if !strings.Contains(st.Engine, "geode") && !strings.Contains(st.Engine, "hifn") {
				t.Errorf("%s: %s on %s absent: %s", name, st.Cipher, st.Engine, st.Reason)
			}
		case selftest.Pass:
			present[st.Engine+"/"+st.Cipher] = true
		}
	}
	if len(present) < 18 {
		t.Errorf("%s: %d (engine, cipher) pairs passed, want the kernel's and Go's for all 9 ciphers", name, len(present))
	}
	rows := map[string]bool{}
	for _, row := range r.Speed {
		rows[row.Engine+"/"+row.Cipher] = true
		if row.Err != "" || len(row.Cells) != len(speed.Sizes) {
			t.Errorf("%s: speed %s %s: %d cells, error %q", name, row.Engine, row.Cipher, len(row.Cells), row.Err)
		}
	}
	for k := range present {
		if !rows[k] {
			t.Errorf("%s: no speed row for %s", name, k)
		}
	}
	if len(r.Policy.Ciphers) != 9 {
		t.Errorf("%s: policy covers %d ciphers", name, len(r.Policy.Ciphers))
	}
	if !strings.HasPrefix(r.Env.Kernel, "6.1.") {
		t.Errorf("%s: environment names kernel %q", name, r.Env.Kernel)
	}
	return r
}

// TestEndToEnd proves the whole chain on every change: profile, plan,
// Debian's kernel, the Go userland, the CF image, SYSLINUX, the boot, the
// self-test and speed run, and the report kept on the card.
func TestEndToEnd(t *testing.T) {
	needEndToEnd(t)
	dir := t.TempDir()
	alix := filepath.Join(dir, "alix.img")
	buildImage(t, alix, "--board", "alix2d13", "--card", "vpn1411")

	// The first boot goes to a copy, kept for a look: the image itself
	// stays as built, ready to flash.
	booted := filepath.Join(dir, "booted.img")
	console, summary, code := boot(t, alix, "--keep-copy", booted)
	if code != 0 {
		t.Fatalf("first boot: exit %d\n%s\n%s", code, summary, lastLines(console, 40))
	}
	for _, w := range []string{"ocfw: self-test: ", speed.Header, "ocfw: report written: /ocfw/report-01.json (boot 1)"} {
		if !strings.Contains(console, w) {
			t.Errorf("console lacks %q", w)
		}
	}
	if !strings.Contains(summary, "report of boot 1 on the data partition of the copy "+booted) {
		t.Errorf("summary does not name the copy's report: %q", summary)
	}
	unchanged(t, alix)
	if c := dataStore(t, alix); c.State.Boot != 0 || len(c.Reports) != 0 {
		t.Errorf("the image itself was booted: boot %d, %d reports on its data partition", c.State.Boot, len(c.Reports))
	}
	c1 := dataStore(t, booted)
	if c1.State.Boot != 1 || len(c1.Reports) != 1 {
		t.Fatalf("store of the copy after one boot: boot %d, %d reports", c1.State.Boot, len(c1.Reports))
	}
	first := c1.Reports[0].JSON
	checkReport(t, "boot 1", first, 1)

	// A second boot of the copy, in place (--persist), keeps both
	// reports and leaves the first alone.
	_, summary, code = boot(t, booted, "--persist")
	if code != 0 {
		t.Fatalf("second boot: exit %d: %s", code, summary)
	}
	if !strings.Contains(summary, "will no longer match") {
		t.Errorf("--persist does not warn that the image changes: %q", summary)
	}
	c2 := dataStore(t, booted)
	if c2.State.Boot != 2 || len(c2.Reports) != 2 {
		t.Fatalf("store after two boots: boot %d, %d reports", c2.State.Boot, len(c2.Reports))
	}
	checkReport(t, "boot 2", c2.Reports[0].JSON, 2)
	if !bytes.Equal(first, c2.Reports[1].JSON) {
		t.Error("the second boot changed the first report")
	}
	if _, ok := c2.State.Values["policy"]; !ok {
		t.Error("no policy on the card")
	}

	// The net5501 (console 19200) boots the same way.
	// Given as a relative path, as users type it: the userland build
	// changes directories, which once broke relative outputs.
	net := filepath.Join(dir, "net5501.img")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, net)
	if err != nil {
		t.Fatal(err)
	}
	buildImage(t, rel, "--board", "net5501", "--card", "vpn1401")
	// Booted as `ocfw run` does by default, through boardvm: a temporary
	// copy, whose report Run reads back and returns.
	res, err := boardvm.Run(context.Background(), net, boardvm.RunOptions{PoweroffAfterReport: true, Timeout: 8 * time.Minute})
	if err != nil {
		console := ""
		if res != nil {
			console = lastLines(res.Console, 40)
		}
		t.Fatalf("net5501: %v\n%s", err, console)
	}
	if res.Report == nil || !res.NewReport || !res.Copy {
		t.Errorf("net5501: Run returned report %v (new %v) from a copy %v", res.Report != nil, res.NewReport, res.Copy)
	} else {
		js, err := res.Report.JSON()
		if err != nil {
			t.Fatal(err)
		}
		checkReport(t, "net5501", js, 1)
	}
	if _, err := os.Stat(res.Booted); !os.IsNotExist(err) {
		t.Errorf("the temporary copy %s is still there: %v", res.Booted, err)
	}
	unchanged(t, net)
	info, err := firmware.Inspect(net)
	if err != nil || !strings.Contains(info.BootConfig, "19200") {
		t.Errorf("net5501 boot config does not use 19200 baud: %v\n%s", err, info.BootConfig)
	}
}

// TestEndToEndBadEngine: an image whose firmware carries an engine that
// corrupts output at one size must report it failed, exclude it, and make
// `ocfw run` exit non-zero.
func TestEndToEndBadEngine(t *testing.T) {
	needEndToEnd(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "bad.img")
	buildImage(t, img, "--board", "alix2d13", "--cipher", "aes-128-cbc", "--test-inject", "corrupt:4096")
	booted := filepath.Join(dir, "booted.img")
	console, summary, code := boot(t, img, "--keep-copy", booted)
	if code == 0 {
		t.Fatalf("ocfw run exited 0 with a corrupting engine\n%s", lastLines(console, 30))
	}
	if !strings.Contains(summary, "test-corrupt") {
		t.Errorf("exit message does not name the engine: %q", summary)
	}
	unchanged(t, img)
	c := dataStore(t, booted)
	if len(c.Reports) != 1 {
		t.Fatalf("%d reports on the copy booted", len(c.Reports))
	}
	r, err := report.Read(bytes.NewReader(c.Reports[0].JSON))
	if err != nil {
		t.Fatal(err)
	}
	failed := false
	for _, st := range r.SelfTest {
		if st.Engine == "test-corrupt" && st.Status == selftest.Fail && st.Failure != nil && strings.Contains(st.Failure.Case, "4096") {
			failed = true
		}
	}
	if !failed {
		t.Errorf("report does not show test-corrupt failing at 4096 bytes: %+v", r.SelfTest)
	}
	if _, ok := r.Policy.Failed["test-corrupt"]; !ok {
		t.Errorf("policy does not exclude test-corrupt: %+v", r.Policy)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprint(strings.Join(lines, "\n"))
}
