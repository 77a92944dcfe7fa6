package main

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/u-root/u-root/pkg/cpio"
	"github.com/ulikunitz/xz"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/build"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/rootfs"
)

// benchEpoch fixes file times so builds are comparable (and reproducible).
const benchEpoch = 1700000000

// imageBuild is what one firmware build took and made (the "image" child
// mode prints it as JSON).
type imageBuild struct {
	Board     string        `json:"board"`
	KernelS   float64       `json:"kernel_s"`   // LoadKernel (cached package)
	UserlandS float64       `json:"userland_s"` // mkuimage: go build of the busybox userland, its cpio
	AssembleS float64       `json:"assemble_s"` // rest of rootfs.Build: modules, plan, merge, compress
	ImageS    float64       `json:"image_s"`    // firmware.Build: partitions, FAT, bootloader, manifest
	TotalS    float64       `json:"total_s"`
	Raw       int64         `json:"initramfs_raw"`
	Packed    int64         `json:"initramfs"`
	Image     int64         `json:"image"`
	ImagePath string        `json:"image_path"`
	Kernel    string        `json:"kernel_image"`
	KernelArg string        `json:"kernel_arg"`
	Parts     []rootfs.Part `json:"parts"`
}

// imageChild is `bench image BOARD DIR`: one `ocfw build` worth of work
// (build.Build, which the build command calls) in a process of its own,
// so the parent can give it an empty Go build cache.
func imageChild(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: bench image BOARD DIR")
	}
	board, dir := args[0], args[1]
	ctx := context.Background()
	cat, err := boards.Embedded()
	if err != nil {
		return err
	}
	pl, err := cat.Resolve(boards.Request{Board: board})
	if err != nil {
		return err
	}
	if pl.Kernel.Package == "" {
		return fmt.Errorf("board %s has no Debian kernel package: %s", board, pl.Kernel.Note)
	}
	deb, err := debian.CachedKernel(pl.Kernel.Package, pl.Kernel.Arch, "")
	if err != nil {
		return fmt.Errorf("%w (ocfw kernel fetch --board %s)", err, board)
	}
	// rootfs.Build says nothing once mkuimage is done; its busybox cpio
	// (uroot.cpio in the build's temporary directory) appearing marks the
	// end of Go compilation.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	done := make(chan struct{})
	userland := make(chan time.Time, 1)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if m, _ := filepath.Glob(filepath.Join(dir, ".build-*", "uroot.cpio")); len(m) > 0 {
				userland <- time.Now()
				return
			}
		}
	}()
	img := filepath.Join(dir, board+".img")
	t0 := time.Now()
	b, err := build.Build(ctx, pl, build.Options{Output: img, Kernel: deb, WorkDir: dir, SourceDateEpoch: benchEpoch, Tool: "ocfw bench", NoCache: true})
	close(done)
	if err != nil {
		return err
	}
	t3 := time.Now()
	var tu time.Time
	select {
	case tu = <-userland:
	default:
		return fmt.Errorf("did not see mkuimage's uroot.cpio in %s: cannot split Go compilation from assembly", dir)
	}
	took := map[string]time.Duration{}
	for _, s := range b.Steps {
		took[s.Name] = s.Took
	}
	// The modules built before the userland (cryptodev.ko, the test
	// engine's) count with the kernel step, not the userland's.
	t1 := t0.Add(took["kernel"] + took["test engine"] + took["cryptodev"])
	t2 := t1.Add(took["initramfs"])
	k, r := b.Kernel, b.Rootfs
	fi, err := os.Stat(img)
	if err != nil {
		return err
	}
	res := imageBuild{Board: board, KernelS: t1.Sub(t0).Seconds(), UserlandS: tu.Sub(t1).Seconds(),
		AssembleS: t2.Sub(tu).Seconds(), ImageS: t3.Sub(t2).Seconds(), TotalS: t3.Sub(t0).Seconds(),
		Raw: r.RawSize, Packed: r.Size, Image: fi.Size(), ImagePath: img, Kernel: k.Image,
		KernelArg: pl.Console.KernelArg, Parts: r.Parts}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// buildResult is items 4 and 5.
