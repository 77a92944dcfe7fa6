package kbuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/debian"
)

// cryptodev-linux, the /dev/crypto module: its release, where a user's
// build downloads it, and the hash of its content.
const (
	CryptodevModule  = "cryptodev"
	CryptodevVersion = "1.14"
	// CryptodevSource is the source tarball's file name in the cache
	// (sources/) and in the project's shared/deps.
	CryptodevSource = "cryptodev-linux-" + CryptodevVersion + ".tar.gz"
	// CryptodevURL is the upstream tag's tarball.
	CryptodevURL = "https://github.com/cryptodev-linux/cryptodev-linux/archive/refs/tags/cryptodev-linux-" + CryptodevVersion + ".tar.gz"
	// CryptodevContent is ContentHash of the tag's tree (git tree
	// 86ad29815a40dcea99ad895f252838b8f5f9ce56): the files, not the
	// tarball's bytes, so that a code host compressing the same tree
	// anew still matches.
	CryptodevContent = "428d4c48d409f04d183f6025d263c53d6fb1fc5dc9c71609c2f3c1b6acc96cb1"
)

// recipe names how Cryptodev builds: part of the cache key, so that a
// change of flags builds anew instead of reusing an old module.
const recipe = "r1 strip-debug file-prefix-map epoch0"

// ErrNoSource wraps a cryptodev-linux source that is neither given, nor
// cached, nor downloadable.
var ErrNoSource = errors.New("cryptodev-linux source not available")

// CryptodevOptions say what to build cryptodev.ko from and for.
type CryptodevOptions struct {
	Options
	// Source is the source tarball; "" means the cache's
	// sources/CryptodevSource, downloaded from CryptodevURL when absent
	// (unless NoDownload).
	Source     string
	NoDownload bool
	// OutDir, when set, is where the module is built, every time,
	// instead of the cache: to build twice and compare.
	OutDir string
}

// Module is a built module.
type Module struct {
	Path    string // the .ko, in the cache
	Release string // the kernel release it is built for (vermagic)
	Version string // the kernel package's Debian version
	Built   bool   // false when it came from the cache
}

// Cryptodev builds cryptodev-linux's cryptodev.ko for the cached kernel
// package, with its top-level Makefile (which writes version.h) and the
// kernel's kbuild. The build is reproducible — the same source and
// kernel give the same bytes: no build path (-ffile-prefix-map), time or
// host in the module, debug information stripped — and cached by kernel
// version and source content: a second call returns the cached module.
func Cryptodev(ctx context.Context, opt CryptodevOptions) (*Module, error) {
	if opt.CacheDir == "" {
		var err error
		if opt.CacheDir, err = debian.DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	k, err := Headers(ctx, opt.Options)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("strip"); err != nil {
		return nil, fmt.Errorf("%w: stripping cryptodev.ko needs strip (apt-get install binutils)", ErrNoTools)
	}
	src := opt.Source
	if src == "" {
		if src, err = cachedSource(ctx, opt); err != nil {
			return nil, err
		}
	}
	files, err := CryptodevFiles(src)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256([]byte(recipe + "\x00" + k.CC + "\x00" + CryptodevContent))
	outDir := filepath.Join(opt.CacheDir, "kbuild", CryptodevModule, k.Release+"_"+k.Version+"_"+hex.EncodeToString(key[:8]))
	if opt.OutDir != "" {
		outDir = opt.OutDir
	}
	m := &Module{Path: filepath.Join(outDir, CryptodevModule+".ko"), Release: k.Release, Version: k.Version}
	if _, err := os.Stat(m.Path); err == nil && opt.OutDir == "" {
		return m, nil
	}
	if opt.Log != nil {
		opt.Log("building %s.ko (cryptodev-linux %s) for %s", CryptodevModule, CryptodevVersion, k.Release)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(outDir, ".build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	dir := filepath.Join(work, "cryptodev-linux-"+CryptodevVersion)
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, err
		}
	}
	// The top-level Makefile writes version.h, then runs kbuild with M=.
	// The build directory's path is mapped away, the kernel's own
	// timestamp and host variables fixed.
	cmd := exec.CommandContext(ctx, "make", "-C", dir, "build", "KERNEL_DIR="+k.Dir,
		"KCFLAGS=-ffile-prefix-map="+dir+"=cryptodev-linux-"+CryptodevVersion)
	cmd.Env = append(Env(), "SOURCE_DATE_EPOCH=0", "KBUILD_BUILD_TIMESTAMP=@0", "KBUILD_BUILD_USER=ocfw", "KBUILD_BUILD_HOST=ocfw")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kbuild: make -C %s KERNEL_DIR=%s: %w\n%s", dir, k.Dir, err, LastLines(out.String(), 30))
	}
	// Debian's kernel config keeps debug information: 1.3 MB of it in
	// the module, 60 KB without.
	ko := filepath.Join(work, CryptodevModule+".ko")
	strip := exec.CommandContext(ctx, "strip", "--strip-debug", "-o", ko, filepath.Join(dir, CryptodevModule+".ko"))
	if b, err := strip.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kbuild: strip --strip-debug %s: %w\n%s", ko, err, b)
	}
	if err := CheckModule(ko); err != nil {
		return nil, err
	}
	if err := os.Rename(ko, m.Path); err != nil {
		return nil, err
	}
	m.Built = true
	return m, nil
}

