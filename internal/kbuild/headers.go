// Package kbuild builds out-of-tree kernel modules for a Debian kernel
// package with that kernel's own headers and kbuild, as Debian ships
// them: cryptodev-linux's cryptodev.ko (/dev/crypto), which ocfw build
// puts into x86 images, and the test engine's module
// (internal/lab/testengine). The headers are downloaded with apt-get
// (package debian) and extracted once into the ocfw cache.
package kbuild

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/ocfw/ocfw/internal/debian"
)

// ErrNoKernel wraps a kernel package missing from the cache: modules are
// built for the kernel the image boots, so fetch that first.
var ErrNoKernel = errors.New("kernel package not cached")

// ErrNoTools wraps missing build tools (make, the kernel's gcc).
var ErrNoTools = errors.New("build tools missing")

// Options say which kernel to build for.
type Options struct {
	KernelPackage string // Debian kernel package; "" means linux-image-686
	Arch          string // its Debian architecture; "" means i386
	CacheDir      string // "" means debian.DefaultCacheDir
	Log           func(format string, args ...any)
}

// Kernel is a Debian kernel's extracted headers, ready for kbuild.
type Kernel struct {
	Release string // e.g. 6.1.0-57-686, as uname -r on the board
	Version string // the kernel package's Debian version, e.g. 6.1.192-3
	Dir     string // the flavour's headers tree: make -C Dir / KERNEL_DIR=Dir
	CC      string // the compiler Debian built the kernel with (gcc-12)
	// Fetched is true when this call downloaded and extracted the headers.
	Fetched bool
}

// release splits a Debian kernel release such as 6.1.0-57-686 into its
// ABI (6.1.0-57), series (6.1) and flavour (686).
var release = regexp.MustCompile(`^(([0-9]+\.[0-9]+)\.[0-9]+-[0-9]+)-([a-z0-9-]+)$`)

// hostArch is the Debian architecture of this host: linux-kbuild's
// scripts (fixdep, modpost) run here.
var hostArch = map[string]string{"amd64": "amd64", "386": "i386"}

// headersDir is where extracted headers live in the cache. The test
// engine's build put them there first; the name stays so that caches
// filled before this package existed are used, not fetched again.
const headersDir = "testengine/headers"

// Headers readies the cached kernel package's headers: linux-headers-
// RELEASE (the flavour's), its -common package and linux-kbuild for this
// host, all at exactly the kernel package's version, downloaded with
// apt-get and extracted once into the cache. It needs make and the gcc
// the kernel was built with (gcc-12 for Debian bookworm), and an x86 host
// for the i386 kernel.
func Headers(ctx context.Context, opt Options) (*Kernel, error) {
	if opt.KernelPackage == "" {
		opt.KernelPackage = "linux-image-686"
	}
	if opt.Arch == "" {
		opt.Arch = "i386"
	}
	if opt.CacheDir == "" {
		var err error
		if opt.CacheDir, err = debian.DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	if opt.Arch != "i386" {
		return nil, fmt.Errorf("kbuild: modules are built here for x86 (i386) kernels, not %s", opt.Arch)
	}
	host, ok := hostArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("kbuild: building i386 kernel modules needs an x86 host (the host's gcc compiles them), not %s", runtime.GOARCH)
	}
	if _, err := exec.LookPath("make"); err != nil {
		return nil, fmt.Errorf("%w: building kernel modules needs make (apt-get install make gcc-12)", ErrNoTools)
	}
	deb, err := debian.CachedKernel(opt.KernelPackage, opt.Arch, opt.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v: fetch it first with `ocfw kernel fetch` (modules are built for the kernel the image boots)", ErrNoKernel, err)
	}
	name, version, _, ok := debian.ParseDebName(deb)
	if !ok {
		return nil, fmt.Errorf("kbuild: %s: not a name_version_arch.deb file name", deb)
	}
	rel := strings.TrimPrefix(name, "linux-image-")
	m := release.FindStringSubmatch(rel)
	if m == nil || rel == name {
		return nil, fmt.Errorf("kbuild: %s: not a Debian kernel package name like linux-image-6.1.0-57-686", name)
	}
	k := &Kernel{Release: rel, Version: version}
	pkgs := []struct{ name, arch string }{
		{"linux-headers-" + rel, opt.Arch},
		{"linux-headers-" + m[1] + "-common", opt.Arch}, // "all", through the kernel's lists
		{"linux-kbuild-" + m[2], host},
	}
	headers := filepath.Join(opt.CacheDir, filepath.FromSlash(headersDir), rel+"_"+version)
	if _, err := os.Stat(filepath.Join(headers, doneMarker)); err != nil {
		f := &debian.Fetcher{CacheDir: opt.CacheDir, Log: opt.Log}
		var debs []string
		for _, p := range pkgs {
			d, err := f.FetchExact(ctx, p.name, version, p.arch)
			if err != nil {
				return nil, fmt.Errorf("kbuild: headers for kernel %s %s: %w", rel, version, err)
			}
			debs = append(debs, d)
		}
		if err := extractHeaders(debs, headers); err != nil {
			return nil, err
		}
		k.Fetched = true
	}
	k.Dir = filepath.Join(headers, "usr", "src", "linux-headers-"+rel)
	if err := patchMakefile(k.Dir, filepath.Join(headers, "usr", "src", "linux-headers-"+m[1]+"-common")); err != nil {
		return nil, err
	}
	if k.CC, err = compiler(k.Dir); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(k.CC); err != nil {
		return nil, fmt.Errorf("%w: building kernel modules needs %s, the compiler Debian built kernel %s with (apt-get install %s)", ErrNoTools, k.CC, rel, k.CC)
	}
	return k, nil
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
			return fmt.Errorf("kbuild: extracting %s: %w", deb, err)
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
		return fmt.Errorf("kbuild: headers: %w", err)
	}
	m := includeLine.FindSubmatch(b)
	if m == nil {
		return fmt.Errorf("kbuild: %s has no \"include .../linux-headers-*-common/Makefile\" line to point at the extracted headers", mk)
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
		return "", fmt.Errorf("kbuild: headers: %w", err)
	}
	cc := regexp.MustCompile(`(?m)^CC = .*\b(gcc-[0-9]+)\s*$`).FindSubmatch(b)
	if cc == nil {
		return "", fmt.Errorf("kbuild: %s names no gcc-N compiler", filepath.Join(kdir, ".kernelvariables"))
	}
	return string(cc[1]), nil
}

// CheckModule makes sure make produced a 32-bit x86 ELF relocatable.
func CheckModule(ko string) error {
	f, err := elf.Open(ko)
	if err != nil {
		return fmt.Errorf("kbuild: the build left no module: %w", err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS32 || f.Machine != elf.EM_386 || f.Type != elf.ET_REL {
		return fmt.Errorf("kbuild: %s is %v %v %v, want a 32-bit i386 relocatable module", ko, f.Class, f.Machine, f.Type)
	}
	return nil
}

// Env is the environment for make: this process's, without the
// variables that would change what kbuild builds for (only the headers'
// own settings count), in the C locale.
func Env() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "ARCH", "CROSS_COMPILE", "CC", "KBUILD_OUTPUT", "O", "M", "KERNELRELEASE", "DEB_BUILD_ARCH", "DEB_HOST_ARCH",
			"KCFLAGS", "KERNEL_DIR", "CRYPTODEV_CFLAGS", "LC_ALL":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "LC_ALL=C")
}

// LastLines is the end of a build's output, for an error.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
