package kerneltest

// Pieces of the harness for guests that run a program of their own as
// /init rather than a package's tests (package worldvm's agent): find
// the kernel, cross-compile the program, add files to the initramfs,
// and the guest's setup and power-off.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"

	"github.com/u-root/u-root/pkg/cpio"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/qemu"
)

// FindKernel returns the cached kernel package pkg ("" means
// linux-image-686 for i386, linux-image-rpi for armel) for the Debian architecture arch ("" means i386),
// extracted (once, then cached), or an error for which Missing is true
// when the package is not in the cache or QEMU for arch is not
// installed.
func FindKernel(pkg, arch, cacheDir string) (*debian.Kernel, error) {
	if arch == "" {
		arch = "i386"
	}
	if pkg == "" {
		pkg = defaultPackage(arch)
	}
	if _, ok := goArch[arch]; !ok {
		return nil, fmt.Errorf("kerneltest: no Go target for architecture %q", arch)
	}
	if err := qemu.Installed(qemuArch[arch]); err != nil {
		return nil, &missingError{err.Error()}
	}
	deb, err := debian.CachedKernel(pkg, arch, cacheDir)
	if err != nil {
		if cacheDir == "" {
			cacheDir, _ = debian.DefaultCacheDir()
		}
		return nil, &missingError{fmt.Sprintf("kernel package %s (%s) is not in the cache %s: fetch it first with "+
			"`ocfw kernel fetch` (apt-get download, needs the network; OCFW_CACHE chooses the cache): %v",
			pkg, arch, cacheDir, err)}
	}
	return debian.ExtractKernelCached(deb, cacheDir)
}

// BuildProgram cross-compiles the main package pkg (an import path or a
// path relative to the working directory, which must be inside the
// module) for the Debian architecture arch ("" means i386: GOARCH=386
// GO386=softfloat) into out.
func BuildProgram(pkg, out, arch string) error {
	if arch == "" {
		arch = "i386"
	}
	env, ok := goArch[arch]
	if !ok {
		return fmt.Errorf("kerneltest: no Go target for architecture %q", arch)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("kerneltest: no go command to build %s for the guest: %w", pkg, err)
	}
	cmd := exec.Command(goBin, "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kerneltest: building %s for the guest (%s): %w\n%s", pkg, strings.Join(env, " "), err, stderr.String())
	}
	return nil
}

// WriteFiles writes files (absolute guest path to content, mode 0600,
// parent directories 0755) as a newc archive to append after one from
// Initramfs.Write: the kernel unpacks concatenated archives in order,
// so these add to, or replace, what the first one holds. The same files
// give the same bytes.
func WriteFiles(w io.Writer, files map[string][]byte) error {
	names := make([]string, 0, len(files))
	for name := range files {
		if !path.IsAbs(name) || path.Clean(name) != name || name == "/" {
			return fmt.Errorf("initramfs: guest path %q: want a clean absolute path", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var recs []cpio.Record
	dirs := map[string]bool{}
	for _, name := range names {
		// Parents first, 0755 (WriteRecordsAndDirs would add them, and
		// ".", as 0777; the kernel applies a directory's mode again when
		// a later archive names it).
		var parents []string
		for d := path.Dir(name); d != "/"; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if !dirs[d] {
				dirs[d] = true
				recs = append(recs, cpio.Directory(strings.TrimPrefix(d, "/"), 0o755))
			}
		}
		recs = append(recs, cpio.StaticFile(strings.TrimPrefix(name, "/"), string(files[name]), 0o600))
	}
	cw := cpio.Newc.Writer(w)
	for i := range recs {
		recs[i] = cpio.MakeReproducible(recs[i])
	}
	if err := cpio.WriteRecords(cw, recs); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return cpio.WriteTrailer(cw)
}

// PrepareGuest is the guest's setup before the tests in Main, for a
// program of its own running as /init: it mounts /proc, /sys, /dev and
// /tmp and loads the initramfs's modules in order.
func PrepareGuest() error {
	if err := mountBasics(); err != nil {
		return err
	}
	return loadModules(modulesList)
}

// PowerOff drains the serial console, so what was printed reaches the
// host, and powers the machine off.
func PowerOff() { powerOff() }
