package e2e

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
	"sync"
	"testing"

	fwboot "github.com/ocfw/ocfw/boot"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/cli"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"
)

// ocfw runs the CLI in-process, as cmd/ocfw does.
func ocfw(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

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

// buildImage builds image with ocfw build and args (after a default
// --speed-budget of 10s), or copies it from the images this test binary
// already built from the same inputs: builds are reproducible (the
// router test builds its site again, uncached, and compares the bytes
// with the cached build's), and
// a build, even with the userland cached, costs seconds of CPU that the
// guests of the tests running beside it need.
//
// A relative image path is built as given, uncached: the test that
// gives one checks that ocfw build writes a relative output where the
// user meant.
func buildImage(t *testing.T, image string, args ...string) {
	t.Helper()
	args = append([]string{"--speed-budget", "10s"}, args...)
	if !filepath.IsAbs(image) {
		if err := runBuild(image, args); err != nil {
			t.Fatal(err)
		}
		return
	}
	cached, err := images.get(image, args)
	if err != nil {
		t.Fatal(err)
	}
	must(t, copyBuild(cached, image))
}

// buildImageUncached builds image with ocfw build, never from the
// images cache, for a test that compares two builds' bytes.
func buildImageUncached(t *testing.T, image string, args ...string) {
	t.Helper()
	args = append([]string{"--speed-budget", "10s"}, args...)
	if err := runBuild(image, args); err != nil {
		t.Fatal(err)
	}
}

func runBuild(image string, args []string) error {
	var out, errb bytes.Buffer
	if code := cli.Run(context.Background(), append([]string{"build", "-o", image}, args...), &out, &errb); code != 0 {
		return fmt.Errorf("ocfw build %v: exit %d\n%s\n%s", args, code, out.String(), errb.String())
	}
	return nil
}

// imageCache holds the images built so far, one build per key: the
// output's base name (the manifest and sha256sums name it) and the
// arguments, each file among them (a site config) by its contents.
type imageCache struct {
	mu      sync.Mutex
	dir     string
	entries map[string]*imageEntry
}

type imageEntry struct {
	once sync.Once
	path string
	err  error
}

var images = &imageCache{entries: map[string]*imageEntry{}}

func (c *imageCache) get(image string, args []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", filepath.Base(image))
	for _, a := range args {
		if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() {
			b, err := os.ReadFile(a)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "file %x\n", sha256.Sum256(b))
			continue
		}
		fmt.Fprintf(h, "%q\n", a)
	}
	key := hex.EncodeToString(h.Sum(nil))
	c.mu.Lock()
	if c.dir == "" {
		d, err := os.MkdirTemp("", "ocfw-e2e-images-")
		if err != nil {
			c.mu.Unlock()
			return "", err
		}
		c.dir = d
	}
	e := c.entries[key]
	if e == nil {
		e = &imageEntry{path: filepath.Join(c.dir, key[:16], filepath.Base(image))}
		c.entries[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.err = runBuild(e.path, args) })
	return e.path, e.err
}

// remove deletes the cached images (TestMain, after the tests).
func (c *imageCache) remove() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

// copyBuild copies what a build left beside src (the image, its
// manifest and any other output; src's directory holds nothing else) to
// beside dst, which has the same base name (the manifest holds it), and
// merges src's sha256sums lines into dst's as a build into dst would. On
// Linux io.Copy between files is copy_file_range: the kernel shares or
// copies the blocks.
func copyBuild(src, dst string) error {
	if filepath.Base(src) != filepath.Base(dst) {
		return fmt.Errorf("copyBuild: %s and %s differ in name, which the manifest holds", src, dst)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	files, err := os.ReadDir(filepath.Dir(src))
	if err != nil {
		return err
	}
	sums := firmware.SumsPath(src)
	for _, f := range files {
		p := filepath.Join(filepath.Dir(src), f.Name())
		if p == sums {
			continue
		}
		if err := copyFile(p, filepath.Join(filepath.Dir(dst), f.Name())); err != nil {
			return err
		}
	}
	ours, err := os.ReadFile(sums)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(ours)), "\n") {
		if _, name, ok := strings.Cut(line, "  "); ok {
			names[name] = true
		}
	}
	var merged []byte
	if old, err := os.ReadFile(firmware.SumsPath(dst)); err == nil {
		for _, line := range strings.SplitAfter(string(old), "\n") {
			if _, name, ok := strings.Cut(strings.TrimSpace(line), "  "); ok && !names[name] {
				merged = append(merged, line...)
			}
		}
	}
	return os.WriteFile(firmware.SumsPath(dst), append(merged, ours...), 0o644)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func TestMain(m *testing.M) {
	guests.liftParallel()
	code := m.Run()
	images.remove()
	os.Exit(code)
}

// boot runs image with `ocfw run` until the boot's report, then powers
// it off.
func boot(t *testing.T, image string, flags ...string) (console, summary string, code int) {
	t.Helper()
	out, errs, code := ocfw(t, append(append([]string{"run", "--poweroff-after-report", "--timeout", "8m"}, flags...), image)...)
	return out, errs, code
}

// cardStore is the store on image's data partition, which must read
// back without problems.
func cardStore(t *testing.T, image string) *store.Contents {
	t.Helper()
	c := vmtest.Store(t, image)
	if len(c.Problems) > 0 {
		t.Errorf("store on %s: %v", image, c.Problems)
	}
	return c
}

// cardLog is the router's log kept on an image's data partition.
func cardLog(t *testing.T, img string) string {
	t.Helper()
	var lines []string
	for _, l := range cardStore(t, img).Log {
		lines = append(lines, l.Text)
	}
	return strings.Join(lines, "\n")
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
	// /dev/crypto's rows ("/dev/crypto:DRIVER") are in a table of their
	// own, beside the engines' (report.DevCryptoSpeed).
	for _, row := range append(append([]speed.Row(nil), r.Speed...), r.DevCryptoSpeed...) {
		rows[row.Engine+"/"+row.Cipher] = true
		sizes := speed.Sizes
		if strings.HasPrefix(row.Engine, fwboot.DevCryptoEngine) {
			sizes = fwboot.DevCryptoSizes
		}
		if row.Err != "" || len(row.Cells) != len(sizes) {
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
