package debian

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ocfw/ocfw/internal/atomicfile"
)

// Kernel is a kernel extracted from a linux-image package.
type Kernel struct {
	Version    string // "6.1.0-57-686"
	Vmlinuz    string // path of the kernel image (bzImage on x86, zImage on ARM)
	Config     string // path of the config-VERSION file, "" if the package has none
	ModulesDir string // path of lib/modules/VERSION, with a modules.dep
	// DTBDir is where the package keeps its device trees
	// (usr/lib/linux-image-VERSION, ARM packages such as
	// linux-image-rpi); "" when it has none.
	DTBDir string
}

// DTB returns the path of the package's device tree name, or an error
// saying the package has none of that name.
func (k *Kernel) DTB(name string) (string, error) {
	if k.DTBDir == "" {
		return "", fmt.Errorf("kernel %s: its package has no device trees (usr/lib/linux-image-%s)", k.Version, k.Version)
	}
	p := filepath.Join(k.DTBDir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("kernel %s: no device tree %s in %s", k.Version, name, k.DTBDir)
	}
	return p, nil
}

// Modules loads the kernel's module index.
func (k *Kernel) Modules() (*ModuleIndex, error) { return LoadModuleIndex(k.ModulesDir) }

// isKernelFile selects what ExtractKernel needs; merged-/usr packages keep
// modules under usr/lib/modules, and ARM packages their device trees
// under usr/lib/linux-image-VERSION.
func isKernelFile(name string) bool {
	if isDTBFile(name) {
		return true
	}
	switch {
	case strings.HasPrefix(name, "boot/vmlinuz-"), strings.HasPrefix(name, "boot/vmlinux-"),
		strings.HasPrefix(name, "boot/config-"):
		return true
	case name == "lib" || name == "lib/modules" || name == "usr" || name == "usr/lib" || name == "usr/lib/modules":
		return true
	case strings.HasPrefix(name, "lib/modules/"), strings.HasPrefix(name, "usr/lib/modules/"):
		return true
	}
	return false
}

// isDTBFile selects an ARM kernel package's device trees.
func isDTBFile(name string) bool {
	return name == "usr" || name == "usr/lib" || strings.HasPrefix(name, "usr/lib/linux-image-")
}

// ExtractKernel extracts the kernel image, its config and its modules from a
// Debian linux-image .deb into dir, writes a modules.dep when the package
// has none (Debian's are made by depmod at install time), and describes
// the result.
func ExtractKernel(deb, dir string) (*Kernel, error) {
	names, err := Extract(deb, dir, isKernelFile)
	if err != nil {
		return nil, err
	}
	return kernelFromNames(deb, dir, names)
}

