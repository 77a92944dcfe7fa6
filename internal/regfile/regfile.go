// Package regfile reads the small files a user names (profiles,
// manifests, policies) without hanging or filling memory when the name
// is the wrong kind of thing: a FIFO is opened without blocking and
// refused, a device such as /dev/zero is refused before it is read, and
// a regular file is read only up to a limit.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

var (
	// ErrNotRegular marks a name that is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge marks a file over the reader's limit.
	ErrTooLarge = errors.New("file too large")
)

// Error is a refused file. Msg says why without the path, so that
// callers that print FILE: first can use it as it is.
type Error struct {
	Path string
	Msg  string
	Err  error // ErrNotRegular or ErrTooLarge
}

func (e *Error) Error() string { return e.Path + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Open opens name for reading if it is a regular file (symbolic links
// followed). A FIFO is opened without blocking, so naming one returns an
// error at once rather than waiting for a writer.
func Open(name string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if err := CheckRegular(name, fi.Mode()); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// CheckRegular returns an *Error unless mode is a regular file's.
func CheckRegular(name string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	return &Error{Path: name, Msg: "not a regular file but " + Kind(mode), Err: ErrNotRegular}
}

// Kind names a file mode's type for messages: "a directory", "a named
// pipe (FIFO)", ...
func Kind(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "a regular file"
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a file"
}

// ReadFile reads the regular file name, refusing one over max bytes
// without reading more than max+1 of it.
func ReadFile(name string, max int64) ([]byte, error) {
	f, fi, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, tooLarge(name, fi.Size(), max)
	}
	return ReadAll(name, f, max)
}

// ReadAll reads r, which name describes in errors, up to max bytes.
func ReadAll(name string, r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, tooLarge(name, -1, max)
	}
	return data, nil
}

func tooLarge(name string, size, max int64) error {
	what := "more than " + Size(max)
	if size >= 0 {
		what = Size(size)
		if size >= 1<<10 {
			what += fmt.Sprintf(" (%d bytes)", size)
		}
		what += ", over the limit of " + Size(max)
	} else {
		what += ", the limit"
	}
	return &Error{Path: name, Msg: "the file is " + what, Err: ErrTooLarge}
}

// Size renders a byte count as people read it: 256 KiB, 4 MiB, 1.5 GiB.
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return trim(float64(n)/(1<<30)) + " GiB"
	case n >= 1<<20:
		return trim(float64(n)/(1<<20)) + " MiB"
	case n >= 1<<10:
		return trim(float64(n)/(1<<10)) + " KiB"
	}
	return fmt.Sprintf("%d bytes", n)
}

func trim(f float64) string {
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.1f", f)
}
