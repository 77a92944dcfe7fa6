package firmware

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ocfw/ocfw/firmware/mbr"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/store"
)

// Reports reads the reports a board kept, newest first, from wherever a
// user has them: an image file, a card in a reader (the whole disk or its
// data partition, as a block device), or a card mounted on a PC (its root
// folder or its ocfw folder). It only reads.
func Reports(path string) ([]ReportInfo, *StoreInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if fi.IsDir() {
		for _, dir := range []string{filepath.Join(path, store.Dir), path} {
			if _, err := os.Stat(filepath.Join(dir, store.StateA)); err == nil {
				return dirReports(dir)
			}
		}
		return nil, nil, fmt.Errorf("%s: no ocfw reports here (no %s or %s%s/%s): give the card's root or its ocfw folder", path, store.StateA, path, store.Dir, store.StateA)
	}
	if !fi.Mode().IsRegular() && fi.Mode()&os.ModeDevice == 0 {
		return nil, nil, fmt.Errorf("%s: not an image, a card or a card's folder", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, nil, err
	}
	sec := make([]byte, 512)
	if _, err := f.ReadAt(sec, 0); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var parts [][2]int64
	if rec, err := mbr.Parse(sec, uint64(size/512)); err == nil {
		for _, p := range rec.Partitions {
			if p.Type != mbr.TypeEmpty {
				parts = append(parts, [2]int64{int64(p.Start) * 512, int64(p.Sectors) * 512})
			}
		}
	}
	if len(parts) == 0 {
		// A partition (a FAT boot sector ends in 55 AA like an MBR), or a
		// partitionless data image.
		parts = [][2]int64{{0, size}}
	}
	for _, p := range parts {
		fsys, err := fat.Open(f, p[0], p[1])
		if err != nil {
			continue
		}
		if si, reps := readStore(fsys); si != nil {
			return reps, si, nil
		}
	}
	return nil, nil, fmt.Errorf("%s: no ocfw data partition with reports found (%d partitions looked at)", path, len(parts))
}

func dirReports(dir string) ([]ReportInfo, *StoreInfo, error) {
	c, err := store.Load(store.DirReader(os.DirFS(dir)))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	si := &StoreInfo{Boot: c.State.Boot, Seq: c.Seq, From: c.From, Notes: c.Notes, Problems: c.Problems, Log: c.Log}
	var out []ReportInfo
	for _, r := range c.Reports {
		ri := ReportInfo{Name: filepath.Join(dir, r.File), Boot: r.Boot}
		rep, err := report.Read(bytes.NewReader(r.JSON))
		if err != nil {
			ri.Error = err.Error()
		}
		ri.Report = rep
		out = append(out, ri)
	}
	if len(out) == 0 && c.Seq == 0 {
		return nil, si, errors.New(dir + ": the board has not written a report here yet")
	}
	return out, si, nil
}
