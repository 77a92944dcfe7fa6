// Package fat reads FAT12, FAT16 and FAT32 file systems inside an image:
// the boot sector's fields, directories with long names, files, and the
// clusters in use. It is read-only and bounds every walk, so a damaged
// or hostile image gives an error, never a panic or an endless loop.
// Writing is left to Debian's mkfs.fat and mtools (see package firmware).
//
// Why not go-diskfs for reading: v1.9.4, the newest available, has FAT16
// and FAT32 defects (package firmware's tools.go lists them), and this
// reader must refuse a corrupted image with an error, never a panic
// (FuzzInspect in package firmware fuzzes it), and read from any
// io.ReaderAt at an offset, without a writable handle on the image or card.
package fat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strings"
	"time"
	"unicode/utf16"
)

// FS is an opened file system.
type FS struct {
	r      io.ReaderAt
	off    int64 // byte offset of the boot sector in r
	Type   string
	OEM    string
	Label  string // from the boot sector
	Serial uint32

	BytesPerSector    int
	SectorsPerCluster int
	ReservedSectors   int
	NumFATs           int
	RootEntries       int
	TotalSectors      int64
	FATSectors        int64
	HiddenSectors     uint32
	Heads             int
	SectorsPerTrack   int
	MediaByte         byte

	rootCluster uint32 // FAT32
	rootStart   int64  // FAT12/16: byte offset of the root directory (relative to off)
	dataStart   int64  // byte offset of cluster 2 (relative to off)
	clusters    uint32 // number of data clusters
	fat         []byte // the first FAT, read once
}

// Entry is one directory entry.
type Entry struct {
	Name    string    `json:"name"`
	Dir     bool      `json:"dir,omitempty"`
	Size    int64     `json:"size"`
	Attr    byte      `json:"attr"`
	ModTime time.Time `json:"mtime"`
	cluster uint32
}

// Attribute bits.
const (
	AttrReadOnly = 0x01
	AttrHidden   = 0x02
	AttrSystem   = 0x04
	AttrVolume   = 0x08
	AttrDir      = 0x10
	attrLFN      = 0x0f
)

