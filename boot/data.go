package boot

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"
)

// FATLabel returns the volume label in a FAT boot sector (FAT12/16 at
// 0x2B, FAT32 at 0x47, each after an extended boot signature 0x29), or
// false when the sector is not a FAT boot sector.
func FATLabel(sector []byte) (string, bool) {
	if len(sector) < 512 || sector[510] != 0x55 || sector[511] != 0xaa {
		return "", false
	}
	bps := int(sector[11]) | int(sector[12])<<8
	if bps != 512 && bps != 1024 && bps != 2048 && bps != 4096 {
		return "", false
	}
	if spc := sector[13]; spc == 0 || spc&(spc-1) != 0 {
		return "", false
	}
	// An MBR also ends in 55 AA: a FAT boot sector names its type too.
	switch {
	case sector[0x42] == 0x29 && bytes.HasPrefix(sector[0x52:0x5a], []byte("FAT32")):
		return strings.TrimRight(string(sector[0x47:0x52]), " \x00"), true
	case sector[0x26] == 0x29 && bytes.HasPrefix(sector[0x36:0x3e], []byte("FAT")):
		return strings.TrimRight(string(sector[0x2b:0x36]), " \x00"), true
	}
	return "", false
}

// FindLabel looks through the block devices in sysBlock (/sys/class/block)
// for a FAT file system labelled label (case-insensitive, like DOS) and
// returns its device node in devDir. Partitions come before whole disks.
func FindLabel(sysBlock, devDir, label string) (string, error) {
	es, err := os.ReadDir(sysBlock)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	isPart := func(n string) bool {
		_, err := os.Stat(filepath.Join(sysBlock, n, "partition"))
		return err == nil
	}
	sort.SliceStable(names, func(i, j int) bool {
		pi, pj := isPart(names[i]), isPart(names[j])
		if pi != pj {
			return pi
		}
		return names[i] < names[j]
	})
	var seen []string
	for _, n := range names {
		if strings.HasPrefix(n, "loop") || strings.HasPrefix(n, "ram") {
			continue
		}
		dev := filepath.Join(devDir, n)
		f, err := os.Open(dev)
		if err != nil {
			continue
		}
		sector := make([]byte, 512)
		_, err = io.ReadFull(f, sector)
		f.Close()
		if err != nil {
			continue
		}
		if l, ok := FATLabel(sector); ok {
			seen = append(seen, n+"="+l)
			if strings.EqualFold(l, label) {
				return dev, nil
			}
		}
	}
	if len(seen) == 0 {
		return "", fmt.Errorf("no FAT file system labelled %s among %d block devices", label, len(names))
	}
	return "", fmt.Errorf("no FAT file system labelled %s (found %s)", label, strings.Join(seen, ", "))
}

// openStore finds the data partition by its label and opens its store
// (package store), or says why not. It never mounts the partition: the
// store writes inside preallocated files through the block device.
func openStore(cfg *Config, pl *plan.Plan, opts plan.Options) (*store.Store, string) {
	dev := cfg.DataDevice
	if dev == "" {
		label := pl.DataPartitionLabel()
		// Disk drivers probe in the background: give the partition a moment.
		deadline := time.Now().Add(cfg.DataWait)
		var err error
		for {
			dev, err = FindLabel(cfg.path("/sys/class/block"), cfg.path("/dev"), label)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			return nil, err.Error()
		}
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return nil, err.Error()
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Sprintf("%s: %v", dev, err)
	}
	st, err := store.Open(f, size, store.Options{WriteTime: opts.TestWriteTimeOrZero(), Progress: cfg.printf})
	if err != nil {
		f.Close()
		return nil, fmt.Sprintf("%s: %v; nothing written to it (ocfw flash the image again to start afresh)", dev, err)
	}
	return st, ""
}

// DetectPCI lists the PCI devices under dir (/sys/bus/pci/devices) that
// are crypto engines of the catalog, marking whether the plan expects them,
// and the plan's PCI engines that are missing.
func DetectPCI(dir string, pl *plan.Plan) []string {
	present := map[catalog.PCIID]bool{}
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		v, err1 := readHex(filepath.Join(dir, e.Name(), "vendor"))
		d, err2 := readHex(filepath.Join(dir, e.Name(), "device"))
		if err1 == nil && err2 == nil {
			present[catalog.PCIID{Vendor: uint16(v), Device: uint16(d)}] = true
		}
	}
	planned := map[string]bool{}
	for _, e := range pl.Engines {
		planned[e.ID] = true
	}
	var lines []string
	for _, e := range catalog.Engines() {
		if e.Match.Bus != catalog.BusPCI {
			continue
		}
		found := false
		for _, id := range e.Match.PCI {
			if present[catalog.PCIID{Vendor: id.Vendor, Device: id.Device}] {
				found = true
				what := "in the plan"
				if !planned[e.ID] {
					what = "not in the plan: not used"
				}
				lines = append(lines, fmt.Sprintf("PCI %04x:%04x %s (%s), %s", id.Vendor, id.Device, orName(id.Chip, e.ID), e.ID, what))
			}
		}
		if !found && planned[e.ID] {
			lines = append(lines, fmt.Sprintf("%s: planned, but no PCI device %s found", e.ID, pciList(e.Match.PCI)))
		}
	}
	if len(es) == 0 {
		lines = append(lines, "no PCI bus visible (no "+dir+")")
	}
	return lines
}

func orName(chip, id string) string {
	if chip != "" {
		return chip
	}
	return id
}

func pciList(ids []catalog.PCIID) string {
	var s []string
	for _, id := range ids {
		s = append(s, fmt.Sprintf("%04x:%04x", id.Vendor, id.Device))
	}
	return strings.Join(s, " or ")
}

func readHex(name string) (uint64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 16)
}