type buildResult struct {
	Board        string       `json:"board"`
	Route        string       `json:"route"` // what ran as "ocfw build"
	ColdOcfw     *imageBuild  `json:"cold_ocfw,omitempty"`
	WarmOcfw     *imageBuild  `json:"warm_ocfw"`
	WarmOcfwRuns []float64    `json:"warm_ocfw_runs"`
	ColdURoot    float64      `json:"cold_uroot_s,omitempty"`
	WarmURoot    float64      `json:"warm_uroot_s"`
	WarmURootRun []float64    `json:"warm_uroot_runs"`
	URootRaw     int64        `json:"uroot_raw"`
	URootCommand string       `json:"uroot_command"`
	Symbols      []pkgSize    `json:"biggest_packages"`
	BBSize       int64        `json:"bb_unstripped"`
	NSLU2        *nslu2Result `json:"nslu2,omitempty"`
}

type pkgSize struct {
	Package string `json:"package"`
	Bytes   int64  `json:"bytes"`
}

type nslu2Result struct {
	Raw      int64  `json:"raw"`
	Packed   int64  `json:"xz"`
	BudgetKB int    `json:"budget_kb"`
	Ramdisk  int64  `json:"ramdisk_partition"`
	Note     string `json:"note"`
}

// buildBoard is the board builds are measured for: the ALIX, whose
// Debian kernel is cached and whose image boots in QEMU.
const buildBoard = "alix2d13"

// warmBuilds bounds the warm build pairs (ocfw, u-root), the best counts.
const warmBuilds = 2

// runBuild is items 4 and 5: the firmware build cold (empty Go build
// cache) and warm against u-root's own `u-root` command building the same
// commands for the same target, and what the results weigh.
func runBuild(ctx context.Context, r *runner) error {
	child := filepath.Join(r.tmp, "bench")
	if _, err := r.run(ctx, nil, "go", "build", "-o", child, "./bench"); err != nil {
		return err
	}
	uroot := filepath.Join(r.tmp, "u-root")
	if _, err := r.run(ctx, nil, "go", "build", "-o", uroot, "github.com/u-root/u-root"); err != nil {
		return err
	}
	cat, err := boards.Embedded()
	if err != nil {
		return err
	}
	pl, err := cat.Resolve(boards.Request{Board: buildBoard})
	if err != nil {
		return err
	}
	res := &buildResult{Board: buildBoard, Route: "build.Build (what `ocfw build` calls), in a child process"}
	ocfwCache, urootCache := filepath.Join(r.tmp, "gocache-ocfw"), filepath.Join(r.tmp, "gocache-uroot")
	if bin := r.ocfwCommand(ctx); bin != "" {
		res.Route = "`ocfw build --board " + buildBoard + " -o FILE` (cmd/ocfw), steps split by watching its work directory"
		ocfwBuildCmd := func(name string) (*imageBuild, error) {
			return r.timeOcfwBuild(ctx, bin, buildBoard, filepath.Join(r.tmp, name), []string{"GOCACHE=" + ocfwCache})
		}
		return r.measureBuilds(ctx, res, pl, cat, uroot, ocfwCache, urootCache, ocfwBuildCmd)
	}
	ocfwBuild := func(name string) (*imageBuild, error) {
		out, err := r.run(ctx, []string{"GOCACHE=" + ocfwCache}, child, "image", buildBoard, filepath.Join(r.tmp, name))
		if err != nil {
			return nil, err
		}
		var b imageBuild
		if err := json.Unmarshal([]byte(lastLine(out)), &b); err != nil {
			return nil, fmt.Errorf("bench image output: %v: %s", err, tail(out, 300))
		}
		return &b, nil
	}
	return r.measureBuilds(ctx, res, pl, cat, uroot, ocfwCache, urootCache, ocfwBuild)
}

