package firmware

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"
)

func TestBIOSCFReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("two image builds; -short")
	}
	a, _ := buildALIX(t, t.TempDir(), ImageOptions{})
	b, _ := buildALIX(t, t.TempDir(), ImageOptions{})
	if a.Image.SHA256 != b.Image.SHA256 {
		t.Fatalf("two builds of the same inputs differ: %s vs %s", a.Image.SHA256, b.Image.SHA256)
	}
	c, _ := buildALIX(t, t.TempDir(), ImageOptions{SourceDateEpoch: 1700000000 + 86400})
	if c.Image.SHA256 == a.Image.SHA256 {
		t.Errorf("a different SOURCE_DATE_EPOCH gave the same image: timestamps are not from it")
	}
}

func TestBIOSCFSizeErrors(t *testing.T) {
	if err := CheckTools(plan.BootBIOSCF); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	in := x86Payload(t)
	big := filepath.Join(t.TempDir(), "big.initrd")
	if err := os.WriteFile(big, bytes.Repeat([]byte{1}, 40*MiB), 0o644); err != nil {
		t.Fatal(err)
	}
	bigIn := in
	bigIn.Initramfs = big
	for _, tc := range []struct {
		name string
		in   Input
		opts ImageOptions
		want string
	}{
		{"larger than the card", in, ImageOptions{SizeMiB: 200}, "larger than the alix2d13's 128 MB card"},
		{"card override too small", in, ImageOptions{SizeMiB: 120, CardMB: 64}, "64 MB card"},
		{"no room for data", in, ImageOptions{SizeMiB: 36}, "data partition"},
		{"initramfs does not fit", bigIn, ImageOptions{}, "boot partition (boot_mb) holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// In directories the build makes: it removes them again.
			tc.opts.Output = filepath.Join(dir, "new", "sub", "x.img")
			_, err := Build(context.Background(), testPlan(t, "alix2d13"), tc.in, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if es, _ := os.ReadDir(dir); len(es) != 0 {
				t.Errorf("a failed build left files behind: %v", es)
			}
		})
	}
}

