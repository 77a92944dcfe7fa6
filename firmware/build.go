// Package firmware lays out the images ocfw builds for each boot method —
// a bootable CompactFlash image for BIOS boards (MBR, FAT16 boot partition
// with SYSLINUX, FAT data partition for reports) and RedBoot flash images
// for IXP4xx boards — writes them atomically with a manifest, reads any
// of them back (Inspect) and writes them to a card safely (Flash).
package firmware

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/internal/buildinfo"
	"github.com/ocfw/ocfw/plan"
)

// Input is what goes into an image: a kernel and a compressed initramfs
// (from the rootfs step), and the sha256 of everything they were made of.
type Input struct {
	Kernel        string            // bzImage (x86) or zImage (ARM)
	KernelVersion string            // e.g. 6.1.0-57-686, for the manifest
	Initramfs     string            // compressed initramfs
	DTB           string            // device tree (the QEMU ARM stand-in only)
	Inputs        map[string]string // name -> sha256 of the rootfs step's inputs
}

// ImageOptions says where and how big.
type ImageOptions struct {
	Output string // image path; sidecars are written beside it
	// SizeMiB is the whole image (bios-cf); 0 means plan.Image.SizeMB.
	SizeMiB int
	// CardMB is the card the image must fit, in the decimal megabytes
	// cards are sold by; 0 means plan.Storage.CardMB.
	CardMB          int
	SourceDateEpoch int64
	// Tool names the builder in the manifest; "" means ToolVersion.
	// The manifest records Builder as well, whatever Tool says.
	Tool string
	Log  func(format string, args ...any)
}

func (o *ImageOptions) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// ToolVersion names the builder for a manifest: "ocfw" and the source
// revision it was built from, "+modified" when that tree had changes
// (package buildinfo; "ocfw (devel)" when unknown).
func ToolVersion() string { return buildinfo.Get().Tool() }

// Builder is what the manifest records about the ocfw that builds the
// image: revision, uncommitted changes, Go and key module versions. It
// holds no time, so rebuilding from the same tree gives the same bytes.
func Builder() *buildinfo.Source {
	s := buildinfo.Get().Source
	s.Modules = append([]buildinfo.Module(nil), s.Modules...)
	return &s
}

// CheckLayout checks what can be checked of the image's layout before
// anything is built: for a CF image, the image and its data partition
// against the size asked and the card (opts.SizeMiB, opts.CardMB); for an Avila,
// its CF data image. Build checks the same again, with the kernel and
// initramfs sizes. It lets a build fail on a bad size in a second rather
// than after the minute-long userland build.
func CheckLayout(pl *plan.Plan, opts ImageOptions) error {
	if pl == nil {
		return errors.New("firmware: no plan")
	}
	switch pl.Boot {
	case plan.BootBIOSCF:
		_, err := planCFLayout(pl, opts)
		return err
	case plan.BootRedBoot:
		if pl.Storage.CF {
			_, err := avilaDataSize(opts)
			return err
		}
		return nil
	case plan.BootQEMUARM:
		_, err := standInDataSize(opts)
		return err
	}
	return fmt.Errorf("firmware: board %s boots by %q, which ocfw cannot lay out (have %s, %s, %s)", pl.Board, pl.Boot, plan.BootBIOSCF, plan.BootRedBoot, plan.BootQEMUARM)
}

