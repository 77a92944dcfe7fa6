// Package refspeed is for the benchmarks: the seeds' own tools, run in a
// kerneltest guest beside `ocf speed` on the same kernel drivers (issue
// 31), and what they print, read:
//
//   - Debian's i386 openssl with OpenSSL 3's afalg engine (`openssl speed
//     -elapsed -evp CIPHER -engine afalg`): a tree of Debian packages
//     (worldvm.FetchTree, as strongSwan's), run in the guest with the
//     tree's own dynamic loader and libraries;
//   - cryptodev-linux's own tests/speed, built for i386 (gcc -m32,
//     static) from the source ocfw builds cryptodev.ko from.
//
// Result is what the guest's benchmark reports to bench/run, one JSON
// line after Marker.
//
// Test-only: nothing here reaches a router image.
package refspeed

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ocfw/ocfw/internal/lab/worldvm"
)

// OpenSSLPackages are Debian's openssl and what it needs: libssl3 holds
// libcrypto and the engines (afalg.so), libc6 the loader and libc.
var OpenSSLPackages = []string{"openssl", "libssl3", "libc6"}

// Guest paths in the tree, as Debian installs them.
const (
	OpenSSL = "/usr/bin/openssl"
	// OpenSSLConf is Debian's configuration; /usr/lib/ssl (OpenSSL's
	// own directory) only links to /etc/ssl, and is left out.
	OpenSSLConf = "/etc/ssl/openssl.cnf"
	Loader      = "/lib/ld-linux.so.2"
	// LibraryPath is the tree's library directories, for
	// LD_LIBRARY_PATH: the guest has no ld.so.cache.
	LibraryPath = "/lib/i386-linux-gnu:/usr/lib/i386-linux-gnu"
)

// OpenSSLSpec is the tree's recipe for worldvm.FetchTree.
var OpenSSLSpec = worldvm.TreeSpec{
	Name: "openssl", Packages: OpenSSLPackages, Keep: keep, LibraryPath: LibraryPath,
	Required: []string{OpenSSL, OpenSSLConf, Loader},
}

// FetchOpenSSL returns the i386 openssl tree under cacheDir ("" means
// the default ocfw cache), downloading the packages with apt-get the
// first time (worldvm.FetchTree).
func FetchOpenSSL(ctx context.Context, cacheDir string, logf func(format string, args ...any)) (*worldvm.Tree, error) {
	return worldvm.FetchTree(ctx, cacheDir, OpenSSLSpec, logf)
}

// keep leaves out what the guest never reads, and usr/lib/ssl, whose
// links point at /etc/ssl by absolute path (debian.Extract refuses
// links out of the tree).
func keep(name string) bool {
	for _, p := range []string{"usr/lib/ssl", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/lintian",
		"usr/lib/i386-linux-gnu/gconv"} {
		if name == p || strings.HasPrefix(name, p+"/") {
			return false
		}
	}
	return true
}

// AFALGEngine finds OpenSSL's afalg engine in the tree at root (the
// guest's / inside the guest) and returns the guest path of its
// directory, for OPENSSL_ENGINES: engines-N/afalg.so in one of
// LibraryPath's directories, an i386 ELF shared object. Without it
// `-engine afalg` would fail in the guest, after the boot; here it fails
// on the host, naming the tree.
func AFALGEngine(root string) (string, error) {
	var looked []string
	for _, lib := range strings.Split(LibraryPath, ":") {
		m, err := filepath.Glob(filepath.Join(root, lib, "engines-*", "afalg.so"))
		if err != nil {
			return "", err
		}
		looked = append(looked, path.Join(lib, "engines-*", "afalg.so"))
		for _, so := range m {
			if err := checkELF(so, elf.ET_DYN, false); err != nil {
				return "", fmt.Errorf("refspeed: %s: %w", so, err)
			}
			rel, err := filepath.Rel(root, filepath.Dir(so))
			if err != nil {
				return "", err
			}
			return "/" + filepath.ToSlash(rel), nil
		}
	}
	return "", fmt.Errorf("refspeed: the tree %s has no OpenSSL afalg engine (looked for %s; Debian's libssl3 ships it)", root, strings.Join(looked, ", "))
}

// checkELF checks that file is a 32-bit x86 ELF file of type typ and,
// when static, has no program interpreter.
func checkELF(file string, typ elf.Type, static bool) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("not an ELF file: %w", err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS32 || f.Machine != elf.EM_386 || f.Type != typ {
		return fmt.Errorf("%v %v %v, want ELFCLASS32 EM_386 %v", f.Class, f.Machine, f.Type, typ)
	}
	if static {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return fmt.Errorf("dynamically linked (has a program interpreter), want static")
			}
		}
	}
	return nil
}

// exists reports whether name exists.
func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}
