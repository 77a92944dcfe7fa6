package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/boardvm"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
)

// TestEndToEnd proves the whole chain on every change: profile, plan,
// Debian's kernel, the Go userland, the CF image, SYSLINUX, the boot, the
// self-test and speed run, and the report kept on the card.
//
// The ALIX and the net5501 boot in parallel subtests: one guest each.
func TestEndToEnd(t *testing.T) {
	needEndToEnd(t)
	t.Parallel() // no guest of its own: each subtest takes one
	t.Run("alix2d13", testChainALIX)
	t.Run("net5501", testChainNet5501)
}

// testChainALIX boots the ALIX image twice: a copy, then the copy in
// place.
func testChainALIX(t *testing.T) {
	parallel(t, 1)
	dir := t.TempDir()
	alix := filepath.Join(dir, "alix.img")
	buildImage(t, alix, "--board", "alix2d13", "--card", "vpn1411")

	// The first boot goes to a copy, kept for a look: the image itself
	// stays as built, ready to flash.
	booted := filepath.Join(dir, "booted.img")
	console, summary, code := boot(t, alix, "--keep-copy", booted)
	if code != 0 {
		t.Fatalf("first boot: exit %d\n%s\n%s", code, summary, qemu.TailLines(console, 40))
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
	if c := cardStore(t, alix); c.State.Boot != 0 || len(c.Reports) != 0 {
		t.Errorf("the image itself was booted: boot %d, %d reports on its data partition", c.State.Boot, len(c.Reports))
	}
	c1 := cardStore(t, booted)
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
	c2 := cardStore(t, booted)
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

}

// testChainNet5501: the net5501 (console 19200) boots the same way.
func testChainNet5501(t *testing.T) {
	parallel(t, 1)
	// Given as a relative path, as users type it: the userland build
	// changes directories, which once broke relative outputs.
	net := filepath.Join(t.TempDir(), "net5501.img")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, net)
	if err != nil {
		t.Fatal(err)
	}
	// A 2 s speed table and no ESP run: the ALIX boots the default
	// image's (two boots of about 45 s of CPU each); what is the
	// net5501's own here is its console and ocfw run's default path.
	buildImage(t, rel, "--board", "net5501", "--card", "vpn1401", "--speed-budget", "2s", "--esp-budget", "0s")
	// Booted as `ocfw run` does by default, through boardvm: a temporary
	// copy, whose report Run reads back and returns.
	res, err := boardvm.Run(context.Background(), net, boardvm.RunOptions{PoweroffAfterReport: true, Timeout: 8 * time.Minute})
	if err != nil {
		console := ""
		if res != nil {
			console = qemu.TailLines(res.Console, 40)
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
	parallel(t, 1)
	dir := t.TempDir()
	img := filepath.Join(dir, "bad.img")
	// The self-test's verdict is what counts: a short speed table and no
	// ESP run.
	buildImage(t, img, "--board", "alix2d13", "--cipher", "aes-128-cbc", "--test-inject", "corrupt:4096", "--speed-budget", "2s", "--esp-budget", "0s")
	booted := filepath.Join(dir, "booted.img")
	console, summary, code := boot(t, img, "--keep-copy", booted)
	if code == 0 {
		t.Fatalf("ocfw run exited 0 with a corrupting engine\n%s", qemu.TailLines(console, 30))
	}
	if !strings.Contains(summary, "test-corrupt") {
		t.Errorf("exit message does not name the engine: %q", summary)
	}
	unchanged(t, img)
	c := cardStore(t, booted)
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
