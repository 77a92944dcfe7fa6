package firmware

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ocfw/ocfw/firmware/mbr"
	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/plan/slots"
)

// On-card layout shared with the rootfs side (see the contract in
// README): boot partition at 1 MiB, SYSLINUX in /boot/syslinux.
const (
	MiB          = 1 << 20
	bootStart    = 1 * MiB
	syslinuxDir  = "/boot/syslinux"
	syslinuxCfg  = syslinuxDir + "/syslinux.cfg"
	blockSize    = 4096
	fat32FromMiB = 512 // data partitions this large or larger are FAT32
	// syslinuxReserve covers ldlinux.sys and ldlinux.c32 (about 180 KiB)
	// and the manifest, with room to spare.
	syslinuxReserve = 512 * 1024
)

// Boot files on the boot partition: slot a's (the factory default; the
// build puts the same system in slot b, see package boot/upgrade).
const (
	BootKernel    = "/a/vmlinuz"
	BootInitrd    = "/a/initrd"
	BootManifest  = "/ocfw/manifest.json"
	BootSyslinux  = syslinuxCfg
	DataReportDir = "/" + plan.ReportDir // reports on the data partition
)

// SyslinuxConfig is the SYSLINUX configuration for plan: the kernel's
// console on the board's serial port and baud, no prompt.
//
// No SERIAL directive: these boards have no video, and their BIOS copies
// the screen to the serial port (tinyBIOS on the ALIX, comBIOS on the
// net5501, SeaBIOS in QEMU), so SYSLINUX writing to the port as well
// printed every line twice, interleaved ("Loading /vmlinuz...Loading
// /vmlinuz... ook"). CONSOLE 0, meant for this, does not silence SYSLINUX
// 6.04's screen output (tried in QEMU).
func SyslinuxConfig(pl *plan.Plan) (string, error) {
	if _, err := serialPort(pl.Console.Device); err != nil {
		return "", err
	}
	if pl.Console.Baud <= 0 {
		return "", fmt.Errorf("board %s: console baud %d", pl.Board, pl.Console.Baud)
	}
	head := fmt.Sprintf("ocfw firmware for %s: console %s at %d baud (SYSLINUX through the BIOS's)", pl.Board, pl.Console.Device, pl.Console.Baud)
	return slots.Config(head, slots.SlotA, Cmdline(pl))
}

func serialPort(dev string) (int, error) {
	n, ok := strings.CutPrefix(dev, "ttyS")
	if !ok {
		return 0, fmt.Errorf("console %q is not a serial port (ttyS0..ttyS3): SYSLINUX needs one", dev)
	}
	p, err := strconv.Atoi(n)
	if err != nil || p < 0 || p > 3 {
		return 0, fmt.Errorf("console %q: SYSLINUX drives ttyS0..ttyS3", dev)
	}
	return p, nil
}

// cfLayout is where the partitions of a CF image go.
type cfLayout struct {
	size              int64
	bootOff, bootSize int64
	dataOff, dataSize int64
	dataFAT           int // 16 or 32
}

func planCFLayout(pl *plan.Plan, opts ImageOptions) (cfLayout, error) {
	sizeMiB := opts.SizeMiB
	if sizeMiB == 0 {
		sizeMiB = pl.Image.SizeMB
	}
	bootMiB := pl.Image.BootMB
	if bootMiB == 0 {
		bootMiB = 64
	}
	cardMB := opts.CardMB
	if cardMB == 0 {
		cardMB = pl.Storage.CardMB
	}
	l := cfLayout{size: int64(sizeMiB) * MiB, bootOff: bootStart, bootSize: int64(bootMiB) * MiB}
	if bootMiB < 16 || bootMiB > 1024 {
		return l, fmt.Errorf("boot partition of %d MiB: FAT16 here needs 16 to 1024 MiB", bootMiB)
	}
	l.dataOff = l.bootOff + l.bootSize
	l.dataSize = l.size - l.dataOff
	if l.dataSize < 8*MiB {
		return l, &SizeError{Msg: fmt.Sprintf("image size %d MiB leaves %d MiB for the data partition after the %d MiB boot partition; need at least 8 MiB",
			sizeMiB, max(l.dataSize, 0)/MiB, bootMiB)}
	}
	if cardMB > 0 && l.size > int64(cardMB)*1000*1000 {
		return l, &SizeError{Msg: fmt.Sprintf("image of %d MiB (%d bytes) is larger than the %s's %d MB card (%d bytes)",
			sizeMiB, l.size, pl.Board, cardMB, int64(cardMB)*1000*1000), TooLarge: true}
	}
	if l.size/512 > 0xffffffff {
		return l, fmt.Errorf("image of %d MiB is past what an MBR addresses", sizeMiB)
	}
	l.dataFAT = 16
	if l.dataSize >= fat32FromMiB*MiB {
		l.dataFAT = 32
	}
	return l, nil
}

