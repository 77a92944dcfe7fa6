package firmware

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/firmware/fis"
	"github.com/ocfw/ocfw/firmware/mbr"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/internal/regfile"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/store"
)

// Info is what Inspect finds in an image.
type Info struct {
	Path       string          `json:"path"`
	Size       int64           `json:"size"`
	Kind       string          `json:"kind"` // "mbr" (CF image) or "redboot-flash"
	Signature  string          `json:"disk_signature,omitempty"`
	Partitions []PartitionInfo `json:"partitions,omitempty"`
	Flash      []FlashInfo     `json:"flash,omitempty"`
	FIS        []fis.Entry     `json:"fis,omitempty"`
	Trailer    string          `json:"sercomm_trailer,omitempty"`
	BootConfig string          `json:"boot_config,omitempty"`
	// Manifest is the one beside the image when present, else the copy
	// inside it; ManifestFrom says which.
	Manifest     *Manifest    `json:"manifest,omitempty"`
	ManifestFrom string       `json:"manifest_from,omitempty"`
	Store        *StoreInfo   `json:"store,omitempty"`
	Reports      []ReportInfo `json:"reports,omitempty"`
	Problems     []string     `json:"problems,omitempty"`
}

// StoreInfo is the state the board keeps on its data partition.
type StoreInfo struct {
	Boot   int             `json:"boot"`             // boots that found the store
	Seq    uint64          `json:"seq"`              // state record read
	From   string          `json:"from,omitempty"`   // which state copy
	Values []string        `json:"values,omitempty"` // named documents kept
	Log    []store.LogLine `json:"log,omitempty"`
	// Notes are torn or damaged records the store ignored (a power cut
	// during a write leaves one; nothing earlier is lost).
	Notes []string `json:"notes,omitempty"`
}

// PartitionInfo is one MBR partition and its file system.
type PartitionInfo struct {
	Index    int         `json:"index"`
	Bootable bool        `json:"bootable"`
	Type     string      `json:"type"`
	Offset   int64       `json:"offset"`
	Size     int64       `json:"size"`
	FS       *FSInfo     `json:"fs,omitempty"`
	Files    []fat.Entry `json:"files,omitempty"` // whole tree, paths in Name
}

// FSInfo is a FAT file system's boot sector facts.
type FSInfo struct {
	Type          string `json:"type"`
	Label         string `json:"label"`
	Serial        string `json:"serial"`
	HiddenSectors uint32 `json:"hidden_sectors"`
	Heads         int    `json:"heads"`
	SectorsTrack  int    `json:"sectors_per_track"`
	Clusters      uint32 `json:"clusters"`
	ClusterBytes  int64  `json:"cluster_bytes"`
}

// FlashInfo is one flash partition's payload.
type FlashInfo struct {
	Name       string `json:"name"`
	Offset     int64  `json:"offset"`
	Size       int64  `json:"size"`
	DataLength int64  `json:"data_length,omitempty"`
	Content    string `json:"content,omitempty"`
	SHA256     string `json:"sha256,omitempty"`
}

