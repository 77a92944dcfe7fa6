package store

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// A record is a header and a payload, written at the start of a state
// copy or in one sector of the log:
//
//	0  magic "OCFWREC1"
//	8  sequence number, uint64 little-endian (1, 2, ...; 0 is never used)
//	16 payload length, uint32
//	20 kind, uint32 (kindState, kindLog)
//	24 CRC-32C of the payload
//	28 CRC-32C of bytes 0-27
//	32 payload
//
// A record whose magic, lengths or checksums do not hold — never written,
// torn by a power cut, or damaged — is ignored.
const (
	headerSize = 32
	magic      = "OCFWREC1"
	kindState  = 1
	kindLog    = 2
	sectorSize = 512
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type record struct {
	seq     uint64
	kind    uint32
	payload []byte
}

func encode(r record) []byte {
	b := make([]byte, headerSize+len(r.payload))
	copy(b, magic)
	binary.LittleEndian.PutUint64(b[8:], r.seq)
	binary.LittleEndian.PutUint32(b[16:], uint32(len(r.payload)))
	binary.LittleEndian.PutUint32(b[20:], r.kind)
	binary.LittleEndian.PutUint32(b[24:], crc32.Checksum(r.payload, castagnoli))
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
	copy(b[headerSize:], r.payload)
	return b
}

var (
	errBadRecord  = errors.New("damaged or torn record")
	errWrongKind  = errors.New("record of another kind")
	errOversize   = errors.New("record larger than its room")
	errAllZero    = errors.New("never written")
	errShortSpace = errors.New("record header cut off")
)

// header returns the sequence number of the record at the start of b
// when its header still checks, even if its payload does not: a torn
// write leaves the new header over the old payload, so it tells which
// write a damaged copy was.
func header(b []byte) (seq uint64, ok bool) {
	if len(b) < headerSize || string(b[:8]) != magic ||
		crc32.Checksum(b[:28], castagnoli) != binary.LittleEndian.Uint32(b[28:]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), true
}

// decode reads the record at the start of b, of the given kind.
func decode(b []byte, kind uint32) (record, error) {
	if len(b) < headerSize {
		return record{}, errShortSpace
	}
	if string(b[:8]) != magic {
		for _, x := range b[:headerSize] {
			if x != 0 {
				return record{}, errBadRecord
			}
		}
		return record{}, errAllZero
	}
	if crc32.Checksum(b[:28], castagnoli) != binary.LittleEndian.Uint32(b[28:]) {
		return record{}, errBadRecord
	}
	r := record{seq: binary.LittleEndian.Uint64(b[8:]), kind: binary.LittleEndian.Uint32(b[20:])}
	n := int64(binary.LittleEndian.Uint32(b[16:]))
	if r.kind != kind {
		return record{}, errWrongKind
	}
	if n > int64(len(b)-headerSize) {
		return record{}, errOversize
	}
	r.payload = b[headerSize : headerSize+n]
	if crc32.Checksum(r.payload, castagnoli) != binary.LittleEndian.Uint32(b[24:]) || r.seq == 0 {
		return record{}, errBadRecord
	}
	return r, nil
}
