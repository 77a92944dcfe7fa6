package refspeed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/kbuild"
)

// CC is the compiler tests/speed is built with: the one Debian built the
// 686 kernel with, which builds cryptodev.ko too.
const CC = "gcc-12"

// SpeedGuestPath is where the guest finds tests/speed.
const SpeedGuestPath = "/usr/local/bin/cryptodev-speed"

// speedRecipe names how BuildSpeed compiles: part of the cache key.
// Upstream's tests/Makefile compiles with "-I.. -Wall" and no -O; so
// does this, for i386 (-m32), linked statically (the guest has the
// openssl tree's libc, but a static binary needs no tree at all),
// stripped, the build directory mapped away.
const speedRecipe = "r1 -m32 -static -s -I.. -Wall file-prefix-map"

// ErrNoToolchain is a missing gcc-12 or i386 C library: the benchmark
// cannot build tests/speed.
var ErrNoToolchain = errors.New("no i386 C toolchain")

// SpeedOptions say where BuildSpeed works.
type SpeedOptions struct {
	// Source is the cryptodev-linux tarball (kbuild.CryptodevSource);
	// "" means the cache's (kbuild.SourcePath), never downloaded here.
	Source string
	// CacheDir is the ocfw cache; "" means the default.
	CacheDir string
	// OutDir, when set, is where the program is built, every time,
	// instead of the cache: to build twice and compare.
	OutDir string
	Log    func(format string, args ...any)
}

// BuildSpeed compiles cryptodev-linux's tests/speed for i386 and returns
// the program's path. The same source, compiler and C library give the
// same bytes; the result is cached under their hash.
func BuildSpeed(ctx context.Context, opt SpeedOptions) (string, error) {
	if opt.CacheDir == "" {
		var err error
		if opt.CacheDir, err = debian.DefaultCacheDir(); err != nil {
			return "", err
		}
	}
	src := opt.Source
	if src == "" {
		src = kbuild.SourcePath(opt.CacheDir)
	}
	files, err := kbuild.CryptodevFiles(src)
	if err != nil {
		return "", err
	}
	version, libc, err := toolchain(ctx)
	if err != nil {
		return "", err
	}
	libcSum, err := fileHash(libc)
	if err != nil {
		return "", err
	}
	key := sha256.Sum256([]byte(speedRecipe + "\x00" + version + "\x00" + libcSum + "\x00" + kbuild.CryptodevContent))
	outDir := filepath.Join(opt.CacheDir, "refspeed", "cryptodev-speed-"+hex.EncodeToString(key[:8]))
	if opt.OutDir != "" {
		outDir = opt.OutDir
	}
	out := filepath.Join(outDir, "speed")
	if opt.OutDir == "" && exists(out) {
		return out, nil
	}
	if opt.Log != nil {
		opt.Log("building cryptodev-linux %s's tests/speed for i386 (%s -m32 -static)", kbuild.CryptodevVersion, CC)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(outDir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	top := "cryptodev-linux-" + kbuild.CryptodevVersion
	dir := filepath.Join(work, top)
	for _, name := range []string{"tests/speed.c", "crypto/cryptodev.h"} {
		data, ok := files[name]
		if !ok {
			return "", fmt.Errorf("refspeed: %s: no %s in the source", src, name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(work, "speed")
	cmd := exec.CommandContext(ctx, CC, "-m32", "-static", "-s", "-I..", "-Wall",
		"-ffile-prefix-map="+dir+"="+top, "-o", bin, "speed.c")
	cmd.Dir = filepath.Join(dir, "tests")
	cmd.Env = append(os.Environ(), "LC_ALL=C", "SOURCE_DATE_EPOCH=0")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		if strings.Contains(log.String(), "asm/") {
			// Debian's x86 kernel headers are in the amd64 multiarch
			// directory; gcc-multilib links /usr/include/asm to them.
			err = fmt.Errorf("%w: no <asm/...> headers for -m32 (apt-get install gcc-multilib): %v", ErrNoToolchain, err)
		}
		return "", fmt.Errorf("refspeed: %s: %w\n%s", strings.Join(cmd.Args, " "), err, kbuild.LastLines(log.String(), 20))
	}
	if err := CheckSpeed(bin); err != nil {
		return "", err
	}
	if err := os.Rename(bin, out); err != nil {
		return "", err
	}
	return out, nil
}

// CheckSpeed checks that file is what the guest can run without a tree:
// a static i386 executable.
func CheckSpeed(file string) error {
	if err := checkELF(file, elf.ET_EXEC, true); err != nil {
		return fmt.Errorf("refspeed: %s: %w", file, err)
	}
	return nil
}

// toolchain returns the compiler's version line and the i386 libc.a it
// links, or ErrNoToolchain saying what to install.
func toolchain(ctx context.Context) (version, libc string, err error) {
	if _, err := exec.LookPath(CC); err != nil {
		return "", "", fmt.Errorf("%w: %s not found (apt-get install %s)", ErrNoToolchain, CC, CC)
	}
	v, err := exec.CommandContext(ctx, CC, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%w: %s --version: %v", ErrNoToolchain, CC, err)
	}
	// gcc prints the bare name when it has no such file.
	p, err := exec.CommandContext(ctx, CC, "-m32", "-print-file-name=libc.a").Output()
	libc = strings.TrimSpace(string(p))
	if err != nil || !filepath.IsAbs(libc) || !exists(libc) {
		return "", "", fmt.Errorf("%w: %s -m32 finds no i386 libc.a (apt-get install gcc-multilib: libc6-dev-i386, lib32gcc-12-dev)", ErrNoToolchain, CC)
	}
	version, _, _ = strings.Cut(string(v), "\n")
	return version, libc, nil
}

func fileHash(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