// fitsFAT16 estimates whether files fit a FAT16 partition of size bytes,
// conservatively: 8 KiB cluster rounding, both FATs, the root directory
// and the SYSLINUX reserve.
func fitsFAT16(size int64, files []int64) (need, have int64) {
	const cluster = 8192
	have = size - 2*(size/2048*2) - 32*1024 - syslinuxReserve
	for _, f := range files {
		need += (f + cluster - 1) / cluster * cluster
	}
	return need, have
}

func buildBIOSCF(ctx context.Context, pl *plan.Plan, in Input, opts ImageOptions, m *Manifest) (*Manifest, error) {
	if err := CheckTools(plan.BootBIOSCF); err != nil {
		return nil, err
	}
	if err := checkKernel(in.Kernel, KernelBzImage); err != nil {
		return nil, err
	}
	l, err := planCFLayout(pl, opts)
	if err != nil {
		return nil, err
	}
	cfg, err := SyslinuxConfig(pl)
	if err != nil {
		return nil, err
	}
	ksize, isize, err := sizes(in.Kernel, in.Initramfs)
	if err != nil {
		return nil, err
	}
	if b := pl.Image.InitramfsBudgetKB; b > 0 && isize > int64(b)*1024 {
		return nil, fmt.Errorf("initramfs %s is %d KiB, over the %s's budget of %d KiB", in.Initramfs, (isize+1023)/1024, pl.Board, b)
	}
	kslot, islot := slots.SlotSizes(ksize, isize)
	if need, have := fitsFAT16(l.bootSize, []int64{kslot, islot, kslot, islot, slots.CfgSize, 64 * 1024}); need > have {
		return nil, fmt.Errorf("two system slots of %d MiB (kernel %d KiB, initramfs %d KiB, with room to grow) need about %d KiB; the %d MiB boot partition (boot_mb) holds about %d KiB",
			(kslot+islot)/MiB, ksize/1024, isize/1024, need/1024, l.bootSize/MiB, have/1024)
	}

	run := runner{ctx: ctx, sde: opts.SourceDateEpoch}
	m.Cmdline = Cmdline(pl)
	m.HostTools = map[string]string{}
	for _, t := range []hostTool{toolMkfsFat, toolMcopy, toolSyslinux} {
		m.HostTools[t.Name] = t.version(ctx)
	}
	m.Layout = []Region{
		{Name: "mbr", Offset: 0, Size: 512},
		{Name: "boot", Offset: l.bootOff, Size: l.bootSize, FS: "FAT16", Label: plan.BootLabel},
		{Name: "data", Offset: l.dataOff, Size: l.dataSize, FS: fmt.Sprintf("FAT%d", l.dataFAT), Label: pl.Image.DataLabel},
	}
	m.Notes = append(m.Notes, "dd or `ocfw flash` the image to the card; the data partition keeps the last reports in /ocfw/report-NN.json, written in place",
		"the boot partition holds two system slots (/a, /b) of fixed size; `ocfw upgrade` writes the inactive one in place")

	work, err := os.MkdirTemp(filepath.Dir(opts.Output), ".ocfw-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	stamp := time.Unix(opts.SourceDateEpoch, 0)
	stage := func(name string, src string, data []byte, size int64) (string, error) {
		p := filepath.Join(work, name)
		var err error
		if src != "" {
			err = copyFile(src, p)
		} else {
			err = os.WriteFile(p, data, 0o644)
		}
		if err == nil && size > 0 {
			err = os.Truncate(p, size) // zeros after the system: the slot's room to grow
		}
		if err == nil {
			err = os.Chtimes(p, stamp, stamp)
		}
		return p, err
	}
	ksum, _, err := fileSHA256(in.Kernel)
	if err != nil {
		return nil, err
	}
	isum, _, err := fileSHA256(in.Initramfs)
	if err != nil {
		return nil, err
	}
	m.System = &System{
		Revision:   slots.Revision(ksum, isum),
		Kernel:     File{Name: "vmlinuz", Size: ksize, SHA256: ksum},
		Initrd:     File{Name: "initrd", Size: isize, SHA256: isum},
		KernelSlot: kslot, InitrdSlot: islot,
	}
	kpath, err := stage("vmlinuz", in.Kernel, nil, kslot)
	if err != nil {
		return nil, err
	}
	ipath, err := stage("initrd", in.Initramfs, nil, islot)
	if err != nil {
		return nil, err
	}
	cpath, err := stage("syslinux.cfg", "", []byte(cfg), 0)
	if err != nil {
		return nil, err
	}
	// Both slots get the system: either boots, and an upgrade overwrites
	// the one not running.
	var copies [][2]string
	for _, slot := range slots.Slots {
		copies = append(copies, [2]string{slots.Kernel(slot), kpath}, [2]string{slots.Initrd(slot), ipath})
	}
	copies = append(copies, [2]string{BootSyslinux, cpath})
	for _, f := range copies {
		sum, n, err := fileSHA256(f[1])
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, File{Name: f[0], Size: n, SHA256: sum})
	}
	inner, err := m.JSON()
	if err != nil {
		return nil, err
	}
	mpath, err := stage("manifest.json", "", inner, 0)
	if err != nil {
		return nil, err
	}

	var out atomicfile.Set
	defer out.Cleanup()
	img, err := out.Create(opts.Output)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	if err := img.Truncate(l.size); err != nil {
		return nil, err
	}
	if err := img.Sync(); err != nil {
		return nil, err
	}
	name := img.Name()
	seed := volumeSeed(m)
	opts.logf("formatting the boot (FAT16) and data (FAT%d) partitions", l.dataFAT)
	if err := mkfs(run, name, l.bootOff, l.bootSize, 16, plan.BootLabel, seed^0x0b007); err != nil {
		return nil, err
	}
	if err := mkfs(run, name, l.dataOff, l.dataSize, l.dataFAT, pl.Image.DataLabel, seed^0xda7a); err != nil {
		return nil, err
	}
	boot := fmt.Sprintf("%s@@%d", name, l.bootOff)
	data := fmt.Sprintf("%s@@%d", name, l.dataOff)
	dirs := []string{"-i", boot, "::/boot", "::" + syslinuxDir, "::/ocfw"}
	for _, slot := range slots.Slots {
		dirs = append(dirs, "::/"+slot)
	}
	if err := run.run(toolMmd, dirs...); err != nil {
		return nil, err
	}
	if err := run.run(toolMmd, "-i", data, "::"+DataReportDir); err != nil {
		return nil, err
	}
	if m.Store, err = preallocate(run, img, l.dataOff, l.dataSize, work, stamp); err != nil {
		return nil, err
	}
	copies = append(copies, [2]string{BootManifest, mpath})
	for _, f := range copies {
		if err := run.run(toolMcopy, "-m", "-o", "-i", boot, f[1], "::"+f[0]); err != nil {
			return nil, fmt.Errorf("copying %s to the boot partition: %w", f[0], err)
		}
	}
	opts.logf("installing SYSLINUX")
	if err := run.run(toolSyslinux, "--install", "--offset", strconv.FormatInt(l.bootOff, 10), "--directory", syslinuxDir, name); err != nil {
		return nil, err
	}
	if err := checkSlots(img, l); err != nil {
		return nil, err
	}
	if err := writeMBR(img, l); err != nil {
		return nil, err
	}
	if err := patchBPB(img, l.bootOff); err != nil {
		return nil, err
	}
	if err := patchBPB(img, l.dataOff); err != nil {
		return nil, err
	}
	if err := img.Sync(); err != nil {
		return nil, err
	}
	ranges, err := cfUsedRanges(img, l)
	if err != nil {
		return nil, fmt.Errorf("reading back the image just built: %w", err)
	}
	return finish(img, l.size, ranges, m, &out, opts)
}

