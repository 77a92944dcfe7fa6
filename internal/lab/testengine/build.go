package testengine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/internal/debian"
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
var ErrNoKernel = errors.New("kernel package not cached")

// ErrNoTools wraps missing build tools (make, the kernel's gcc).
var ErrNoTools = errors.New("build tools missing")

// release splits a Debian kernel release such as 6.1.0-57-686 into its
// ABI (6.1.0-57), series (6.1) and flavour (686).
var release = regexp.MustCompile(`^(([0-9]+\.[0-9]+)\.[0-9]+-[0-9]+)-([a-z0-9-]+)$`)

// hostArch is the Debian architecture of this host: linux-kbuild's
// scripts (fixdep, modpost) run here.
var hostArch = map[string]string{"amd64": "amd64", "386": "i386"}

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
	if opt.Arch != "i386" {
		return nil, fmt.Errorf("testengine: the test module is for x86 (i386) kernels, not %s", opt.Arch)
	}
	host, ok := hostArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("testengine: building the i386 test module needs an x86 host (the host's gcc compiles it), not %s", runtime.GOARCH)
	}
	if _, err := exec.LookPath("make"); err != nil {
		return nil, fmt.Errorf("%w: building the test module needs make (apt-get install make gcc-12)", ErrNoTools)
	}
	deb, err := debian.CachedKernel(opt.KernelPackage, opt.Arch, opt.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v: fetch it first with `ocfw kernel fetch` (the module is built for the kernel the tests boot)", ErrNoKernel, err)
	}
	name, version, _, ok := debian.ParseDebName(deb)
	if !ok {
		return nil, fmt.Errorf("testengine: %s: not a name_version_arch.deb file name", deb)
	}
	rel := strings.TrimPrefix(name, "linux-image-")
	m := release.FindStringSubmatch(rel)
	if m == nil || rel == name {
		return nil, fmt.Errorf("testengine: %s: not a Debian kernel package name like linux-image-6.1.0-57-686", name)
	}
	res := &Result{KernelRelease: rel, KernelVersion: version}
	pkgs := []struct{ name, arch string }{
		{"linux-headers-" + rel, opt.Arch},
		{"linux-headers-" + m[1] + "-common", opt.Arch}, // "all", through the kernel's lists
		{"linux-kbuild-" + m[2], host},
	}

	root := filepath.Join(opt.CacheDir, "testengine")
	headers := filepath.Join(root, "headers", rel+"_"+version)
	if _, err := os.Stat(filepath.Join(headers, doneMarker)); err != nil {
		f := &debian.Fetcher{CacheDir: opt.CacheDir, Log: opt.Log}
		var debs []string
		for _, p := range pkgs {
			d, err := f.FetchExact(ctx, p.name, version, p.arch)
			if err != nil {
				return nil, fmt.Errorf("testengine: headers for kernel %s %s: %w", rel, version, err)
			}
			debs = append(debs, d)
		}
		if err := extractHeaders(debs, headers); err != nil {
			return nil, err
		}
		res.HeadersFetched = true
	}
	kdir := filepath.Join(headers, "usr", "src", "linux-headers-"+rel)
	if err := patchMakefile(kdir, filepath.Join(headers, "usr", "src", "linux-headers-"+m[1]+"-common")); err != nil {
		return nil, err
	}
	cc, err := compiler(kdir)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(cc); err != nil {
		return nil, fmt.Errorf("%w: building the test module needs %s, the compiler Debian built kernel %s with (apt-get install %s)", ErrNoTools, cc, rel, cc)
	}

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
	cmd := exec.CommandContext(ctx, "make", "-C", kdir, "M="+work, "modules")
	// Only the headers' own settings: no ARCH or CROSS_COMPILE from the
	// caller's environment.
	cmd.Env = append(cleanEnv(os.Environ()), "LC_ALL=C")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("testengine: make -C %s M=%s modules: %w\n%s", kdir, work, err, lastLines(out.String(), 30))
	}
	ko := filepath.Join(work, Module+".ko")
	if err := checkModule(ko); err != nil {
		return nil, err
	}
	if err := os.Rename(ko, res.Path); err != nil {
		return nil, err
	}
	res.Built = true
	return res, nil
}

// doneMarker is written into an extracted headers tree last: a tree
// without it is a leftover of an interrupted extraction.
const doneMarker = ".ocfw-extracted"

// extractHeaders extracts the header and kbuild packages' trees into dir,
// through a temporary directory renamed into place.
func extractHeaders(debs []string, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".extract-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Only the trees kbuild uses: the packages' lib/modules/*/build links
	// are absolute and point out of the extraction directory.
	keep := func(name string) bool {
		return strings.HasPrefix(name, "usr/src/") || strings.HasPrefix(name, "usr/lib/linux-kbuild-")
	}
	for _, deb := range debs {
		if _, err := debian.Extract(deb, tmp, keep); err != nil {
			return fmt.Errorf("testengine: extracting %s: %w", deb, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, doneMarker), nil, 0o644); err != nil {
		return err
	}
	os.RemoveAll(dir) // an interrupted extraction's leftover
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, doneMarker)); serr == nil {
			return nil // a concurrent build finished first
		}
		return err
	}
	return nil
}

// includeLine is the flavour headers' Makefile line that pulls in the
// -common tree by absolute path (/usr/src/... as installed).
var includeLine = regexp.MustCompile(`(?m)^include (\S*/linux-headers-[^/\s]+-common)/Makefile$`)

// patchMakefile points the flavour Makefile's include at common, the
// extracted -common tree, wherever the cache is now.
func patchMakefile(kdir, common string) error {
	mk := filepath.Join(kdir, "Makefile")
	b, err := os.ReadFile(mk)
	if err != nil {
		return fmt.Errorf("testengine: headers: %w", err)
	}
	m := includeLine.FindSubmatch(b)
	if m == nil {
		return fmt.Errorf("testengine: %s has no \"include .../linux-headers-*-common/Makefile\" line to point at the extracted headers", mk)
	}
	if string(m[1]) == common {
		return nil
	}
	b = includeLine.ReplaceAllLiteral(b, []byte("include "+common+"/Makefile"))
	return os.WriteFile(mk, b, 0o644)
}

// compiler reads the C compiler the kernel was built with (gcc-12) from
// the headers' .kernelvariables.
func compiler(kdir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(kdir, ".kernelvariables"))
	if err != nil {
		return "", fmt.Errorf("testengine: headers: %w", err)
	}
	cc := regexp.MustCompile(`(?m)^CC = .*\b(gcc-[0-9]+)\s*$`).FindSubmatch(b)
	if cc == nil {
		return "", fmt.Errorf("testengine: %s names no gcc-N compiler", filepath.Join(kdir, ".kernelvariables"))
	}
	return string(cc[1]), nil
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

// checkModule makes sure make produced a 32-bit x86 ELF relocatable.
func checkModule(ko string) error {
	f, err := elf.Open(ko)
	if err != nil {
		return fmt.Errorf("testengine: the build left no module: %w", err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS32 || f.Machine != elf.EM_386 || f.Type != elf.ET_REL {
		return fmt.Errorf("testengine: %s is %v %v %v, want a 32-bit i386 relocatable module", ko, f.Class, f.Machine, f.Type)
	}
	return nil
}

// cleanEnv drops variables that would change what kbuild builds for.
func cleanEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "ARCH", "CROSS_COMPILE", "CC", "KBUILD_OUTPUT", "O", "M", "KERNELRELEASE", "DEB_BUILD_ARCH", "DEB_HOST_ARCH":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
