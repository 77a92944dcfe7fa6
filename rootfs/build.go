// Package rootfs turns a Plan and its kernel into what the board runs:
// an initramfs whose whole userland is Go — u-root's init, a shell, a few
// core commands and the on-board `ocf` command as the boot sequence —
// built for the board's CPU with u-root's mkuimage.
package rootfs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ocfw/ocfw/kernel"
	"github.com/ocfw/ocfw/site"

	"github.com/u-root/mkuimage/uimage"
	"github.com/u-root/u-root/pkg/cpio"
	"github.com/u-root/uio/llog"
	"github.com/ulikunitz/xz"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/plan"
)

// Options say what goes into the initramfs.
type Options struct {
	Kernel  *kernel.Kernel // from kernel.Load; its modules go in
	WorkDir string         // where the initramfs is written; "" means a new temporary directory
	// SourceDateEpoch is every file's time in the archive; 0 means
	// $SOURCE_DATE_EPOCH, else 0 (1970).
	SourceDateEpoch int64
	Boot            plan.Options // written into the initramfs as plan.OptionsFile
	// Site, when set, is the router's site config, written into the
	// initramfs as site.File (JSON).
	Site *site.Site
	// FirmwareFiles are put into /lib/firmware under their base names:
	// microcode the drivers load (the IXP4xx NPE-B and NPE-C), which
	// ocfw cannot ship.
	FirmwareFiles []string
	// ExtraModules are kernel modules built outside the kernel package
	// (.ko files: the test engine's ocfw_testaes), put under
	// lib/modules/VERSION/extra/ and into modules.dep, so the boot loads
	// them by name like the kernel's own. Each must be a module the plan
	// names and built for this kernel (its vermagic).
	ExtraModules []string
	// SourceDir is a directory inside the ocfw module (cmd/ocf is built
	// from source); "" means the current directory or a parent of it.
	SourceDir string
	// Log, when set, gets progress lines.
	Log func(format string, args ...any)
	// NoCache builds the Go userland even when the userland cache
	// (package usercache) holds it, and does not store it there.
	NoCache bool
}

// Result is a built initramfs.
type Result struct {
	Initramfs string // path, compressed per the plan
	RawSize   int64  // the cpio archive
	Size      int64  // compressed
	Modules   []string
	Kernel    *kernel.Kernel
	Inputs    map[string]string // name -> sha256
	// Parts are the archive's biggest files, largest first.
	Parts []Part
	Took  time.Duration
	// UserlandKey is the userland's cache key ("" when not computed:
	// NoCache, or the cache could not be used); UserlandCached says the
	// userland came from the cache rather than a build.
	UserlandKey    string
	UserlandCached bool
}

// Part is one file of the archive and its size.
type Part struct {
	Name string
	Size int64
}

// Commands are the u-root commands in the firmware's userland, all in one
// busybox binary (shared code is paid once). Each earns its place on a
// router console:
//
//	init      PID 1: mounts, runs `ocf boot` as uinit, then the shell
//	ocfsh     the shell (cmd/ocfsh: gosh's interpreter with a line editor
//	          and history that work on a serial console and over SSH)
//	ls, cat   read reports and /proc, /sys
//	cp, rm, mkdir  manage files on the data partition
//	mount, umount, sync  the data partition by hand, and flush before power-off
//	dmesg     why a module or disk failed
//	poweroff  scripted runs end with it; shutdown: `shutdown reboot`
//	ip, ps, date  look at the router from its console or SSH
//	ping      ocfw's (cmd/ping): u-root's takes any ICMP packet for the
//	          reply and fails on its own request ("got seq 1; want 2")
//	grep, head, tail, df, free, uname, hostname  what an admin reaches
//	          for first (the shell turns head -N into head -n N)
//
// No DHCP client command: the router's own (package router/dhcp) runs in
// the daemon.
var Commands = []string{
	"github.com/u-root/u-root/cmds/core/init",
	"github.com/ocfw/ocfw/cmd/ocfsh",
	"github.com/u-root/u-root/cmds/core/ls",
	"github.com/u-root/u-root/cmds/core/cat",
	"github.com/u-root/u-root/cmds/core/cp",
	"github.com/u-root/u-root/cmds/core/rm",
	"github.com/u-root/u-root/cmds/core/mkdir",
	"github.com/u-root/u-root/cmds/core/mount",
	"github.com/u-root/u-root/cmds/core/umount",
	"github.com/u-root/u-root/cmds/core/sync",
	"github.com/u-root/u-root/cmds/core/dmesg",
	"github.com/u-root/u-root/cmds/core/poweroff",
	"github.com/u-root/u-root/cmds/core/shutdown",
	// For a router's console and SSH sessions: links and routes, the
	// processes, the clock, reachability.
	"github.com/u-root/u-root/cmds/core/ip",
	"github.com/u-root/u-root/cmds/core/ps",
	"github.com/u-root/u-root/cmds/core/date",
	"github.com/ocfw/ocfw/cmd/ping",
	"github.com/u-root/u-root/cmds/core/grep",
	"github.com/u-root/u-root/cmds/core/head",
	"github.com/u-root/u-root/cmds/core/tail",
	"github.com/u-root/u-root/cmds/core/df",
	"github.com/u-root/u-root/cmds/core/free",
	"github.com/u-root/u-root/cmds/core/uname",
	"github.com/u-root/u-root/cmds/core/hostname",
	"github.com/ocfw/ocfw/cmd/ocf",
}