// Open reads the boot sector at byte off of r; size bounds the file
// system (the partition's length).
func Open(r io.ReaderAt, off, size int64) (*FS, error) {
	bs := make([]byte, 512)
	if _, err := r.ReadAt(bs, off); err != nil {
		return nil, fmt.Errorf("fat: reading the boot sector: %w", err)
	}
	if bs[510] != 0x55 || bs[511] != 0xaa {
		return nil, errors.New("fat: no boot sector signature (55 AA): not a FAT file system")
	}
	le16 := func(o int) int { return int(binary.LittleEndian.Uint16(bs[o:])) }
	le32 := func(o int) uint32 { return binary.LittleEndian.Uint32(bs[o:]) }
	fs := &FS{r: r, off: off,
		OEM:               strings.TrimRight(string(bs[3:11]), " \x00"),
		BytesPerSector:    le16(11),
		SectorsPerCluster: int(bs[13]),
		ReservedSectors:   le16(14),
		NumFATs:           int(bs[16]),
		RootEntries:       le16(17),
		MediaByte:         bs[21],
		SectorsPerTrack:   le16(24),
		Heads:             le16(26),
		HiddenSectors:     le32(28),
	}
	switch fs.BytesPerSector {
	case 512, 1024, 2048, 4096:
	default:
		return nil, fmt.Errorf("fat: %d bytes per sector: not a FAT file system", fs.BytesPerSector)
	}
	if spc := fs.SectorsPerCluster; spc == 0 || spc&(spc-1) != 0 || spc > 128 {
		return nil, fmt.Errorf("fat: %d sectors per cluster: not a FAT file system", spc)
	}
	if fs.ReservedSectors == 0 || fs.NumFATs == 0 || fs.NumFATs > 4 {
		return nil, fmt.Errorf("fat: %d reserved sectors, %d FATs: not a FAT file system", fs.ReservedSectors, fs.NumFATs)
	}
	fs.TotalSectors = int64(le16(19))
	if fs.TotalSectors == 0 {
		fs.TotalSectors = int64(le32(32))
	}
	fs.FATSectors = int64(le16(22))
	fat32 := fs.FATSectors == 0
	if fat32 {
		fs.FATSectors = int64(le32(36))
		fs.rootCluster = le32(44)
	}
	bps := int64(fs.BytesPerSector)
	if fs.TotalSectors == 0 || fs.FATSectors == 0 {
		return nil, errors.New("fat: zero total or FAT sectors: not a FAT file system")
	}
	if size > 0 && fs.TotalSectors*bps > size {
		return nil, fmt.Errorf("fat: file system of %d bytes does not fit its %d-byte partition (truncated image?)", fs.TotalSectors*bps, size)
	}
	rootSectors := (int64(fs.RootEntries)*32 + bps - 1) / bps
	fs.rootStart = (int64(fs.ReservedSectors) + int64(fs.NumFATs)*fs.FATSectors) * bps
	fs.dataStart = fs.rootStart + rootSectors*bps
	dataSectors := fs.TotalSectors - fs.dataStart/bps
	if dataSectors <= 0 {
		return nil, errors.New("fat: no room for data after the FATs: not a FAT file system")
	}
	fs.clusters = uint32(dataSectors / int64(fs.SectorsPerCluster))
	// The cluster count decides the FAT width (Microsoft's FAT spec).
	switch {
	case fs.clusters < 4085:
		fs.Type = "FAT12"
	case fs.clusters < 65525:
		fs.Type = "FAT16"
	default:
		fs.Type = "FAT32"
	}
	if (fs.Type == "FAT32") != fat32 {
		return nil, fmt.Errorf("fat: %d clusters means %s but the boot sector is laid out as %s", fs.clusters, fs.Type, map[bool]string{true: "FAT32", false: "FAT12/16"}[fat32])
	}
	ext := 36 // extended boot record: serial at +3, label at +7
	if fat32 {
		ext = 64
	}
	if bs[ext+2] == 0x29 {
		fs.Serial = le32(ext + 3)
		fs.Label = strings.TrimRight(string(bs[ext+7:ext+18]), " ")
	}
	need := fs.fatBytes(fs.clusters + 2)
	if need > fs.FATSectors*bps {
		return nil, fmt.Errorf("fat: the FAT (%d bytes) is too short for %d clusters", fs.FATSectors*bps, fs.clusters)
	}
	fs.fat = make([]byte, need)
	if _, err := r.ReadAt(fs.fat, off+int64(fs.ReservedSectors)*bps); err != nil {
		return nil, fmt.Errorf("fat: reading the FAT: %w", err)
	}
	if fat32 && (fs.rootCluster < 2 || fs.rootCluster >= fs.clusters+2) {
		return nil, fmt.Errorf("fat: root directory cluster %d out of range", fs.rootCluster)
	}
	return fs, nil
}

func (fs *FS) fatBytes(n uint32) int64 {
	switch fs.Type {
	case "FAT12":
		return (int64(n)*3 + 1) / 2
	case "FAT16":
		return int64(n) * 2
	}
	return int64(n) * 4
}

// Clusters is the number of data clusters.
func (fs *FS) Clusters() uint32 { return fs.clusters }

// ClusterBytes is the size of one cluster.
func (fs *FS) ClusterBytes() int64 { return int64(fs.SectorsPerCluster) * int64(fs.BytesPerSector) }

// MetadataBytes is the length of everything before the first data cluster:
// boot sector, reserved sectors, FATs and (FAT12/16) the root directory.
func (fs *FS) MetadataBytes() int64 { return fs.dataStart }

// next returns the FAT entry of cluster c.
func (fs *FS) next(c uint32) uint32 {
	switch fs.Type {
	case "FAT12":
		o := int(c) * 3 / 2
		v := uint32(binary.LittleEndian.Uint16(fs.fat[o:]))
		if c&1 == 1 {
			return v >> 4
		}
		return v & 0xfff
	case "FAT16":
		return uint32(binary.LittleEndian.Uint16(fs.fat[2*c:]))
	}
	return binary.LittleEndian.Uint32(fs.fat[4*c:]) & 0x0fffffff
}

func (fs *FS) isEnd(v uint32) bool {
	switch fs.Type {
	case "FAT12":
		return v >= 0xff8
	case "FAT16":
		return v >= 0xfff8
	}
	return v >= 0x0ffffff8
}

// chain follows a cluster chain, refusing loops and out-of-range links.
func (fs *FS) chain(start uint32) ([]uint32, error) {
	var out []uint32
	c := start
	for {
		if c < 2 || c >= fs.clusters+2 {
			return nil, fmt.Errorf("fat: cluster %d out of range (2..%d)", c, fs.clusters+1)
		}
		out = append(out, c)
		if uint32(len(out)) > fs.clusters {
			return nil, errors.New("fat: cluster chain loops")
		}
		n := fs.next(c)
		if fs.isEnd(n) {
			return out, nil
		}
		c = n
	}
}

