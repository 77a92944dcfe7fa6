package firmware

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ocfw/ocfw/firmware/fis"
	"github.com/ocfw/ocfw/firmware/mbr"
	"github.com/ocfw/ocfw/plan"
)

// seedCF is a 2 MiB image: MBR and one FAT12 partition with a directory,
// a long-named file and a report, made with mkfs.fat and mtools when they
// are installed (nil otherwise).
func seedCF(f *testing.F) []byte {
	if CheckTools(plan.BootRedBoot) != nil {
		return nil
	}
	dir := f.TempDir()
	img := filepath.Join(dir, "seed.img")
	os.WriteFile(img, make([]byte, 2*MiB), 0o644)
	run := func(name string, args ...string) {
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			f.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	p, _ := toolMkfsFat.path()
	run(p, "-F", "12", "-n", "OCFWDATA", "--invariant", "--offset", "64", img, "960")
	src := filepath.Join(dir, "r.json")
	os.WriteFile(src, []byte(`{"version":1,"boot":3,"environment":{"engines":[]},"selftest":[],"speed":[],"policy":{}}`), 0o644)
	run("mmd", "-i", img+"@@32768", "::/ocfw")
	run("mcopy", "-i", img+"@@32768", src, "::/ocfw/report-0003.json")
	run("mcopy", "-i", img+"@@32768", src, "::/ocfw/a-rather-long-file-name.json")
	b, _ := os.ReadFile(img)
	rec := mbr.MBR{Signature: 1}
	rec.Partitions[0] = mbr.Partition{Bootable: true, Type: mbr.TypeFAT12, Start: 64, Sectors: 1920}
	copy(b, rec.Bytes())
	return b
}

// seedFlash is a 128 KiB "flash" with a FIS directory and a Kernel entry.
func seedFlash() []byte {
	b := bytes.Repeat([]byte{0xff}, 0x20000)
	dir, _ := fis.Encode([]fis.Entry{{Name: "RedBoot", FlashBase: ixp4xxFlashBase, Size: 0x1000},
		{Name: "Kernel", FlashBase: ixp4xxFlashBase + 0x1000, Size: 0x1000}}, binary.BigEndian, 0x1000)
	copy(b, dir)
	binary.BigEndian.PutUint32(b[0x1000:], 8)
	copy(b[0x1010:], "\x00\x01\x02\x03\x04\x05\x06\x07")
	copy(b[len(b)-16:], sercommTrailer)
	return b
}

// FuzzInspect: whatever the bytes, inspect returns an image description
// or an error, and never panics or runs away.
func FuzzInspect(f *testing.F) {
	if cf := seedCF(f); cf != nil {
		f.Add(cf)
		f.Add(cf[:MiB])
	}
	f.Add(seedFlash())
	f.Add([]byte{})
	mb := make([]byte, 512)
	mb[510], mb[511] = 0x55, 0xaa
	f.Add(mb)
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := inspect(bytes.NewReader(data), int64(len(data)))
		if err == nil && info == nil {
			t.Fatal("nil info without an error")
		}
	})
}
