package debian

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Extract writes the entries of deb's data archive for which keep returns
// true into dir and returns their cleaned names in archive order. keep gets
// cleaned names ("boot/vmlinuz-6.1.0-57-686"); nil keeps everything.
//
// The package is untrusted input: names that climb out of dir, symlinks
// pointing out of dir and entries reached through a symlink are refused
// with an error; device nodes and FIFOs are skipped; set-id bits dropped.
func Extract(deb, dir string, keep func(name string) bool) ([]string, error) {
	f, err := os.Open(deb)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	x := &extractor{root: dir}
	err = WalkData(f, func(h *tar.Header, r io.Reader) error {
		name, ok := CleanName(h.Name)
		if !ok {
			if h.Typeflag == tar.TypeDir && strings.Trim(h.Name, "/") == "." || h.Name == "/" {
				return nil // the archive's own root entry
			}
			return fmt.Errorf("%s: entry %q leaves the extraction directory", deb, h.Name)
		}
		if keep != nil && !keep(name) {
			return nil
		}
		if err := x.entry(name, h, r); err != nil {
			return fmt.Errorf("%s: %s: %w", deb, name, err)
		}
		return nil
	})
	if err != nil {
		return x.names, err
	}
	return x.names, nil
}

type extractor struct {
	root  string
	names []string
}

func (x *extractor) entry(name string, h *tar.Header, r io.Reader) error {
	if err := x.checkParents(name); err != nil {
		return err
	}
	target := filepath.Join(x.root, filepath.FromSlash(name))
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
	case tar.TypeReg: // archive/tar reports old archives' '\x00' entries as TypeReg too
		if err := x.mkParent(name); err != nil {
			return err
		}
		if err := removeIfNotDir(target); err != nil {
			return err
		}
		perm := os.FileMode(h.Mode) & 0o777
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm|0o200)
		if err != nil {
			return err
		}
		n, err := io.Copy(out, r)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if n != h.Size {
			return fmt.Errorf("%w: short entry (%d of %d bytes)", ErrFormat, n, h.Size)
		}
		if err := os.Chmod(target, perm); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if !symlinkInside(name, h.Linkname) {
			return fmt.Errorf("symlink to %q points outside the extraction directory", h.Linkname)
		}
		if err := x.mkParent(name); err != nil {
			return err
		}
		if err := removeIfNotDir(target); err != nil {
			return err
		}
		if err := os.Symlink(h.Linkname, target); err != nil {
			return err
		}
	case tar.TypeLink:
		src, ok := CleanName(h.Linkname)
		if !ok {
			return fmt.Errorf("hard link to %q points outside the extraction directory", h.Linkname)
		}
		if err := x.checkParents(src); err != nil {
			return err
		}
		srcPath := filepath.Join(x.root, filepath.FromSlash(src))
		if fi, err := os.Lstat(srcPath); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("hard link to %q, which was not extracted as a regular file", h.Linkname)
		}
		if err := x.mkParent(name); err != nil {
			return err
		}
		if err := removeIfNotDir(target); err != nil {
			return err
		}
		if err := os.Link(srcPath, target); err != nil {
			return err
		}
	default:
		return nil // devices, FIFOs: nothing a kernel package needs
	}
	x.names = append(x.names, name)
	return nil
}

// checkParents refuses a name whose existing parent directories include a
// symlink: writing through it could land outside the root.
func (x *extractor) checkParents(name string) error {
	parts := strings.Split(name, "/")
	p := x.root
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("path goes through symlink %s", p)
		}
		if !fi.IsDir() {
			return fmt.Errorf("parent %s is not a directory", p)
		}
	}
	return nil
}

func (x *extractor) mkParent(name string) error {
	return os.MkdirAll(filepath.Join(x.root, filepath.FromSlash(path.Dir(name))), 0o755)
}

func removeIfNotDir(p string) error {
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s exists as a directory", p)
	}
	return os.Remove(p)
}

// symlinkInside reports whether a symlink at name (relative to the root)
// with the given target resolves lexically inside the root.
func symlinkInside(name, target string) bool {
	if target == "" || path.IsAbs(target) {
		return false
	}
	resolved := path.Join(path.Dir(name), target)
	return resolved != ".." && !strings.HasPrefix(resolved, "../")
}
