package ipsec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

// fileValues is a store of named values in one file, rewritten whole and
// synced on each SetValue (like the board's store, a value is there once
// SetValue returns); open reads it again as a boot would.
type fileValues struct{ path string }

func (f fileValues) all() (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	return m, json.Unmarshal(b, &m)
}

func (f fileValues) Value(name string, v any) (bool, error) {
	m, err := f.all()
	if err != nil {
		return false, err
	}
	raw, ok := m[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(raw, v)
}

func (f fileValues) SetValue(name string, v any) error {
	m, err := f.all()
	if err != nil {
		return err
	}
	if m[name], err = json.Marshal(v); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := f.path + ".new"
	fd, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := fd.Write(b); err != nil {
		fd.Close()
		return err
	}
	if err := fd.Sync(); err != nil {
		fd.Close()
		return err
	}
	if err := fd.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, f.path)
}

// boot installs tun on h as the firmware does at boot: a fresh Seqs on
// the store in the file (read again from it), then its Install.
func boot(t *testing.T, h *Handle, path string, tun Tunnel) *Seqs {
	t.Helper()
	s := NewSeqs(fileValues{path}, "")
	s.InSaveEvery = time.Nanosecond // every Check saves the inbound counter
	if err := s.Install(h, tun); err != nil {
		t.Fatalf("installing %s through its saved counters: %v", tun.Name, err)
	}
	return s
}

func check(t *testing.T, s *Seqs, h *Handle, tun Tunnel) TunnelCounters {
	t.Helper()
	c, overrun, err := s.Check(h, tun)
	if err != nil || overrun {
		t.Fatalf("Check %s: overrun %v, %v", tun.Name, overrun, err)
	}
	return c
}