// measureBuilds times cold and warm builds with ocfwBuild against the
// u-root command and fills in the sizes.
func (r *runner) measureBuilds(ctx context.Context, res *buildResult, pl *plan.Plan, cat *boards.Catalog, uroot, ocfwCache, urootCache string,
	ocfwBuild func(name string) (*imageBuild, error)) error {
	var err error
	urootArgs := func(out string, extra ...string) []string {
		a := append([]string{"-o", out, "-build", "bb", "-initcmd", "init",
			"-uinitcmd", "ocf boot", "-defaultsh", "ocfsh", "-skip-ldd", "-go-enable-inlining"}, extra...)
		return append(a, rootfs.Commands...)
	}
	goEnv := func(cache string, t plan.GoTarget) []string {
		e := append([]string{"GOCACHE=" + cache, "CGO_ENABLED=0", "GOFLAGS="}, t.Env()...)
		return e
	}
	urootBuild := func(out string, extra ...string) (float64, error) {
		t0 := time.Now()
		if _, err := r.run(ctx, goEnv(urootCache, pl.Go), uroot, urootArgs(out, extra...)...); err != nil {
			return 0, err
		}
		return time.Since(t0).Seconds(), nil
	}
	res.URootCommand = strings.Join(pl.Go.Env(), " ") + ` u-root -o OUT.cpio -build bb -initcmd init -uinitcmd "ocf boot" -defaultsh ocfsh -skip-ldd -go-enable-inlining` +
		" <the " + strconv.Itoa(len(rootfs.Commands)) + " commands of kernel.Commands>"
	for _, d := range []string{ocfwCache, urootCache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if r.cold {
		r.logf("cold ocfw build (empty GOCACHE)")
		if res.ColdOcfw, err = ocfwBuild("cold"); err != nil {
			return err
		}
		r.logf("cold u-root build (empty GOCACHE)")
		if res.ColdURoot, err = urootBuild(filepath.Join(r.tmp, "uroot-cold.cpio")); err != nil {
			return err
		}
	} else {
		// Warm runs need a filled cache all the same.
		if _, err := ocfwBuild("fill"); err != nil {
			return err
		}
		if _, err := urootBuild(filepath.Join(r.tmp, "uroot-fill.cpio")); err != nil {
			return err
		}
	}
	urootOut := filepath.Join(r.tmp, "uroot.cpio")
	// Warm pairs take about 1.5 minutes here: at most warmBuilds of them.
	for t := 0; t < min(r.trials, warmBuilds); t++ {
		b, err := ocfwBuild(fmt.Sprintf("warm%d", t))
		if err != nil {
			return err
		}
		res.WarmOcfwRuns = append(res.WarmOcfwRuns, b.TotalS)
		if res.WarmOcfw == nil || b.TotalS < res.WarmOcfw.TotalS {
			res.WarmOcfw = b
		}
		s, err := urootBuild(urootOut)
		if err != nil {
			return err
		}
		res.WarmURootRun = append(res.WarmURootRun, s)
	}
	res.WarmURoot = minOf(res.WarmURootRun)
	if fi, err := os.Stat(urootOut); err == nil {
		res.URootRaw = fi.Size()
	}
	// Biggest contributors: the busybox binary unstripped, by package.
	r.logf("unstripped busybox for symbol sizes")
	fat := filepath.Join(r.tmp, "uroot-nostrip.cpio")
	if _, err := urootBuild(fat, "-go-no-strip"); err != nil {
		return err
	}
	if res.Symbols, res.BBSize, err = r.bbSymbols(ctx, fat); err != nil {
		return err
	}
	if res.NSLU2, err = r.nslu2(ctx, cat, uroot); err != nil {
		return err
	}
	r.res.Build = res
	if res.NSLU2 != nil {
		r.res.goalMax("5", "NSLU2 userland initramfs (xz) vs its ramdisk budget", "<= 1.0 of budget", "of budget", float64(res.NSLU2.Packed)/float64(res.NSLU2.BudgetKB*1024), 1)
	}
	return nil
}

func minOf(v []float64) float64 {
	m := 0.0
	for i, x := range v {
		if i == 0 || x < m {
			m = x
		}
	}
	return m
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// bbSymbols extracts bbin/bb from an unstripped u-root archive and sums
// ELF symbol sizes, zero-filled sections left out by package.
func (r *runner) bbSymbols(ctx context.Context, archive string) ([]pkgSize, int64, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(f))
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", archive, err)
	}
	bb := filepath.Join(r.tmp, "bb")
	var size int64
	for _, rec := range recs {
		if rec.Name != "bbin/bb" {
			continue
		}
		out, err := os.Create(bb)
		if err != nil {
			return nil, 0, err
		}
		size, err = io.Copy(out, io.NewSectionReader(rec.ReaderAt, 0, int64(rec.FileSize)))
		out.Close()
		if err != nil {
			return nil, 0, err
		}
	}
	if size == 0 {
		return nil, 0, fmt.Errorf("no bbin/bb in %s", archive)
	}
	ps, err := symbolsByPackage(bb, 12)
	return ps, size, err
}

