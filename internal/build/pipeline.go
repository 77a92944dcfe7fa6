// Package pipeline is the one way a firmware image is built: the plan's
// kernel (kernel.Load), the initramfs with the Go userland
// (rootfs.Build) and the image for the board's boot method
// (firmware.Build). `ocfw build`, `ocfw try` and the benchmarks all call
// Build, so what is measured is what users get.
package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocfw/ocfw/kernel"
	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/kbuild"
	"github.com/ocfw/ocfw/internal/lab/testengine"
	"github.com/ocfw/ocfw/internal/progress"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/rootfs"
)

// Options say what to build from and where to put it.
type Options struct {
	// Output is the image path; sidecars go beside it. Made absolute
	// before the userland build, which changes directories.
	Output string
	// Kernel is a --kernel spec (kernel.Load); "" means the board's
	// Debian package from the cache.
	Kernel string
	// Initramfs, when set, is a ready compressed initramfs used instead of
	// building one.
	Initramfs string
	// Boot are the boot options written into the initramfs.
	Boot plan.Options
	// Site is the router's site config baked into the image; nil: the
	// firmware does not route.
	Site *site.Site
	// FirmwareFiles go into the initramfs's /lib/firmware (NPE microcode).
	FirmwareFiles []string
	// SizeMiB and CardMB override the board's image and card sizes.
	SizeMiB, CardMB int
	SourceDateEpoch int64
	// WorkDir is where the initramfs is assembled; "" means a temporary
	// directory beside Output, removed afterwards.
	WorkDir string
	// Tool names the builder in the manifest ("" means ocfw and its
	// version).
	Tool string
	// Log gets one line per step; nil is quiet.
	Log func(format string, args ...any)
	// NoCache builds the Go userland even when the userland cache holds
	// it, and leaves the cache alone (rootfs.Options.NoCache).
	NoCache bool
	// Progress, when set, gets a line every 10 s while a step runs (the
	// userland build takes a minute or more): the step and its time so
	// far. Give it a terminal only (progress.Terminal).
	Progress io.Writer
}

// Step is one stage of a build and how long it took.
type Step struct {
	Name string // "kernel", "initramfs", "image"
	Took time.Duration
}

// Result is what a build made.
type Result struct {
	Output   string // absolute image path
	Manifest *firmware.Manifest
	Kernel   *kernel.Kernel
	// Rootfs is the initramfs build, nil when Options.Initramfs was given.
	Rootfs *rootfs.Result
	Steps  []Step
}

// Build builds the image for pl. Problems that need no build — missing
// host tools, an image that does not fit the card (--size, --card-mb), an
// unreadable kernel — come before the slow userland build.
func Build(ctx context.Context, pl *plan.Plan, opts Options) (*Result, error) {
	if opts.Output == "" {
		return nil, errors.New("pipeline: no output file")
	}
	out, err := filepath.Abs(opts.Output)
	if err != nil {
		return nil, err
	}
	if err := firmware.CheckTools(pl.Boot); err != nil {
		return nil, err
	}
	if opts.Initramfs != "" && opts.Site != nil {
		return nil, &InitramfsGivenError{Input: InputSite}
	}
	if opts.Initramfs != "" && len(opts.FirmwareFiles) > 0 {
		return nil, &InitramfsGivenError{Input: InputFirmwareFiles}
	}
	if opts.Initramfs != "" && testEngine(pl) {
		return nil, &InitramfsGivenError{Input: InputTestEngine}
	}
	// What the manifest says about the source tree, read before this
	// build puts its temporary files anywhere (they would count as
	// uncommitted changes in a checkout).
	firmware.Builder()
	imgOpts := firmware.ImageOptions{Output: out, SizeMiB: opts.SizeMiB, CardMB: opts.CardMB,
		SourceDateEpoch: opts.SourceDateEpoch, Tool: opts.Tool, Log: opts.Log}
	if err := firmware.CheckLayout(pl, imgOpts); err != nil {
		return nil, err
	}
	if opts.Initramfs != "" {
		// One built by ocfw names its board: refuse another board's. One
		// without a plan is the user's own, used as given.
		if ip, err := firmware.InitramfsPlan(opts.Initramfs); err == nil && ip.Board != pl.Board {
			return nil, firmware.CheckInitramfsBoard(opts.Initramfs, pl.Board)
		} else if err != nil && opts.Log != nil {
			opts.Log("initramfs %s: %v: used as given", opts.Initramfs, err)
		}
	}
	// A new output directory is made, and removed again if the build
	// fails.
	undo, err := firmware.MakeOutputDir(out)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			undo()
		}
	}()
	res := &Result{Output: out}
	step := func(name string, t0 time.Time) { res.Steps = append(res.Steps, Step{Name: name, Took: time.Since(t0)}) }

	t0 := time.Now()
	stop := progress.Start(opts.Progress, "reading the kernel")
	k, err := kernel.Load(ctx, pl, opts.Kernel, "")
	stop()
	if err != nil {
		return nil, err
	}
	res.Kernel = k
	step("kernel", t0)

	// The test engine's module is in no kernel package: built here for
	// this kernel, before the slow userland build, and only when the plan
	// names it (--card testaes).
	var extra []string
	if testEngine(pl) {
		t0 = time.Now()
		stop := progress.Start(opts.Progress, "building the test engine's kernel module")
		ko, err := buildTestEngine(ctx, pl, k, opts.Log)
		stop()
		if err != nil {
			return nil, err
		}
		extra = append(extra, ko)
		step("test engine", t0)
	}

	// /dev/crypto (cryptodev-linux) for a plan that loads it: built
	// for Debian's kernel; an image without it still boots, and its boot
	// report says /dev/crypto is absent.
	if opts.Initramfs == "" && plannedModule(pl, catalog.DevCryptoModule) {
		t0 = time.Now()
		stop := progress.Start(opts.Progress, "building cryptodev.ko (/dev/crypto)")
		ko, err := buildDevCrypto(ctx, pl, k, opts.Log)
		stop()
		if err != nil {
			return nil, err
		}
		if ko != "" {
			extra = append(extra, ko)
		}
		step("cryptodev", t0)
	}

	in := firmware.Input{Kernel: k.Image, KernelVersion: k.Version, Initramfs: opts.Initramfs, DTB: k.DTB, Inputs: map[string]string{}}
	if opts.Initramfs == "" {
		t0 = time.Now()
		work := opts.WorkDir
		if work == "" {
			work, err = os.MkdirTemp(filepath.Dir(out), ".ocfw-rootfs-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(work)
		}
		stop := progress.Start(opts.Progress, fmt.Sprintf("building the Go userland and initramfs (%s)", goTarget(pl.Go)))
		r, err := rootfs.Build(ctx, pl, rootfs.Options{Kernel: k, WorkDir: work, SourceDateEpoch: opts.SourceDateEpoch,
			Boot: opts.Boot, Site: opts.Site, FirmwareFiles: opts.FirmwareFiles, ExtraModules: extra, Log: opts.Log, NoCache: opts.NoCache})
		stop()
		if err != nil {
			return nil, err
		}
		res.Rootfs = r
		in.Initramfs = r.Initramfs
		for name, sum := range r.Inputs {
			in.Inputs[name] = sum
		}
		step("initramfs", t0)
	}
	if k.SHA256 != "" {
		in.Inputs["kernel-source"] = k.SHA256
	}

	t0 = time.Now()
	stop = progress.Start(opts.Progress, "laying out the image")
	m, err := firmware.Build(ctx, pl, in, imgOpts)
	stop()
	if err != nil {
		return nil, err
	}
	res.Manifest = m
	step("image", t0)
	ok = true
	return res, nil
}

