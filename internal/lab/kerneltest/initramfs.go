package kerneltest

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/u-root/u-root/pkg/cpio"

	"github.com/ocfw/ocfw/internal/debian"
)

// Initramfs describes the guest's root file system.
type Initramfs struct {
	Init    string           // host path of the program to run as /init
	Kernel  *debian.Kernel   // where the modules come from
	Modules []*debian.Module // modules to load, in load order (from Closure)
	// ModuleFiles are host paths of more modules, loaded after Modules
	// in order, from /kerneltest/extra/.
	ModuleFiles []string
}

// Write writes the initramfs as a newc cpio archive. The same inputs give
// the same bytes: no timestamps, owners or host inode numbers.
func (ir *Initramfs) Write(w io.Writer) error {
	var recs []cpio.Record
	for _, d := range []string{"dev", "proc", "sys", "tmp", "kerneltest"} {
		recs = append(recs, cpio.Directory(d, 0o755))
	}
	// The kernel opens /dev/console for init's stdin/stdout/stderr before
	// init runs: without this node the tests' output is lost.
	recs = append(recs, cpio.CharDev("dev/console", 0o600, 5, 1))
	initRec, err := fileRecord(ir.Init, "init", 0o755)
	if err != nil {
		return err
	}
	recs = append(recs, initRec)

	var list strings.Builder
	if len(ir.Modules) > 0 {
		if ir.Kernel == nil {
			return fmt.Errorf("initramfs: modules without a kernel")
		}
		idx, err := ir.Kernel.Modules()
		if err != nil {
			return err
		}
		modRoot := path.Join("lib/modules", ir.Kernel.Version)
		var dep strings.Builder
		if err := idx.WriteDep(&dep, ir.Modules); err != nil {
			return err
		}
		recs = append(recs, cpio.StaticFile(path.Join(modRoot, "modules.dep"), dep.String(), 0o644))
		for _, m := range ir.Modules {
			rec, err := fileRecord(path.Join(ir.Kernel.ModulesDir, m.Path), path.Join(modRoot, m.Path), 0o644)
			if err != nil {
				return err
			}
			recs = append(recs, rec)
			fmt.Fprintf(&list, "/%s/%s\n", modRoot, m.Path)
		}
	}
	seen := map[string]bool{}
	for _, f := range ir.ModuleFiles {
		name := path.Join("kerneltest/extra", filepath.Base(f))
		if seen[name] {
			return fmt.Errorf("initramfs: two module files named %s", filepath.Base(f))
		}
		seen[name] = true
		rec, err := fileRecord(f, name, 0o644)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
		fmt.Fprintf(&list, "/%s\n", name)
	}
	recs = append(recs, cpio.StaticFile(strings.TrimPrefix(modulesList, "/"), list.String(), 0o644))

	cw := cpio.Newc.Writer(w)
	for i := range recs {
		recs[i] = cpio.MakeReproducible(recs[i])
	}
	if err := cpio.WriteRecordsAndDirs(cw, recs); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return cpio.WriteTrailer(cw)
}

func fileRecord(hostPath, name string, perm uint64) (cpio.Record, error) {
	f, err := os.Open(hostPath)
	if err != nil {
		return cpio.Record{}, fmt.Errorf("initramfs: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return cpio.Record{}, err
	}
	// The writer closes the file after copying it.
	return cpio.Record{ReaderAt: f, Info: cpio.Info{
		Name:     name,
		Mode:     cpio.S_IFREG | perm,
		FileSize: uint64(fi.Size()),
	}}, nil
}
