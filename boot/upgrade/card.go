package upgrade

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ocfw/ocfw/boot/adv"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/plan/slots"
)

// Device is the boot partition's block device (or an image file in
// tests).
type Device interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
}

// Card is the boot partition's preallocated files, each one contiguous
// extent found once at open: everything Card writes goes inside them.
type Card struct {
	dev  Device
	fsys *fat.FS
	ext  map[string]fat.Extent
}

// ManifestPath is the build's manifest on the boot partition: it names
// the factory system's revision.
const ManifestPath = "/ocfw/manifest.json"

// OpenCard checks the boot partition (read-only) and refuses, writing
// nothing ever, unless both slots, syslinux.cfg and ldlinux.sys are each
// one contiguous extent, syslinux.cfg of its fixed size with a DEFAULT
// slot, and ldlinux.sys ends in a valid ADV.
func OpenCard(dev Device, size int64) (*Card, error) {
	fsys, err := fat.Open(dev, 0, size)
	if err != nil {
		return nil, fmt.Errorf("boot partition: %w", err)
	}
	if _, err := fsys.Owners(); err != nil {
		return nil, fmt.Errorf("boot partition: %w", err)
	}
	c := &Card{dev: dev, fsys: fsys, ext: map[string]fat.Extent{}}
	paths := []string{slots.SyslinuxCfg, slots.LDLinux}
	for _, s := range slots.Slots {
		paths = append(paths, slots.Kernel(s), slots.Initrd(s))
	}
	for _, p := range paths {
		e, err := fsys.Extent(p)
		if err != nil {
			return nil, fmt.Errorf("boot partition (an image without two system slots? flash a current image): %w", err)
		}
		c.ext[p] = e
	}
	if n := c.ext[slots.SyslinuxCfg].Size; n != slots.CfgSize {
		return nil, fmt.Errorf("boot partition: %s is %d bytes, want %d", slots.SyslinuxCfg, n, slots.CfgSize)
	}
	if _, err := c.Default(); err != nil {
		return nil, err
	}
	if _, err := adv.Read(dev, c.advOffset()); err != nil {
		return nil, fmt.Errorf("boot partition: %s: %w", slots.LDLinux, err)
	}
	return c, nil
}

func (c *Card) advOffset() int64 {
	e := c.ext[slots.LDLinux]
	return e.Offset + e.Size - adv.Size
}

func (c *Card) cfg() ([]byte, error) {
	e := c.ext[slots.SyslinuxCfg]
	b := make([]byte, e.Size)
	if _, err := c.dev.ReadAt(b, e.Offset); err != nil {
		return nil, fmt.Errorf("%s: %w", slots.SyslinuxCfg, err)
	}
	return b, nil
}

// Default is the slot syslinux.cfg boots by default: the committed one.
func (c *Card) Default() (string, error) {
	b, err := c.cfg()
	if err != nil {
		return "", err
	}
	return slots.Default(b)
}

// SetDefault commits slot: it rewrites the DEFAULT line of syslinux.cfg
// in place, one sector, the FAT untouched.
func (c *Card) SetDefault(slot string) error {
	old, err := c.cfg()
	if err != nil {
		return err
	}
	b, err := slots.SetDefault(old, slot)
	if err != nil {
		return err
	}
	e := c.ext[slots.SyslinuxCfg]
	for off := 0; off < len(b); off += 512 {
		end := min(off+512, len(b))
		if bytes.Equal(b[off:end], old[off:end]) {
			continue
		}
		if _, err := c.dev.WriteAt(b[off:end], e.Offset+int64(off)); err != nil {
			return fmt.Errorf("%s: %w", slots.SyslinuxCfg, err)
		}
	}
	return c.dev.Sync()
}

// ArmOnce makes the loader boot slot once, at the next reset only.
func (c *Card) ArmOnce(slot string) error {
	if !slots.ValidSlot(slot) {
		return fmt.Errorf("slot %q: want a or b", slot)
	}
	return adv.Write(c.dev, c.advOffset(), adv.ADV{adv.TagBootOnce: []byte(slot)})
}

// BootOnce is the label the loader will boot once, "" when none.
func (c *Card) BootOnce() (string, error) {
	a, err := adv.Read(c.dev, c.advOffset())
	if err != nil {
		return "", err
	}
	return a.BootOnce(), nil
}

// Room is the size of slot's kernel and initramfs files.
func (c *Card) Room(slot string) (int64, int64) {
	return c.ext[slots.Kernel(slot)].Size, c.ext[slots.Initrd(slot)].Size
}

// FactoryRevision is the revision of the system the image was built
// with (both slots held it), from the manifest on the boot partition.
func (c *Card) FactoryRevision() string {
	b, err := c.fsys.ReadFile(ManifestPath, 4<<20)
	if err != nil {
		return ""
	}
	var m struct {
		System struct {
			Revision string `json:"revision"`
		} `json:"system"`
	}
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	return m.System.Revision
}

