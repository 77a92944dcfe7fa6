package store

import (
	"bytes"
	"testing"
	"time"
)

func TestRecordRoundTripAndDamage(t *testing.T) {
	b := encode(record{seq: 7, kind: kindState, payload: []byte(`{"boot":3}`)})
	r, err := decode(append(b, make([]byte, 100)...), kindState)
	if err != nil || r.seq != 7 || string(r.payload) != `{"boot":3}` {
		t.Fatalf("decode: %+v, %v", r, err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		kind uint32
		want error
	}{
		{"never written", make([]byte, 64), kindState, errAllZero},
		{"other kind", b, kindLog, errWrongKind},
		{"torn payload", append(append([]byte(nil), b[:len(b)-3]...), 0, 0, 0), kindState, errBadRecord},
		{"torn header", append(append([]byte(nil), b[:20]...), make([]byte, len(b)-20)...), kindState, errBadRecord},
		{"flipped bit", flip(b, headerSize+2), kindState, errBadRecord},
		{"length past the end", b[:len(b)-1], kindState, errOversize},
		{"cut header", b[:10], kindState, errShortSpace},
		{"garbage", bytes.Repeat([]byte{0xff}, 64), kindState, errBadRecord},
	} {
		if _, err := decode(tc.b, tc.kind); err != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x10
	return c
}

func TestLogRing(t *testing.T) {
	ring := make([]byte, 4*sectorSize)
	now := time.Unix(1700000000, 0).UTC()
	// Seven records into four sectors: the oldest three are overwritten.
	for i := 1; i <= 7; i++ {
		copy(ring[(i-1)%4*sectorSize:], encodeLog(uint64(i), now.Add(time.Duration(i)*time.Second), string(rune('a'+i-1))))
	}
	got := readLog(ring)
	if len(got) != 4 || got[0].Seq != 4 || got[3].Seq != 7 || got[3].Text != "g" || !got[3].Time.Equal(now.Add(7*time.Second)) {
		t.Fatalf("ring: %+v", got)
	}
	// A torn sector is skipped, the others stay.
	copy(ring[2*sectorSize+40:], "torn")
	if got := readLog(ring); len(got) != 3 {
		t.Errorf("after tearing one: %d records", len(got))
	}
	long := encodeLog(1, now, string(bytes.Repeat([]byte("x"), 2000)))
	if len(long) != sectorSize || len(readLog(long)[0].Text) != maxLogText {
		t.Errorf("a long line is not cut to one sector")
	}
}