// UsedClusters returns the allocated clusters' byte ranges relative to the
// file system's start, merged, in order.
func (fs *FS) UsedClusters() [][2]int64 {
	var out [][2]int64
	cb := fs.ClusterBytes()
	for c := uint32(2); c < fs.clusters+2; c++ {
		if fs.next(c) == 0 {
			continue
		}
		start := fs.dataStart + int64(c-2)*cb
		if n := len(out); n > 0 && out[n-1][1] == start {
			out[n-1][1] += cb
			continue
		}
		out = append(out, [2]int64{start, start + cb})
	}
	return out
}

// maxDirEntries bounds a directory walk (a 32-byte entry per slot).
const maxDirEntries = 1 << 16

func (fs *FS) readDirAt(cluster uint32) ([]Entry, error) {
	var raw []byte
	if cluster == 0 && fs.Type != "FAT32" {
		raw = make([]byte, fs.RootEntries*32)
		if _, err := fs.r.ReadAt(raw, fs.off+fs.rootStart); err != nil {
			return nil, fmt.Errorf("fat: reading the root directory: %w", err)
		}
	} else {
		if cluster == 0 {
			cluster = fs.rootCluster
		}
		cs, err := fs.chain(cluster)
		if err != nil {
			return nil, err
		}
		cb := fs.ClusterBytes()
		if int64(len(cs))*cb/32 > maxDirEntries {
			return nil, fmt.Errorf("fat: directory of %d clusters is too large", len(cs))
		}
		raw = make([]byte, int64(len(cs))*cb)
		for i, c := range cs {
			if _, err := fs.r.ReadAt(raw[int64(i)*cb:int64(i+1)*cb], fs.off+fs.dataStart+int64(c-2)*cb); err != nil {
				return nil, fmt.Errorf("fat: reading a directory: %w", err)
			}
		}
	}
	return parseDir(raw), nil
}

// parseDir decodes directory entries, joining long-name slots to the short
// entry that follows them when their checksum matches.
func parseDir(raw []byte) []Entry {
	var out []Entry
	var lfn []uint16
	var lfnSum byte
	var lfnOK bool
	for o := 0; o+32 <= len(raw); o += 32 {
		e := raw[o : o+32]
		if e[0] == 0 {
			break
		}
		if e[0] == 0xe5 {
			lfn, lfnOK = nil, false
			continue
		}
		if e[11] == attrLFN {
			seq := e[0] & 0x1f
			if e[0]&0x40 != 0 {
				lfn, lfnSum, lfnOK = nil, e[13], true
			}
			if !lfnOK || e[13] != lfnSum || seq == 0 {
				lfnOK = false
				continue
			}
			var part []uint16
			for _, r := range [][2]int{{1, 11}, {14, 26}, {28, 32}} {
				for i := r[0]; i < r[1]; i += 2 {
					part = append(part, binary.LittleEndian.Uint16(e[i:]))
				}
			}
			lfn = append(part, lfn...)
			continue
		}
		if e[11]&AttrVolume != 0 {
			lfn, lfnOK = nil, false
			continue
		}
		name := shortName(e)
		if lfnOK && len(lfn) > 0 && checksum(e[:11]) == lfnSum {
			if i := indexU16(lfn, 0); i >= 0 {
				lfn = lfn[:i]
			}
			for len(lfn) > 0 && lfn[len(lfn)-1] == 0xffff {
				lfn = lfn[:len(lfn)-1]
			}
			name = string(utf16.Decode(lfn))
		}
		lfn, lfnOK = nil, false
		if name == "." || name == ".." {
			continue
		}
		cl := uint32(binary.LittleEndian.Uint16(e[26:])) | uint32(binary.LittleEndian.Uint16(e[20:]))<<16
		out = append(out, Entry{Name: name, Dir: e[11]&AttrDir != 0, Size: int64(binary.LittleEndian.Uint32(e[28:])),
			Attr: e[11], ModTime: dosTime(binary.LittleEndian.Uint16(e[24:]), binary.LittleEndian.Uint16(e[22:])), cluster: cl})
	}
	return out
}

