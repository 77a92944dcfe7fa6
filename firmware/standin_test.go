package firmware

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/plan"
)

// A stand-in image is a power-of-2 SD card with only the data partition
// (store preallocated), the kernel, device tree and initramfs beside it,
// all listed in the manifest and sha256sums; sizes QEMU would refuse are
// refused before anything is written.
func TestStandInImage(t *testing.T) {
	if err := CheckTools(plan.BootQEMUARM); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	c, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := c.Resolve(boards.Request{Board: "nslu2", StandIn: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	k := fakeZImage(t, dir, 4*MiB, false)
	ird := fakeInitrd(t, dir, 3*MiB)
	dtb := filepath.Join(dir, "a-plus.dtb")
	if err := os.WriteFile(dtb, []byte{0xd0, 0x0d, 0xfe, 0xed, 1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "n.img")
	m, err := Build(context.Background(), pl, Input{Kernel: k, Initramfs: ird, DTB: dtb}, ImageOptions{Output: out})
	if err != nil {
		t.Fatal(err)
	}
	side := StandInSidecars(out)
	for src, dst := range map[string]string{k: side.Kernel, ird: side.Initramfs, dtb: side.DTB} {
		if sha(t, src) != sha(t, dst) {
			t.Errorf("%s is not %s", dst, src)
		}
	}
	if err := qemu.RaspiStandIn.CheckDisk(out); err != nil {
		t.Error(err)
	}
	if m.Cmdline != pl.StandIn.Cmdline || m.Inputs["dtb"] != sha(t, dtb) || len(m.Outputs) != 3 || m.Store == nil {
		t.Errorf("manifest: cmdline %q, dtb %q, outputs %+v, store %v", m.Cmdline, m.Inputs["dtb"], m.Outputs, m.Store)
	}
	notes := strings.Join(m.Notes, "\n")
	if !strings.Contains(notes, "not an image for the board") || !strings.Contains(notes, "stand-in: the crypto engine") {
		t.Errorf("notes do not say it is a stand-in:\n%s", notes)
	}
	info, err := Inspect(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Partitions) != 1 || info.Partitions[0].FS == nil || info.Partitions[0].FS.Label != plan.DataLabel || len(info.Problems) > 0 {
		t.Errorf("SD card image: %+v %v", info.Partitions, info.Problems)
	}
	sums, _ := os.ReadFile(SumsPath(out))
	for _, f := range []string{"n.img", "n.zImage", "n.dtb", "n.initrd"} {
		if !strings.Contains(string(sums), "  "+f+"\n") {
			t.Errorf("sha256sums lacks %s:\n%s", f, sums)
		}
	}

	for _, tt := range []struct {
		in   Input
		opts ImageOptions
		want string
	}{
		{Input{Kernel: k, Initramfs: ird, DTB: dtb}, ImageOptions{Output: filepath.Join(dir, "x.img"), SizeMiB: 48}, "power of 2"},
		{Input{Kernel: k, Initramfs: ird, DTB: dtb}, ImageOptions{Output: filepath.Join(dir, "x.img"), SizeMiB: 8}, "power of 2"},
		{Input{Kernel: k, Initramfs: ird}, ImageOptions{Output: filepath.Join(dir, "x.img")}, "device tree"},
		{Input{Kernel: fakeZImage(t, t.TempDir(), 4096, true), Initramfs: ird, DTB: dtb}, ImageOptions{Output: filepath.Join(dir, "x.img")}, "big-endian"},
	} {
		if _, err := Build(context.Background(), pl, tt.in, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt.opts, err, tt.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "x.img")); err == nil {
			t.Errorf("%+v: a refused build left x.img", tt.opts)
		}
	}
}
