package boardvm

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copySparse copies src into dst (both at offset 0) and gives dst src's
// size. Only src's data segments (SEEK_DATA/SEEK_HOLE) are copied, so
// holes stay holes: a 120 MiB image holds about 9 MiB of data. Each
// segment goes through io.Copy between two *os.File, which uses
// copy_file_range (a reflink or an in-kernel copy where the file system
// can). A file system without SEEK_DATA gets a plain whole copy.
func copySparse(dst, src *os.File) error {
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	for off := int64(0); off < size; {
		data, err := src.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // nothing but a hole from off to the end
		}
		hole := size
		if err != nil {
			data = off // no SEEK_DATA here: copy the rest as it is
		} else if h, err := src.Seek(data, unix.SEEK_HOLE); err == nil {
			hole = min(h, size)
		}
		if err := copyRange(dst, src, data, hole); err != nil {
			return err
		}
		off = hole
	}
	return dst.Truncate(size)
}

// copyRange copies [off, end) of src to the same offsets of dst.
func copyRange(dst, src *os.File, off, end int64) error {
	if _, err := src.Seek(off, io.SeekStart); err != nil {
		return err
	}
	if _, err := dst.Seek(off, io.SeekStart); err != nil {
		return err
	}
	n, err := io.Copy(dst, io.LimitReader(src, end-off))
	if err != nil {
		return err
	}
	if n != end-off {
		return fmt.Errorf("copied %d bytes at offset %d, want %d: %w", n, off, end-off, io.ErrUnexpectedEOF)
	}
	return nil
}
