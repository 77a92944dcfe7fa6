package boardvm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/plan"
)

// StatePath is where ocfw run keeps the board's card between runs of
// image (see Card): what the board writes (its SSH host key, DHCP leases,
// the boot counter, the reports, an upgrade's slot) survives from one run
// to the next, while the image stays as built.
func StatePath(image string) string { return image + ".state" }

// dataRange is the byte range of the image's data partition: the
// partition whose FAT label is the plan's data label.
func dataRange(info *firmware.Info, pl *plan.Plan) (off, size int64, err error) {
	label := pl.DataPartitionLabel()
	for _, p := range info.Partitions {
		if p.FS != nil && strings.EqualFold(strings.TrimSpace(p.FS.Label), label) {
			return p.Offset, p.Size, nil
		}
	}
	return 0, 0, fmt.Errorf("%s: no data partition labelled %s", info.Path, label)
}

// StateMismatchError is a kept state that does not fit the image: its
// data partition's size differs (the image was rebuilt with another
// layout), or it is neither a card of the image's size nor an older
// ocfw's data partition.
type StateMismatchError struct {
	State           string
	Size, Partition int64
	Card            int64 // the image's size, when the state is neither
}

func (e *StateMismatchError) Error() string {
	if e.Card != 0 {
		return fmt.Sprintf("%s is %d bytes: neither a card of the image (%d bytes) nor its data partition (%d bytes, kept by an older ocfw): give --fresh to start over with the image's own (it deletes %s)",
			e.State, e.Size, e.Card, e.Partition, e.State)
	}
	return fmt.Sprintf("%s holds a data partition of %d bytes, but the image's is %d bytes (rebuilt with another size?): give --fresh to start over with the image's own (it deletes %s)",
		e.State, e.Size, e.Partition, e.State)
}

// copyAt copies size bytes of src at srcOff to dst at dstOff, only src's
// data segments (SEEK_DATA/SEEK_HOLE) as copySparse does, so the state of
// a mostly empty data partition stays small. dst's range must read as
// zeros where src has holes: a new file, or one punched (punchRange).
func copyAt(dst *os.File, dstOff int64, src *os.File, srcOff, size int64) error {
	end := srcOff + size
	for off := srcOff; off < end; {
		data, err := src.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) || (err == nil && data >= end) {
			break // nothing but a hole from off to the end
		}
		hole := end
		if err != nil {
			data = off // no SEEK_DATA here: copy the rest as it is
		} else if h, err := src.Seek(data, unix.SEEK_HOLE); err == nil {
			hole = min(h, end)
		}
		if _, err := src.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := dst.Seek(dstOff+data-srcOff, io.SeekStart); err != nil {
			return err
		}
		n, err := io.Copy(dst, io.LimitReader(src, hole-data))
		if err != nil {
			return err
		}
		if n != hole-data {
			return fmt.Errorf("copied %d bytes at offset %d, want %d: %w", n, data, hole-data, io.ErrUnexpectedEOF)
		}
		off = hole
	}
	fi, err := dst.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < dstOff+size {
		return dst.Truncate(dstOff + size)
	}
	return nil
}

// punchRange makes [off, off+size) of f read as zeros: a hole where the
// file system can punch one, else zeros written.
func punchRange(f *os.File, off, size int64) error {
	if unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, size) == nil {
		return nil
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(zeros)))
		if _, err := f.Write(zeros[:n]); err != nil {
			return err
		}
		left -= n
	}
	return nil
}
