package firmware

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/regfile"
)

// Device is what Flash needs to know about a target.
type Device struct {
	Path      string   // as given
	Name      string   // kernel name, e.g. sdb
	Block     bool     // a block device (else a regular file)
	Missing   bool     // nothing at Path yet (a new regular file)
	Partition bool     // a partition, not a whole disk
	Size      int64    // bytes
	Removable bool     // the kernel's removable flag
	Mounts    []string // mount points (and "swap") of it or its partitions
	HoldsRoot bool     // it, or one of its partitions, is mounted at /
	Model     string
}

// DeviceInfo describes flash targets; tests inject their own.
type DeviceInfo interface {
	Describe(path string) (*Device, error)
}

// MaxUnforcedBytes is the largest disk Flash writes without Force: a
// CompactFlash card for these boards is far smaller, a larger disk is
// more likely a user's backup drive.
const MaxUnforcedBytes = 64 << 30

// FlashOptions controls Flash.
type FlashOptions struct {
	Force   bool // allow non-removable disks and disks over 64 GiB
	Yes     bool // do not ask for confirmation
	Confirm func(prompt string) bool
	// Progress gets the progress display; Terminal selects a redrawn
	// bar (bytes, rate, time left) over plain lines.
	Progress io.Writer
	Terminal bool
	Devices  DeviceInfo // nil means the running system's (/sys, /proc)

	afterWrite func(target string) // test hook: between write and verify
}

// ErrVerify marks a target whose contents differ from the manifest.
var ErrVerify = errors.New("verify failed")

// ErrImageChanged marks an image that no longer matches the manifest
// written with it: Flash refuses it before writing anything.
var ErrImageChanged = errors.New("the image changed since it was built")

// Flash writes image to target: only the block map's ranges, then sync,
// then a read-back of those ranges checked against the manifest's sha256.
// It refuses targets that are probably the wrong disk before writing.
func Flash(ctx context.Context, image, target string, opts FlashOptions) (err error) {
	m, err := loadManifest(image)
	if err != nil {
		return err
	}
	if opts.Devices == nil {
		opts.Devices = SysDevices{}
	}
	dev, err := opts.Devices.Describe(target)
	if err != nil {
		return err
	}
	if err := checkTarget(image, dev, m.BlockMap.ImageSize, opts.Force); err != nil {
		return err
	}
	src, err := os.Open(image)
	if err != nil {
		return err
	}
	defer src.Close()
	// The image itself must still match its manifest before it goes out,
	// and before the user is asked.
	if bad := checkRanges(src, m.BlockMap); len(bad) > 0 {
		return imageChanged(image, bad, len(m.BlockMap.Ranges))
	}
	if !opts.Yes {
		what := fmt.Sprintf("file %s", target)
		if dev.Block {
			what = fmt.Sprintf("%s (%s, %.1f GB%s)", target, orUnknown(dev.Model), float64(dev.Size)/1e9, map[bool]string{true: ", removable", false: ""}[dev.Removable])
		} else if dev.Missing {
			what = fmt.Sprintf("new file %s", target)
		}
		prompt := fmt.Sprintf("write %s (%s, %d MiB mapped of %d MiB) to %s, destroying what is there?",
			filepath.Base(image), m.Board, m.BlockMap.Mapped/MiB, m.BlockMap.ImageSize/MiB, what)
		if opts.Confirm == nil || !opts.Confirm(prompt) {
			return &NotConfirmedError{}
		}
	}
	flags := os.O_WRONLY
	if dev.Missing {
		// A new file: created here, and removed again if anything fails,
		// so a failed flash leaves no half-written copy behind.
		flags |= os.O_CREATE | os.O_EXCL
	}
	dst, err := os.OpenFile(target, flags, 0o644)
	if err != nil {
		return err
	}
	if dev.Missing {
		defer func() {
			if err != nil {
				os.Remove(target)
			}
		}()
	}
	if !dev.Block {
		if err := dst.Truncate(m.BlockMap.ImageSize); err != nil {
			dst.Close()
			return err
		}
	}
	if err := writeRanges(ctx, src, dst, target, m.BlockMap, newProgress(opts.Progress, opts.Terminal, m.BlockMap.Mapped)); err != nil {
		return err
	}
	if opts.afterWrite != nil {
		opts.afterWrite(target)
	}
	return verifyTarget(target, m, opts)
}

// writeRanges copies the block map's ranges from src to dst, syncs and
// closes dst.
func writeRanges(ctx context.Context, src *os.File, dst *os.File, target string, bm *BlockMap, prog *progress) error {
	buf := make([]byte, 1<<20)
	for _, r := range bm.Ranges {
		for off := r.Offset; off < r.Offset+r.Length; {
			if err := ctx.Err(); err != nil {
				dst.Close()
				return err
			}
			n := min(int64(len(buf)), r.Offset+r.Length-off)
			if _, err := src.ReadAt(buf[:n], off); err != nil {
				dst.Close()
				return err
			}
			if _, err := dst.WriteAt(buf[:n], off); err != nil {
				dst.Close()
				return fmt.Errorf("writing %s at %d: %w", target, off, err)
			}
			off += n
			prog.add(n)
		}
	}
	prog.done("written")
	if err := dst.Sync(); err != nil {
		dst.Close()
		return fmt.Errorf("syncing %s: %w", target, err)
	}
	// Drop the cached pages so the read-back comes from the device.
	unix.Fadvise(int(dst.Fd()), 0, 0, unix.FADV_DONTNEED)
	return dst.Close()
}

