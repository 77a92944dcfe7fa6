package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrExists says a target is an existing file the caller may not
// replace.
var ErrExists = errors.New("the file exists")

// ErrNotRegular says a target names something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// CheckTarget checks, before anything is made, that path may be written
// as a file, and returns the path to write. What is not a regular file —
// a device, a FIFO, a socket, a directory, also behind a symbolic link —
// is refused: a rename over it would put a file where a device node was
// (/dev/sdc1), and a device is never an output a user means. An existing
// file is refused with ErrExists unless replace. A symbolic link to a
// file gives the file it names, so that the file is replaced and the
// link stays, as a shell's redirection does. what names the target in
// the error (a flag and its value).
func CheckTarget(path, what string, replace bool) (string, error) {
	fi, err := os.Stat(path) // follows links: /dev/stdout, a link to /dev/null
	if errors.Is(err, fs.ErrNotExist) {
		if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%s: a symbolic link to nothing: give a file name", what)
		}
		return path, nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is %s, %w: only files are written here; give a file name", what, kind(fi.Mode()), ErrNotRegular)
	}
	if !replace {
		return "", fmt.Errorf("%s: %w", what, ErrExists)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return real, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}
