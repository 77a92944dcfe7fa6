// Package atomicfile writes files so that a reader, a crash or a power cut
// sees either the old file or the whole new one, never a part: each file
// is written under a temporary name in its own directory, synced, renamed
// over the target, and the directory synced so the rename itself is on
// disk. A Set commits several files together (an image and its manifest),
// and a failed or interrupted write leaves none of its temporary files.
//
// It is the project's one helper for this, on the host and on the board.
// github.com/google/renameio does the single-file case, but it leaves the
// directory unsynced and has no multi-file commit, which the build's
// outputs need.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically with permissions perm.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	var s Set
	defer s.Cleanup()
	if err := s.WriteFile(path, data); err != nil {
		return err
	}
	return s.Commit(perm)
}

// Set is files written under temporary names and renamed into place
// together by Commit, in the order they were created. The zero value is
// ready to use. Always call Cleanup (deferred): after a Commit it does
// nothing.
type Set struct {
	files []*os.File
	final []string
}

// TempPattern is the name pattern of temporary files next to target:
// hidden, and saying what they will become.
func TempPattern(target string) string { return "." + filepath.Base(target) + ".tmp-*" }

// Create opens a new temporary file that Commit renames to final. The
// caller writes it and may close it; Commit syncs and closes it.
func (s *Set) Create(final string) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Dir(final), TempPattern(final))
	if err != nil {
		return nil, err
	}
	s.files = append(s.files, f)
	s.final = append(s.final, final)
	return f, nil
}

// WriteFile adds a file with the given contents.
func (s *Set) WriteFile(final string, data []byte) error {
	f, err := s.Create(final)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return err
}

// Commit syncs every file, sets its permissions, renames each into place
// in creation order, and syncs the directories. A reader that finds the
// last file renamed finds all the earlier ones.
func (s *Set) Commit(perm fs.FileMode) error {
	for _, f := range s.files {
		// A file the caller closed cannot be synced through f: reopen.
		if err := syncFile(f); err != nil {
			return err
		}
		if err := os.Chmod(f.Name(), perm); err != nil {
			return err
		}
	}
	dirs := map[string]bool{}
	for i, f := range s.files {
		if err := os.Rename(f.Name(), s.final[i]); err != nil {
			return err
		}
		s.files[i] = nil
		dirs[filepath.Dir(s.final[i])] = true
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	s.files, s.final = nil, nil
	return nil
}

// Cleanup closes and removes the temporary files not yet committed.
func (s *Set) Cleanup() {
	for _, f := range s.files {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
	s.files, s.final = nil, nil
}

func syncFile(f *os.File) error {
	err := f.Sync()
	if errors.Is(err, os.ErrClosed) {
		g, oerr := os.OpenFile(f.Name(), os.O_RDWR, 0)
		if oerr != nil {
			return oerr
		}
		err = g.Sync()
		if cerr := g.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// Some file systems (and FAT on old kernels) refuse fsync on a
	// directory; the rename is then as durable as they make it.
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) && !isEINVAL(err) {
		return err
	}
	return nil
}