func kernelFromNames(src, dir string, names []string) (*Kernel, error) {
	k := &Kernel{}
	var modDirs []string
	for _, n := range names {
		base := path.Base(n)
		switch {
		case path.Dir(n) == "boot" && (strings.HasPrefix(base, "vmlinuz-") || strings.HasPrefix(base, "vmlinux-")):
			if k.Vmlinuz != "" {
				return nil, fmt.Errorf("%s: more than one kernel image (%s and %s)", src, k.Vmlinuz, n)
			}
			k.Vmlinuz = filepath.Join(dir, n)
			k.Version = base[len("vmlinuz-"):]
		default:
			for _, prefix := range []string{"lib/modules/", "usr/lib/modules/"} {
				if rest, ok := strings.CutPrefix(n, prefix); ok {
					v, _, _ := strings.Cut(rest, "/")
					modDirs = append(modDirs, prefix+v)
				}
			}
		}
	}
	if k.Vmlinuz == "" {
		return nil, fmt.Errorf("%s: no boot/vmlinuz-* in the package: not a kernel image package", src)
	}
	for _, n := range names {
		if n == "boot/config-"+k.Version {
			k.Config = filepath.Join(dir, n)
		}
	}
	for _, d := range modDirs {
		if path.Base(d) == k.Version {
			k.ModulesDir = filepath.Join(dir, d)
		}
	}
	if k.ModulesDir == "" {
		return nil, fmt.Errorf("%s: no lib/modules/%s in the package", src, k.Version)
	}
	if fi, err := os.Stat(filepath.Join(dir, "usr/lib/linux-image-"+k.Version)); err == nil && fi.IsDir() {
		k.DTBDir = filepath.Join(dir, "usr/lib/linux-image-"+k.Version)
	}
	dep := filepath.Join(k.ModulesDir, "modules.dep")
	if _, err := os.Stat(dep); errors.Is(err, os.ErrNotExist) {
		idx, err := LoadModuleIndex(k.ModulesDir)
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(dep, func(f *os.File) error { return idx.WriteDep(f, nil) }); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return k, nil
}

// OpenKernelDir describes a kernel already extracted by ExtractKernel into
// dir (or laid out the same way: boot/vmlinuz-V, lib/modules/V).
func OpenKernelDir(dir string) (*Kernel, error) {
	var names []string
	boot, err := os.ReadDir(filepath.Join(dir, "boot"))
	if err != nil {
		return nil, fmt.Errorf("kernel directory %s: %w", dir, err)
	}
	for _, e := range boot {
		names = append(names, "boot/"+e.Name())
	}
	for _, md := range []string{"lib/modules", "usr/lib/modules"} {
		es, err := os.ReadDir(filepath.Join(dir, md))
		if err != nil {
			continue
		}
		for _, e := range es {
			names = append(names, md+"/"+e.Name())
		}
	}
	return kernelFromNames(dir, dir, names)
}

// writeFileAtomic streams a file into place atomically (package
// atomicfile), so a crash never leaves a half-written file under the real
// name.
func writeFileAtomic(name string, write func(*os.File) error) error {
	var set atomicfile.Set
	defer set.Cleanup()
	f, err := set.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		return err
	}
	return set.Commit(0o644)
}

// ExtractKernelCached extracts deb once into cacheDir/kernels/NAME (NAME
// is the .deb's file name without .deb) and reuses that directory later.
// Concurrent callers (parallel test packages) each extract into a
// temporary directory; the first rename wins and the others use it.
func ExtractKernelCached(deb, cacheDir string) (*Kernel, error) {
	if cacheDir == "" {
		var err error
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	base := filepath.Join(cacheDir, "kernels")
	dir := filepath.Join(base, strings.TrimSuffix(filepath.Base(deb), ".deb"))
	if k, err := OpenKernelDir(dir); err == nil {
		return addDTBs(k, deb, base, dir)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(base, ".extract-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := ExtractKernel(deb, tmp); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, dtbStamp), nil, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Someone else finished first, or a broken leftover is in the way.
		if k, err2 := OpenKernelDir(dir); err2 == nil {
			return k, nil
		}
		return nil, fmt.Errorf("caching extracted kernel in %s: %w", dir, err)
	}
	return OpenKernelDir(dir)
}

// dtbStamp marks a cached kernel directory whose package was looked
// through for device trees: directories extracted before ExtractKernel
// kept them have none, and get them once.
const dtbStamp = ".dtbs-extracted"

// addDTBs adds the package's device trees to a kernel directory cached
// before ExtractKernel kept them, once (into a temporary directory, then
// renamed into place, so concurrent callers never see half of them).
func addDTBs(k *Kernel, deb, base, dir string) (*Kernel, error) {
	stamp := filepath.Join(dir, dtbStamp)
	if _, err := os.Stat(stamp); k.DTBDir != "" || err == nil {
		return k, nil
	}
	tmp, err := os.MkdirTemp(base, ".dtbs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := Extract(deb, tmp, isDTBFile); err != nil {
		return nil, err
	}
	rel := "usr/lib/linux-image-" + k.Version
	if _, err := os.Stat(filepath.Join(tmp, rel)); err == nil {
		if err := os.MkdirAll(filepath.Join(dir, "usr/lib"), 0o755); err != nil {
			return nil, err
		}
		// Someone else may have renamed theirs first: theirs is as good.
		if err := os.Rename(filepath.Join(tmp, rel), filepath.Join(dir, rel)); err != nil && !os.IsExist(err) {
			if _, serr := os.Stat(filepath.Join(dir, rel)); serr != nil {
				return nil, err
			}
		}
	}
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		return nil, err
	}
	return OpenKernelDir(dir)
}