// finish hashes the image, records the block map, writes the manifest and
// sha256sums beside the image and renames everything into place.
func finish(img *os.File, size int64, ranges [][2]int64, m *Manifest, out *atomicfile.Set, opts ImageOptions) (*Manifest, error) {
	bm, err := makeBlockMap(img, size, blockSize, ranges)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(img, 0, size)); err != nil {
		return nil, err
	}
	if err := img.Close(); err != nil {
		return nil, err
	}
	m.Image = &File{Name: filepath.Base(opts.Output), Size: size, SHA256: fmt.Sprintf("%x", h.Sum(nil))}
	m.BlockMap = bm
	js, err := m.JSON()
	if err != nil {
		return nil, err
	}
	if err := out.WriteFile(ManifestPath(opts.Output), js); err != nil {
		return nil, err
	}
	sums := []File{*m.Image, {Name: ManifestPath(opts.Output), SHA256: bytesSHA256(js)}}
	sums = append(sums, m.Outputs...)
	if err := out.WriteFile(SumsPath(opts.Output), mergeSums(SumsPath(opts.Output), sums)); err != nil {
		return nil, err
	}
	if err := out.Commit(0o644); err != nil {
		return nil, err
	}
	opts.logf("wrote %s (%d bytes, sha256 %s), %s, %s", opts.Output, size, m.Image.SHA256, ManifestPath(opts.Output), SumsPath(opts.Output))
	return m, nil
}

