package firmware

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocfw/ocfw/firmware/fis"
	"github.com/ocfw/ocfw/firmware/mbr"
	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/plan"
)

// IXP4xx boards map their NOR flash at the expansion bus's chip select 0.
const ixp4xxFlashBase = 0x50000000

// Where the NSLU2's Linksys RedBoot boot script puts the kernel and the
// ramdisk in RAM (it ignores the FIS directory for these).
const (
	nslu2KernelMem  = 0x01d00000
	nslu2RamdiskMem = 0x01000000
)

// Avila load addresses used in the generated RedBoot commands.
const (
	avilaKernelMem  = 0x01600000
	avilaRamdiskMem = 0x00800000
)

// payloadHeader is the 16-byte header Sercomm's RedBoot expects at the
// start of the Kernel and Ramdisk partitions: big-endian data length, then
// 12 zero bytes.
const payloadHeader = 16

// sercommTrailer is the 16-byte trailer at the end of an NSLU2's flash:
// product id 1, protocol 0, firmware version 0x2325 (R25), the magic
// "eRcOmM" RedBoot's boot command checks; the two unknown fields are 0.
var sercommTrailer = []byte{0x00, 0x01, 0x00, 0x00, 0x23, 0x25, 0x00, 0x00, 'e', 'R', 'c', 'O', 'm', 'M', 0x00, 0x00}

// fisOrder is the byte order of the FIS directory and the length headers:
// the NSLU2's and Avila's RedBoots run the XScale big-endian.
var fisOrder binary.ByteOrder = binary.BigEndian

func flashPart(pl *plan.Plan, name string) (plan.FlashPart, bool) {
	for _, p := range pl.Image.Flash {
		if strings.EqualFold(p.Name, name) {
			return p, true
		}
	}
	return plan.FlashPart{}, false
}

func buildRedBoot(ctx context.Context, pl *plan.Plan, in Input, opts ImageOptions, m *Manifest) (*Manifest, error) {
	if err := checkKernel(in.Kernel, KernelZImageLE); err != nil {
		return nil, err
	}
	kp, ok1 := flashPart(pl, "Kernel")
	rp, ok2 := flashPart(pl, "Ramdisk")
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("board %s: the profile's flash layout needs Kernel and Ramdisk partitions", pl.Board)
	}
	ksize, isize, err := sizes(in.Kernel, in.Initramfs)
	if err != nil {
		return nil, err
	}
	m.Cmdline = Cmdline(pl)
	if pl.Storage.CF {
		return buildAvila(ctx, pl, in, opts, m, kp, rp, ksize, isize)
	}
	return buildFlashImage(pl, in, opts, m, kp, rp, ksize, isize)
}

