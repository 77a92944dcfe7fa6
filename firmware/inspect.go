package firmware

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"

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

	inner *Manifest // the copy inside the image, when there is one
}

// StoreInfo is the state the board keeps on its data partition.
type StoreInfo struct {
	Boot   int             `json:"boot"`             // boots that found the store
	Seq    uint64          `json:"seq"`              // state record read
	From   string          `json:"from,omitempty"`   // which state copy
	Values []string        `json:"values,omitempty"` // named documents kept
	Log    []store.LogLine `json:"log,omitempty"`
	// Notes are what a power cut leaves by design and the store put
	// right: nothing is lost.
	Notes []string `json:"notes,omitempty"`
	// Problems are damage: a state copy or a report that does not read
	// back, a lost state. Inspect counts them among its problems.
	Problems []string `json:"problems,omitempty"`
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
		info.Problems = append(info.Problems, checkSidecar(f, path, b, info)...)
	}
	return info, nil
}

// changedAfterBuild ends the problems that say an image and its manifest
// no longer belong together.
const changedAfterBuild = "it was changed after the build (booted in place, not as a copy, or written to)"

// checkSidecar reads the manifest beside an image (data) and checks it
// against the image: a damaged or edited manifest, one for another board
// or another image, and an image changed since its build are problems.
func checkSidecar(img io.ReaderAt, path string, data []byte, info *Info) []string {
	name := ManifestPath(path)
	if len(data) == 0 {
		return []string{fmt.Sprintf("%s is empty: not a manifest (rebuild the image, or remove it to use the copy inside the image)", name)}
	}
	m, err := ReadManifest(data)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	info.Manifest, info.ManifestFrom = m, name
	var problems []string
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(new(Manifest)); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v: it is not as ocfw wrote it", name, err))
	}
	if sum, ok := listedSum(SumsPath(path), filepath.Base(name)); ok && sum != bytesSHA256(data) {
		problems = append(problems, fmt.Sprintf("%s does not match its sha256 in %s: the manifest was changed after the build", name, SumsPath(path)))
	}
	if in := info.inner; in != nil {
		if in.Board != m.Board {
			problems = append(problems, fmt.Sprintf("%s is for board %s, but the image's own manifest (%s) says %s: they do not belong together",
				name, catalog.Quote(m.Board), BootManifest, catalog.Quote(in.Board)))
		} else if diff := manifestDiff(in, m); len(diff) > 0 {
			problems = append(problems, fmt.Sprintf("%s differs from the copy inside the image in %s", name, strings.Join(diff, ", ")))
		}
	}
	switch {
	case m.Image == nil:
		problems = append(problems, fmt.Sprintf("%s has no image size or sha256: it is not the manifest written beside an image", name))
	case m.Image.Size != info.Size:
		problems = append(problems, fmt.Sprintf("the manifest describes a %d-byte image; this one is %d bytes: %s", m.Image.Size, info.Size, changedAfterBuild))
	default:
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(img, 0, info.Size)); err != nil {
			problems = append(problems, fmt.Sprintf("reading the image to check it against its manifest: %v", err))
		} else if hex.EncodeToString(h.Sum(nil)) != m.Image.SHA256 {
			problems = append(problems, "the image no longer matches its manifest (sha256): "+changedAfterBuild+whereChanged(img, m))
		}
	}
	return problems
}

// whereChanged says which of the image's regions differ from the block
// map's checksums.
func whereChanged(img io.ReaderAt, m *Manifest) string {
	if m.BlockMap == nil {
		return ""
	}
	var regions []string
	n := 0
	for _, r := range m.BlockMap.Ranges {
		if checkRanges(img, &BlockMap{Ranges: []Range{r}}) == nil {
			continue
		}
		n++
		for _, reg := range m.Layout {
			if r.Offset < reg.Offset+reg.Size && reg.Offset < r.Offset+r.Length && !slices.Contains(regions, reg.Name) {
				regions = append(regions, reg.Name)
			}
		}
	}
	if n == 0 {
		return "; only free space outside the block map differs, which flashing does not write"
	}
	where := ""
	if len(regions) > 0 {
		where = " in " + strings.Join(regions, ", ")
	}
	return fmt.Sprintf("; %d of %d mapped ranges differ%s", n, len(m.BlockMap.Ranges), where)
}

// listedSum finds name's sha256 in a sha256sums file.
func listedSum(sums, name string) (string, bool) {
	b, err := regfile.ReadFile(sums, maxSmallFile)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if sum, n, ok := strings.Cut(line, "  "); ok && n == name {
			return sum, true
		}
	}
	return "", false
}