// Header is what precedes a system on `ocf upgrade receive`'s input:
// the board it is for, its revision, and its two files' sizes and
// sha256s; the kernel's bytes follow, then the initramfs's.
type Header struct {
	Board    string   `json:"board"`
	Revision string   `json:"revision"`
	Kernel   FileSum  `json:"kernel"`
	Initrd   FileSum  `json:"initrd"`
	Builder  string   `json:"builder,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// FileSum is a file's size and sha256 (hex).
type FileSum struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// StreamMagic is the first line of the stream.
const StreamMagic = "ocfw-upgrade 1"

// WriteHeader writes the stream's first two lines.
func WriteHeader(w io.Writer, h Header) error {
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n%s\n", StreamMagic, js)
	return err
}

// ReadHeader reads the stream's first two lines, byte by byte so that
// nothing after them is consumed.
func ReadHeader(r io.Reader) (Header, error) {
	var h Header
	line := func() (string, error) {
		var b []byte
		one := make([]byte, 1)
		for len(b) < 64<<10 {
			if _, err := io.ReadFull(r, one); err != nil {
				return "", err
			}
			if one[0] == '\n' {
				return string(b), nil
			}
			b = append(b, one[0])
		}
		return "", errors.New("header line over 64 KiB")
	}
	m, err := line()
	if err != nil {
		return h, fmt.Errorf("reading the upgrade stream: %w", err)
	}
	if m != StreamMagic {
		return h, fmt.Errorf("the input is not an upgrade stream (first line %.40q, want %q)", m, StreamMagic)
	}
	js, err := line()
	if err != nil {
		return h, fmt.Errorf("reading the upgrade stream's header: %w", err)
	}
	if err := json.Unmarshal([]byte(js), &h); err != nil {
		return h, fmt.Errorf("the upgrade stream's header: %w", err)
	}
	if h.Board == "" || h.Revision == "" || h.Kernel.Size <= 0 || h.Initrd.Size <= 0 || len(h.Kernel.SHA256) != 64 || len(h.Initrd.SHA256) != 64 {
		return h, fmt.Errorf("the upgrade stream's header lacks the board, revision, or a file's size and sha256: %s", js)
	}
	return h, nil
}

// WriteSystem writes the kernel and initramfs read from r into slot, in
// place, zeros after each up to the slot's size, then reads both back
// and checks their sha256 against h. It refuses a system larger than the
// slot before writing anything.
func (c *Card) WriteSystem(slot string, h Header, r io.Reader) error {
	if err := c.writeFiles(slot, h, r); err != nil {
		return err
	}
	return c.Verify(slot, h)
}

// writeFiles is WriteSystem without the check: the files written and
// synced.
func (c *Card) writeFiles(slot string, h Header, r io.Reader) error {
	if !slots.ValidSlot(slot) {
		return fmt.Errorf("slot %q: want a or b", slot)
	}
	kroom, iroom := c.Room(slot)
	if h.Kernel.Size > kroom || h.Initrd.Size > iroom {
		return fmt.Errorf("the new system (kernel %d bytes, initramfs %d) does not fit slot %s (%d and %d bytes): build an image with a larger boot partition and flash it",
			h.Kernel.Size, h.Initrd.Size, slot, kroom, iroom)
	}
	for _, f := range []struct {
		path string
		sum  FileSum
	}{{slots.Kernel(slot), h.Kernel}, {slots.Initrd(slot), h.Initrd}} {
		e := c.ext[f.path]
		if err := c.fill(e, io.LimitReader(r, f.sum.Size), f.sum.Size); err != nil {
			return fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return c.dev.Sync()
}

// fill writes n bytes from r at e's start, then zeros to its end.
func (c *Card) fill(e fat.Extent, r io.Reader, n int64) error {
	buf := make([]byte, 64<<10)
	var off int64
	for off < e.Size {
		want := min(int64(len(buf)), e.Size-off)
		chunk := buf[:want]
		clear(chunk)
		if off < n {
			k := min(want, n-off)
			if _, err := io.ReadFull(r, chunk[:k]); err != nil {
				return fmt.Errorf("the stream ended after %d of %d bytes: %w", off, n, err)
			}
		}
		if _, err := c.dev.WriteAt(chunk, e.Offset+off); err != nil {
			return err
		}
		off += want
	}
	return nil
}

// Verify reads slot's files back and checks them against h.
func (c *Card) Verify(slot string, h Header) error {
	for _, f := range []struct {
		path string
		sum  FileSum
	}{{slots.Kernel(slot), h.Kernel}, {slots.Initrd(slot), h.Initrd}} {
		e := c.ext[f.path]
		hash := sha256.New()
		if _, err := io.Copy(hash, io.NewSectionReader(c.dev, e.Offset, f.sum.Size)); err != nil {
			return fmt.Errorf("reading back %s: %w", f.path, err)
		}
		if got := fmt.Sprintf("%x", hash.Sum(nil)); got != f.sum.SHA256 {
			return fmt.Errorf("%s on the card has sha256 %s, the manifest says %s", f.path, got, f.sum.SHA256)
		}
	}
	return nil
}