// symbolsByPackage sums an ELF executable's symbol sizes by Go package
// and returns the n biggest. Only symbols in sections with file contents
// count: zero-filled memory (BSS, and large arrays the linker puts in
// NOBITS sections, e.g. crypto/internal/fips140/drbg.memory) costs no
// flash.
func symbolsByPackage(name string, n int) ([]pkgSize, error) {
	f, err := elf.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s: %w (stripped?)", name, err)
	}
	sums := map[string]int64{}
	for _, s := range syms {
		if s.Size == 0 || int(s.Section) <= 0 || int(s.Section) >= len(f.Sections) {
			continue
		}
		if f.Sections[s.Section].Type == elf.SHT_NOBITS {
			continue
		}
		sums[symbolPackage(s.Name)] += int64(s.Size)
	}
	var res []pkgSize
	for p, s := range sums {
		res = append(res, pkgSize{p, s})
	}
	sort.Slice(res, func(i, j int) bool {
		return res[i].Bytes > res[j].Bytes || res[i].Bytes == res[j].Bytes && res[i].Package < res[j].Package
	})
	if len(res) > n {
		res = res[:n]
	}
	return res, nil
}

// symbolPackage is the package part of a Go symbol name:
// "github.com/u-root/u-root/pkg/ls.(*X).Y" -> "github.com/u-root/u-root/pkg/ls",
// "go:string.*" and other linker symbols -> "(linker: go:string)".
func symbolPackage(sym string) string {
	if strings.HasPrefix(sym, "go:") || strings.HasPrefix(sym, "type:") {
		k, _, _ := strings.Cut(sym, ".")
		return "(" + k + ")"
	}
	slash := strings.LastIndex(sym, "/")
	rest := sym[slash+1:]
	if i := strings.Index(rest, "."); i >= 0 {
		return sym[:slash+1+i]
	}
	return sym
}

// nslu2 builds the NSLU2's userland (GOARCH=arm GOARM=5) with the u-root
// command and the same commands, compresses it as rootfs does, and
// compares it with the ramdisk budget. Debian ships no IXP4xx kernel, so
// the kernel's modules are not in it.
func (r *runner) nslu2(ctx context.Context, cat *boards.Catalog, uroot string) (*nslu2Result, error) {
	pl, err := cat.Resolve(boards.Request{Board: "nslu2"})
	if err != nil {
		return nil, err
	}
	r.logf("nslu2 userland (arm)")
	raw := filepath.Join(r.tmp, "nslu2.cpio")
	env := append([]string{"CGO_ENABLED=0", "GOFLAGS="}, pl.Go.Env()...)
	args := []string{"-o", raw, "-build", "bb", "-initcmd", "init",
		"-uinitcmd", "ocf boot", "-defaultsh", "ocfsh", "-skip-ldd", "-go-enable-inlining"}
	if _, err := r.run(ctx, env, uroot, append(args, rootfs.Commands...)...); err != nil {
		return nil, err
	}
	packed, err := xzSize(raw)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(raw)
	if err != nil {
		return nil, err
	}
	res := &nslu2Result{Raw: fi.Size(), Packed: packed, BudgetKB: pl.Image.InitramfsBudgetKB,
		Note: "userland only (u-root command, same commands, GOARCH=arm GOARM=5, xz as rootfs compresses); the kernel's modules are not included: Debian ships no IXP4xx kernel"}
	for _, p := range pl.Image.Flash {
		if p.Name == "Ramdisk" {
			res.Ramdisk = int64(p.Size)
		}
	}
	return res, nil
}