// StorageModules are what the boot sequence needs to reach a data
// partition: disk controllers (QEMU's PIIX, the Geode boards' CS5536,
// IXP4xx CF, USB sticks) and SCSI disks. No file system: the board never
// mounts the data partition, it writes inside preallocated files through
// the block device (package store). They are optional: the ones the
// kernel lacks are left out (or are built in).
func StorageModules(p *plan.Plan) []string {
	mods := []string{"ata_piix", "pata_cs5536", "pata_amd", "pata_ixp4xx_cf"}
	if p.Storage.Kind == "flash" && !p.Storage.CF {
		mods = append(mods, "ehci_pci", "ohci_pci", "usb_storage")
	}
	return append(mods, "sd_mod")
}

// buildMu serialises userland builds: each is a whole `go build -a`, and
// two at once only compete for the same CPUs.
var buildMu sync.Mutex

// Build makes the initramfs for plan with the kernel's modules: the
// files the boot sequence reads, the modules and microcode, the Go
// userland (from the cache when it can), packed as the plan says.
func Build(ctx context.Context, pl *plan.Plan, opts Options) (*Result, error) {
	start := time.Now()
	if pl == nil || opts.Kernel == nil {
		return nil, errors.New("rootfs: Build needs a plan and a kernel (kernel.Load)")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := opts.Kernel
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	epoch, err := sourceDateEpoch(opts.SourceDateEpoch)
	if err != nil {
		return nil, err
	}
	if err := opts.Boot.CheckDurations(); err != nil {
		return nil, err
	}
	src, err := sourceDir(opts.SourceDir)
	if err != nil {
		return nil, err
	}
	work, tmp, err := workDirs(opts.WorkDir)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	extra, inputs, err := contractRecords(pl, opts)
	if err != nil {
		return nil, err
	}
	inputs["kernel"] = k.SHA256
	mods, modRecs, storage, extraSums, err := moduleRecords(pl, k, opts.ExtraModules)
	if err != nil {
		return nil, err
	}
	for name, h := range extraSums {
		inputs["module/"+name] = h
	}
	extra = append(extra, modRecs...)
	extra = append(extra, cpio.StaticFile(strings.TrimPrefix(plan.StorageModulesFile, "/"), strings.Join(storage, "\n")+"\n", 0o644))

	// The Go userland.
	logf("building the Go userland for %s", strings.Join(pl.Go.Env(), " "))
	base := filepath.Join(tmp, "uroot.cpio")
	ukey, cached, err := userland(ctx, pl.Go, src, tmp, base, opts.NoCache, logf)
	if err != nil {
		return nil, err
	}

	raw := filepath.Join(tmp, "initramfs.cpio")
	parts, split, err := assemble(base, raw, extra, epoch)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rawInfo, err := os.Stat(raw)
	if err != nil {
		return nil, err
	}
	packed, size, err := pack(ctx, pl, raw, split, tmp, opts.NoCache, logf)
	if err != nil {
		return nil, err
	}
	if b := pl.Image.InitramfsBudgetKB; b > 0 && size > int64(b)*1024 {
		return nil, &BudgetError{Board: pl.Board, Budget: int64(b) * 1024, Size: size, Raw: rawInfo.Size(), Compression: pl.Image.Compression, Parts: parts}
	}
	out := filepath.Join(work, filepath.Base(packed))
	if err := os.Rename(packed, out); err != nil {
		return nil, err
	}
	return &Result{Initramfs: out, RawSize: rawInfo.Size(), Size: size, Modules: mods, Kernel: k, Inputs: inputs,
		Parts: parts, Took: time.Since(start), UserlandKey: ukey, UserlandCached: cached}, nil
}

// sourceDateEpoch is the build's timestamp: the option, else
// $SOURCE_DATE_EPOCH, else 0.
func sourceDateEpoch(epoch int64) (int64, error) {
	if epoch != 0 {
		return epoch, nil
	}
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", s)
	}
	return v, nil
}

