package fis

import (
	"encoding/binary"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	es := []Entry{
		{Name: "RedBoot", FlashBase: 0x50000000, MemBase: 0x50000000, Size: 0x40000, DataLength: 0x40000},
		{Name: "Kernel", FlashBase: 0x50060000, MemBase: 0x01d00000, Size: 0x100000, Entry: 0x01d00000, DataLength: 0x1010},
	}
	for _, order := range []binary.ByteOrder{binary.BigEndian, binary.LittleEndian} {
		b, err := Encode(es, order, 0x1000)
		if err != nil {
			t.Fatal(err)
		}
		if string(b[:8]) != "RedBoot\x00" || b[2*EntrySize] != 0xff {
			t.Errorf("%v: layout % x", order, b[:8])
		}
		if order.Uint32(b[EntrySize+16:]) != 0x50060000 {
			t.Errorf("%v: Kernel flash base not at offset 16 of its entry", order)
		}
		got, err := Decode(b, order)
		if err != nil || !reflect.DeepEqual(got, es) {
			t.Errorf("%v: %+v, %v", order, got, err)
		}
	}
	if _, err := Encode([]Entry{{Name: "a-name-that-is-too-long"}}, binary.BigEndian, 256); err == nil {
		t.Error("16-byte name accepted")
	}
	if _, err := Encode(es, binary.BigEndian, 256); err == nil {
		t.Error("two entries in one slot accepted")
	}
	bad := make([]byte, 256)
	copy(bad, "\x01\x02bin")
	if _, err := Decode(bad, binary.BigEndian); err == nil {
		t.Error("binary name accepted")
	}
}