// Build lays out the image for plan's boot method and writes it, with
// its manifest and a sha256sums file, atomically to opts.Output. Every
// size check happens before anything is written.
func Build(ctx context.Context, pl *plan.Plan, in Input, opts ImageOptions) (_ *Manifest, err error) {
	if pl == nil {
		return nil, errors.New("firmware: no plan")
	}
	if opts.Output == "" {
		return nil, errors.New("firmware: no output file (-o)")
	}
	if fi, err := os.Stat(opts.Output); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("firmware: output %s is a directory", opts.Output)
	}
	undo, err := MakeOutputDir(opts.Output)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			undo() // a failed build leaves no directory it made
		}
	}()
	if opts.Tool == "" {
		opts.Tool = ToolVersion()
	}
	if opts.SourceDateEpoch < 0 {
		return nil, fmt.Errorf("firmware: SOURCE_DATE_EPOCH %d is negative", opts.SourceDateEpoch)
	}
	m := &Manifest{Format: ManifestFormat, Tool: opts.Tool, Builder: Builder(), Board: pl.Board, Cards: []string{},
		Boot: pl.Boot, SourceDateEpoch: opts.SourceDateEpoch, KernelVersion: in.KernelVersion,
		Inputs: map[string]string{}, Plan: pl}
	for _, c := range pl.Cards {
		m.Cards = append(m.Cards, c.Name)
	}
	for k, v := range in.Inputs {
		m.Inputs[k] = v
	}
	for name, p := range map[string]string{"kernel": in.Kernel, "initramfs": in.Initramfs} {
		if p == "" {
			return nil, fmt.Errorf("firmware: no %s given", name)
		}
		sum, _, err := fileSHA256(p)
		if err != nil {
			return nil, fmt.Errorf("firmware: %s: %w", name, err)
		}
		m.Inputs[name] = sum
	}
	switch pl.Boot {
	case plan.BootBIOSCF:
		return buildBIOSCF(ctx, pl, in, opts, m)
	case plan.BootRedBoot:
		return buildRedBoot(ctx, pl, in, opts, m)
	case plan.BootQEMUARM:
		return buildQEMUARM(ctx, pl, in, opts, m)
	}
	return nil, fmt.Errorf("firmware: board %s boots by %q, which ocfw cannot lay out (have %s, %s, %s)", pl.Board, pl.Boot, plan.BootBIOSCF, plan.BootRedBoot, plan.BootQEMUARM)
}

// MakeOutputDir creates the directory an output file goes in, with its
// missing parents, as -o newdir/x.img asks. undo removes the directories
// it made again if they are still empty: call it when the build fails.
func MakeOutputDir(output string) (undo func(), err error) {
	dir := filepath.Dir(output)
	var made []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("firmware: -o %s: cannot create its directory: %w", output, err)
	}
	return func() {
		for _, d := range made { // deepest first
			os.Remove(d)
		}
	}, nil
}

// Kernel image formats.
const (
	KernelBzImage  = "x86 bzImage"
	KernelZImageLE = "ARM zImage, little-endian"
	KernelZImageBE = "ARM zImage, big-endian"
)

// KernelFormat identifies a kernel image from its header: an x86 bzImage
// ("HdrS" at 0x202) or an ARM zImage (magic 0x016f2818 at 0x24, in the
// kernel's own byte order).
func KernelFormat(head []byte) (string, error) {
	if len(head) >= 0x206 && string(head[0x202:0x206]) == "HdrS" && head[0x1fe] == 0x55 && head[0x1ff] == 0xaa {
		return KernelBzImage, nil
	}
	if len(head) >= 0x28 {
		switch {
		case binary.LittleEndian.Uint32(head[0x24:]) == 0x016f2818:
			return KernelZImageLE, nil
		case binary.BigEndian.Uint32(head[0x24:]) == 0x016f2818:
			return KernelZImageBE, nil
		}
	}
	return "", errors.New("not a Linux kernel image: no bzImage header (HdrS) and no ARM zImage magic at 0x24")
}

func checkKernel(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 0x400)
	n, _ := f.ReadAt(head, 0)
	got, err := KernelFormat(head[:n])
	if err != nil {
		return fmt.Errorf("kernel %s: %w", path, err)
	}
	if got == KernelZImageBE {
		return fmt.Errorf("kernel %s is a big-endian ARM zImage: Go has no big-endian ARM port, so the firmware's userland needs a little-endian kernel (CONFIG_CPU_LITTLE_ENDIAN)", path)
	}
	if got != want {
		return fmt.Errorf("kernel %s is an %s; this board needs an %s", path, got, want)
	}
	return nil
}

// Cmdline is the kernel command line for plan: the serial console at the
// board's baud, reboot 10 s after a panic, and the profile's extras.
func Cmdline(pl *plan.Plan) string {
	parts := []string{pl.Console.KernelArg, "panic=10"}
	if pl.Kernel.Cmdline != "" {
		parts = append(parts, pl.Kernel.Cmdline)
	}
	return strings.Join(parts, " ")
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