// workDirs makes the output directory (a new temporary one when dir is
// "") and a scratch directory inside it that the caller removes.
func workDirs(dir string) (work, tmp string, err error) {
	work = dir
	if work == "" {
		if work, err = os.MkdirTemp("", "ocfw-rootfs-"); err != nil {
			return "", "", err
		}
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return "", "", err
	}
	tmp, err = os.MkdirTemp(work, ".build-")
	return work, tmp, err
}

// contractRecords are the files the boot sequence reads (plan, boot
// options, site config) and the microcode files, with the sha256 of each
// for the manifest's inputs.
func contractRecords(pl *plan.Plan, opts Options) ([]cpio.Record, map[string]string, error) {
	planJSON, err := pl.JSON()
	if err != nil {
		return nil, nil, err
	}
	bootJSON, err := json.MarshalIndent(opts.Boot, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	bootJSON = append(bootJSON, '\n')
	recs := []cpio.Record{
		cpio.StaticFile("etc/ocfw/plan.json", string(planJSON), 0o644),
		cpio.StaticFile("etc/ocfw/boot.json", string(bootJSON), 0o644),
	}
	inputs := map[string]string{"plan.json": sum(planJSON), "boot.json": sum(bootJSON)}
	if opts.Boot.TestBreak == plan.TestBreakInitExit {
		// A test image whose init exits at once: u-root's sync in its
		// place (it replaces mkuimage's /init by name in assemble).
		recs = append(recs, cpio.Symlink("init", "bbin/sync"))
	}
	if opts.Site != nil {
		sj, err := opts.Site.JSON()
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, cpio.StaticFile(strings.TrimPrefix(site.File, "/"), string(sj), 0o644))
		inputs["site.json"] = sum(sj)
	}
	seen := map[string]bool{}
	for _, fw := range opts.FirmwareFiles {
		data, err := os.ReadFile(fw)
		if err != nil {
			return nil, nil, &FirmwareFileError{Err: err}
		}
		if len(data) == 0 || len(data) > 4<<20 {
			return nil, nil, &FirmwareFileError{File: fw, Err: fmt.Errorf("%d bytes: want a microcode file of 1 byte to 4 MiB", len(data))}
		}
		name := filepath.Base(fw)
		if seen[name] {
			return nil, nil, &FirmwareFileError{File: fw, Err: fmt.Errorf("a file named %s is given twice", name)}
		}
		seen[name] = true
		inputs["firmware/"+name] = sum(data)
		recs = append(recs, cpio.StaticFile("lib/firmware/"+name, string(data), 0o644))
	}
	return recs, inputs, nil
}