// cachedSource is the cache's source tarball, downloaded when absent.
func cachedSource(ctx context.Context, opt CryptodevOptions) (string, error) {
	p := SourcePath(opt.CacheDir)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if opt.NoDownload {
		return "", fmt.Errorf("%w: %s is not in the cache (put the upstream tag's tarball there, or let ocfw build download %s)", ErrNoSource, p, CryptodevURL)
	}
	if opt.Log != nil {
		opt.Log("downloading %s", CryptodevURL)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, CryptodevURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoSource, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: %s: %s", ErrNoSource, CryptodevURL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrNoSource, CryptodevURL, err)
	}
	if err := storeSource(opt.CacheDir, b, CryptodevURL); err != nil {
		return "", err
	}
	return p, nil
}

// SourcePath is where the cache keeps the cryptodev-linux tarball.
func SourcePath(cacheDir string) string {
	return filepath.Join(cacheDir, "sources", CryptodevSource)
}

// StoreSource puts a cryptodev-linux tarball (a copy of the upstream tag)
// into the cache after checking its content: how tests, and builds
// without network access, give ocfw the source.
func StoreSource(cacheDir, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	return storeSource(cacheDir, b, file)
}

func storeSource(cacheDir string, tgz []byte, from string) error {
	_, sum, err := readSource(tgz)
	if err != nil {
		return fmt.Errorf("kbuild: %s: %w", from, err)
	}
	if sum != CryptodevContent {
		return fmt.Errorf("kbuild: %s: content hash %s, want cryptodev-linux %s's %s", from, sum, CryptodevVersion, CryptodevContent)
	}
	p := SourcePath(cacheDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, tgz, 0o644)
}

// CryptodevFiles reads the cryptodev-linux source tarball file and
// checks it is release CryptodevVersion (CryptodevContent): its regular
// files by path below the top directory. Builds of the source's other
// parts (its tests/speed, for the benchmarks) start here.
func CryptodevFiles(file string) (map[string][]byte, error) {
	tgz, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoSource, err)
	}
	files, sum, err := readSource(tgz)
	if err != nil {
		return nil, fmt.Errorf("kbuild: %s: %w", file, err)
	}
	if sum != CryptodevContent {
		return nil, fmt.Errorf("kbuild: %s: content hash %s, want cryptodev-linux %s's %s", file, sum, CryptodevVersion, CryptodevContent)
	}
	return files, nil
}

// readSource reads a source tarball's regular files, by path below its
// one top directory, and their ContentHash.
func readSource(tgz []byte) (map[string][]byte, string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, "", err
	}
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		clean := path.Clean(h.Name)
		_, rest, ok := strings.Cut(clean, "/")
		if !ok || rest == "" || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, "", fmt.Errorf("%s: not a file below the archive's top directory", h.Name)
		}
		b, err := io.ReadAll(io.LimitReader(tr, 4<<20))
		if err != nil {
			return nil, "", err
		}
		files[rest] = b
	}
	if len(files) == 0 {
		return nil, "", errors.New("no files in the archive")
	}
	return files, ContentHash(files), nil
}

// ContentHash hashes files (path below the top directory -> content) in
// path order: names and bytes, nothing of the archive around them.
func ContentHash(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}