func indexU16(s []uint16, v uint16) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func shortName(e []byte) string {
	base := strings.TrimRight(string(e[0:8]), " ")
	ext := strings.TrimRight(string(e[8:11]), " ")
	if base != "" && base[0] == 0x05 {
		base = "\xe5" + base[1:]
	}
	// Windows NT's lower-case flags, which mtools and Linux write for
	// names like "vmlinuz" that fit 8.3 in lower case.
	if e[12]&0x08 != 0 {
		base = strings.ToLower(base)
	}
	if e[12]&0x10 != 0 {
		ext = strings.ToLower(ext)
	}
	if ext == "" {
		return base
	}
	return base + "." + ext
}

func checksum(name []byte) byte {
	var s byte
	for _, c := range name {
		s = (s>>1 | s<<7) + c
	}
	return s
}

func dosTime(date, tm uint16) time.Time {
	if date == 0 {
		return time.Time{}
	}
	return time.Date(1980+int(date>>9), time.Month(date>>5&15), int(date&31),
		int(tm>>11), int(tm>>5&63), int(tm&31)*2, 0, time.UTC)
}

// ErrNotExist marks a missing path. It matches fs.ErrNotExist under
// errors.Is, so callers that read through an interface (the board's
// store) compare with the standard error, not with this package.
var ErrNotExist error = notExist{}

type notExist struct{}

func (notExist) Error() string        { return "no such file or directory" }
func (notExist) Is(target error) bool { return target == iofs.ErrNotExist }

func (fs *FS) lookup(path string) (Entry, error) {
	cur := Entry{Name: "/", Dir: true}
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		if part == "" {
			continue
		}
		if !cur.Dir {
			return Entry{}, fmt.Errorf("fat: %s: %s is not a directory", path, cur.Name)
		}
		es, err := fs.readDirAt(cur.cluster)
		if err != nil {
			return Entry{}, err
		}
		found := false
		for _, e := range es {
			if strings.EqualFold(e.Name, part) {
				cur, found = e, true
				break
			}
		}
		if !found {
			return Entry{}, fmt.Errorf("fat: %s: %w", path, ErrNotExist)
		}
	}
	return cur, nil
}

// ReadDir lists a directory ("/" or "" is the root).
func (fs *FS) ReadDir(path string) ([]Entry, error) {
	e, err := fs.lookup(path)
	if err != nil {
		return nil, err
	}
	if !e.Dir {
		return nil, fmt.Errorf("fat: %s is not a directory", path)
	}
	if e.Name != "/" && e.cluster == 0 {
		return nil, nil // empty directory
	}
	return fs.readDirAt(e.cluster)
}

// ReadFile returns a file's contents, refusing files over max bytes.
func (fs *FS) ReadFile(path string, max int64) ([]byte, error) {
	e, err := fs.lookup(path)
	if err != nil {
		return nil, err
	}
	if e.Dir {
		return nil, fmt.Errorf("fat: %s is a directory", path)
	}
	if e.Size > max {
		return nil, fmt.Errorf("fat: %s is %d bytes, more than the %d this reader accepts", path, e.Size, max)
	}
	if e.Size == 0 {
		return []byte{}, nil
	}
	cs, err := fs.chain(e.cluster)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cb := fs.ClusterBytes()
	if int64(len(cs))*cb < e.Size {
		return nil, fmt.Errorf("fat: %s: %d bytes in a %d-cluster chain", path, e.Size, len(cs))
	}
	out := make([]byte, e.Size)
	for i, c := range cs {
		lo := int64(i) * cb
		if lo >= e.Size {
			break
		}
		hi := min(lo+cb, e.Size)
		if _, err := fs.r.ReadAt(out[lo:hi], fs.off+fs.dataStart+int64(c-2)*cb); err != nil {
			return nil, fmt.Errorf("fat: reading %s: %w", path, err)
		}
	}
	return out, nil
}

// Cluster is the entry's first cluster (0 for an empty file, and for the
// root directory on FAT12/16).
func (e Entry) Cluster() uint32 { return e.cluster }

// CheckFile follows a file's cluster chain and checks that it holds the
// file's size: no loop, no cluster out of range, not too short or longer
// than the size needs.
func (fs *FS) CheckFile(e Entry) error {
	if e.Dir || e.Size == 0 {
		return nil
	}
	cs, err := fs.chain(e.cluster)
	if err != nil {
		return err
	}
	cb := fs.ClusterBytes()
	if want := (e.Size + cb - 1) / cb; int64(len(cs)) != want {
		return fmt.Errorf("fat: %d bytes in a chain of %d clusters (want %d)", e.Size, len(cs), want)
	}
	return nil
}
