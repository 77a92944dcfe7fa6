package firmware

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/firmware/fis"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/plan"
)

// fakeZImage is a little- (or big-) endian ARM zImage header and filler.
func fakeZImage(t *testing.T, dir string, size int, big bool) string {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i * 7)
	}
	order := binary.ByteOrder(binary.LittleEndian)
	if big {
		order = binary.BigEndian
	}
	order.PutUint32(b[0x24:], 0x016f2818)
	p := filepath.Join(dir, "zImage")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fakeInitrd(t *testing.T, dir string, size int) string {
	b := append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, bytes.Repeat([]byte{0x42}, size-6)...)
	p := filepath.Join(dir, "initrd.xz")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sha(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestNSLU2FlashImage(t *testing.T) {
	dir := t.TempDir()
	k := fakeZImage(t, dir, 900*1024, false)
	ird := fakeInitrd(t, dir, 3*MiB+2) // not a multiple of 4: padded
	out := filepath.Join(dir, "nslu2.img")
	in := Input{Kernel: k, Initramfs: ird}
	m, err := Build(context.Background(), testPlan(t, "nslu2"), in, ImageOptions{Output: out, SourceDateEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(img) != 8*MiB {
		t.Fatalf("image is %d bytes, want exactly 8 MiB", len(img))
	}
	if !bytes.Equal(img[:0x60000], bytes.Repeat([]byte{0xff}, 0x60000)) {
		t.Error("RedBoot and SysConf areas are not left erased")
	}
	if n := binary.BigEndian.Uint32(img[0x60000:]); n != 900*1024 || !bytes.Equal(img[0x60004:0x60010], make([]byte, 12)) {
		t.Errorf("kernel header: length %d, rest % x", n, img[0x60004:0x60010])
	}
	// Payload words are byte-swapped: the zImage magic reads big-endian.
	if binary.BigEndian.Uint32(img[0x60010+0x24:]) != 0x016f2818 {
		t.Errorf("kernel payload at 0x60010 is not the word-swapped zImage")
	}
	if n := binary.BigEndian.Uint32(img[0x160000:]); n != 3*MiB+4 {
		t.Errorf("ramdisk header length %d, want %d (padded to 4)", n, 3*MiB+4)
	}
	es, err := fis.Decode(img[0x7e0000:0x800000], binary.BigEndian)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name        string
		flash, size uint32
	}{{"RedBoot", 0x50000000, 0x40000}, {"SysConf", 0x50040000, 0x20000}, {"Kernel", 0x50060000, 0x100000},
		{"Ramdisk", 0x50160000, 0x680000}, {"FIS directory", 0x507e0000, 0x20000}}
	if len(es) != len(want) {
		t.Fatalf("FIS entries %+v", es)
	}
	for i, w := range want {
		if es[i].Name != w.name || es[i].FlashBase != w.flash || es[i].Size != w.size {
			t.Errorf("FIS entry %d: %+v, want %+v", i, es[i], w)
		}
	}
	if es[2].DataLength != 16+900*1024 || es[2].MemBase != 0x01d00000 {
		t.Errorf("Kernel entry %+v", es[2])
	}
	if !bytes.Equal(img[0x7ffff8:0x7ffffe], []byte("eRcOmM")) {
		t.Errorf("no Sercomm trailer: % x", img[0x7ffff0:])
	}
	// Inspect reads the layout back.
	info, err := Inspect(out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "redboot-flash" || len(info.Flash) != 5 || info.Trailer == "" || len(info.Problems) > 0 {
		t.Fatalf("inspect: %+v", info)
	}
	kf := info.Flash[2]
	if kf.Offset != 0x60000 || kf.Content != KernelZImageLE || kf.SHA256 != sha(t, k) {
		t.Errorf("inspect Kernel: %+v", kf)
	}
	if rf := info.Flash[3]; rf.Offset != 0x160000 || rf.Content != "xz data (initramfs)" || rf.DataLength != 3*MiB+4 {
		t.Errorf("inspect Ramdisk: %+v", rf)
	}
	if m.BlockMap.Mapped >= int64(len(img)) || m.BlockMap.Ranges[0].Offset != 0x60000 {
		t.Errorf("block map should start at the Kernel partition and skip RedBoot: %+v", m.BlockMap.Ranges[0])
	}
	// Same inputs, same bytes.
	out2 := filepath.Join(t.TempDir(), "nslu2.img")
	m2, err := Build(context.Background(), testPlan(t, "nslu2"), in, ImageOptions{Output: out2, SourceDateEpoch: 1})
	if err != nil || m2.Image.SHA256 != m.Image.SHA256 {
		t.Errorf("second build: %v, sha %s vs %s", err, m2.Image.SHA256, m.Image.SHA256)
	}
}

func TestRedBootRefusals(t *testing.T) {
	dir := t.TempDir()
	small := fakeInitrd(t, dir, 1024)
	for _, tc := range []struct {
		name, board string
		kernel      func() string
		initrd      string
		want        string
	}{
		{"kernel overflows", "nslu2", func() string { return fakeZImage(t, t.TempDir(), 0x100000, false) }, small, "Kernel partition holds 1048560"},
		{"ramdisk overflows", "nslu2", func() string { return fakeZImage(t, t.TempDir(), 4096, false) }, fakeInitrd(t, t.TempDir(), 0x680000), "Ramdisk partition"},
		{"big-endian kernel", "nslu2", func() string { return fakeZImage(t, t.TempDir(), 4096, true) }, small, "big-endian"},
		{"not a kernel", "nslu2", func() string { return small }, small, "not a Linux kernel"},
		{"x86 kernel on ARM board", "avila-gw2348", func() string {
			b := make([]byte, 0x400)
			copy(b[0x202:], "HdrS")
			b[0x1fe], b[0x1ff] = 0x55, 0xaa
			p := filepath.Join(t.TempDir(), "bz")
			os.WriteFile(p, b, 0o644)
			return p
		}, small, "bzImage"},
		{"avila kernel overflows", "avila-gw2348", func() string { return fakeZImage(t, t.TempDir(), 0x200001, false) }, small, "Kernel partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "x.img")
			_, err := Build(context.Background(), testPlan(t, tc.board), Input{Kernel: tc.kernel(), Initramfs: tc.initrd}, ImageOptions{Output: out})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a refused build left an image")
			}
		})
	}
}

func TestAvilaOutputs(t *testing.T) {
	if err := CheckTools(plan.BootRedBoot); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	dir := t.TempDir()
	k := fakeZImage(t, dir, 1500*1024, false)
	ird := fakeInitrd(t, dir, 2*MiB)
	out := filepath.Join(dir, "avila.img")
	m, err := Build(context.Background(), testPlan(t, "avila-gw2348", "vpn1411"), Input{Kernel: k, Initramfs: ird}, ImageOptions{Output: out})
	if err != nil {
		t.Fatal(err)
	}
	if sha(t, filepath.Join(dir, "avila.zImage")) != sha(t, k) || sha(t, filepath.Join(dir, "avila.initrd")) != sha(t, ird) {
		t.Error("avila.zImage / avila.initrd are not the inputs")
	}
	cmds, err := os.ReadFile(filepath.Join(dir, "avila.redboot.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fis create", "-f 0x50040000", "-f 0x50240000", "-l 0x177000", "console=ttyS0,115200n8"} {
		if !strings.Contains(string(cmds), want) {
			t.Errorf("RedBoot commands lack %q:\n%s", want, cmds)
		}
	}
	info, err := Inspect(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Partitions) != 1 || info.Partitions[0].FS == nil || info.Partitions[0].FS.Label != "OCFWDATA" || len(info.Problems) > 0 {
		t.Errorf("CF data image: %+v %v", info.Partitions, info.Problems)
	}
	sums, _ := os.ReadFile(SumsPath(out))
	for _, f := range []string{"avila.img", "avila.img.manifest.json", "avila.zImage", "avila.initrd", "avila.redboot.txt"} {
		if !strings.Contains(string(sums), "  "+f+"\n") {
			t.Errorf("sha256sums lacks %s:\n%s", f, sums)
		}
	}
	if len(m.Outputs) != 3 {
		t.Errorf("manifest outputs: %+v", m.Outputs)
	}
}

// TestDebianARMKernel uses Debian armel's marvell kernel as a real
// little-endian ARMv5 stand-in (an IXP4xx needs its own kernel): it is
// recognised, and at 2.6 MB it overflows both boards' Kernel partitions.
func TestDebianARMKernel(t *testing.T) {
	k, err := debKernel("linux-image-marvell", "armel")
	if err != nil && labtest.Required() {
		// CI: no board profile names this package, so nothing else
		// fetches it; apt-get download it here.
		var deb string
		if deb, err = debian.FetchKernel(context.Background(), "linux-image-marvell", "armel", ""); err == nil {
			k, err = debian.ExtractKernelCached(deb, "")
		}
	}
	if err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	head := make([]byte, 0x400)
	f, err := os.Open(k.Vmlinuz)
	if err != nil {
		t.Fatal(err)
	}
	f.ReadAt(head, 0)
	f.Close()
	if got, err := KernelFormat(head); got != KernelZImageLE {
		t.Fatalf("marvell kernel identified as %q (%v)", got, err)
	}
	fi, _ := os.Stat(k.Vmlinuz)
	ird := fakeInitrd(t, t.TempDir(), 1024)
	for _, board := range []string{"nslu2", "avila-gw2348"} {
		part, _ := flashPart(testPlan(t, board), "Kernel")
		if fi.Size() <= int64(part.Size) {
			continue
		}
		_, err := Build(context.Background(), testPlan(t, board), Input{Kernel: k.Vmlinuz, Initramfs: ird}, ImageOptions{Output: filepath.Join(t.TempDir(), "x.img")})
		if err == nil || !strings.Contains(err.Error(), "too many") {
			t.Errorf("%s with a %d-byte kernel: %v", board, fi.Size(), err)
		}
	}
}
