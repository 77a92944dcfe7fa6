package firmware

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/plan"
)

// StandInFiles are the files beside a stand-in image (plan.BootQEMUARM)
// that QEMU boots: the kernel, its device tree and the initramfs.
type StandInFiles struct {
	Kernel, DTB, Initramfs string
}

// StandInSidecars names the files beside the stand-in image image.
func StandInSidecars(image string) StandInFiles {
	base := strings.TrimSuffix(image, filepath.Ext(image))
	return StandInFiles{Kernel: base + ".zImage", DTB: base + ".dtb", Initramfs: base + ".initrd"}
}

// standInDataSize is the SD card image's size: the size asked, default 32 MiB,
// at least 16 MiB, and a power of 2 (QEMU takes SD card images in no
// other size).
func standInDataSize(opts ImageOptions) (int64, error) {
	sizeMiB := opts.SizeMiB
	if sizeMiB == 0 {
		sizeMiB = 32
	}
	if sizeMiB < 16 || sizeMiB&(sizeMiB-1) != 0 {
		return 0, &SizeError{Msg: fmt.Sprintf("SD card image of %d MiB for the QEMU stand-in: want a power of 2 of at least 16 MiB", sizeMiB),
			Sizes: "16, 32, 64...", Why: "QEMU takes SD card images in no other size"}
	}
	return int64(sizeMiB) * MiB, nil
}

// buildQEMUARM writes a stand-in image: an SD card image holding only the
// data partition (the stand-in machine's disk for reports), and beside it
// the kernel, device tree and initramfs QEMU is given on its command
// line. The manifest's notes say what the stand-in does not prove.
func buildQEMUARM(ctx context.Context, pl *plan.Plan, in Input, opts ImageOptions, m *Manifest) (*Manifest, error) {
	if pl.StandIn == nil {
		return nil, fmt.Errorf("board %s: a %s image needs the plan's stand-in machine (a plan for the stand-in)", pl.Board, plan.BootQEMUARM)
	}
	if in.DTB == "" {
		return nil, fmt.Errorf("firmware: the stand-in %s needs its device tree %s from the kernel package", pl.StandIn.Machine, pl.StandIn.DTB)
	}
	if err := checkKernel(in.Kernel, KernelZImageLE); err != nil {
		return nil, err
	}
	size, err := standInDataSize(opts)
	if err != nil {
		return nil, err
	}
	sum, _, err := fileSHA256(in.DTB)
	if err != nil {
		return nil, fmt.Errorf("firmware: device tree: %w", err)
	}
	m.Inputs["dtb"] = sum
	m.Cmdline = pl.StandIn.Cmdline
	run := runner{ctx: ctx, sde: opts.SourceDateEpoch}
	m.HostTools = map[string]string{toolMkfsFat.Name: toolMkfsFat.version(ctx), toolMcopy.Name: toolMcopy.version(ctx)}
	dataFAT := 16
	if size-bootStart >= fat32FromMiB*MiB {
		dataFAT = 32
	}
	label := pl.DataPartitionLabel()
	m.Layout = []Region{{Name: "mbr", Size: 512}, {Name: "data", Offset: bootStart, Size: size - bootStart, FS: fmt.Sprintf("FAT%d", dataFAT), Label: label}}
	side := StandInSidecars(opts.Output)
	m.Notes = append(m.Notes, fmt.Sprintf("QEMU stand-in for %s, not an image for the board: %s; the SD card image holds only the data partition, QEMU boots %s, %s and %s (ocfw run)",
		pl.Board, pl.StandIn.Name, filepath.Base(side.Kernel), filepath.Base(side.DTB), filepath.Base(side.Initramfs)))
	for _, l := range pl.StandIn.Limits {
		m.Notes = append(m.Notes, "stand-in: "+l)
	}

	var out atomicfile.Set
	defer out.Cleanup()
	if err := copySidecars(&out, m, [][2]string{{in.Kernel, side.Kernel}, {in.DTB, side.DTB}, {in.Initramfs, side.Initramfs}}); err != nil {
		return nil, err
	}
	img, err := out.Create(opts.Output)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	ranges, err := writeDataDisk(run, img, size, dataFAT, label, m, opts)
	if err != nil {
		return nil, err
	}
	return finish(img, size, ranges, m, &out, opts)
}
