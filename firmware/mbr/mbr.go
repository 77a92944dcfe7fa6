// Package mbr reads and writes a DOS master boot record: boot code, disk
// signature and four primary partition entries with both CHS and LBA
// addresses, because old PC BIOSes (tinyBIOS, comBIOS) still look at CHS.
package mbr

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes and offsets in the 512-byte sector.
const (
	SectorSize   = 512
	BootCodeSize = 440
	sigOffset    = 440
	tableOffset  = 446
	magicOffset  = 510
)

// Geometry is the BIOS disk geometry CHS fields are computed with: 255
// heads and 63 sectors per track, what every BIOS of the boards' era
// assumes for a CF card in LBA mode.
const (
	Heads           = 255
	SectorsPerTrack = 63
)

// Partition types ocfw writes.
const (
	TypeFAT16   = 0x06 // FAT16 >= 32 MiB, CHS-addressable
	TypeFAT32L  = 0x0c // FAT32, LBA
	TypeFAT16L  = 0x0e // FAT16, LBA
	TypeFAT12   = 0x01
	TypeFAT16s  = 0x04 // FAT16 < 32 MiB
	TypeFAT32   = 0x0b
	TypeEmpty   = 0x00
	bootableFlg = 0x80
)

// Partition is one primary partition entry.
type Partition struct {
	Bootable bool
	Type     byte
	Start    uint32 // first LBA
	Sectors  uint32
}

// End returns the LBA just past the partition.
func (p Partition) End() uint64 { return uint64(p.Start) + uint64(p.Sectors) }

// MBR is a whole boot record.
type MBR struct {
	BootCode   [BootCodeSize]byte
	Signature  uint32
	Partitions [4]Partition
}

// CHS encodes an LBA as the 3-byte CHS field, clamped to 1023/254/63 past
// the 8 GB CHS limit as partitioning tools do.
func CHS(lba uint32) [3]byte {
	c := lba / (Heads * SectorsPerTrack)
	h := (lba / SectorsPerTrack) % Heads
	s := lba%SectorsPerTrack + 1
	if c > 1023 {
		c, h, s = 1023, Heads-1, SectorsPerTrack
	}
	return [3]byte{byte(h), byte(s) | byte((c>>8)&3)<<6, byte(c)}
}

// Bytes renders the record as a 512-byte sector.
func (m *MBR) Bytes() []byte {
	b := make([]byte, SectorSize)
	copy(b, m.BootCode[:])
	binary.LittleEndian.PutUint32(b[sigOffset:], m.Signature)
	for i, p := range m.Partitions {
		if p.Type == TypeEmpty {
			continue
		}
		e := b[tableOffset+16*i : tableOffset+16*(i+1)]
		if p.Bootable {
			e[0] = bootableFlg
		}
		first := CHS(p.Start)
		last := CHS(p.Start + p.Sectors - 1)
		copy(e[1:4], first[:])
		e[4] = p.Type
		copy(e[5:8], last[:])
		binary.LittleEndian.PutUint32(e[8:], p.Start)
		binary.LittleEndian.PutUint32(e[12:], p.Sectors)
	}
	b[magicOffset], b[magicOffset+1] = 0x55, 0xaa
	return b
}

// ErrNoMBR marks a sector without the 55 AA boot signature.
var ErrNoMBR = errors.New("no MBR: the first sector lacks the 55 AA boot signature")

// Parse reads a boot record from the first sector of a disk. It checks
// the signature, the status bytes and that partitions do not overlap;
// diskSectors, when non-zero, bounds every partition.
func Parse(b []byte, diskSectors uint64) (*MBR, error) {
	if len(b) < SectorSize {
		return nil, fmt.Errorf("mbr: %d bytes, need %d", len(b), SectorSize)
	}
	if b[magicOffset] != 0x55 || b[magicOffset+1] != 0xaa {
		return nil, ErrNoMBR
	}
	m := &MBR{Signature: binary.LittleEndian.Uint32(b[sigOffset:])}
	copy(m.BootCode[:], b)
	for i := range m.Partitions {
		e := b[tableOffset+16*i : tableOffset+16*(i+1)]
		if e[0] != 0 && e[0] != bootableFlg {
			return nil, fmt.Errorf("mbr: partition %d: status byte %#02x is neither 0x00 nor 0x80: not a partition table", i+1, e[0])
		}
		p := Partition{Bootable: e[0] == bootableFlg, Type: e[4],
			Start: binary.LittleEndian.Uint32(e[8:]), Sectors: binary.LittleEndian.Uint32(e[12:])}
		if p.Type == TypeEmpty {
			continue
		}
		if p.Start == 0 || p.Sectors == 0 {
			return nil, fmt.Errorf("mbr: partition %d: start %d, %d sectors: invalid", i+1, p.Start, p.Sectors)
		}
		if diskSectors > 0 && p.End() > diskSectors {
			return nil, fmt.Errorf("mbr: partition %d ends at sector %d, past the end of the %d-sector disk (truncated image?)", i+1, p.End(), diskSectors)
		}
		m.Partitions[i] = p
	}
	for i, p := range m.Partitions {
		for j := i + 1; j < len(m.Partitions); j++ {
			q := m.Partitions[j]
			if p.Type != TypeEmpty && q.Type != TypeEmpty && uint64(p.Start) < q.End() && uint64(q.Start) < p.End() {
				return nil, fmt.Errorf("mbr: partitions %d and %d overlap", i+1, j+1)
			}
		}
	}
	return m, nil
}

// TypeName names a partition type byte.
func TypeName(t byte) string {
	switch t {
	case TypeFAT12:
		return "FAT12"
	case TypeFAT16s, TypeFAT16:
		return "FAT16"
	case TypeFAT16L:
		return "FAT16 (LBA)"
	case TypeFAT32:
		return "FAT32"
	case TypeFAT32L:
		return "FAT32 (LBA)"
	case 0x83:
		return "Linux"
	}
	return fmt.Sprintf("type %#02x", t)
}