// pack compresses the raw initramfs as the plan says, in tmp, and
// returns the packed file and its size.
func pack(ctx context.Context, pl *plan.Plan, raw string, split int64, tmp string, noCache bool, logf func(string, ...any)) (string, int64, error) {
	name := "initramfs.cpio"
	switch pl.Image.Compression {
	case "xz":
		name += ".xz"
	case "gzip":
		name += ".gz"
	case "", "none":
	default:
		return "", 0, fmt.Errorf("plan %s: unknown initramfs compression %q (want xz, gzip or none)", pl.Board, pl.Image.Compression)
	}
	packed := filepath.Join(tmp, name)
	var err error
	if pl.Image.Compression == "xz" {
		err = compressInitramfsXZ(ctx, raw, split, packed, tmp, noCache, logf)
	} else {
		err = compress(ctx, raw, packed, pl.Image.Compression)
	}
	if err != nil {
		return "", 0, err
	}
	pi, err := os.Stat(packed)
	if err != nil {
		return "", 0, err
	}
	return packed, pi.Size(), nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// BudgetError is an initramfs bigger than the board allows, with its
// biggest parts.
type BudgetError struct {
	Board             string
	Budget, Size, Raw int64
	Compression       string
	Parts             []Part
}

func (e *BudgetError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "initramfs for %s is %d KiB %s-compressed (%d KiB raw), over the board's budget of %d KiB; biggest parts (raw):",
		e.Board, e.Size/1024, e.Compression, e.Raw/1024, e.Budget/1024)
	for i, p := range e.Parts {
		if i == 8 {
			break
		}
		fmt.Fprintf(&b, "\n  %8d KiB  %s", (p.Size+1023)/1024, p.Name)
	}
	return b.String()
}

// sourceDir finds the root of the ocfw module from dir.
func sourceDir(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if modulePath(b) == "github.com/ocfw/ocfw" {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("rootfs: %s is not inside the ocfw source tree: the firmware's Go userland (cmd/ocf, u-root) is compiled from source, so run the build from a checkout of ocfw", abs)
		}
	}
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// buildUserland runs mkuimage for the plan's Go target. When ctx ends it
// stops the compile (busyboxBuilder) and returns once nothing it started
// runs any more.
func buildUserland(ctx context.Context, target plan.GoTarget, src, tmp, out string, logf func(string, ...any)) error {
	buildMu.Lock()
	defer buildMu.Unlock()

	env := userlandEnv(target, src)
	var logBuf bytes.Buffer
	l := llog.New(slog.LevelWarn, func(format string, v ...any) {
		fmt.Fprintf(&logBuf, format+"\n", v...)
	})
	busybox := &busyboxBuilder{ctx: ctx, gotmp: filepath.Join(tmp, "gotmp"), env: goEnv(target)}
	err := uimage.Create(l,
		uimage.WithReplaceEnv(env),
		// gobusybox builds with -gcflags=all=-l by default: no inlining
		// anywhere, including the Go crypto the board runs in software.
		uimage.WithCommands(userlandBuildOpts(), busybox, Commands...),
		uimage.WithInit(userlandInit),
		uimage.WithUinit(userlandUinit[0], userlandUinit[1:]...),
		uimage.WithShell(userlandShell),
		uimage.WithSkipLDD(),
		uimage.WithTempDir(tmp),
		uimage.WithCPIOOutput(out),
	)
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("building the Go userland: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("building the Go userland (%s) with mkuimage: %w\n%s", strings.Join(target.Env(), " "), err, strings.TrimSpace(logBuf.String()))
	}
	return nil
}

// goEnv is what the userland's `go build` gets besides gobusybox's
// GOOS and GOARCH: the target's GOARM and GO386 (empty: the toolchain's
// default), cgo off, and no GOFLAGS, whatever ocfw's own environment
// holds. Passed to the command, not set in the process, so builds and
// tests running at the same time see no change of environment.
// gobusybox's package lookup (`go list`, before the compile) takes the
// process environment as it is and no more variables: what it reads
// there besides its Environ selects files only through GOARM/GO386
// feature tags, which none of the userland's packages use.
func goEnv(target plan.GoTarget) []string {
	return []string{"GOARM=" + target.GOARM, "GO386=" + target.GO386, "GOFLAGS=", "CGO_ENABLED=0"}
}

// extraDir is where modules from outside the kernel package go, as
// depmod's convention has it.
const extraDir = "extra"