// buildFlashImage writes the whole flash (NSLU2): erased (0xff) RedBoot
// and SysConf areas, which ocfw does not ship and flashing must skip;
// Kernel and Ramdisk with their length headers, payloads stored in 32-bit
// words swapped, as Debian's little-endian NSLU2 images were, because
// RedBoot copies flash as big-endian words; the FIS directory; and the
// Sercomm trailer.
func buildFlashImage(pl *plan.Plan, in Input, opts ImageOptions, m *Manifest, kp, rp plan.FlashPart, ksize, isize int64) (*Manifest, error) {
	size := int64(pl.Storage.FlashMB) * MiB
	if size <= 0 {
		return nil, fmt.Errorf("board %s: no flash size in the profile", pl.Board)
	}
	for _, c := range []struct {
		what string
		n    int64
		p    plan.FlashPart
	}{{"kernel " + in.Kernel, pad4(ksize), kp}, {"initramfs " + in.Initramfs, pad4(isize), rp}} {
		if room := int64(c.p.Size) - payloadHeader; c.n > room {
			return nil, fmt.Errorf("%s is %d bytes; the %s's %s partition holds %d (%#x less its %d-byte header): %d bytes too many",
				c.what, c.n, pl.Board, c.p.Name, room, c.p.Size, payloadHeader, c.n-room)
		}
	}
	var fisPart plan.FlashPart
	var entries []fis.Entry
	for _, p := range pl.Image.Flash {
		if int64(p.Offset)+int64(p.Size) > size || p.Offset < 0 || p.Size <= 0 {
			return nil, fmt.Errorf("board %s: flash partition %s (%#x+%#x) is outside the %d MiB flash", pl.Board, p.Name, p.Offset, p.Size, pl.Storage.FlashMB)
		}
		e := fis.Entry{Name: p.Name, FlashBase: ixp4xxFlashBase + uint32(p.Offset), MemBase: ixp4xxFlashBase + uint32(p.Offset), Size: uint32(p.Size), DataLength: uint32(p.Size)}
		switch p.Name {
		case "Kernel":
			e.MemBase, e.Entry, e.DataLength = nslu2KernelMem, nslu2KernelMem, uint32(payloadHeader+pad4(ksize))
		case "Ramdisk":
			e.MemBase, e.DataLength = nslu2RamdiskMem, uint32(payloadHeader+pad4(isize))
		case "FIS directory":
			fisPart = p
		}
		entries = append(entries, e)
	}
	if fisPart.Size == 0 {
		return nil, fmt.Errorf("board %s: the flash layout has no FIS directory partition", pl.Board)
	}
	sercomm := false
	if _, ok := flashPart(pl, "SysConf"); ok {
		sercomm = true // the Linksys/Sercomm layout
	}
	img := bytes.Repeat([]byte{0xff}, int(size))
	var ranges [][2]int64
	for _, x := range []struct {
		path string
		p    plan.FlashPart
		name string
	}{{in.Kernel, kp, "kernel"}, {in.Initramfs, rp, "ramdisk"}} {
		data, err := os.ReadFile(x.path)
		if err != nil {
			return nil, err
		}
		data = swapWords(append(data, make([]byte, pad4(int64(len(data)))-int64(len(data)))...))
		off := int64(x.p.Offset)
		hdr := make([]byte, payloadHeader)
		fisOrder.PutUint32(hdr, uint32(len(data)))
		copy(img[off:], hdr)
		copy(img[off+payloadHeader:], data)
		ranges = append(ranges, [2]int64{off, off + payloadHeader + int64(len(data))})
		m.Layout = append(m.Layout, Region{Name: x.p.Name, Offset: off, Size: int64(x.p.Size), Data: int64(len(data))})
	}
	dir, err := fis.Encode(entries, fisOrder, fisPart.Size)
	if err != nil {
		return nil, err
	}
	copy(img[fisPart.Offset:], dir)
	ranges = append(ranges, [2]int64{int64(fisPart.Offset), int64(fisPart.Offset + fisPart.Size)})
	m.Layout = append(m.Layout, Region{Name: fisPart.Name, Offset: int64(fisPart.Offset), Size: int64(fisPart.Size), Data: int64(len(entries) * fis.EntrySize)})
	if sercomm {
		copy(img[size-16:], sercommTrailer)
		ranges = append(ranges, [2]int64{size - 16, size})
		m.Layout = append(m.Layout, Region{Name: "Sercomm trailer", Offset: size - 16, Size: 16, Data: 16})
	}
	m.Notes = append(m.Notes,
		"RedBoot and SysConf are left erased (0xff): ocfw ships no RedBoot; write only from the Kernel partition on, e.g. from RedBoot: load -r -v -b 0x01000000 -m xmodem, then fis write -f 0x50060000 -b 0x01060000 -l 0x7a0000",
		"kernel and ramdisk payloads are stored in byte-swapped 32-bit words (big-endian RedBoot copies flash by words); the 16-byte length headers and the FIS directory are big-endian",
		"a little-endian kernel started by big-endian RedBoot must switch the CPU's endianness first (as Debian's APEX loader did); the kernel is the user's (given to ocfw build)")

	var out atomicfile.Set
	defer out.Cleanup()
	f, err := out.Create(opts.Output)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Write(img); err != nil {
		return nil, err
	}
	return finish(f, size, ranges, m, &out, opts)
}

