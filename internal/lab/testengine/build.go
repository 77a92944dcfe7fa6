package testengine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/kbuild"
)

//go:embed module/Kbuild module/*.c
var source embed.FS

// Source is the module's source: Kbuild and the C file, at the top.
func Source() fs.FS {
	sub, err := fs.Sub(source, "module")
	if err != nil {
		panic(err) // the embedded tree is fixed at compile time
	}
	return sub
}

// Options say what to build the module for.
type Options struct {
	KernelPackage string // Debian kernel package; "" means linux-image-686
	Arch          string // its Debian architecture; "" means i386
	CacheDir      string // "" means debian.DefaultCacheDir
	// Source is the module source (Kbuild and .c files at the top); nil
	// means the embedded one. Tests change it to see a rebuild.
	Source fs.FS
	Log    func(format string, args ...any)
}

// Result is a built module.
type Result struct {
	Path           string // the .ko, in the cache
	KernelRelease  string // e.g. 6.1.0-57-686, as uname -r in the guest
	KernelVersion  string // the kernel package's Debian version, e.g. 6.1.192-3
	Built          bool   // false when it came from the cache
	HeadersFetched bool   // the headers were downloaded and extracted by this call
}

// ErrNoKernel wraps a kernel package missing from the cache: the module
// is built for the kernel the tests boot, so fetch that first.
var ErrNoKernel = kbuild.ErrNoKernel

// ErrNoTools wraps missing build tools (make, the kernel's gcc).
var ErrNoTools = kbuild.ErrNoTools

// Build compiles the test module for the cached kernel package, with that
// kernel's own headers: linux-headers-RELEASE (the flavour's), its
// -common package and linux-kbuild for this host, all at exactly the
// kernel package's version, downloaded with apt-get (package debian) and
// extracted once into the cache. The .ko is cached by kernel version and
// source hash: a second call returns it without building, a changed
// source builds anew. It needs make and the gcc the kernel was built with
// (gcc-12 for Debian bookworm), and an x86 host.
func Build(ctx context.Context, opt Options) (*Result, error) {
	if opt.KernelPackage == "" {
		opt.KernelPackage = "linux-image-686"
	}
	if opt.Arch == "" {
		opt.Arch = "i386"
	}
	if opt.Source == nil {
		opt.Source = Source()
	}
	if opt.CacheDir == "" {
		var err error
		if opt.CacheDir, err = debian.DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	k, err := kbuild.Headers(ctx, kbuild.Options{KernelPackage: opt.KernelPackage, Arch: opt.Arch, CacheDir: opt.CacheDir, Log: opt.Log})
	if err != nil {
		return nil, fmt.Errorf("testengine: %w", err)
	}
	res := &Result{KernelRelease: k.Release, KernelVersion: k.Version, HeadersFetched: k.Fetched}
	root := filepath.Join(opt.CacheDir, "testengine")
	rel, version := k.Release, k.Version

	sum, files, err := hashSource(opt.Source)
	if err != nil {
		return nil, err
	}
	outDir := filepath.Join(root, "module", rel+"_"+version+"_"+sum)
	res.Path = filepath.Join(outDir, Module+".ko")
	if _, err := os.Stat(res.Path); err == nil {
		return res, nil
	}
	if opt.Log != nil {
		opt.Log("building %s.ko for %s", Module, rel)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(outDir, ".build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	for _, f := range files {
		b, err := fs.ReadFile(opt.Source, f)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, "make", "-C", k.Dir, "M="+work, "modules")
	cmd.Env = kbuild.Env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("testengine: make -C %s M=%s modules: %w\n%s", k.Dir, work, err, kbuild.LastLines(out.String(), 30))
	}
	ko := filepath.Join(work, Module+".ko")
	if err := kbuild.CheckModule(ko); err != nil {
		return nil, err
	}
	if err := os.Rename(ko, res.Path); err != nil {
		return nil, err
	}
	res.Built = true
	return res, nil
}

// hashSource hashes the source's files (names and contents), and lists
// them; only plain files at the top count.
func hashSource(src fs.FS) (string, []string, error) {
	es, err := fs.ReadDir(src, ".")
	if err != nil {
		return "", nil, err
	}
	var files []string
	for _, e := range es {
		if e.Type().IsRegular() {
			files = append(files, e.Name())
		}
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		b, err := fs.ReadFile(src, f)
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path.Base(f), len(b))
		h.Write(b)
	}
	if len(files) == 0 {
		return "", nil, errors.New("testengine: the module source has no files")
	}
	return hex.EncodeToString(h.Sum(nil))[:16], files, nil
}
