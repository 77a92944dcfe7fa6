package boardvm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/plan"
)

// StatePath is where ocfw run keeps the board's data partition between
// runs of image: what the board writes there (its SSH host key, DHCP
// leases, the boot counter and the reports) survives from one run to the
// next, as on a card, while the image stays as built.
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

// StateMismatchError is a state file that does not fit the image's data
// partition (the image was rebuilt with another layout).
type StateMismatchError struct {
	State           string
	Size, Partition int64
}

func (e *StateMismatchError) Error() string {
	return fmt.Sprintf("%s holds a data partition of %d bytes, but the image's is %d bytes (rebuilt with another size?): give --fresh to start over with the image's own (it deletes %s)",
		e.State, e.Size, e.Partition, e.State)
}

// loadState writes the kept data partition into disk (a copy of the
// image) at off. It reports false, and changes nothing, when there is no
// state file yet.
func loadState(disk, state string, off, size int64) (bool, error) {
	src, err := os.Open(state)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("%s: not a regular file", state)
	}
	if fi.Size() != size {
		return false, &StateMismatchError{State: state, Size: fi.Size(), Partition: size}
	}
	dst, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	if err := punchRange(dst, off, size); err != nil {
		dst.Close()
		return false, fmt.Errorf("restoring %s into the copy booted: %w", state, err)
	}
	if err := copyAt(dst, off, src, 0, size); err != nil {
		dst.Close()
		return false, fmt.Errorf("restoring %s into the copy booted: %w", state, err)
	}
	return true, dst.Close()
}

// saveState writes disk's data partition to state, replacing it whole
// (a temporary file renamed over it): an interrupted save leaves the
// previous state.
func saveState(disk, state string, off, size int64) (err error) {
	src, err := os.Open(disk)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(state), "."+filepath.Base(state)+"-*")
	if err != nil {
		return fmt.Errorf("keeping the board's state: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = copyAt(tmp, 0, src, off, size); err != nil {
		return fmt.Errorf("keeping the board's state in %s: %w", state, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), state)
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