func pad4(n int64) int64 { return (n + 3) &^ 3 }

// swapWords reverses the bytes of every 32-bit word in place.
func swapWords(b []byte) []byte {
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return b
}

// buildAvila writes a CF card image with the data partition for reports,
// and beside it the kernel, the initramfs and the RedBoot commands that
// store them in the board's flash and boot them.
func buildAvila(ctx context.Context, pl *plan.Plan, in Input, opts ImageOptions, m *Manifest, kp, rp plan.FlashPart, ksize, isize int64) (*Manifest, error) {
	if err := CheckTools(plan.BootRedBoot); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		what string
		n    int64
		p    plan.FlashPart
	}{{"kernel " + in.Kernel, ksize, kp}, {"initramfs " + in.Initramfs, isize, rp}} {
		if c.n > int64(c.p.Size) {
			return nil, fmt.Errorf("%s is %d bytes; the %s's %s partition holds %d (%#x): %d bytes too many",
				c.what, c.n, pl.Board, c.p.Name, c.p.Size, c.p.Size, c.n-int64(c.p.Size))
		}
	}
	size, err := avilaDataSize(opts)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(opts.Output, filepath.Ext(opts.Output))
	kname, iname, cname := base+".zImage", base+".initrd", base+".redboot.txt"
	cmds := avilaCommands(pl, filepath.Base(kname), filepath.Base(iname), kp, rp, ksize, isize)

	run := runner{ctx: ctx, sde: opts.SourceDateEpoch}
	m.HostTools = map[string]string{toolMkfsFat.Name: toolMkfsFat.version(ctx), toolMcopy.Name: toolMcopy.version(ctx)}
	dataFAT := 16
	if size-bootStart >= fat32FromMiB*MiB {
		dataFAT = 32
	}
	m.Layout = []Region{{Name: "mbr", Size: 512}, {Name: "data", Offset: bootStart, Size: size - bootStart, FS: fmt.Sprintf("FAT%d", dataFAT), Label: pl.Image.DataLabel}}
	m.Notes = append(m.Notes, "the CF card holds only the data partition for reports; the kernel and initramfs go to flash with the RedBoot commands in "+filepath.Base(cname))

	var out atomicfile.Set
	defer out.Cleanup()
	if err := copySidecars(&out, m, [][2]string{{in.Kernel, kname}, {in.Initramfs, iname}}); err != nil {
		return nil, err
	}
	if err := out.WriteFile(cname, []byte(cmds)); err != nil {
		return nil, err
	}
	m.Outputs = append(m.Outputs, File{Name: filepath.Base(cname), Size: int64(len(cmds)), SHA256: bytesSHA256([]byte(cmds))})

	img, err := out.Create(opts.Output)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	ranges, err := writeDataDisk(run, img, size, dataFAT, pl.Image.DataLabel, m, opts)
	if err != nil {
		return nil, err
	}
	return finish(img, size, ranges, m, &out, opts)
}

// copySidecars copies each {source, destination} pair into out (written
// beside the image) and lists the copies in the manifest's outputs.
func copySidecars(out *atomicfile.Set, m *Manifest, pairs [][2]string) error {
	for _, x := range pairs {
		f, err := out.Create(x[1])
		if err != nil {
			return err
		}
		src, err := os.Open(x[0])
		if err != nil {
			f.Close()
			return err
		}
		_, err = io.Copy(f, src)
		src.Close()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		sum, n, err := fileSHA256(x[0])
		if err != nil {
			return err
		}
		m.Outputs = append(m.Outputs, File{Name: filepath.Base(x[1]), Size: n, SHA256: sum})
	}
	return nil
}