func TestInspectBIOSCF(t *testing.T) {
	dir := t.TempDir()
	m, img := buildALIX(t, dir, ImageOptions{})
	if info, err := Inspect(img); err != nil || len(info.Problems) > 0 {
		t.Fatalf("a fresh image: %v, problems %q", err, info.Problems)
	}
	// Two boots' reports on the data partition, as the firmware writes
	// them (package store, through the "block device").
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	dev := &partDev{f: f, off: m.Layout[2].Offset}
	for _, n := range []int{1, 2} {
		st, err := store.Open(dev, m.Layout[2].Size, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := st.BeginBoot(); err != nil || b != n {
			t.Fatalf("boot %d: %v", b, err)
		}
		r := &report.Report{Version: report.Version, Boot: n}
		r.Env.Board = "alix2d13"
		js, err := r.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutReport(n, js); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	info, err := Inspect(img)
	if err != nil {
		t.Fatal(err)
	}
	// Booting changed the image: the manifest beside it says so, and
	// nothing else is wrong.
	if len(info.Problems) != 1 || !strings.Contains(info.Problems[0], "the image no longer matches its manifest") || !strings.HasSuffix(info.Problems[0], " in data") {
		t.Errorf("problems: %q", info.Problems)
	}
	if len(info.Partitions) != 2 || !info.Partitions[0].Bootable || info.Partitions[1].Bootable {
		t.Fatalf("partitions: %+v", info.Partitions)
	}
	p1, p2 := info.Partitions[0], info.Partitions[1]
	if p1.Offset != MiB || p1.FS == nil || p1.FS.Type != "FAT16" || p1.FS.Label != plan.BootLabel || p1.FS.HiddenSectors != 2048 || p1.FS.Heads != 255 || p1.FS.SectorsTrack != 63 {
		t.Errorf("boot partition: %+v fs %+v", p1, p1.FS)
	}
	if p2.FS == nil || p2.FS.Label != "OCFWDATA" || p2.FS.HiddenSectors != uint32(p2.Offset/512) {
		t.Errorf("data partition: %+v fs %+v", p2, p2.FS)
	}
	// Volume ids come from the inputs, one per partition, not mkfs.fat's
	// --invariant constant.
	if p2.FS != nil && p1.FS != nil && (p1.FS.Serial == p2.FS.Serial || p1.FS.Serial == "1234-ABCD") {
		t.Errorf("volume serials %s and %s", p1.FS.Serial, p2.FS.Serial)
	}
	names := map[string]int64{}
	for _, f := range p1.Files {
		names[f.Name] = f.Size
	}
	for _, want := range []string{BootKernel, BootInitrd, BootSyslinux, BootManifest, "/boot/syslinux/ldlinux.sys"} {
		if _, ok := names[want]; !ok {
			t.Errorf("boot partition lacks %s (have %v)", want, names)
		}
	}
	if names[BootKernel] != m.Files[0].Size {
		t.Errorf("vmlinuz is %d bytes in the image, manifest says %d", names[BootKernel], m.Files[0].Size)
	}
	if !strings.Contains(info.BootConfig, "DEFAULT a\n") || !strings.Contains(info.BootConfig, "console=ttyS0,38400n8") {
		t.Errorf("boot config:\n%s", info.BootConfig)
	}
	if info.Manifest == nil || info.Manifest.Image == nil || info.Manifest.Image.SHA256 != m.Image.SHA256 {
		t.Errorf("manifest not read back from beside the image: %+v", info.ManifestFrom)
	}
	if len(info.Reports) != 2 || info.Reports[0].Boot != 2 || info.Reports[1].Boot != 1 || info.Reports[0].Report == nil {
		t.Errorf("reports, latest first: %+v", info.Reports)
	}
	// Without the sidecar, the copy inside the image is found.
	os.Remove(ManifestPath(img))
	info, err = Inspect(img)
	if err != nil {
		t.Fatal(err)
	}
	if info.Manifest == nil || !strings.HasPrefix(info.ManifestFrom, "partition 1") || info.Manifest.Board != "alix2d13" {
		t.Errorf("in-image manifest: from %q", info.ManifestFrom)
	}
}

// -o newdir/x.img makes the directory, as ocfw try does.
func TestBuildMakesOutputDir(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "new", "sub", "alix.img")
	_, img := buildALIX(t, dir, ImageOptions{Output: out})
	for _, p := range []string{img, ManifestPath(img), SumsPath(img)} {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v", p, err)
		}
	}
	// A path through a regular file cannot be made: the error says which.
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	_, err := Build(context.Background(), testPlan(t, "alix2d13"), Input{}, ImageOptions{Output: filepath.Join(file, "x.img")})
	if err == nil || !strings.Contains(err.Error(), "cannot create its directory") {
		t.Errorf("output under a file: %v", err)
	}
}

func TestInspectTruncated(t *testing.T) {
	dir := t.TempDir()
	_, img := buildALIX(t, dir, ImageOptions{})
	os.Remove(ManifestPath(img))
	for _, keep := range []int64{100, 512, MiB + 512, 20 * MiB} {
		cut := filepath.Join(dir, "cut.img")
		cutOut(t, img, cut, 0, keep)
		if _, err := Inspect(cut); err == nil {
			t.Errorf("image truncated to %d bytes: no error", keep)
		} else if errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// partDev is a partition of an image file, as the board's block device.
type partDev struct {
	f   *os.File
	off int64
}

func (d *partDev) ReadAt(p []byte, off int64) (int, error)  { return d.f.ReadAt(p, d.off+off) }
func (d *partDev) WriteAt(p []byte, off int64) (int, error) { return d.f.WriteAt(p, d.off+off) }
func (d *partDev) Sync() error                              { return d.f.Sync() }