// TestGuestRestartKeepsSeqs is issue 21's finding: two ends with the SAs
// of one key file (ESN, 128-packet window), 400 datagrams through, then
// one end takes its tunnel out and installs it again as the firmware does
// at boot. Started from 0 (the control), 0 of 20 came back: the survivor
// takes the numbers for the next 2^32 round and fails their ICV. Through
// the counters kept in the store, 20 of 20 come back, with either end
// restarted; a packet from before the saved inbound counter, replayed
// after the restart, is refused; and with the store lost the tunnel
// stays down and says how to recover.
func TestGuestRestartKeepsSeqs(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	s := newSites(t)
	a := testTunnel("aes-128-cbc", "hmac-sha256", true)
	b := mirror(a, "site-a")
	dir := t.TempDir()
	fileA, fileB := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	seqA, seqB := boot(t, s.hA, fileA, a), boot(t, s.hB, fileB, b)
	if c := counters(t, s.hA, a); c.Out.Seq != 0 || c.In.Seq != 0 {
		t.Fatalf("new keys: counters start at %d/%d, want 0", c.Out.Seq, c.In.Seq)
	}
	if out, _, ok, err := seqA.Saved(a); err != nil || !ok || out != Reserve {
		t.Fatalf("reservation after the first install: %d, %v, %v; want %d committed", out, ok, err, Reserve)
	}

	wanA := s.capture(t, s.gwA, "wan0")
	if got := s.exchange(t, 100, 200, 3*time.Second); got != 100 {
		t.Fatalf("%d of 100 datagrams came back", got)
	}
	packet100 := wanA.frame() // A's 100th packet, for a replay after B restarts
	if got := s.exchange(t, 300, 200, 3*time.Second); got != 300 {
		t.Fatalf("%d of 300 datagrams came back", got)
	}
	ca, cb := check(t, seqA, s.hA, a), check(t, seqB, s.hB, b)
	if ca.Out.Seq != 400 || cb.In.Seq != 400 || cb.Out.Seq != 400 || ca.In.Seq != 400 {
		t.Fatalf("after 400 each way: A out %d in %d, B out %d in %d", ca.Out.Seq, ca.In.Seq, cb.Out.Seq, cb.In.Seq)
	}
	// Traffic after the last save: its numbers are above what is stored.
	if got := s.exchange(t, 10, 200, 3*time.Second); got != 10 {
		t.Fatalf("%d of 10 datagrams came back", got)
	}

	t.Run("control: restart from 0", func(t *testing.T) {
		// What the firmware did before: the same keys, counters from 0.
		// This is what the test below would see without the fix.
		ctl := newSites(t)
		install(t, ctl.hA, a)
		install(t, ctl.hB, b)
		if got := ctl.exchange(t, 400, 100, 3*time.Second); got != 400 {
			t.Fatalf("%d of 400", got)
		}
		if err := ctl.hA.Remove(a); err != nil {
			t.Fatal(err)
		}
		install(t, ctl.hA, a)
		got := ctl.exchange(t, 20, 100, 300*time.Millisecond)
		in := counters(t, ctl.hB, b).In
		t.Logf("restarted from 0: %d of 20 came back; B in %+v", got, in)
		if got != 0 || in.IntegrityFailed == 0 {
			t.Errorf("restart from 0: %d of 20 came back, B counted %d integrity failures; want 0 and some (the issue's finding)", got, in.IntegrityFailed)
		}
	})

	for _, end := range []string{"A", "B"} {
		t.Run("restart "+end, func(t *testing.T) {
			h, tun, file := s.hA, a, fileA
			if end == "B" {
				h, tun, file = s.hB, b, fileB
			}
			before := counters(t, h, tun)
			savedOut, savedIn, _, err := NewSeqs(fileValues{file}, "").Saved(tun)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Remove(tun); err != nil {
				t.Fatal(err)
			}
			seq := boot(t, h, file, tun)
			after := counters(t, h, tun)
			if after.Out.Seq != savedOut || after.In.Seq != savedIn || savedOut <= before.Out.Seq || savedIn > before.In.Seq {
				t.Errorf("restarted at out %d in %d; saved %d/%d; before the restart out %d in %d", after.Out.Seq, after.In.Seq, savedOut, savedIn, before.Out.Seq, before.In.Seq)
			}
			if out, _, _, _ := seq.Saved(tun); out != savedOut+Reserve {
				t.Errorf("new reservation %d, want %d committed before the install", out, savedOut+Reserve)
			}
			if got := s.exchange(t, 20, 200, 3*time.Second); got != 20 {
				ca, cb := counters(t, s.hA, a), counters(t, s.hB, b)
				t.Fatalf("after %s restarted through its saved counters, %d of 20 came back; A %+v; B %+v", end, got, ca, cb)
			}
			c := check(t, seq, h, tun)
			if c.Out.Seq != savedOut+20 || c.Out.Packets != 20 || c.In.Packets != 20 {
				t.Errorf("after the restart: %+v, want 20 packets each way, out from %d", c, savedOut)
			}
			if end == "B" {
				// A's 100th packet again, from before B's saved
				// counter (400): outside the window now too.
				in0 := counters(t, s.hB, b).In
				wanA.resendFrame(t, packet100)
				time.Sleep(300 * time.Millisecond)
				in1 := counters(t, s.hB, b).In
				if in1.Packets != in0.Packets || in1.Errors() != in0.Errors()+1 {
					t.Errorf("replayed packet 100 after B's restart: B in %+v -> %+v, want it refused", in0, in1)
				}
			}
		})
	}

	t.Run("store lost", func(t *testing.T) {
		if err := s.hA.Remove(a); err != nil {
			t.Fatal(err)
		}
		empty := fileValues{filepath.Join(dir, "lost.json")}
		err := NewSeqs(empty, "the card's store lost its state").Install(s.hA, a)
		var u *UntrustedError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), "roll the keys: make a new key file with ocfw tunnel keys") {
			t.Errorf("Install with the store lost: %v, want an UntrustedError saying to roll the keys", err)
		}
		if _, err := s.hA.Counters(a); !errors.Is(err, unix.ESRCH) {
			t.Errorf("after the refusal the SAs are there: %v", err)
		}
		if ok, _ := empty.Value(SeqValue, &seqLedger{}); ok {
			t.Error("a reservation was written for keys that were refused")
		}
	})
}