// moduleRecords puts the planned and storage modules the kernel has
// (with their dependencies, from modules.dep) under lib/modules/VERSION,
// with a modules.dep and modules.builtin for them; extra module files go
// under extra/.
func moduleRecords(pl *plan.Plan, k *kernel.Kernel, extra []string) (names []string, recs []cpio.Record, storage []string, sums map[string]string, err error) {
	if k.ModulesDir == "" {
		if len(extra) > 0 {
			return nil, nil, nil, nil, fmt.Errorf("kernel %s has no modules directory to add %s to", k.Source, strings.Join(extra, ", "))
		}
		return nil, nil, nil, nil, nil
	}
	idx, err := debian.LoadModuleIndex(k.ModulesDir)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	files := map[string]string{} // slash path in the tree -> file on this host
	sums = map[string]string{}
	for _, f := range extra {
		name := debian.ModuleName(f)
		planned := false
		for _, m := range pl.Modules {
			planned = planned || debian.ModuleName(m.Name) == name
		}
		if !planned {
			return nil, nil, nil, nil, fmt.Errorf("kernel module %s: the plan for %s does not load %s", f, pl.Board, name)
		}
		info, err := debian.Modinfo(f)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		// vermagic starts with the release the module was built for;
		// the kernel refuses any other.
		if vm := strings.Fields(info["vermagic"]); len(vm) == 0 || vm[0] != k.Version {
			return nil, nil, nil, nil, fmt.Errorf("kernel module %s was built for kernel %q, not this image's %s", f, info["vermagic"], k.Version)
		}
		m, err := idx.AddFile(f, extraDir+"/"+name+".ko")
		if err != nil {
			return nil, nil, nil, nil, err
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		files[m.Path] = f
		sums[name+".ko"] = sum(data)
	}
	var want []string
	for _, m := range pl.Modules {
		want = append(want, m.Name)
	}
	for _, m := range StorageModules(pl) {
		if _, ok := idx.Modules[m]; ok || idx.Builtin[m] {
			storage = append(storage, m)
			want = append(want, m)
		}
	}
	// Absent out-of-tree modules are reported at boot, not packed.
	var have []string
	for _, n := range want {
		if _, ok := idx.Modules[debian.ModuleName(n)]; ok || idx.Builtin[debian.ModuleName(n)] {
			have = append(have, n)
		}
	}
	load, builtin, err := idx.Closure(have...)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	root := path.Join("lib/modules", k.Version)
	var dep strings.Builder
	if err := idx.WriteDep(&dep, load); err != nil {
		return nil, nil, nil, nil, err
	}
	recs = append(recs, cpio.StaticFile(path.Join(root, "modules.dep"), dep.String(), 0o644))
	var bl strings.Builder
	for _, b := range builtin {
		fmt.Fprintf(&bl, "kernel/%s.ko\n", b)
	}
	recs = append(recs, cpio.StaticFile(path.Join(root, "modules.builtin"), bl.String(), 0o644))
	for _, m := range load {
		file := filepath.Join(k.ModulesDir, filepath.FromSlash(m.Path))
		if f, ok := files[m.Path]; ok {
			file = f
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		recs = append(recs, cpio.StaticFile(path.Join(root, m.Path), string(data), 0o644))
		names = append(names, m.Name)
	}
	return names, recs, storage, sums, nil
}

// baseRecords are the nodes and directories the kernel and u-root's init
// need before anything is mounted.
func baseRecords() []cpio.Record {
	var recs []cpio.Record
	for _, d := range []string{"bin", "dev", "etc", "lib", "proc", "sys", "run", "tmp", "data", "usr", "usr/lib", "var", "var/log"} {
		mode := uint64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		recs = append(recs, cpio.Directory(d, mode))
	}
	return append(recs,
		cpio.CharDev("dev/console", 0o600, 5, 1),
		cpio.CharDev("dev/tty", 0o666, 5, 0),
		cpio.CharDev("dev/null", 0o666, 1, 3),
		cpio.CharDev("dev/urandom", 0o666, 1, 9),
	)
}

// assemble writes the final archive: mkuimage's records plus the base
// nodes and extra files, sorted by name (parents sort before their
// children), with fixed owners, inode numbers and times. split is the
// length of the archive's leading records that come from mkuimage's
// archive and the base nodes alone (see xzjoin.go).
func assemble(uroot, out string, extra []cpio.Record, epoch int64) (parts []Part, split int64, err error) {
	f, err := os.Open(uroot)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	rr, err := cpio.Newc.NewFileReader(f)
	if err != nil {
		return nil, 0, err
	}
	recs, err := cpio.ReadAllRecords(rr)
	if err != nil {
		return nil, 0, fmt.Errorf("reading mkuimage's archive: %w", err)
	}
	byName := map[string]cpio.Record{}
	fromExtra := map[string]bool{}
	for i, r := range append(append(baseRecords(), recs...), extra...) {
		if i >= len(baseRecords())+len(recs) {
			fromExtra[path.Clean(strings.TrimPrefix(r.Name, "/"))] = true
		}
		name := path.Clean(strings.TrimPrefix(r.Name, "/"))
		if name == "." || name == "" || name == "TRAILER!!!" {
			continue
		}
		r.Name = name
		if old, ok := byName[name]; ok && old.Mode&cpio.S_IFMT == cpio.S_IFDIR && r.Mode&cpio.S_IFMT == cpio.S_IFDIR {
			continue // the first directory record wins (keeps /tmp's mode)
		}
		byName[name] = r
	}
	// Every parent directory gets its own record (with the fixed time),
	// so nothing is left for the writer to invent.
	for n := range byName {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			if _, ok := byName[d]; !ok {
				byName[d] = cpio.Directory(d, 0o755)
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	final := make([]cpio.Record, 0, len(names))
	for _, n := range names {
		r := cpio.MakeReproducible(byName[n])
		r.MTime = uint64(epoch)
		final = append(final, r)
		if r.Mode&cpio.S_IFMT == cpio.S_IFREG {
			parts = append(parts, Part{Name: "/" + n, Size: int64(r.FileSize)})
		}
	}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].Size > parts[j].Size })
	o, err := os.Create(out)
	if err != nil {
		return nil, 0, err
	}
	bw := bufio.NewWriter(o)
	cw := &countingWriter{w: bw}
	w := cpio.Newc.Writer(cw)
	split = -1
	for _, r := range final {
		// Directories the extra files need (etc/ocfw) are not the
		// userland's either.
		if split < 0 && (fromExtra[r.Name] || !fromBase(r.Name, fromExtra)) {
			split = cw.n
		}
		if err := w.WriteRecord(r); err != nil {
			o.Close()
			return nil, 0, fmt.Errorf("writing the initramfs: %s: %w", r.Name, err)
		}
	}
	if split < 0 {
		split = cw.n
	}
	if err := cpio.WriteTrailer(w); err != nil {
		o.Close()
		return nil, 0, err
	}
	if err := bw.Flush(); err != nil {
		o.Close()
		return nil, 0, err
	}
	return parts, split, o.Close()
}

// fromBase says whether name is not a directory made only for an extra
// file: none of the extra files is under it.
func fromBase(name string, fromExtra map[string]bool) bool {
	for e := range fromExtra {
		if strings.HasPrefix(e, name+"/") {
			return false
		}
	}
	return true
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// compress packs raw as the kernel's initramfs decompressors expect: xz
// with CRC32 checks (the kernel's xz decoder has no CRC64 by default),
// gzip without a name or time, or nothing.
func compress(ctx context.Context, raw, out, how string) error {
	f, err := os.Open(raw)
	if err != nil {
		return err
	}
	defer f.Close()
	in := ctxReader{ctx, f}
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(o)
	var w io.WriteCloser
	switch how {
	case "xz":
		w, err = xz.WriterConfig{CheckSum: xz.CRC32, DictCap: 8 << 20}.NewWriter(bw)
	case "gzip":
		w, err = gzip.NewWriterLevel(bw, gzip.BestCompression)
	default:
		w = nopCloser{bw}
	}
	if err != nil {
		o.Close()
		return err
	}
	if _, err := io.Copy(w, in); err != nil {
		o.Close()
		return err
	}
	if err := w.Close(); err != nil {
		o.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

type nopCloser struct{ io.Writer }

// ctxReader fails reads once ctx has ended, so a long compression stops.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (nopCloser) Close() error { return nil }

// FirmwareFileError is a file for /lib/firmware (Options.FirmwareFiles)
// that cannot go there; File is "" when it could not be read (Err names
// it).
type FirmwareFileError struct {
	File string
	Err  error
}

func (e *FirmwareFileError) Error() string {
	return strings.TrimSpace("firmware file "+e.File) + ": " + e.Err.Error()
}

func (e *FirmwareFileError) Unwrap() error { return e.Err }
