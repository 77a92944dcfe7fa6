package adv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

type memDev struct {
	b      []byte
	writes int
	cutAt  int // the write that is torn (1-based), 0: none
}

func (d *memDev) ReadAt(p []byte, off int64) (int, error) { return copy(p, d.b[off:]), nil }
func (d *memDev) WriteAt(p []byte, off int64) (int, error) {
	d.writes++
	if d.writes == d.cutAt {
		copy(d.b[off:], p[:8]) // the magic and checksum made it, the records not
		return 0, errors.New("power cut")
	}
	if d.cutAt > 0 && d.writes > d.cutAt {
		return 0, errors.New("power is off")
	}
	return copy(d.b[off:], p), nil
}
func (d *memDev) Sync() error { return nil }

// empty is what `syslinux --install` leaves: both copies valid, no record.
func empty(t *testing.T) []byte {
	t.Helper()
	c, err := Encode(ADV{})
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte{}, c...), c...)
}

func TestChecksumAndMagics(t *testing.T) {
	c, err := Encode(ADV{TagBootOnce: []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	var s uint32
	for i := 4; i < 508; i += 4 {
		s += binary.LittleEndian.Uint32(c[i:])
	}
	if s != 0xa3041767 {
		t.Errorf("dwords 4..507 sum to %#x, want 0xa3041767", s)
	}
	if binary.LittleEndian.Uint32(c) != 0x5a2d2fa5 || binary.LittleEndian.Uint32(c[508:]) != 0xdd28bf64 {
		t.Errorf("magics wrong: % x ... % x", c[:4], c[508:])
	}
	if !bytes.Equal(c[8:11], []byte{1, 1, 'b'}) || c[11] != 0 {
		t.Errorf("records % x, want 01 01 62 00", c[8:12])
	}
	if !Valid(c) {
		t.Error("Valid rejects what Encode made")
	}
	c[9]++
	if Valid(c) {
		t.Error("Valid accepts a copy with a changed byte")
	}
}

func TestDecode(t *testing.T) {
	b0, _ := Encode(ADV{TagBootOnce: []byte("new")})
	b1, _ := Encode(ADV{TagBootOnce: []byte("old"), TagMenuSave: []byte("a")})
	torn := append([]byte{}, b0...)
	copy(torn[256:], make([]byte, 256))
	for _, tc := range []struct {
		name      string
		b         []byte
		want      string
		wantCopy  int
		wantError bool
	}{
		{"both valid: copy 0", append(append([]byte{}, b0...), b1...), "new", 0, false},
		{"torn copy 0: copy 1", append(append([]byte{}, torn...), b1...), "old", 1, false},
		{"neither", append(append([]byte{}, torn...), torn...), "", -1, true},
		{"zeros", make([]byte, Size), "", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, which, err := Decode(tc.b)
			if (err != nil) != tc.wantError {
				t.Fatalf("err = %v", err)
			}
			if which != tc.wantCopy || a.BootOnce() != tc.want {
				t.Errorf("copy %d BOOTONCE %q, want copy %d %q", which, a.BootOnce(), tc.wantCopy, tc.want)
			}
		})
	}
	if _, _, err := Decode(make([]byte, 10)); err == nil {
		t.Error("Decode accepts 10 bytes")
	}
}

func TestEncodeRefusesWhatDoesNotFit(t *testing.T) {
	if _, err := Encode(ADV{1: bytes.Repeat([]byte("x"), 256)}); err == nil {
		t.Error("a 256-byte value encoded")
	}
	if _, err := Encode(ADV{1: bytes.Repeat([]byte("x"), 255), 2: bytes.Repeat([]byte("y"), 255)}); err == nil {
		t.Error("514 bytes of records encoded in 500")
	}
	if _, err := Encode(ADV{0: []byte("x")}); err == nil {
		t.Error("tag 0 encoded")
	}
	a, _, err := Decode(append(mustEncode(t, ADV{2: []byte("m"), 1: []byte("b")}), make([]byte, CopySize)...))
	if err != nil || a.BootOnce() != "b" || string(a[TagMenuSave]) != "m" {
		t.Errorf("round trip: %v %v", a, err)
	}
}

func mustEncode(t *testing.T, a ADV) []byte {
	t.Helper()
	c, err := Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A power cut at every write of Write leaves the loader reading the old
// or the new BOOTONCE, never nothing.
func TestWritePowerCut(t *testing.T) {
	const off = 4096
	for cut := 1; cut <= 3; cut++ {
		d := &memDev{b: make([]byte, 8192), cutAt: cut}
		copy(d.b[off:], empty(t))
		err := Write(d, off, ADV{TagBootOnce: []byte("b")})
		a, err2 := Read(d, off)
		if err2 != nil {
			t.Fatalf("cut at write %d: %v", cut, err2)
		}
		got := a.BootOnce()
		switch {
		case cut == 3 && (err != nil || got != "b"):
			t.Errorf("no cut: BOOTONCE %q, err %v", got, err)
		case cut == 1 && got != "":
			t.Errorf("copy 0 torn: BOOTONCE %q, want the old (none)", got)
		case cut == 2 && got != "b":
			t.Errorf("copy 1 torn: BOOTONCE %q, want the new b", got)
		}
		if cut < 3 && err == nil {
			t.Errorf("cut at write %d: no error", cut)
		}
	}
}

func TestWriteRefusesWhatIsNoADV(t *testing.T) {
	d := &memDev{b: make([]byte, 8192)}
	if err := Write(d, 0, ADV{TagBootOnce: []byte("b")}); err == nil || d.writes != 0 {
		t.Errorf("wrote %d times over zeros (err %v)", d.writes, err)
	}
}
