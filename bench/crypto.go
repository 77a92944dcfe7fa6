package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/internal/lab/refspeed"
)

// cryptoCiphers are the ciphers compared with openssl speed in benchmark
// items 1 and 1b, and benchSizes the openssl speed sizes (also ocf/soft's
// BenchmarkSoft sizes).
var (
	cryptoCiphers = []string{"aes-128-cbc", "aes-256-cbc", "des-ede3-cbc", "des-cbc", "hmac-sha1"}
	benchSizes    = []int{16, 64, 256, 1024, 8192, 16384}
)

// cell is one cipher at one size: the best MB/s of each side over the
// trials, every trial's figure, and their ratio (Go / OpenSSL).
type cell struct {
	Cipher     string    `json:"cipher"`
	Size       int       `json:"size"`
	Go         float64   `json:"go_mbs"`
	Other      float64   `json:"other_mbs"`
	Ratio      float64   `json:"ratio"`
	GoRuns     []float64 `json:"go_runs"`
	OtherRuns  []float64 `json:"other_runs"`
	GoAllocsOp float64   `json:"go_allocs_op"`
}

// side runs one cipher over all sizes and returns MB/s by size.
type side func(ctx context.Context, cipher string) (map[int]float64, map[int]float64, error)

// compare runs Go and the reference alternately, trials times per
// cipher (Go first in odd trials, the reference first in even ones), so
// both see the same machine state; the best of each side counts.
func (r *runner) compare(ctx context.Context, goSide, other side) ([]cell, error) {
	var cells []cell
	for _, c := range cryptoCiphers {
		goRuns := map[int][]float64{}
		otherRuns := map[int][]float64{}
		allocs := map[int]float64{}
		for t := 0; t < r.trials; t++ {
			order := []bool{true, false}
			if t%2 == 1 {
				order = []bool{false, true}
			}
			for _, isGo := range order {
				if isGo {
					mbs, al, err := goSide(ctx, c)
					if err != nil {
						return nil, err
					}
					for s, v := range mbs {
						goRuns[s] = append(goRuns[s], v)
						allocs[s] = max(allocs[s], al[s])
					}
				} else {
					mbs, _, err := other(ctx, c)
					if err != nil {
						return nil, err
					}
					for s, v := range mbs {
						otherRuns[s] = append(otherRuns[s], v)
					}
				}
			}
		}
		for _, s := range benchSizes {
			g, o := best(goRuns[s]), best(otherRuns[s])
			if g == 0 || o == 0 {
				return nil, fmt.Errorf("%s at %d bytes: no figure (go %v, reference %v)", c, s, goRuns[s], otherRuns[s])
			}
			cells = append(cells, cell{Cipher: c, Size: s, Go: g, Other: o, Ratio: g / o,
				GoRuns: goRuns[s], OtherRuns: otherRuns[s], GoAllocsOp: allocs[s]})
		}
		r.logf("%s done", c)
	}
	return cells, nil
}