// imageChanged explains an image that no longer matches its manifest.
func imageChanged(image string, bad []string, ranges int) error {
	return &ImageChangedError{Image: image, Manifest: filepath.Base(ManifestPath(image)), Bad: first(bad, 3), Differ: len(bad), Ranges: ranges}
}

// Verify reads back the block map's ranges from target and checks them
// against image's manifest.
func Verify(image, target string, opts FlashOptions) error {
	m, err := loadManifest(image)
	if err != nil {
		return err
	}
	return verifyTarget(target, m, opts)
}

func verifyTarget(target string, m *Manifest, opts FlashOptions) error {
	f, err := os.Open(target)
	if err != nil {
		return err
	}
	defer f.Close()
	prog := newProgress(opts.Progress, opts.Terminal, m.BlockMap.Mapped)
	bad := checkRangesProgress(f, m.BlockMap, prog)
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s differs from the image in %d of %d ranges: %s", ErrVerify, target, len(bad), len(m.BlockMap.Ranges), strings.Join(first(bad, 5), "; "))
	}
	prog.done("verified")
	return nil
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

func checkRanges(r io.ReaderAt, bm *BlockMap) []string { return checkRangesProgress(r, bm, nil) }

func checkRangesProgress(r io.ReaderAt, bm *BlockMap, prog *progress) []string {
	var bad []string
	buf := make([]byte, 1<<20)
	for _, rg := range bm.Ranges {
		h := sha256.New()
		n, err := io.CopyBuffer(h, io.NewSectionReader(r, rg.Offset, rg.Length), buf)
		if prog != nil {
			prog.add(n)
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("bytes %d-%d: read %d of %d: %v", rg.Offset, rg.Offset+rg.Length-1, n, rg.Length, err))
			continue
		}
		if n != rg.Length {
			bad = append(bad, fmt.Sprintf("bytes %d-%d: read %d of %d: it ends at byte %d", rg.Offset, rg.Offset+rg.Length-1, n, rg.Length, rg.Offset+n))
			continue
		}
		if hex.EncodeToString(h.Sum(nil)) != rg.SHA256 {
			bad = append(bad, fmt.Sprintf("bytes %d-%d: sha256 mismatch", rg.Offset, rg.Offset+rg.Length-1))
		}
	}
	return bad
}

func loadManifest(image string) (*Manifest, error) {
	b, err := regfile.ReadFile(ManifestPath(image), maxManifest)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest beside the image (it holds the block map and checksums flashing needs): %w", err)
	}
	m, err := ReadManifest(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestPath(image), err)
	}
	if m.BlockMap == nil || m.Image == nil || len(m.BlockMap.Ranges) == 0 {
		return nil, fmt.Errorf("%s has no block map", ManifestPath(image))
	}
	fi, err := os.Stat(image)
	if err != nil {
		return nil, err
	}
	if fi.Size() != m.BlockMap.ImageSize {
		return nil, fmt.Errorf("%s is %d bytes; its manifest says %d", image, fi.Size(), m.BlockMap.ImageSize)
	}
	return m, nil
}

// checkTarget refuses the wrong disk.
func checkTarget(image string, d *Device, size int64, force bool) error {
	if a, err1 := filepath.EvalSymlinks(image); err1 == nil {
		if b, err2 := filepath.EvalSymlinks(d.Path); err2 == nil && a == b {
			return fmt.Errorf("target %s is the image itself", d.Path)
		}
	}
	if !d.Block {
		if underDev(d.Path) {
			what := "it is a regular file"
			if d.Missing {
				what = "there is no such device"
			}
			return fmt.Errorf("refusing %s: %s; a target under /dev must be an existing block device, the card's whole disk "+
				"(find it with: lsblk -d -o NAME,SIZE,MODEL,TRAN,RM); to write a file instead, give a path outside /dev", d.Path, what)
		}
		return nil
	}
	switch {
	case d.HoldsRoot:
		return fmt.Errorf("refusing %s: it holds the running system's root file system (/)", d.Path)
	case len(d.Mounts) > 0:
		return fmt.Errorf("refusing %s: it is mounted (%s); unmount it first", d.Path, strings.Join(d.Mounts, ", "))
	case d.Partition:
		return fmt.Errorf("refusing %s: it is a partition; give the whole card (e.g. /dev/sdX, not /dev/sdX1)", d.Path)
	case d.Size > 0 && d.Size < size:
		return fmt.Errorf("refusing %s: the image is %d bytes, the device only %d", d.Path, size, d.Size)
	case !d.Removable && !force:
		return &NotCardError{Path: d.Path}
	case d.Size > MaxUnforcedBytes && !force:
		return &NotCardError{Path: d.Path, Removable: true, Size: d.Size}
	}
	return nil
}

