package firmware

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"
)

// dataReadme is put beside the store's files, for whoever puts the card
// in a PC.
const dataReadme = `These files belong to the ocfw firmware. It writes inside them in place,
never changing the file system itself, so that pulling the plug cannot
damage anything. Do not delete, move, defragment or edit them; copying
them off is fine.

report-01.json .. report-11.json   one boot's report each, JSON padded with
                                   spaces (the newest has the highest "boot")
state-a.bin, state-b.bin           which report is which, the boot counter,
                                   the policy (two copies: one is always whole)
log.bin                            a ring of log records

'ocfw inspect IMAGE' or 'ocfw report DIR' lists the reports, newest first.
To start afresh, write the image to the card again ('ocfw flash').
`

// preallocate creates the store's files in the data partition at dataOff
// of the image (mtools, in store.Files' order on a fresh file system, so
// each is contiguous), checks each with the FAT reader, and returns their
// extents relative to the image.
func preallocate(run runner, img *os.File, dataOff, dataSize int64, work string, stamp time.Time) ([]fat.Extent, error) {
	data := fmt.Sprintf("%s@@%d", img.Name(), dataOff)
	for _, f := range store.Files() {
		p := filepath.Join(work, "store-"+f.Name)
		if err := os.WriteFile(p, make([]byte, f.Size), 0o644); err != nil {
			return nil, err
		}
		if err := os.Chtimes(p, stamp, stamp); err != nil {
			return nil, err
		}
		if err := run.run(toolMcopy, "-m", "-o", "-i", data, p, "::"+store.Dir+"/"+f.Name); err != nil {
			return nil, fmt.Errorf("preallocating %s on the data partition: %w", f.Name, err)
		}
	}
	readme := filepath.Join(work, "README.TXT")
	if err := os.WriteFile(readme, []byte(dataReadme), 0o644); err != nil {
		return nil, err
	}
	if err := os.Chtimes(readme, stamp, stamp); err != nil {
		return nil, err
	}
	if err := run.run(toolMcopy, "-m", "-o", "-i", data, readme, "::"+store.Dir+"/README.TXT"); err != nil {
		return nil, err
	}
	return storeExtents(img, dataOff, dataSize)
}

// storeExtents checks the store's files as the board will and returns
// their extents relative to the image.
func storeExtents(img io.ReaderAt, dataOff, dataSize int64) ([]fat.Extent, error) {
	fsys, err := fat.Open(img, dataOff, dataSize)
	if err != nil {
		return nil, err
	}
	var out []fat.Extent
	for _, f := range store.Files() {
		e, err := fsys.Extent(store.Dir + "/" + f.Name)
		if err != nil {
			return nil, fmt.Errorf("the data partition's %s is not one contiguous extent: %w", f.Name, err)
		}
		e.Offset += dataOff
		out = append(out, e)
	}
	return out, nil
}

// DataPartition writes a FAT file system of size bytes, labelled label,
// with the store's files preallocated, as a file of its own (no partition
// table): what the board finds on its data partition after `ocfw flash`.
// Tests use it as a board's data partition; the same inputs give the same
// bytes.
func DataPartition(ctx context.Context, path string, size int64, label string, epoch int64) error {
	if err := CheckTools(plan.BootRedBoot); err != nil {
		return err
	}
	fatBits := 16
	if size >= fat32FromMiB*MiB {
		fatBits = 32
	}
	var out atomicfile.Set
	defer out.Cleanup()
	img, err := out.Create(path)
	if err != nil {
		return err
	}
	defer img.Close()
	if err := img.Truncate(size); err != nil {
		return err
	}
	run := runner{ctx: ctx, sde: epoch}
	if err := mkfs(run, img.Name(), 0, size, fatBits, label, 0x0da7a000|uint32(epoch&0xfff)); err != nil {
		return err
	}
	if err := run.run(toolMmd, "-i", img.Name(), "::"+DataReportDir); err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Dir(path), ".ocfw-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if _, err := preallocate(run, img, 0, size, work, time.Unix(epoch, 0)); err != nil {
		return err
	}
	return out.Commit(0o644)
}
