// Package adv reads and writes SYSLINUX's auxiliary data vector (ADV):
// the two 512-byte copies at the end of ldlinux.sys where the loader
// finds BOOTONCE, the label it boots once and then clears itself.
//
// Format (SYSLINUX 6.04, checked under QEMU, see FACTS): each copy has
// magic 0x5a2d2fa5 at 0, a checksum at 4, 500 bytes of tag/length/value
// records from 8 (tag 0 ends them) and magic 0xdd28bf64 at 508; the
// little-endian dwords from 4 to 507 sum to 0xa3041767. The loader reads
// copy 0 if it is valid, else copy 1, so Write writes copy 0 first: a
// power cut tearing it leaves the old copy 1 in force, one tearing copy 1
// leaves the new copy 0.
//
// Pure Go, no I/O beyond an io.WriterAt: the board writes the sectors in
// place through the boot partition's block device, never through a FAT
// driver.
package adv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Sizes and magics of the format.
const (
	CopySize = 512          // one copy
	Size     = 2 * CopySize // both copies, the last two sectors of ldlinux.sys
	dataLen  = CopySize - 12

	magicHead = 0x5a2d2fa5
	magicSum  = 0xa3041767
	magicTail = 0xdd28bf64
)

// Tags of the records SYSLINUX knows.
const (
	TagBootOnce = 1 // a label booted once, then cleared by the loader
	TagMenuSave = 2 // the menu's saved entry (UI menu.c32, MENU SAVE)
)

// ADV is the records of one copy, by tag (0 is never a tag).
type ADV map[byte][]byte

// BootOnce returns the BOOTONCE label, "" when there is none.
func (a ADV) BootOnce() string { return string(a[TagBootOnce]) }

// ErrInvalid says neither copy is valid.
var ErrInvalid = errors.New("SYSLINUX ADV: neither copy is valid")

// Encode returns one copy holding a's records (in tag order) with its
// magics and checksum.
func Encode(a ADV) ([]byte, error) {
	b := make([]byte, CopySize)
	binary.LittleEndian.PutUint32(b[0:], magicHead)
	binary.LittleEndian.PutUint32(b[CopySize-4:], magicTail)
	p := 8
	for tag := 1; tag < 256; tag++ {
		v, ok := a[byte(tag)]
		if !ok || len(v) == 0 {
			continue // an empty value is no record, as SYSLINUX's own writer does
		}
		if len(v) > 255 {
			return nil, fmt.Errorf("SYSLINUX ADV: tag %d's value is %d bytes, at most 255", tag, len(v))
		}
		if p+2+len(v) > 8+dataLen {
			return nil, fmt.Errorf("SYSLINUX ADV: records need more than its %d bytes", dataLen)
		}
		b[p], b[p+1] = byte(tag), byte(len(v))
		copy(b[p+2:], v)
		p += 2 + len(v)
	}
	if _, ok := a[0]; ok {
		return nil, errors.New("SYSLINUX ADV: tag 0 ends the records, it holds no value")
	}
	binary.LittleEndian.PutUint32(b[4:], magicSum-sum(b))
	return b, nil
}

// sum adds the dwords from 8 to 507 (the checksum at 4 excluded).
func sum(b []byte) uint32 {
	var s uint32
	for i := 8; i < CopySize-4; i += 4 {
		s += binary.LittleEndian.Uint32(b[i:])
	}
	return s
}

// Valid reports whether copy is a whole, checksummed ADV copy.
func Valid(copy []byte) bool {
	if len(copy) != CopySize {
		return false
	}
	return binary.LittleEndian.Uint32(copy[0:]) == magicHead &&
		binary.LittleEndian.Uint32(copy[CopySize-4:]) == magicTail &&
		binary.LittleEndian.Uint32(copy[4:])+sum(copy) == magicSum
}

// Decode reads both copies as the loader does: copy 0 if valid, else
// copy 1. It returns which copy it used.
func Decode(b []byte) (ADV, int, error) {
	if len(b) != Size {
		return nil, -1, fmt.Errorf("SYSLINUX ADV: %d bytes, want %d", len(b), Size)
	}
	for i := 0; i < 2; i++ {
		c := b[i*CopySize : (i+1)*CopySize]
		if Valid(c) {
			return parse(c), i, nil
		}
	}
	return nil, -1, ErrInvalid
}

func parse(c []byte) ADV {
	a := ADV{}
	for p := 8; p+2 <= 8+dataLen; {
		tag, n := c[p], int(c[p+1])
		if tag == 0 || p+2+n > 8+dataLen {
			break
		}
		a[tag] = append([]byte(nil), c[p+2:p+2+n]...)
		p += 2 + n
	}
	return a
}

// Device is where the ADV lives: the boot partition's block device.
type Device interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
}

// Write writes a as both copies at off (the last Size bytes of
// ldlinux.sys), copy 0 first, each synced before the next, after
// checking that off holds an ADV (at least one valid copy): a wrong
// offset is refused, never overwritten.
func Write(dev Device, off int64, a ADV) error {
	old := make([]byte, Size)
	if _, err := dev.ReadAt(old, off); err != nil {
		return fmt.Errorf("SYSLINUX ADV at %d: %w", off, err)
	}
	if _, _, err := Decode(old); err != nil {
		return fmt.Errorf("%w at offset %d: not writing there", err, off)
	}
	c, err := Encode(a)
	if err != nil {
		return err
	}
	for i := int64(0); i < 2; i++ {
		if _, err := dev.WriteAt(c, off+i*CopySize); err != nil {
			return fmt.Errorf("SYSLINUX ADV copy %d: %w", i, err)
		}
		if err := dev.Sync(); err != nil {
			return fmt.Errorf("SYSLINUX ADV copy %d: %w", i, err)
		}
	}
	return nil
}

// Read decodes the ADV at off.
func Read(dev io.ReaderAt, off int64) (ADV, error) {
	b := make([]byte, Size)
	if _, err := dev.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("SYSLINUX ADV at %d: %w", off, err)
	}
	a, _, err := Decode(b)
	return a, err
}