func best(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// goSoftSide runs BenchmarkSoft for one cipher with a test binary,
// through wrap (an emulator) when given.
func (r *runner) goSoftSide(bin string, wrap []string, env []string) side {
	return func(ctx context.Context, cipher string) (map[int]float64, map[int]float64, error) {
		args := append(append([]string{}, wrap...), bin, "-test.run", "^$",
			"-test.bench", "^BenchmarkSoft$/^"+regexp.QuoteMeta(cipher)+"$/",
			"-test.benchtime", r.benchtime, "-test.benchmem")
		out, err := r.run(ctx, env, args[0], args[1:]...)
		if err != nil {
			return nil, nil, err
		}
		mbs, allocs := map[int]float64{}, map[int]float64{}
		for _, g := range parseGoBench(out) {
			var size int
			if _, err := fmt.Sscanf(strings.TrimPrefix(g.Name, "BenchmarkSoft/"+cipher+"/"), "%d", &size); err != nil {
				continue
			}
			mbs[size] = g.Metrics["MB/s"]
			allocs[size] = g.Metrics["allocs/op"]
		}
		if len(mbs) != len(benchSizes) {
			return nil, nil, fmt.Errorf("BenchmarkSoft/%s: %d sizes in the output, want %d: %s", cipher, len(mbs), len(benchSizes), tail(out, 400))
		}
		return mbs, allocs, nil
	}
}

// opensslSide runs `openssl speed` for one cipher (all sizes), through
// wrap when given.
func (r *runner) opensslSide(openssl []string, env []string) side {
	return func(ctx context.Context, cipher string) (map[int]float64, map[int]float64, error) {
		a, err := speedArgs(cipher)
		if err != nil {
			return nil, nil, err
		}
		args := append(append([]string{}, openssl...), a...)
		out, err := r.run(ctx, env, args[0], args[1:]...)
		if err != nil {
			return nil, nil, err
		}
		m, err := refspeed.ParseOpenSSL(out)
		return m, nil, err
	}
}

// runCrypto is benchmark item 1 (the item column of the README's
// benchmark tables and bench.md): the host's Go build against the host's
// openssl.
func runCrypto(ctx context.Context, r *runner) error {
	bin, err := r.goTestBinary(ctx, "./ocf/soft", "soft.test")
	if err != nil {
		return err
	}
	cells, err := r.compare(ctx, r.goSoftSide(bin, nil, nil), r.opensslSide([]string{"openssl"}, nil))
	if err != nil {
		return err
	}
	r.res.Crypto = &cryptoResult{Reference: r.res.Host.OpenSSL + " (this host, amd64, AES-NI)", Cells: cells}
	r.res.goal("1", "soft aes-128-cbc vs openssl at 8192 bytes", ">= 0.9x", ratioAt(cells, "aes-128-cbc", 8192), 0.9)
	r.res.goal("1", "soft aes-128-cbc vs openssl at 16 bytes", ">= 0.5x", ratioAt(cells, "aes-128-cbc", 16), 0.5)
	return nil
}

// qemuUser is how the 386 side runs: this host's kernel runs no 32-bit
// binaries, so both Go's 386 build and Debian's i386 openssl run under
// QEMU's user-mode emulator with a CPU model that has MMX but no SSE,
// like the Geode LX.
var qemuUser = []string{"qemu-i386", "-cpu", "pentium2"}

// geodeMask is OPENSSL_ia32cap with everything a Geode LX lacks cleared:
// FXSR, SSE, SSE2 (EDX bits 24-26), every CPUID.1 ECX feature (SSE3,
// SSSE3, AES-NI, PCLMULQDQ, AVX ...) and the CPUID.7 word (":0").
const geodeMask = "~0xffffffff07000000:0"

// runCrypto386 is benchmark item 1b: GOARCH=386 GO386=softfloat against
// Debian's i386 openssl with AES-NI and SSE masked.
func runCrypto386(ctx context.Context, r *runner) error {
	root, err := r.i386OpenSSL(ctx)
	if err != nil {
		return err
	}
	bin, err := r.goTestBinary(ctx, "./ocf/soft", "soft386.test", "GOARCH=386", "GO386=softfloat")
	if err != nil {
		return err
	}
	libs := filepath.Join(root, "lib/i386-linux-gnu") + ":" + filepath.Join(root, "usr/lib/i386-linux-gnu")
	openssl := append(append([]string{}, qemuUser...), filepath.Join(root, "lib/i386-linux-gnu/ld-linux.so.2"),
		"--library-path", libs, filepath.Join(root, "usr/bin/openssl"))
	env := []string{"OPENSSL_ia32cap=" + geodeMask,
		"OPENSSL_MODULES=" + filepath.Join(root, "usr/lib/i386-linux-gnu/ossl-modules")}
	// Which code path OpenSSL takes: the capability vector it computes
	// from the emulated CPU and the mask.
	va, err := r.run(ctx, env, openssl[0], append(openssl[1:], "version", "-a")...)
	if err != nil {
		return err
	}
	capv, err := parseIA32Cap(va)
	if err != nil {
		return err
	}
	if err := geodeCapCheck(capv); err != nil {
		return err
	}
	version := strings.TrimSpace(strings.SplitN(va, "\n", 2)[0])
	// Go's runtime preempts with signals, which qemu-i386 7.2 delivers on
	// the wrong stack ("bad g in signal handler"); the benchmarks do not
	// need asynchronous preemption.
	goEnv := []string{"GODEBUG=asyncpreemptoff=1"}
	cells, err := r.compare(ctx, r.goSoftSide(bin, qemuUser, goEnv), r.opensslSide(openssl, env))
	if err != nil {
		return err
	}
	r.res.Crypto386 = &cryptoResult{
		Reference: fmt.Sprintf("Debian i386 %s under `%s`, OPENSSL_ia32cap=%s (effective %#x: no SSE, SSE2, SSSE3, AES-NI)",
			version, strings.Join(qemuUser, " "), geodeMask, capv),
		Cells: cells,
	}
	r.res.goal("1b", "386 soft aes-128-cbc vs i386 openssl at 16 bytes", ">= 1.0x", ratioAt(cells, "aes-128-cbc", 16), 1.0)
	r.res.goal("1b", "386 soft aes-128-cbc vs i386 openssl at 8192 bytes", ">= 0.8x", ratioAt(cells, "aes-128-cbc", 8192), 0.8)
	for _, s := range []int{16, 8192} {
		r.res.goal("1b", fmt.Sprintf("386 soft des-ede3-cbc vs i386 openssl at %d bytes", s), ">= 1.0x", ratioAt(cells, "des-ede3-cbc", s), 1.0)
	}
	return nil
}

func ratioAt(cells []cell, cipher string, size int) float64 {
	for _, c := range cells {
		if c.Cipher == cipher && c.Size == size {
			return c.Ratio
		}
	}
	return 0
}

// i386Packages are what Debian's i386 openssl needs to run from a folder.
var i386Packages = []string{"openssl", "libssl3", "libc6"}

// i386OpenSSL downloads Debian's i386 openssl, libssl3 and libc6 with
// apt-get into the ocfw cache, using the private i386 package lists
// internal/debian keeps there (the host's apt state is untouched), and
// unpacks them with dpkg-deb; nothing is installed.
func (r *runner) i386OpenSSL(ctx context.Context) (string, error) {
	cache := os.Getenv("OCFW_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache", "ocfw")
		if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
			cache = filepath.Join(x, "ocfw")
		}
	}
	base := filepath.Join(cache, "debian", "i386")
	debs := filepath.Join(cache, "bench", "openssl-i386")
	root := filepath.Join(debs, "root")
	if _, err := os.Stat(filepath.Join(root, "usr/bin/openssl")); err == nil {
		return root, nil
	}
	for _, d := range []string{filepath.Join(base, "lists", "partial"), filepath.Join(base, "apt-cache", "archives", "partial"), debs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	opts := []string{
		"-oAPT::Architecture=i386", "-oAPT::Architectures::=i386",
		"-oDir::State::Lists=" + filepath.Join(base, "lists"),
		"-oDir::Cache=" + filepath.Join(base, "apt-cache"),
		"-oDir::State::status=/dev/null", "-oDebug::NoLocking=1", "-oAcquire::Languages=none",
	}
	if os.Geteuid() == 0 {
		opts = append(opts, "-oAPT::Sandbox::User=root")
	}
	if m, _ := filepath.Glob(filepath.Join(base, "lists", "*_Packages*")); len(m) == 0 {
		r.logf("apt-get update (i386, private lists)")
		if _, err := r.run(ctx, nil, "apt-get", append(opts, "update")...); err != nil {
			return "", err
		}
	}
	var pkgs []string
	for _, p := range i386Packages {
		pkgs = append(pkgs, p+":i386")
	}
	r.logf("apt-get download %s", strings.Join(pkgs, " "))
	if _, err := r.runIn(ctx, debs, nil, "apt-get", append(append(opts, "download"), pkgs...)...); err != nil {
		return "", err
	}
	tmpRoot, err := os.MkdirTemp(debs, ".root-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmpRoot)
	got, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	sort.Strings(got)
	if len(got) < len(i386Packages) {
		return "", fmt.Errorf("apt-get download left %d .deb files in %s, want %d", len(got), debs, len(i386Packages))
	}
	for _, d := range got {
		if _, err := r.run(ctx, nil, "dpkg-deb", "-x", d, tmpRoot); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmpRoot, root); err != nil {
		return "", err
	}
	return root, nil
}