// testEngine reports whether the plan names the test engine (--card
// testaes): the only way its module gets into an image.
func testEngine(pl *plan.Plan) bool {
	for _, e := range pl.Engines {
		if e.ID == catalog.TestAES {
			return true
		}
	}
	return false
}

// buildTestEngine builds the test module for the plan's Debian kernel
// package and checks it is the kernel this image boots.
func buildTestEngine(ctx context.Context, pl *plan.Plan, k *kernel.Kernel, logf func(string, ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	logf("building the test engine's module %s for kernel %s", testengine.Module, k.Version)
	m, err := testengine.Build(ctx, testengine.Options{KernelPackage: pl.Kernel.Package, Arch: pl.Kernel.Arch, Log: logf})
	if err != nil {
		return "", &TestEngineError{Err: fmt.Errorf("building its kernel module %s: %w", testengine.Module, err)}
	}
	if m.KernelRelease != k.Version {
		return "", &TestEngineError{Built: m.KernelRelease, Boots: k.Version}
	}
	return m.Path, nil
}

// plannedModule reports whether the plan loads the module.
func plannedModule(pl *plan.Plan, name string) bool {
	for _, m := range pl.Modules {
		if m.Name == name {
			return true
		}
	}
	return false
}

// buildDevCrypto builds cryptodev.ko for the plan's Debian kernel
// package, or says why the image goes without it: no make or gcc-12, no
// source (no network for the download), another kernel (--kernel) than
// the Debian package it is built for. "" with a nil error is such an
// image. A build that fails for any other reason fails the image.
func buildDevCrypto(ctx context.Context, pl *plan.Plan, k *kernel.Kernel, logf func(string, ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	without := func(why string, args ...any) (string, error) {
		logf("no /dev/crypto in this image: "+why, args...)
		return "", nil
	}
	if pl.Kernel.Source != plan.KernelDebian {
		return without("the board's kernel is not a Debian package ocfw builds cryptodev.ko for")
	}
	m, err := kbuild.Cryptodev(ctx, kbuild.CryptodevOptions{Options: kbuild.Options{KernelPackage: pl.Kernel.Package, Arch: pl.Kernel.Arch, Log: logf}})
	switch {
	case errors.Is(err, kbuild.ErrNoTools), errors.Is(err, kbuild.ErrNoSource), errors.Is(err, kbuild.ErrNoKernel):
		return without("%v", err)
	case err != nil:
		return "", fmt.Errorf("building cryptodev.ko (/dev/crypto): %w", err)
	case m.Release != k.Version:
		return without("cryptodev.ko is built for Debian's kernel %s, but this image boots kernel %s", m.Release, k.Version)
	}
	return m.Path, nil
}

// goTarget is what sets the Go target apart: GOARCH and GO386 or GOARM.
func goTarget(g plan.GoTarget) string {
	var parts []string
	for _, e := range g.Env() {
		if !strings.HasPrefix(e, "GOOS=") && !strings.HasPrefix(e, "CGO_ENABLED=") {
			parts = append(parts, e)
		}
	}
	return strings.Join(parts, " ")
}

// String says in one line what was built.
func (r *Result) String() string {
	m := r.Manifest
	return fmt.Sprintf("%s  %s (%s, %d bytes; %d MiB mapped)", m.Image.SHA256, r.Output, m.Board, m.Image.Size, m.BlockMap.Mapped/(1<<20))
}
