// Package fis reads and writes RedBoot's Flash Image System directory:
// 256-byte struct fis_image_desc entries (name, flash base, memory base,
// size, entry point, data length, checksums) in the byte order of the
// RedBoot that reads them. The NSLU2's Linksys RedBoot runs big-endian,
// as do the Gateworks Avila RedBoots, so ocfw writes big-endian.
package fis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// EntrySize is sizeof(struct fis_image_desc).
const EntrySize = 256

// Entry is one FIS directory entry. Addresses are absolute (flash base
// plus offset, e.g. 0x50060000 for the NSLU2's Kernel).
type Entry struct {
	Name       string `json:"name"`
	FlashBase  uint32 `json:"flash_base"`
	MemBase    uint32 `json:"mem_base"`
	Size       uint32 `json:"size"`
	Entry      uint32 `json:"entry"`
	DataLength uint32 `json:"data_length"`
}

// Encode writes entries into a directory block of blockSize bytes, the
// rest erased (0xff) as RedBoot leaves unused slots.
func Encode(entries []Entry, order binary.ByteOrder, blockSize int) ([]byte, error) {
	if len(entries)*EntrySize > blockSize {
		return nil, fmt.Errorf("fis: %d entries do not fit a %d-byte directory", len(entries), blockSize)
	}
	b := bytes.Repeat([]byte{0xff}, blockSize)
	for i, e := range entries {
		if len(e.Name) == 0 || len(e.Name) > 15 {
			return nil, fmt.Errorf("fis: entry name %q: 1 to 15 bytes", e.Name)
		}
		d := b[i*EntrySize : (i+1)*EntrySize]
		for j := range d {
			d[j] = 0
		}
		copy(d, e.Name)
		for j, v := range []uint32{e.FlashBase, e.MemBase, e.Size, e.Entry, e.DataLength} {
			order.PutUint32(d[16+4*j:], v)
		}
		// desc_cksum and file_cksum stay 0: RedBoot only checks them when
		// built with CYGSEM_REDBOOT_FIS_CRC_CHECK, which these boards' are not.
	}
	return b, nil
}

// Decode reads a directory block: entries until the first erased (0xff)
// or empty slot. A block whose first entry is not a printable name is not
// a FIS directory.
func Decode(b []byte, order binary.ByteOrder) ([]Entry, error) {
	var out []Entry
	for o := 0; o+EntrySize <= len(b); o += EntrySize {
		d := b[o : o+EntrySize]
		if d[0] == 0xff || d[0] == 0 {
			break
		}
		end := bytes.IndexByte(d[:16], 0)
		if end < 0 {
			return nil, fmt.Errorf("fis: entry %d: name not NUL-terminated", len(out))
		}
		for _, c := range d[:end] {
			if c < 0x20 || c > 0x7e {
				return nil, fmt.Errorf("fis: entry %d: name has byte %#02x: not a FIS directory", len(out), c)
			}
		}
		e := Entry{Name: string(d[:end])}
		vals := []*uint32{&e.FlashBase, &e.MemBase, &e.Size, &e.Entry, &e.DataLength}
		for j, p := range vals {
			*p = order.Uint32(d[16+4*j:])
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, errors.New("fis: no entries: not a FIS directory")
	}
	return out, nil
}