// writeDataDisk makes img a disk of size bytes holding only the data
// partition (FAT fatBits, labelled label, at 1 MiB, the store
// preallocated) and returns the ranges that hold data, for the block map.
func writeDataDisk(run runner, img *os.File, size int64, fatBits int, label string, m *Manifest, opts ImageOptions) ([][2]int64, error) {
	if err := img.Truncate(size); err != nil {
		return nil, err
	}
	name := img.Name()
	if err := mkfs(run, name, bootStart, size-bootStart, fatBits, label, volumeSeed(m)^0xda7a); err != nil {
		return nil, err
	}
	if err := run.run(toolMmd, "-i", fmt.Sprintf("%s@@%d", name, bootStart), "::"+DataReportDir); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(filepath.Dir(opts.Output), ".ocfw-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	if m.Store, err = preallocate(run, img, bootStart, size-bootStart, work, time.Unix(opts.SourceDateEpoch, 0)); err != nil {
		return nil, err
	}
	rec := mbr.MBR{Signature: volumeSeed(m) | 1}
	rec.Partitions[0] = mbr.Partition{Type: fatType(fatBits, size-bootStart), Start: bootStart / 512, Sectors: uint32((size - bootStart) / 512)}
	if _, err := img.WriteAt(rec.Bytes(), 0); err != nil {
		return nil, err
	}
	if err := patchBPB(img, bootStart); err != nil {
		return nil, err
	}
	ranges := [][2]int64{{0, bootStart}}
	fs, err := openFAT(img, bootStart, size-bootStart)
	if err != nil {
		return nil, err
	}
	return append(ranges, fsRanges(fs, bootStart)...), nil
}

// avilaCommands is the RedBoot session that stores the kernel and the
// initramfs in flash and makes them boot.
func avilaCommands(pl *plan.Plan, kname, iname string, kp, rp plan.FlashPart, ksize, isize int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# ocfw firmware for %s: store the kernel and initramfs in flash with RedBoot.
# Serial console %s at %d baud. Put %s and %s on a TFTP server,
# then at the RedBoot> prompt (set SERVER and the board's address first):
#   ip_address -l BOARD_IP/24 -h SERVER
load -r -v -b %#08x %s
fis create -b %#08x -l %#x -f %#08x -e %#08x -r %#08x linux
load -r -v -b %#08x %s
fis create -b %#08x -l %#x -f %#08x -r %#08x ramdisk
# Boot script (fconfig boot_script_data, then these three lines):
#   fis load linux
#   fis load ramdisk
#   exec -r %#08x -s %#x -c "%s"
`, pl.Board, pl.Console.Device, pl.Console.Baud, kname, iname,
		avilaKernelMem, kname,
		avilaKernelMem, ksize, ixp4xxFlashBase+kp.Offset, avilaKernelMem, avilaKernelMem,
		avilaRamdiskMem, iname,
		avilaRamdiskMem, isize, ixp4xxFlashBase+rp.Offset, avilaRamdiskMem,
		avilaRamdiskMem, isize, Cmdline(pl))
	return b.String()
}

// avilaDataSize is the size of the CF image that holds an Avila's data
// partition: the size asked, default 32 MiB, at least 16 MiB and within the card.
func avilaDataSize(opts ImageOptions) (int64, error) {
	sizeMiB := opts.SizeMiB
	if sizeMiB == 0 {
		sizeMiB = 32
	}
	if sizeMiB < 16 {
		return 0, &SizeError{Msg: fmt.Sprintf("CF data image of %d MiB: need at least 16 MiB", sizeMiB)}
	}
	size := int64(sizeMiB) * MiB
	if opts.CardMB > 0 && size > int64(opts.CardMB)*1000*1000 {
		return 0, fmt.Errorf("CF data image of %d MiB is larger than the %d MB card", sizeMiB, opts.CardMB)
	}
	return size, nil
}