// underDev reports whether path names something in /dev, where a new
// regular file is never what a user means (a mistyped or absent card).
func underDev(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	return abs == "/dev" || strings.HasPrefix(abs, "/dev/")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown model"
	}
	return s
}

// SysDevices reads device facts from /sys and /proc (Root prefixes both,
// for tests).
type SysDevices struct{ Root string }

// Describe implements DeviceInfo.
func (s SysDevices) Describe(path string) (*Device, error) {
	d := &Device{Path: path}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		d.Missing = true // a new regular file
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	switch {
	case fi.Mode().IsRegular():
		return d, nil
	case fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0:
		return nil, fmt.Errorf("%s is neither a regular file nor a block device", path)
	}
	d.Block = true
	var us unix.Stat_t
	if err := unix.Stat(path, &us); err != nil {
		return nil, err
	}
	devno := fmt.Sprintf("%d:%d", unix.Major(uint64(us.Rdev)), unix.Minor(uint64(us.Rdev)))
	sys := filepath.Join(s.Root, "/sys/dev/block", devno)
	real, err := filepath.EvalSymlinks(sys)
	if err != nil {
		return nil, fmt.Errorf("%s: no %s: %w", path, sys, err)
	}
	d.Name = filepath.Base(real)
	disk := real
	if _, err := os.Stat(filepath.Join(real, "partition")); err == nil {
		d.Partition = true
		disk = filepath.Dir(real)
	}
	d.Size = readInt(filepath.Join(real, "size")) * 512
	d.Removable = readInt(filepath.Join(disk, "removable")) == 1
	if b, err := os.ReadFile(filepath.Join(disk, "device", "model")); err == nil {
		d.Model = strings.TrimSpace(string(b))
	}
	// Every kernel name on this disk: the disk and its partitions.
	names := map[string]bool{filepath.Base(disk): true}
	if es, err := os.ReadDir(disk); err == nil {
		for _, e := range es {
			if _, err := os.Stat(filepath.Join(disk, e.Name(), "partition")); err == nil {
				names[e.Name()] = true
			}
		}
	}
	d.Mounts, d.HoldsRoot = mountsOf(filepath.Join(s.Root, "/proc/mounts"), filepath.Join(s.Root, "/proc/swaps"), names)
	return d, nil
}

// mountsOf lists where devices with the given kernel names are mounted.
func mountsOf(mounts, swaps string, names map[string]bool) (where []string, root bool) {
	devName := func(src string) string {
		if !strings.HasPrefix(src, "/dev/") {
			return ""
		}
		if r, err := filepath.EvalSymlinks(src); err == nil {
			src = r
		}
		return filepath.Base(src)
	}
	if f, err := os.Open(mounts); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 2 || !names[devName(fs[0])] {
				continue
			}
			mp := strings.ReplaceAll(fs[1], `\040`, " ")
			where = append(where, mp)
			if mp == "/" {
				root = true
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile(swaps); err == nil {
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if fs := strings.Fields(line); len(fs) > 0 && names[devName(fs[0])] {
				where = append(where, "swap")
			}
		}
	}
	return where, root
}

func readInt(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return n
}

// progress shows bytes done, rate and time left.
type progress struct {
	w       io.Writer
	term    bool
	total   int64
	done_   int64
	start   time.Time
	last    time.Time
	lastPct int64
}

func newProgress(w io.Writer, term bool, total int64) *progress {
	return &progress{w: w, term: term, total: total, start: time.Now(), lastPct: -1}
}

func (p *progress) add(n int64) {
	if p == nil || p.w == nil {
		return
	}
	p.done_ += n
	now := time.Now()
	if p.term {
		if now.Sub(p.last) < 100*time.Millisecond && p.done_ < p.total {
			return
		}
		p.last = now
		fmt.Fprintf(p.w, "\r%s", p.line(now))
		return
	}
	pct := p.done_ * 10 / max(p.total, 1) // a line per 10 %
	if pct != p.lastPct {
		p.lastPct = pct
		fmt.Fprintln(p.w, p.line(now))
	}
}

func (p *progress) line(now time.Time) string {
	el := now.Sub(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(p.done_) / el
	}
	left := "--"
	if rate > 0 {
		left = (time.Duration(float64(p.total-p.done_)/rate) * time.Second).Round(time.Second).String()
	}
	const width = 30
	fill := int(int64(width) * p.done_ / max(p.total, 1))
	bar := ""
	if p.term {
		bar = "[" + strings.Repeat("=", fill) + strings.Repeat(" ", width-fill) + "] "
	}
	return fmt.Sprintf("%s%.1f/%.1f MiB  %.1f MiB/s  %s left", bar, float64(p.done_)/MiB, float64(p.total)/MiB, rate/MiB, left)
}

func (p *progress) done(what string) {
	if p == nil || p.w == nil {
		return
	}
	if p.term {
		fmt.Fprintln(p.w)
	}
	fmt.Fprintf(p.w, "%s %.1f MiB in %v\n", what, float64(p.done_)/MiB, time.Since(p.start).Round(time.Millisecond))
}