// xzSize compresses a file the way rootfs does (xz, CRC32, 8 MiB
// dictionary) and returns the compressed size.
func xzSize(name string) (int64, error) {
	in, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	var c countWriter
	bw := bufio.NewWriter(&c)
	w, err := xz.WriterConfig{CheckSum: xz.CRC32, DictCap: 8 << 20}.NewWriter(bw)
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(w, in); err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	return c.n, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func buildTable(b *strings.Builder, x *buildResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("### 4. Build cost (%s)\n\n`ocfw build` route: %s. Reference: u-root's own command, `%s`. Cold: empty GOCACHE (module cache filled); warm: nothing changed, best of the runs.\n\n", x.Board, x.Route, x.URootCommand)
	p("| | ocfw build | u-root command | ratio |\n|---|---|---|---|\n")
	if x.ColdOcfw != nil {
		p("| cold | %.1f s | %.1f s | %.2f |\n", x.ColdOcfw.TotalS, x.ColdURoot, x.ColdOcfw.TotalS/x.ColdURoot)
	}
	w := x.WarmOcfw
	p("| warm | %.1f s | %.1f s | %.2f |\n\n", w.TotalS, x.WarmURoot, w.TotalS/x.WarmURoot)
	p("Warm ocfw build by step: kernel package %.2f s, Go userland (mkuimage) %.1f s, initramfs assembly (modules, merge, xz) %.1f s, image layout %.2f s: **%.1f s excluding Go compilation**.", w.KernelS, w.UserlandS, w.AssembleS, w.ImageS, w.KernelS+w.AssembleS+w.ImageS)
	if c := x.ColdOcfw; c != nil {
		p(" Cold: userland %.1f s, assembly %.1f s, image %.2f s.", c.UserlandS, c.AssembleS, c.ImageS)
	}
	p("\n\n### 5. Sizes\n\n| what | size |\n|---|---|\n")
	p("| %s initramfs, raw cpio | %s |\n| %s initramfs, xz | %s |\n| %s CF image | %s |\n", x.Board, mib(w.Raw), x.Board, mib(w.Packed), x.Board, mib(w.Image))
	p("| u-root command's cpio (same commands, no modules) | %s |\n", mib(x.URootRaw))
	if n := x.NSLU2; n != nil {
		p("| NSLU2 userland, raw / xz | %s / %s |\n| NSLU2 ramdisk budget (partition %s) | %s: userland uses %.0f%% |\n", mib(n.Raw), mib(n.Packed), mib(n.Ramdisk), mib(int64(n.BudgetKB)*1024), 100*float64(n.Packed)/float64(n.BudgetKB*1024))
	}
	p("\nBiggest files in the %s initramfs:", x.Board)
	for i, pt := range w.Parts {
		if i == 6 {
			break
		}
		p(" %s %s;", pt.Name, mib(pt.Size))
	}
	p("\n\nBiggest Go packages in the busybox binary (unstripped %s, ELF symbol sizes, zero-filled sections left out):", mib(x.BBSize))
	for _, s := range x.Symbols {
		p(" %s %.0f KiB;", s.Package, float64(s.Bytes)/1024)
	}
	p("\n\n")
	if x.NSLU2 != nil {
		p("NSLU2: %s.\n\n", x.NSLU2.Note)
	}
}