// ReportInfo is one report on the data partition.
type ReportInfo struct {
	Name   string         `json:"name"`
	Boot   int            `json:"boot"`
	Report *report.Report `json:"report,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// Limits that keep Inspect bounded on hostile input.
const (
	maxSmallFile = 4 << 20 // manifests, configs, reports
	// maxManifest bounds the manifest beside an image: its block map
	// grows with the image, about 100 bytes per range.
	maxManifest  = 16 << 20
	maxTreeFiles = 4096
	maxTreeDepth = 8
)

// Inspect reads an image file: partition table or flash layout, file
// systems, boot files and configuration, manifest and reports. Input that
// is not an ocfw image (truncated, corrupted, anything else) is an error.
func Inspect(path string) (*Info, error) {
	f, fi, err := regfile.Open(path) // a FIFO or device is refused, not waited on
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := inspect(f, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	info.Path = path
	if b, err := regfile.ReadFile(ManifestPath(path), maxManifest); err != nil && !errors.Is(err, fs.ErrNotExist) {
		info.Problems = append(info.Problems, err.Error())
	} else if err == nil {
		m, err := ReadManifest(b)
		if err != nil {
			info.Problems = append(info.Problems, fmt.Sprintf("%s: %v", ManifestPath(path), err))
		} else {
			info.Manifest, info.ManifestFrom = m, ManifestPath(path)
			if m.Image != nil && m.Image.Size != info.Size {
				info.Problems = append(info.Problems, fmt.Sprintf("the manifest describes a %d-byte image; this one is %d bytes", m.Image.Size, info.Size))
			}
		}
	}
	return info, nil
}

// ErrNotImage marks input that is neither a CF image nor a flash image.
var ErrNotImage = errors.New("not an ocfw image: no MBR partition table and no RedBoot FIS directory")

func inspect(r io.ReaderAt, size int64) (*Info, error) {
	info := &Info{Size: size}
	if size < 512 {
		return nil, fmt.Errorf("%w (only %d bytes)", ErrNotImage, size)
	}
	sec := make([]byte, 512)
	if _, err := r.ReadAt(sec, 0); err != nil {
		return nil, err
	}
	rec, mbrErr := mbr.Parse(sec, uint64(size/512))
	if mbrErr == nil {
		return info, inspectCF(r, size, rec, info)
	}
	if err := inspectFlash(r, size, info); err == nil {
		return info, nil
	} else if !errors.Is(err, ErrNotImage) {
		return nil, err
	}
	if errors.Is(mbrErr, mbr.ErrNoMBR) {
		return nil, ErrNotImage
	}
	return nil, mbrErr
}

func inspectCF(r io.ReaderAt, size int64, rec *mbr.MBR, info *Info) error {
	info.Kind = "mbr"
	info.Signature = fmt.Sprintf("%08x", rec.Signature)
	any := false
	for i, p := range rec.Partitions {
		if p.Type == mbr.TypeEmpty {
			continue
		}
		any = true
		pi := PartitionInfo{Index: i + 1, Bootable: p.Bootable, Type: mbr.TypeName(p.Type), Offset: int64(p.Start) * 512, Size: int64(p.Sectors) * 512}
		fs, err := fat.Open(r, pi.Offset, pi.Size)
		if err != nil {
			info.Problems = append(info.Problems, fmt.Sprintf("partition %d: %v", i+1, err))
			info.Partitions = append(info.Partitions, pi)
			continue
		}
		pi.FS = &FSInfo{Type: fs.Type, Label: fs.Label, Serial: fmt.Sprintf("%04X-%04X", fs.Serial>>16, fs.Serial&0xffff),
			HiddenSectors: fs.HiddenSectors, Heads: fs.Heads, SectorsTrack: fs.SectorsPerTrack, Clusters: fs.Clusters(), ClusterBytes: fs.ClusterBytes()}
		if fs.HiddenSectors != p.Start {
			info.Problems = append(info.Problems, fmt.Sprintf("partition %d: hidden sectors %d, but it starts at sector %d (real BIOSes may not boot it)", i+1, fs.HiddenSectors, p.Start))
		}
		n := 0
		if err := walk(fs, "/", 0, &n, &pi.Files); err != nil {
			info.Problems = append(info.Problems, fmt.Sprintf("partition %d: %v", i+1, err))
		}
		if p.Bootable {
			if b, err := fs.ReadFile(syslinuxCfg, maxSmallFile); err == nil {
				info.BootConfig = string(b)
			}
		}
		if b, err := fs.ReadFile(BootManifest, maxSmallFile); err == nil {
			if m, err := ReadManifest(b); err == nil {
				info.Manifest, info.ManifestFrom = m, fmt.Sprintf("partition %d: %s", i+1, BootManifest)
			} else {
				info.Problems = append(info.Problems, fmt.Sprintf("partition %d: %s: %v", i+1, BootManifest, err))
			}
		}
		if si, reps := readStore(fs); si != nil {
			info.Store = si
			info.Reports = append(info.Reports, reps...)
		}
		info.Partitions = append(info.Partitions, pi)
	}
	if !any {
		return fmt.Errorf("%w: the partition table is empty", ErrNotImage)
	}
	sort.SliceStable(info.Reports, func(i, j int) bool { return info.Reports[i].Boot > info.Reports[j].Boot })
	return nil
}

func walk(fs *fat.FS, dir string, depth int, n *int, out *[]fat.Entry) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("directories nested deeper than %d at %s", maxTreeDepth, dir)
	}
	es, err := fs.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range es {
		*n++
		if *n > maxTreeFiles {
			return fmt.Errorf("more than %d files; listing stopped", maxTreeFiles)
		}
		p := strings.TrimSuffix(dir, "/") + "/" + e.Name
		e.Name = p
		*out = append(*out, e)
		if e.Dir {
			if err := walk(fs, p, depth+1, n, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// readStore reads the board's store (package store) on a data partition:
// its boot counter and the kept reports. Torn or damaged records, which a
// power cut leaves and the store ignores by design, are notes, not
// problems.
func readStore(fs *fat.FS) (*StoreInfo, []ReportInfo) {
	if _, err := fs.ReadFile(store.Dir+"/"+store.StateA, store.StateSize); err != nil {
		return nil, nil // not a data partition
	}
	c, err := store.Load(func(name string) ([]byte, error) { return fs.ReadFile(store.Dir+"/"+name, maxSmallFile) })
	if err != nil {
		return &StoreInfo{Notes: []string{err.Error()}}, nil
	}
	si := &StoreInfo{Boot: c.State.Boot, Seq: c.Seq, From: c.From, Notes: c.Problems, Log: c.Log}
	for name := range c.State.Values {
		si.Values = append(si.Values, name)
	}
	sort.Strings(si.Values)
	var out []ReportInfo
	for _, r := range c.Reports {
		ri := ReportInfo{Name: store.Dir + "/" + r.File, Boot: r.Boot}
		rep, err := report.Read(bytes.NewReader(r.JSON))
		if err != nil {
			ri.Error = err.Error()
		}
		ri.Report = rep
		out = append(out, ri)
	}
	return si, out
}

// inspectFlash looks for a FIS directory in the image's last erase
// blocks (RedBoot keeps it near the end of flash).
func inspectFlash(r io.ReaderAt, size int64, info *Info) error {
	const erase = 0x20000
	if size%0x10000 != 0 || size > 64*MiB {
		return ErrNotImage
	}
	var entries []fis.Entry
	var at int64 = -1
	for off := size - erase; off >= 0 && off >= size-4*erase; off -= 0x1000 {
		blk := make([]byte, fis.EntrySize*4)
		if _, err := r.ReadAt(blk, off); err != nil {
			return err
		}
		if !bytes.HasPrefix(blk, []byte("RedBoot\x00")) {
			continue
		}
		n := min(erase, size-off)
		dir := make([]byte, n)
		if _, err := r.ReadAt(dir, off); err != nil {
			return err
		}
		es, err := fis.Decode(dir, fisOrder)
		if err != nil {
			continue
		}
		entries, at = es, off
		break
	}
	if at < 0 {
		return ErrNotImage
	}
	info.Kind, info.FIS = "redboot-flash", entries
	for _, e := range entries {
		off := int64(e.FlashBase) - ixp4xxFlashBase
		fi := FlashInfo{Name: e.Name, Offset: off, Size: int64(e.Size)}
		if off < 0 || off+int64(e.Size) > size {
			info.Problems = append(info.Problems, fmt.Sprintf("FIS entry %s (%#x+%#x) lies outside the %d-byte image", e.Name, e.FlashBase, e.Size, size))
			info.Flash = append(info.Flash, fi)
			continue
		}
		if e.Name == "Kernel" || e.Name == "Ramdisk" {
			hdr := make([]byte, payloadHeader)
			if _, err := r.ReadAt(hdr, off); err != nil {
				return err
			}
			n := int64(fisOrder.Uint32(hdr))
			if n == 0xffffffff {
				fi.Content = "erased"
			} else if n > int64(e.Size)-payloadHeader {
				info.Problems = append(info.Problems, fmt.Sprintf("%s: length header %d is past the %d-byte partition", e.Name, n, e.Size))
			} else {
				fi.DataLength = n
				data := make([]byte, n)
				if _, err := r.ReadAt(data, off+payloadHeader); err != nil {
					return err
				}
				swapWords(data)
				fi.SHA256 = bytesSHA256(data) // of the payload as given (padded to 4 bytes)
				fi.Content = describePayload(data)
			}
		}
		info.Flash = append(info.Flash, fi)
	}
	if size >= 16 {
		tr := make([]byte, 16)
		if _, err := r.ReadAt(tr, size-16); err != nil {
			return err
		}
		if bytes.Equal(tr[8:14], []byte("eRcOmM")) {
			info.Trailer = fmt.Sprintf("% x", tr)
		}
	}
	return nil
}

func describePayload(b []byte) string {
	if f, err := KernelFormat(b); err == nil {
		return f
	}
	switch {
	case bytes.HasPrefix(b, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "xz data (initramfs)"
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		return "gzip data (initramfs)"
	case bytes.HasPrefix(b, []byte("070701")):
		return "cpio archive (initramfs)"
	}
	return "data"
}
