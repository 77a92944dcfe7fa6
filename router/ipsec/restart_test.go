package ipsec

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
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

// TestGuestLinuxPeerCommands sets up gwB with the ip xfrm commands
// PeerCommands prints for a Linux peer, gwA with the router's path, and
// carries traffic both ways. The guest has no ip binary: applyIPXfrm maps
// each printed line onto the XFRM message iproute2 sends for it, and
// refuses any word it does not know, so nothing printed goes unused.
func TestGuestLinuxPeerCommands(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	for _, c := range []struct {
		cipher, auth string
	}{{"aes-128-cbc", "hmac-sha256"}, {"des-ede3-cbc", "hmac-sha1"}} {
		t.Run(c.cipher+"+"+c.auth, func(t *testing.T) {
			s := newSites(t)
			a := testTunnel(c.cipher, c.auth, true)
			boot(t, s.hA, filepath.Join(t.TempDir(), "a.json"), a)
			lines, err := a.PeerCommands()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lines {
				if strings.HasPrefix(l, "#") {
					continue
				}
				if err := applyIPXfrm(s.hB, l); err != nil {
					t.Fatalf("%s: %v", l, err)
				}
			}
			if got := s.exchange(t, 20, 500, 3*time.Second); got != 20 {
				t.Fatalf("%d of 20 came back through the Linux peer's SAs", got)
			}
			b := mirror(a, "site-a")
			cb := counters(t, s.hB, b)
			if cb.In.Packets != 20 || cb.Out.Packets != 20 || cb.In.Errors() != 0 {
				t.Errorf("peer's SAs: %+v", cb)
			}
		})
	}
}

// applyIPXfrm does one "ip xfrm state add" or "ip xfrm policy add" line
// as iproute2 would: an ESN SA gets XFRMA_REPLAY_ESN_VAL with the window
// (and the u8 window 0), an SA's selector stays empty, a policy's
// template allows any algorithm. A word it does not know is an error.
func applyIPXfrm(h *Handle, line string) error {
	w := strings.Fields(line)
	if len(w) < 4 || w[0] != "ip" || w[1] != "xfrm" || w[3] != "add" {
		return fmt.Errorf("not an ip xfrm ... add line")
	}
	kind, w := w[2], w[4:]
	take := func(word string, n int) ([]string, error) {
		if len(w) < n {
			return nil, fmt.Errorf("%s: missing values at the end", word)
		}
		v := w[:n]
		w = w[n:]
		return v, nil
	}
	hexKey := func(s string) ([]byte, error) { return hex.DecodeString(strings.TrimPrefix(s, "0x")) }
	u32 := func(s string) (uint32, error) { n, err := strconv.ParseUint(s, 0, 32); return uint32(n), err }
	want := func(word, got, ok string) error {
		if got != ok {
			return fmt.Errorf("%s %s: want %s", word, got, ok)
		}
		return nil
	}
	var m saMsg
	var p policyMsg
	inTmpl := false
	for len(w) > 0 {
		word := w[0]
		w = w[1:]
		if kind == "policy" && word == "tmpl" {
			inTmpl = true
			continue
		}
		n := 1
		switch word {
		case "enc":
			n = 2
		case "auth-trunc":
			n = 3
		}
		v, err := take(word, n)
		if err != nil {
			return err
		}
		switch kind + " " + word {
		case "state src", "state dst":
			a, perr := netip.ParseAddr(v[0])
			err = perr
			if word == "src" {
				m.src = a
			} else {
				m.dst = a
			}
		case "state spi":
			m.spi, err = u32(v[0])
		case "state reqid":
			m.reqid, err = u32(v[0])
		case "state replay-window":
			m.replayWindow, err = u32(v[0])
		case "state proto", "policy proto":
			err = want(word, v[0], "esp")
		case "state mode", "policy mode":
			err = want(word, v[0], "tunnel")
			m.mode = modeTunnel
		case "state flag":
			err = want(word, v[0], "esn")
			m.esn = true
		case "state enc":
			m.cryptName = strings.Trim(v[0], "'")
			m.cryptKey, err = hexKey(v[1])
		case "state auth-trunc":
			m.authName = strings.Trim(v[0], "'")
			if m.authKey, err = hexKey(v[1]); err == nil {
				m.truncBits, err = u32(v[2])
			}
		case "policy src", "policy dst":
			if inTmpl {
				a, perr := netip.ParseAddr(v[0])
				err = perr
				if word == "src" {
					p.tunnelSrc = a
				} else {
					p.tunnelDst = a
				}
				break
			}
			pre, perr := netip.ParsePrefix(v[0])
			err = perr
			if word == "src" {
				p.src = pre
			} else {
				p.dst = pre
			}
		case "policy dir":
			d, ok := map[string]uint8{"in": policyIn, "out": policyOut, "fwd": policyFwd}[v[0]]
			if !ok {
				err = fmt.Errorf("dir %s", v[0])
			}
			p.dir = d
		case "policy priority":
			p.priority, err = u32(v[0])
		case "policy reqid":
			p.reqid, err = u32(v[0])
		default:
			return fmt.Errorf("ip xfrm %s: unknown word %q", kind, word)
		}
		if err != nil {
			return fmt.Errorf("%s: %v", word, err)
		}
	}
	switch kind {
	case "state":
		return h.installSA(m)
	case "policy":
		body, err := encodePolicy(h.arch, p)
		if err == nil {
			_, err = h.request(msgUpdPolicy, body, true, 0)
		}
		return err
	}
	return fmt.Errorf("ip xfrm %s", kind)
}
