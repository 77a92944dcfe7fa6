// Package store keeps what the board writes — the boot counter, reports,
// the policy, and later leases, host keys and a log — on the data
// partition so that pulling the plug at any moment loses nothing written
// before and damages nothing.
//
// FAT metadata (allocation, renames, sizes, the dirty bit) cannot be
// updated safely against a power cut, and the firmware has no FAT checker
// to repair it. So the board never changes it: the build preallocates
// every file the board will write, contiguous, in the data partition's
// ocfw folder (Files); at boot the board checks with a read-only FAT
// reader that each file still has one contiguous extent of the right
// size, owned by no other file, and from then on writes only inside those
// extents, through the block device, with the file system not mounted.
//
// Inside the extents:
//   - state-a.bin and state-b.bin hold the state (boot counter, which
//     report slot holds which boot, named values such as the policy) as
//     one checksummed record each; a write goes to the older copy, so a
//     torn write leaves the newer one, and the newest valid copy wins;
//   - report-01.json … report-11.json are report slots: plain JSON padded
//     with spaces, so they stay readable on a PC. A new report goes to a
//     slot no kept report uses, and only once it is on the card does the
//     state name it (with its length and sha256) and drop the oldest: a
//     torn report is never named, an earlier one is never overwritten;
//   - log.bin is a ring of one-sector, checksummed log records.
package store

import (
	"fmt"

	"github.com/ocfw/ocfw/plan"
)

// Sizes of the preallocated files.
const (
	StateSize = 64 << 10  // each of the two state copies
	SlotSize  = 128 << 10 // one report
	LogSize   = 1 << 20   // the log ring: 2048 records
	// Keep is how many reports stay on the card; there is one slot more
	// so the newest is written before the oldest is given up.
	Keep  = 10
	Slots = Keep + 1
)

// File names inside the ocfw folder.
const (
	StateA  = "state-a.bin"
	StateB  = "state-b.bin"
	LogFile = "log.bin"
)

// Dir is the folder on the data partition, from its root.
const Dir = "/" + plan.ReportDir

// SlotName is report slot i's file name (i from 1).
func SlotName(i int) string { return fmt.Sprintf("report-%02d.json", i) }

// File is one preallocated file.
type File struct {
	Name string // inside Dir
	Size int64
}

// Files lists the files the build preallocates, in the order it creates
// them (so a fresh file system lays them out one after the other).
func Files() []File {
	fs := []File{{StateA, StateSize}, {StateB, StateSize}}
	for i := 1; i <= Slots; i++ {
		fs = append(fs, File{SlotName(i), SlotSize})
	}
	return append(fs, File{LogFile, LogSize})
}

// TotalSize is the room the files take, before cluster rounding.
func TotalSize() int64 {
	var n int64
	for _, f := range Files() {
		n += f.Size
	}
	return n
}
