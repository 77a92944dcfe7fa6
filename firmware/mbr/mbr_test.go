package mbr

import (
	"errors"
	"testing"
)

func TestCHS(t *testing.T) {
	for _, tc := range []struct {
		lba  uint32
		want [3]byte
	}{
		{0, [3]byte{0, 1, 0}},
		{2048, [3]byte{32, 33, 0}},                           // c0 h32 s33, what fdisk writes at 1 MiB
		{16065, [3]byte{0, 1, 1}},                            // first sector of cylinder 1
		{1023*16065 + 254*63 + 62, [3]byte{254, 0xff, 0xff}}, // last CHS-addressable sector
		{200000000, [3]byte{254, 0xff, 0xff}},                // past 8 GB: clamped
	} {
		if got := CHS(tc.lba); got != tc.want {
			t.Errorf("CHS(%d) = % x, want % x", tc.lba, got, tc.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	m := MBR{Signature: 0xdeadbeef}
	copy(m.BootCode[:], "boot code")
	m.Partitions[0] = Partition{Bootable: true, Type: TypeFAT16, Start: 2048, Sectors: 65536}
	m.Partitions[1] = Partition{Type: TypeFAT32L, Start: 67584, Sectors: 100000}
	b := m.Bytes()
	got, err := Parse(b, 167584)
	if err != nil {
		t.Fatal(err)
	}
	if *got != m {
		t.Errorf("round trip: %+v, want %+v", got.Partitions, m.Partitions)
	}
	if _, err := Parse(b, 100000); err == nil {
		t.Error("a partition past the end of the disk was accepted")
	}
	b[446] = 0x12
	if _, err := Parse(b, 0); err == nil {
		t.Error("status byte 0x12 accepted")
	}
	if _, err := Parse(make([]byte, 512), 0); !errors.Is(err, ErrNoMBR) {
		t.Errorf("zero sector: %v", err)
	}
	over := MBR{}
	over.Partitions[0] = Partition{Type: TypeFAT16, Start: 100, Sectors: 100}
	over.Partitions[1] = Partition{Type: TypeFAT16, Start: 150, Sectors: 100}
	if _, err := Parse(over.Bytes(), 0); err == nil {
		t.Error("overlapping partitions accepted")
	}
}
