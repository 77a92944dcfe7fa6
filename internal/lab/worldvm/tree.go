package worldvm

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/debian"
)

// TreeSpec says which Debian packages make a tree of programs for the
// world (a peer such as strongSwan or Libreswan) and how to check it.
type TreeSpec struct {
	// Name is the tree's folder in the cache and its messages' prefix.
	Name string
	// Packages are the i386 packages, dependencies included.
	Packages []string
	// Keep, if set, says which paths of the packages to unpack.
	Keep func(name string) bool
	// LibraryPath is the tree's library directories (colon-separated).
	LibraryPath string
	// Required are guest paths the tree must hold.
	Required []string
}

// Tree is an unpacked tree.
type Tree struct {
	Dir  string   // the tree, for Config.Trees
	Debs []string // the packages' file names (name_version_arch.deb)
}

// FetchTree returns the tree of spec's packages for i386 under cacheDir
// ("" means the default ocfw cache), downloading the packages with
// apt-get the first time and unpacking them the first time this set of
// files is seen: later runs need no network and no unpacking. logf, if
// not nil, hears what is downloaded.
func FetchTree(ctx context.Context, cacheDir string, spec TreeSpec, logf func(format string, args ...any)) (*Tree, error) {
	if cacheDir == "" {
		var err error
		if cacheDir, err = debian.DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	f := &debian.Fetcher{CacheDir: cacheDir, Log: logf}
	debs, err := f.FetchPackages(ctx, "i386", spec.Packages)
	if err != nil {
		return nil, fmt.Errorf("%s: fetching the i386 packages: %w", spec.Name, err)
	}
	r := &Tree{}
	h := sha256.New()
	for _, d := range debs {
		r.Debs = append(r.Debs, filepath.Base(d))
		fmt.Fprintln(h, filepath.Base(d))
	}
	// One tree per set of package files: a refresh that brings new
	// versions unpacks a new tree.
	base := filepath.Join(cacheDir, spec.Name, "i386")
	r.Dir = filepath.Join(base, "root-"+hex.EncodeToString(h.Sum(nil))[:16])
	complete := func(dir string) bool {
		for _, p := range spec.Required {
			if _, err := os.Lstat(filepath.Join(dir, strings.TrimPrefix(p, "/"))); err != nil {
				return false
			}
		}
		return true
	}
	err = placeTree(r.Dir, complete, func(tmp string) error {
		for _, d := range debs {
			if _, err := debian.Extract(d, tmp, spec.Keep); err != nil {
				return fmt.Errorf("%s: unpacking: %w", spec.Name, err)
			}
		}
		return CheckTree(tmp, spec)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// placeTree makes the directory dir once, among any number of
// processes doing the same at the same time (go test runs the packages
// that use the tree side by side, and on a fresh machine all of them
// find the cache empty): fill writes the tree into a temporary
// directory beside dir, which is renamed to dir whole, so a dir that
// exists is complete. A lock file beside dir (dir.lock, flock) lets one
// process unpack while the others wait and then find the tree; the
// rename's "already there" is success too, for whatever the lock
// cannot see (a cache on a file system without flock).
func placeTree(dir string, complete func(dir string) bool, fill func(tmp string) error) error {
	if complete(dir) {
		return nil
	}
	base := filepath.Dir(dir)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if complete(dir) {
		return nil // another process unpacked it while we waited
	}
	tmp, err := os.MkdirTemp(base, ".unpack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if complete(dir) {
			return nil
		}
		return fmt.Errorf("worldvm: placing the unpacked tree: %w", err)
	}
	return nil
}

// lockFile takes an exclusive flock on name, waiting for other
// processes, and returns how to release it. The file stays for the
// next run.
func lockFile(name string) (func(), error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("worldvm: locking %s: %w", name, err)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// CheckTree checks that every shared library the tree's programs and
// libraries need is in the tree (in a library directory of
// spec.LibraryPath or their RUNPATH), and that spec.Required are there:
// a package missing from spec.Packages shows here, on the host, by
// name, rather than as a program that does not start in the guest.
func CheckTree(root string, spec TreeSpec) error {
	have := map[string]bool{}
	type need struct{ file, lib string }
	var needs []need
	var runpaths = map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = "/" + filepath.ToSlash(rel)
		have[rel] = true
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := elf.Open(p)
		if err != nil {
			return nil // not an ELF file
		}
		defer f.Close()
		libs, _ := f.ImportedLibraries()
		rp, _ := f.DynString(elf.DT_RUNPATH)
		rp2, _ := f.DynString(elf.DT_RPATH)
		for _, s := range append(rp, rp2...) {
			runpaths[rel] = append(runpaths[rel], strings.Split(s, ":")...)
		}
		for _, l := range libs {
			needs = append(needs, need{rel, l})
		}
		return nil
	})
	if err != nil {
		return err
	}
	var missing []string
	for _, n := range needs {
		dirs := append(strings.Split(spec.LibraryPath, ":"), runpaths[n.file]...)
		found := false
		for _, d := range dirs {
			if have[path.Join(d, n.lib)] {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%s needs %s", n.file, n.lib))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%s: the tree %s lacks libraries (add their packages to Packages): %s", spec.Name, root, strings.Join(missing, "; "))
	}
	for _, p := range spec.Required {
		if !have[p] {
			return fmt.Errorf("%s: the tree %s has no %s: is Packages complete?", spec.Name, root, p)
		}
	}
	return nil
}
