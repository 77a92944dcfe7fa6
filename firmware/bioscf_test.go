package firmware

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/plan"
)

func buildALIX(t *testing.T, dir string, opts ImageOptions) (*Manifest, string) {
	t.Helper()
	if err := CheckTools(plan.BootBIOSCF); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	in := x86Payload(t)
	if opts.Output == "" {
		opts.Output = filepath.Join(dir, "alix.img")
	}
	if opts.SourceDateEpoch == 0 {
		opts.SourceDateEpoch = 1700000000
	}
	opts.Tool = "ocfw test"
	m, err := Build(context.Background(), testPlan(t, "alix2d13"), in, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, opts.Output
}

func TestBIOSCFImageChecks(t *testing.T) {
	dir := t.TempDir()
	m, img := buildALIX(t, dir, ImageOptions{})
	fi, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 120*MiB {
		t.Errorf("image is %d bytes, want 120 MiB", fi.Size())
	}
	if m.Image == nil || m.BlockMap == nil {
		t.Fatal("manifest lacks the image checksum or block map")
	}
	// fsck.fat -n on each partition, cut out of the image.
	for _, r := range m.Layout[1:] {
		part := filepath.Join(dir, r.Name+".part")
		cutOut(t, img, part, r.Offset, r.Size)
		out, err := exec.Command("fsck.fat", "-n", part).CombinedOutput()
		if err != nil {
			t.Errorf("fsck.fat -n %s partition: %v\n%s", r.Name, err, out)
		}
		if strings.Contains(string(out), "differences") || strings.Contains(strings.ToLower(string(out)), "dirty") {
			t.Errorf("fsck.fat -n %s partition reports problems:\n%s", r.Name, out)
		}
	}
	out, err := exec.Command("mdir", "-a", "-b", "-/", "-i", img+"@@1M", "::").CombinedOutput()
	if err != nil {
		t.Fatalf("mdir: %v\n%s", err, out)
	}
	for _, want := range []string{"::/a/vmlinuz", "::/a/initrd", "::/b/vmlinuz", "::/b/initrd", "::/boot/syslinux/syslinux.cfg", "::/boot/syslinux/ldlinux.sys", "::/ocfw/manifest.json"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("mdir lists no %s:\n%s", want, out)
		}
	}
}

func cutOut(t *testing.T, img, dst string, off, size int64) {
	t.Helper()
	in, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	buf := make([]byte, size)
	if _, err := in.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}
