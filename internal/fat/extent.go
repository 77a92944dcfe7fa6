package fat

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Extent is where a file's bytes lie, relative to the file system's
// start (the partition's first byte).
type Extent struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
}

// Extent returns the byte range of a regular file whose clusters are
// contiguous, and refuses anything else: a missing file, a directory, an
// empty file, a fragmented or broken chain, a chain longer or shorter than
// the size says, or FAT copies that disagree about it. A file that passes
// can be rewritten in place, byte for byte, without touching the file
// system's metadata.
func (fs *FS) Extent(path string) (Extent, error) {
	e, err := fs.lookup(path)
	if err != nil {
		return Extent{}, err
	}
	if e.Dir {
		return Extent{}, fmt.Errorf("fat: %s is a directory", path)
	}
	if e.Size == 0 || e.cluster == 0 {
		return Extent{}, fmt.Errorf("fat: %s is empty: no clusters to write into", path)
	}
	cs, err := fs.chain(e.cluster)
	if err != nil {
		return Extent{}, fmt.Errorf("%s: %w", path, err)
	}
	cb := fs.ClusterBytes()
	if want := (e.Size + cb - 1) / cb; int64(len(cs)) != want {
		return Extent{}, fmt.Errorf("fat: %s: %d bytes but a chain of %d clusters (want %d)", path, e.Size, len(cs), want)
	}
	for i := 1; i < len(cs); i++ {
		if cs[i] != cs[i-1]+1 {
			return Extent{}, fmt.Errorf("fat: %s is fragmented (cluster %d follows %d)", path, cs[i], cs[i-1])
		}
	}
	if err := fs.copiesAgree(cs); err != nil {
		return Extent{}, fmt.Errorf("%s: %w", path, err)
	}
	return Extent{Path: path, Offset: fs.dataStart + int64(cs[0]-2)*cb, Size: e.Size}, nil
}

// copiesAgree checks that every FAT copy holds the same entries for the
// clusters cs (and so describes the same chain).
func (fs *FS) copiesAgree(cs []uint32) error {
	if fs.NumFATs < 2 || len(cs) == 0 {
		return nil
	}
	lo := fs.fatBytes(cs[0]) &^ 3
	hi := min(fs.fatBytes(cs[len(cs)-1]+1)+4, int64(len(fs.fat)))
	want := fs.fat[lo:hi]
	got := make([]byte, len(want))
	bps := int64(fs.BytesPerSector)
	for i := 1; i < fs.NumFATs; i++ {
		at := fs.off + (int64(fs.ReservedSectors)+int64(i)*fs.FATSectors)*bps + lo
		if _, err := fs.r.ReadAt(got, at); err != nil {
			return fmt.Errorf("fat: reading FAT copy %d: %w", i+1, err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("fat: FAT copy %d disagrees with the first about this file's clusters", i+1)
		}
	}
	return nil
}

// maxWalk bounds the number of entries Walk visits.
const maxWalk = 1 << 16

// Owners walks the whole tree and returns, for each allocated cluster
// reachable from a directory entry, the path that owns it. Two entries
// claiming one cluster (cross-linked files) are an error: a write into
// one would change the other.
func (fs *FS) Owners() (map[uint32]string, error) {
	owners := map[uint32]string{}
	claim := func(path string, cs []uint32) error {
		for _, c := range cs {
			if o, ok := owners[c]; ok {
				return fmt.Errorf("fat: cluster %d belongs to both %s and %s (cross-linked)", c, o, path)
			}
			owners[c] = path
		}
		return nil
	}
	seen := 0
	var walk func(dir string, cluster uint32, depth int) error
	walk = func(dir string, cluster uint32, depth int) error {
		if depth > 32 {
			return errors.New("fat: directories nested deeper than 32: a loop?")
		}
		es, err := fs.readDirAt(cluster)
		if err != nil {
			return err
		}
		for _, e := range es {
			if seen++; seen > maxWalk {
				return errors.New("fat: more than 65536 entries")
			}
			p := strings.TrimSuffix(dir, "/") + "/" + e.Name
			if e.cluster == 0 {
				continue
			}
			cs, err := fs.chain(e.cluster)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := claim(p, cs); err != nil {
				return err
			}
			if e.Dir {
				if err := walk(p, e.cluster, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if fs.Type == "FAT32" {
		cs, err := fs.chain(fs.rootCluster)
		if err != nil {
			return nil, fmt.Errorf("root directory: %w", err)
		}
		if err := claim("/", cs); err != nil {
			return nil, err
		}
	}
	if err := walk("/", 0, 0); err != nil {
		return nil, err
	}
	return owners, nil
}
