package firmware

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/ocfw/ocfw/firmware/mbr"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/internal/regfile"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/plan/slots"
)

// SystemImage is the system (kernel and initramfs) of a bios-cf image,
// as `ocfw upgrade` sends it: the manifest inside the image and the two
// files' bytes, checked against it.
type SystemImage struct {
	Manifest *Manifest
	f        *os.File
	kernel   fat.Extent
	initrd   fat.Extent
}

// OpenSystem reads image's boot partition: the manifest on it names the
// board and the system (revision, sizes, sha256s); slot a holds the
// system. It reads both files back and checks their sha256 before
// returning, so a damaged image is refused before anything is sent.
func OpenSystem(image string) (*SystemImage, error) {
	f, fi, err := regfile.Open(image)
	if err != nil {
		return nil, err
	}
	s, err := openSystem(f, fi.Size(), image)
	if err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func openSystem(f *os.File, size int64, image string) (*SystemImage, error) {
	sec := make([]byte, 512)
	if _, err := f.ReadAt(sec, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", image, err)
	}
	rec, err := mbr.Parse(sec, uint64(size/512))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (ocfw upgrade takes a bios-cf image)", image, err)
	}
	for _, p := range rec.Partitions {
		if !p.Bootable {
			continue
		}
		fsys, err := fat.Open(f, int64(p.Start)*512, int64(p.Sectors)*512)
		if err != nil {
			return nil, fmt.Errorf("%s: boot partition: %w", image, err)
		}
		js, err := fsys.ReadFile(BootManifest, plan.MaxFileSize)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", image, BootManifest, err)
		}
		var m Manifest
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", image, BootManifest, err)
		}
		if m.System == nil {
			return nil, fmt.Errorf("%s: its manifest names no system: an image without two system slots (built before ocfw upgrade existed)", image)
		}
		s := &SystemImage{Manifest: &m, f: f}
		for _, x := range []struct {
			path string
			want File
			ext  *fat.Extent
		}{{slots.Kernel(slots.SlotA), m.System.Kernel, &s.kernel}, {slots.Initrd(slots.SlotA), m.System.Initrd, &s.initrd}} {
			e, err := fsys.Extent(x.path)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", image, err)
			}
			if e.Size < x.want.Size {
				return nil, fmt.Errorf("%s: %s is %d bytes, the manifest's system %d", image, x.path, e.Size, x.want.Size)
			}
			e.Offset += int64(p.Start) * 512
			e.Size = x.want.Size
			h := sha256.New()
			if _, err := io.Copy(h, io.NewSectionReader(f, e.Offset, e.Size)); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", image, x.path, err)
			}
			if got := fmt.Sprintf("%x", h.Sum(nil)); got != x.want.SHA256 {
				return nil, fmt.Errorf("%s: %s has sha256 %s, its manifest says %s: the image is damaged", image, x.path, got, x.want.SHA256)
			}
			*x.ext = e
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s: no bootable partition", image)
}

// Reader returns the kernel's bytes followed by the initramfs's.
func (s *SystemImage) Reader() io.Reader {
	return io.MultiReader(io.NewSectionReader(s.f, s.kernel.Offset, s.kernel.Size), io.NewSectionReader(s.f, s.initrd.Offset, s.initrd.Size))
}

// Close closes the image.
func (s *SystemImage) Close() error { return s.f.Close() }