// mergeSums keeps the lines of an existing sha256sums for other files.
func mergeSums(path string, files []File) []byte {
	ours := map[string]bool{}
	for _, f := range files {
		ours[filepath.Base(f.Name)] = true
	}
	var keep []byte
	if old, err := os.ReadFile(path); err == nil {
		for _, line := range strings.SplitAfter(string(old), "\n") {
			_, name, ok := strings.Cut(strings.TrimSpace(line), "  ")
			if ok && !ours[name] {
				keep = append(keep, line...)
			}
		}
	}
	return append(keep, sha256sums(files)...)
}

// volumeSeed derives the FAT volume ids and nothing else from the inputs,
// so two builds of the same inputs get the same ids.
func volumeSeed(m *Manifest) uint32 {
	h := sha256.New()
	fmt.Fprintf(h, "%s %d\n", m.Board, m.SourceDateEpoch)
	for _, k := range sortedKeys(m.Inputs) {
		fmt.Fprintf(h, "%s %s\n", k, m.Inputs[k])
	}
	return binary.BigEndian.Uint32(h.Sum(nil))
}

func mkfs(run runner, img string, off, size int64, fatBits int, label string, volid uint32) error {
	// --invariant before -i: mkfs.fat applies options in order, and
	// --invariant sets its own volume id.
	args := []string{"--invariant", "-F", strconv.Itoa(fatBits), "-n", label, "-i", fmt.Sprintf("%08x", volid),
		"-S", "512", "-h", strconv.FormatInt(off/512, 10), "-g", fmt.Sprintf("%d/%d", mbr.Heads, mbr.SectorsPerTrack),
		"--offset", strconv.FormatInt(off/512, 10), img, strconv.FormatInt(size/1024, 10)}
	if err := run.run(toolMkfsFat, args...); err != nil {
		return fmt.Errorf("making the %s file system: %w", label, err)
	}
	return nil
}

