package firmware

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/internal/buildinfo"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/plan"
)

// ManifestFormat is the version of the manifest layout.
const ManifestFormat = 1

// Manifest describes a built image: what went in, how it is laid out and,
// in the copy beside the image, the image's own checksum and block map.
// The copy inside the image (bios-cf: /ocfw/manifest.json on the boot
// partition) cannot hold the image's checksum, so Image and BlockMap are
// empty there.
type Manifest struct {
	Format          int               `json:"format"`
	Tool            string            `json:"tool"`
	Board           string            `json:"board"`
	Cards           []string          `json:"cards"`
	Boot            string            `json:"boot"`
	SourceDateEpoch int64             `json:"source_date_epoch"`
	KernelVersion   string            `json:"kernel_version,omitempty"`
	Cmdline         string            `json:"cmdline,omitempty"`
	HostTools       map[string]string `json:"host_tools,omitempty"`
	// Builder is the ocfw that built the image: its source revision (and
	// whether that tree had uncommitted changes), Go and key module
	// versions, so an image can be traced to its source.
	Builder *buildinfo.Source `json:"builder,omitempty"`
	// Inputs maps each input's name to its sha256.
	Inputs map[string]string `json:"inputs"`
	Layout []Region          `json:"layout"`
	Files  []File            `json:"files,omitempty"`
	// System is the kernel and initramfs as built (bios-cf), before the
	// padding to the slots' size: what `ocfw upgrade` sends and checks.
	System  *System    `json:"system,omitempty"`
	Outputs []File     `json:"outputs,omitempty"` // other files written beside the image
	Notes   []string   `json:"notes,omitempty"`
	Plan    *plan.Plan `json:"plan"`

	Image    *File     `json:"image,omitempty"`
	BlockMap *BlockMap `json:"block_map,omitempty"`
	// Store is where the board keeps its state: the preallocated files
	// it writes in place (package store), as byte ranges of the image.
	Store []fat.Extent `json:"store,omitempty"`
}

// System is one system (kernel and initramfs) of a bios-cf image.
type System struct {
	// Revision names the system by its contents (boot/upgrade.Revision).
	Revision string `json:"revision"`
	Kernel   File   `json:"kernel"`
	Initrd   File   `json:"initrd"`
	// KernelSlot and InitrdSlot are the sizes of each slot's files.
	KernelSlot int64 `json:"kernel_slot"`
	InitrdSlot int64 `json:"initrd_slot"`
}

// Region is one partition or flash area of the image.
type Region struct {
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	FS     string `json:"fs,omitempty"`
	Label  string `json:"label,omitempty"`
	Data   int64  `json:"data,omitempty"` // payload bytes (flash areas)
}

// File is a named file with its size and sha256.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// BlockMap lists the byte ranges of the image that matter, as bmaptool
// does: file system metadata and allocated clusters. Everything else is
// free space whose contents on the target do not matter.
type BlockMap struct {
	BlockSize int64   `json:"block_size"`
	ImageSize int64   `json:"image_size"`
	Mapped    int64   `json:"mapped_bytes"`
	Ranges    []Range `json:"ranges"`
}

// Range is [Offset, Offset+Length) of the image with its sha256.
type Range struct {
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	SHA256 string `json:"sha256"`
}

// JSON renders the manifest, indented, with a trailing newline.
func (m *Manifest) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ReadManifest parses a manifest, refusing other documents.
func ReadManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not an ocfw manifest: %w", err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("manifest format %d: this ocfw reads format %d", m.Format, ManifestFormat)
	}
	return &m, nil
}

// ManifestPath is where the manifest of image lives.
func ManifestPath(image string) string { return image + ".manifest.json" }

// SumsPath is the sha256sums file beside image.
func SumsPath(image string) string { return filepath.Join(filepath.Dir(image), "sha256sums") }

// fileSHA256 hashes a file.
func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func bytesSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// mergeRanges sorts, rounds out to block boundaries, clips to size and
// merges byte ranges [lo, hi).
func mergeRanges(rs [][2]int64, block, size int64) [][2]int64 {
	var out [][2]int64
	for _, r := range rs {
		lo := r[0] / block * block
		hi := min((r[1]+block-1)/block*block, size)
		if hi > lo {
			out = append(out, [2]int64{lo, hi})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	var merged [][2]int64
	for _, r := range out {
		if n := len(merged); n > 0 && r[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// makeBlockMap hashes the given ranges of the image file.
func makeBlockMap(f io.ReaderAt, size, block int64, rs [][2]int64) (*BlockMap, error) {
	bm := &BlockMap{BlockSize: block, ImageSize: size}
	buf := make([]byte, 1<<20)
	for _, r := range mergeRanges(rs, block, size) {
		h := sha256.New()
		if _, err := io.CopyBuffer(h, io.NewSectionReader(f, r[0], r[1]-r[0]), buf); err != nil {
			return nil, err
		}
		bm.Ranges = append(bm.Ranges, Range{Offset: r[0], Length: r[1] - r[0], SHA256: hex.EncodeToString(h.Sum(nil))})
		bm.Mapped += r[1] - r[0]
	}
	return bm, nil
}

// sha256sums renders lines in sha256sum's format for files (named by
// base name: the sums file sits beside them).
func sha256sums(files []File) []byte {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s  %s\n", f.SHA256, filepath.Base(f.Name))
	}
	return []byte(b.String())
}