// manifestDiff names the top-level fields in which the manifest beside
// the image differs from the copy inside it, leaving out those only the
// one beside it has.
func manifestDiff(inner, side *Manifest) []string {
	s := *side
	s.Image, s.BlockMap, s.Store = nil, nil, nil
	fields := func(m *Manifest) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		if b, err := json.Marshal(m); err == nil {
			json.Unmarshal(b, &out)
		}
		return out
	}
	a, b := fields(inner), fields(&s)
	var diff []string
	for k, v := range b {
		if !bytes.Equal(a[k], v) {
			diff = append(diff, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			diff = append(diff, k)
		}
	}
	sort.Strings(diff)
	return diff
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
		w := &walker{fs: fs, seen: map[uint32]string{}}
		if err := w.walk("/", 0); err != nil {
			info.Problems = append(info.Problems, fmt.Sprintf("partition %d: %v", i+1, err))
		}
		pi.Files = w.out
		for _, p := range w.problems {
			info.Problems = append(info.Problems, fmt.Sprintf("partition %d: %s", i+1, p))
		}
		if p.Bootable {
			if b, err := fs.ReadFile(syslinuxCfg, maxSmallFile); err == nil {
				info.BootConfig = string(b)
			} else if !errors.Is(err, fat.ErrNotExist) {
				info.Problems = append(info.Problems, fmt.Sprintf("partition %d: %v", i+1, err))
			}
		}
		if b, err := fs.ReadFile(BootManifest, maxSmallFile); err == nil {
			if m, err := ReadManifest(b); err == nil {
				info.Manifest, info.ManifestFrom = m, fmt.Sprintf("partition %d: %s", i+1, BootManifest)
				info.inner = m
			} else {
				info.Problems = append(info.Problems, fmt.Sprintf("partition %d: %s: %v", i+1, BootManifest, err))
			}
		} else if !errors.Is(err, fat.ErrNotExist) {
			info.Problems = append(info.Problems, fmt.Sprintf("partition %d: %v", i+1, err))
		}
		if si, reps := readStore(fs); si != nil {
			info.Store = si
			info.Reports = append(info.Reports, reps...)
			for _, p := range si.Problems {
				info.Problems = append(info.Problems, fmt.Sprintf("partition %d: store: %s", i+1, p))
			}
		}
		info.Partitions = append(info.Partitions, pi)
	}
	if !any {
		return fmt.Errorf("%w: the partition table is empty", ErrNotImage)
	}
	sort.SliceStable(info.Reports, func(i, j int) bool { return info.Reports[i].Boot > info.Reports[j].Boot })
	return nil
}

// walker lists a FAT tree, checking each file's cluster chain and
// refusing to follow a directory that is already on the list (a cycle).
type walker struct {
	fs       *fat.FS
	n        int
	seen     map[uint32]string // directory cluster -> path
	out      []fat.Entry
	problems []string // damage that does not stop the listing
}

// walk lists dir; an error is damage that stops the listing.
func (w *walker) walk(dir string, depth int) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("directories nested deeper than %d at %s", maxTreeDepth, dir)
	}
	es, err := w.fs.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range es {
		w.n++
		if w.n > maxTreeFiles {
			return fmt.Errorf("more than %d files; listing stopped", maxTreeFiles)
		}
		p := strings.TrimSuffix(dir, "/") + "/" + e.Name
		if err := w.fs.CheckFile(e); err != nil {
			w.problems = append(w.problems, fmt.Sprintf("%s: %v", p, err))
		}
		e.Name = p
		w.out = append(w.out, e)
		if !e.Dir {
			continue
		}
		if c := e.Cluster(); c != 0 {
			if prev, ok := w.seen[c]; ok {
				w.problems = append(w.problems, fmt.Sprintf("directory cycle: %s is %s again (cluster %d); not followed", p, prev, c))
				continue
			}
			w.seen[c] = p
		}
		if err := w.walk(p, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// readStore reads the board's store (package store) on a data partition:
// its boot counter and the kept reports. What a power cut leaves by
// design is a note; a state copy or report that does not read back is a
// problem (a torn newest copy among them: from the card alone it cannot
// be told from damage).
func readStore(fs *fat.FS) (*StoreInfo, []ReportInfo) {
	if _, err := fs.ReadFile(store.Dir+"/"+store.StateA, store.StateSize); err != nil {
		return nil, nil // not a data partition
	}
	c, err := store.Load(func(name string) ([]byte, error) { return fs.ReadFile(store.Dir+"/"+name, maxSmallFile) })
	if err != nil {
		return &StoreInfo{Problems: []string{err.Error()}}, nil
	}
	si := &StoreInfo{Boot: c.State.Boot, Seq: c.Seq, From: c.From, Notes: c.Notes, Problems: c.Problems, Log: c.Log}
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