// writeMBR writes SYSLINUX's MBR boot code, a disk signature derived from
// the partitions' contents, and the partition table.
func writeMBR(img *os.File, l cfLayout) error {
	p, err := fileMBRBin.path()
	if err != nil {
		return err
	}
	code, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if len(code) > mbr.BootCodeSize {
		return fmt.Errorf("%s is %d bytes, more than the MBR's %d bytes of boot code", p, len(code), mbr.BootCodeSize)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(img, l.bootOff, l.size-l.bootOff)); err != nil {
		return err
	}
	sig := binary.LittleEndian.Uint32(h.Sum(nil))
	if sig == 0 {
		sig = 1 // 0 reads as "no signature" to some tools
	}
	rec := mbr.MBR{Signature: sig}
	copy(rec.BootCode[:], code)
	rec.Partitions[0] = mbr.Partition{Bootable: true, Type: fatType(16, l.bootSize), Start: uint32(l.bootOff / 512), Sectors: uint32(l.bootSize / 512)}
	rec.Partitions[1] = mbr.Partition{Type: fatType(l.dataFAT, l.dataSize), Start: uint32(l.dataOff / 512), Sectors: uint32(l.dataSize / 512)}
	_, err = img.WriteAt(rec.Bytes(), 0)
	return err
}

func fatType(bits int, size int64) byte {
	switch {
	case bits == 32:
		return mbr.TypeFAT32L
	case size/512 < 65536:
		return mbr.TypeFAT16s
	}
	return mbr.TypeFAT16
}

// patchBPB makes sure the boot sector's hidden sectors equal the
// partition start and the geometry is 255/63, as real BIOSes and SYSLINUX
// expect, whatever the formatter wrote. It rewrites the FAT32 backup boot
// sector too.
func patchBPB(img *os.File, off int64) error {
	bs := make([]byte, 512)
	if _, err := img.ReadAt(bs, off); err != nil {
		return err
	}
	want := make([]byte, 512)
	copy(want, bs)
	binary.LittleEndian.PutUint16(want[24:], mbr.SectorsPerTrack)
	binary.LittleEndian.PutUint16(want[26:], mbr.Heads)
	binary.LittleEndian.PutUint32(want[28:], uint32(off/512))
	if string(want) == string(bs) {
		return nil
	}
	if _, err := img.WriteAt(want, off); err != nil {
		return err
	}
	if binary.LittleEndian.Uint16(bs[22:]) == 0 { // FAT32: backup boot sector
		if b := int64(binary.LittleEndian.Uint16(bs[50:])); b > 0 && b < 32 {
			_, err := img.WriteAt(want, off+b*512)
			return err
		}
	}
	return nil
}

// cfUsedRanges is the block map's input: the MBR and the gap before the
// first partition, and per partition its metadata and used clusters.
func cfUsedRanges(img io.ReaderAt, l cfLayout) ([][2]int64, error) {
	rs := [][2]int64{{0, l.bootOff}}
	for _, p := range [][2]int64{{l.bootOff, l.bootSize}, {l.dataOff, l.dataSize}} {
		fs, err := fat.Open(img, p[0], p[1])
		if err != nil {
			return nil, err
		}
		rs = append(rs, fsRanges(fs, p[0])...)
	}
	return rs, nil
}

func fsRanges(fs *fat.FS, off int64) [][2]int64 {
	rs := [][2]int64{{off, off + fs.MetadataBytes()}}
	for _, r := range fs.UsedClusters() {
		rs = append(rs, [2]int64{off + r[0], off + r[1]})
	}
	return rs
}

func sizes(paths ...string) (int64, int64, error) {
	var s [2]int64
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return 0, 0, err
		}
		if !fi.Mode().IsRegular() {
			return 0, 0, fmt.Errorf("%s is not a regular file", p)
		}
		s[i] = fi.Size()
	}
	return s[0], s[1], nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkSlots makes sure every file an upgrade writes in place is one
// contiguous extent of the boot partition, as the board will require.
func checkSlots(img io.ReaderAt, l cfLayout) error {
	fsys, err := fat.Open(img, l.bootOff, l.bootSize)
	if err != nil {
		return err
	}
	paths := []string{slots.SyslinuxCfg, slots.LDLinux}
	for _, s := range slots.Slots {
		paths = append(paths, slots.Kernel(s), slots.Initrd(s))
	}
	for _, p := range paths {
		if _, err := fsys.Extent(p); err != nil {
			return fmt.Errorf("the boot partition's %s is not one contiguous extent (an upgrade writes it in place): %w", p, err)
		}
	}
	return nil
}

func openFAT(r io.ReaderAt, off, size int64) (*fat.FS, error) { return fat.Open(r, off, size) }
