package fault

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/soft"
)

func openAES(t *testing.T, d ocf.Driver) ocf.Session {
	t.Helper()
	c, err := ocf.LookupCipher("aes-128-cbc")
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Open(c, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// want is what soft gives for an aes-128-cbc encryption of src.
func want(t *testing.T, src []byte) []byte {
	t.Helper()
	out := make([]byte, len(src))
	if err := openAES(t, soft.New()).Do([]ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16), Src: src, Dst: out}}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDriversClaimHardware(t *testing.T) {
	for _, d := range []ocf.Driver{
		NewFailing("f", soft.New(), nil),
		NewHanging(context.Background(), "h", soft.New(), nil),
		NewCorrupting("c", soft.New(), nil),
	} {
		if !d.Hardware() || !d.Caps().Supports("aes-128-cbc", 16) {
			t.Errorf("%s: Hardware %v, supports aes-128-cbc %v; want both true", d.Name(), d.Hardware(), d.Caps().Supports("aes-128-cbc", 16))
		}
		if s := openAES(t, d); s.Driver() != d.Name() {
			t.Errorf("session driver %q, want %q", s.Driver(), d.Name())
		}
	}
}

func TestFailingFailsOnlyChosenSizes(t *testing.T) {
	s := openAES(t, NewFailing("f", soft.New(), Sizes(32)))
	a, b := make([]byte, 16), make([]byte, 32)
	reqs := []ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16), Src: a, Dst: make([]byte, 16)}, {Op: ocf.Encrypt, IV: make([]byte, 16), Src: b}}
	err := s.Do(reqs)
	if !errors.Is(err, ErrInjected) || reqs[0].Err != nil || !errors.Is(reqs[1].Err, ErrInjected) {
		t.Fatalf("Do = %v, errors %v, %v; want only the 32-byte request to fail", err, reqs[0].Err, reqs[1].Err)
	}
	if !bytes.Equal(reqs[0].Dst, want(t, a)) {
		t.Fatal("the 16-byte request was not served correctly")
	}
}

func TestHangingBlocksUntilReleasedThenScribbles(t *testing.T) {
	h := NewHanging(context.Background(), "h", soft.New(), AtLeast(64))
	s := openAES(t, h)
	// Below the size it serves normally.
	small := make([]byte, 16)
	if err := s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16), Src: small}}); err != nil || !bytes.Equal(small, want(t, make([]byte, 16))) {
		t.Fatalf("16-byte request: %v", err)
	}
	done := make(chan error, 1)
	out := make([]byte, 64)
	go func() {
		done <- s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16), Src: make([]byte, 64), Dst: out}})
	}()
	<-h.Blocked()
	select {
	case <-done:
		t.Fatal("a hanging request returned before Release")
	case <-time.After(20 * time.Millisecond):
	}
	h.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if !bytes.Equal(out, bytes.Repeat([]byte{0xA5}, 64)) {
		t.Fatalf("late output %x, want 0xA5 junk", out)
	}
}

func TestHangingEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := openAES(t, NewHanging(ctx, "h", soft.New(), nil))
	done := make(chan error, 1)
	go func() { done <- s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16), Src: make([]byte, 16)}}) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCorruptingFlipsOneBitAtChosenSizes(t *testing.T) {
	s := openAES(t, NewCorrupting("c", soft.New(), Sizes(48)))
	for _, n := range []int{16, 48} {
		src := bytes.Repeat([]byte{byte(n)}, n)
		out := make([]byte, n)
		if err := s.Do([]ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, 16), Src: src, Dst: out}}); err != nil {
			t.Fatal(err)
		}
		w := want(t, src)
		diff := 0
		for i := range out {
			for x := out[i] ^ w[i]; x != 0; x &= x - 1 {
				diff++
			}
		}
		if wantDiff := map[int]int{16: 0, 48: 1}[n]; diff != wantDiff {
			t.Errorf("%d bytes: %d bits differ from software, want %d", n, diff, wantDiff)
		}
	}
}
