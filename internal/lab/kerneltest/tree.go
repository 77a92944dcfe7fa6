package kerneltest

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/u-root/u-root/pkg/cpio"
)

// harnessPaths are the guest paths the harness owns or mounts over at
// boot: a tree must not put anything there.
var harnessPaths = []string{"dev", "proc", "sys", "tmp", "init", "kerneltest", "lib/modules"}

// WriteTree writes the host directory tree dir (directories, regular
// files with their permission bits, symbolic links) as a newc archive
// to append after one from Initramfs.Write, rooted at the guest's /: a
// root file system unpacked from Debian packages, whose programs then
// run in the guest with their own dynamic loader and libraries. Owners
// and times are dropped (root, epoch), so the same tree gives the same
// bytes. Other file types, and anything under the harness's paths
// (/dev, /proc, /sys, /tmp, /init, /kerneltest, /lib/modules), are an
// error naming the file.
func WriteTree(w io.Writer, dir string) error {
	cw := cpio.Newc.Writer(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name := filepath.ToSlash(rel)
		for _, h := range harnessPaths {
			if name == h || strings.HasPrefix(name, h+"/") {
				return fmt.Errorf("initramfs: tree %s: %s: /%s is the harness's or mounted over at boot", dir, name, h)
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var rec cpio.Record
		switch {
		case fi.IsDir():
			rec = cpio.Directory(name, uint64(fi.Mode().Perm()))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			rec = cpio.Symlink(name, target)
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return fmt.Errorf("initramfs: %w", err)
			}
			defer f.Close()
			rec = cpio.Record{ReaderAt: f, Info: cpio.Info{Name: name,
				Mode: cpio.S_IFREG | uint64(fi.Mode().Perm()), FileSize: uint64(fi.Size())}}
		default:
			return fmt.Errorf("initramfs: tree %s: %s: a %v, want directories, regular files and symbolic links", dir, path.Clean(name), fi.Mode().Type())
		}
		return cw.WriteRecord(cpio.MakeReproducible(rec))
	})
	if err != nil {
		return err
	}
	return cpio.WriteTrailer(cw)
}
