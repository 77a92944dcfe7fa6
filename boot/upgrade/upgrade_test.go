package upgrade

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boot/adv"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/plan/slots"
)

func TestDecide(t *testing.T) {
	p := func(state, slot, trial string) *Record {
		return &Record{State: state, To: "new", Slot: slot, Trial: trial}
	}
	for _, tc := range []struct {
		name        string
		r           *Record
		booted, def string
		want        Action
		reason      string
	}{
		{"no record", nil, "a", "a", Nothing, ""},
		{"no slot on the command line", p(Pending, "b", ""), "", "a", Nothing, ""},
		{"committed", p(Committed, "b", ""), "b", "b", Nothing, ""},
		{"rolled back already", p(RolledBack, "b", "x"), "a", "a", Nothing, ""},
		{"trial boot", p(Pending, "b", ""), "b", "a", Prove, ""},
		{"trial boot again after a reset in it", p(Pending, "b", Started), "b", "a", Prove, ""},
		{"commit written, record not", p(Pending, "b", Started), "b", "b", Commit, ""},
		{"old system, new never started", p(Pending, "b", ""), "a", "a", RollBack, NoStart},
		{"old system, new crashed", p(Pending, "b", Started), "a", "a", RollBack, Started},
		{"old system, new said why", p(Pending, "b", "no network: x"), "a", "a", RollBack, "no network: x"},
		{"write cut off", p(Writing, "b", ""), "a", "a", RollBack, "the new system's write was cut off before it was verified"},
		{"old label picked by hand after a commit", p(Pending, "b", ""), "a", "b", Nothing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := Decide(tc.r, tc.booted, tc.def)
			if got != tc.want || reason != tc.reason {
				t.Errorf("Decide = %v %q, want %v %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

// memStore is the store's value API over JSON, as package store keeps it.
type memStore struct {
	v   map[string][]byte
	log []string // the card's log, as ocf log prints it
}

func (s *memStore) Log(text string) error {
	s.log = append(s.log, text)
	return nil
}

func (s *memStore) SetValue(name string, v any) error {
	b, err := json.Marshal(v)
	s.v[name] = b
	return err
}
func (s *memStore) Value(name string, v any) (bool, error) {
	b, ok := s.v[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

// memDev is a partition in memory that can lose power after n writes.
type memDev struct {
	b      []byte
	writes int
	cutAt  int
}

var errCut = errors.New("power cut")

func (d *memDev) ReadAt(p []byte, off int64) (int, error) { return copy(p, d.b[off:]), nil }
func (d *memDev) WriteAt(p []byte, off int64) (int, error) {
	d.writes++
	if d.cutAt > 0 && d.writes >= d.cutAt {
		return 0, errCut
	}
	return copy(d.b[off:], p), nil
}
func (d *memDev) Sync() error { return nil }

const partSize = 48 << 20

// bootPartition makes a boot partition as the build does (mkfs.fat,
// mtools), with small slots and an ldlinux.sys ending in an empty ADV.
func bootPartition(t *testing.T, kernel, initrd []byte) []byte {
	t.Helper()
	for _, tool := range []string{"mkfs.fat", "mmd", "mcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "boot.part")
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("mkfs.fat", "-F", "16", "-n", "OCFWBOOT", "-C", img, fmt.Sprint(partSize/1024))
	run("mmd", "-i", img, "::/boot", "::/boot/syslinux", "::/ocfw", "::/a", "::/b")
	put := func(name string, data []byte, size int) {
		p := filepath.Join(dir, "f")
		b := make([]byte, size)
		copy(b, data)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		run("mcopy", "-o", "-i", img, p, "::"+name)
	}
	for _, s := range slots.Slots {
		put(slots.Kernel(s), kernel, 1<<20)
		put(slots.Initrd(s), initrd, 1<<20)
	}
	cfg, err := slots.Config("test", slots.SlotA, "panic=10")
	if err != nil {
		t.Fatal(err)
	}
	put(slots.SyslinuxCfg, []byte(cfg), len(cfg))
	empty, _ := adv.Encode(adv.ADV{})
	put(slots.LDLinux, append(bytes.Repeat([]byte{0x90}, 4096), append(empty, empty...)...), 4096+adv.Size)
	man := []byte(`{"system":{"revision":"` + sysRev(kernel, initrd) + `"}}`)
	put(ManifestPath, man, len(man))
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hexSum(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

func sysRev(k, i []byte) string { return slots.Revision(hexSum(k), hexSum(i)) }

func header(board string, k, i []byte) Header {
	return Header{Board: board, Revision: sysRev(k, i), Kernel: FileSum{int64(len(k)), hexSum(k)}, Initrd: FileSum{int64(len(i)), hexSum(i)}}
}

func stream(t *testing.T, h Header, k, i []byte) *bytes.Buffer {
	var buf bytes.Buffer
	if err := WriteHeader(&buf, h); err != nil {
		t.Fatal(err)
	}
	buf.Write(k)
	buf.Write(i)
	return &buf
}

var (
	oldK, oldI = bytes.Repeat([]byte("old kernel "), 5000), bytes.Repeat([]byte("old initrd "), 3000)
	newK, newI = bytes.Repeat([]byte("NEW KERNEL!"), 7000), bytes.Repeat([]byte("NEW INITRD!"), 2000)
)

func board(t *testing.T, dev *memDev, st Store, booted string) *Board {
	t.Helper()
	c, err := OpenCard(dev, int64(len(dev.b)))
	if err != nil {
		t.Fatal(err)
	}
	return &Board{Card: c, Store: st, Booted: booted, Name: "alix2d13"}
}

// metadata is the partition's FAT metadata: what an upgrade never changes.
func metadata(t *testing.T, b []byte) []byte {
	fsys, err := fat.Open(bytes.NewReader(b), 0, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), b[:fsys.MetadataBytes()]...)
}

func TestReceiveProveCommit(t *testing.T) {
	dev := &memDev{b: bootPartition(t, oldK, oldI)}
	meta := metadata(t, dev.b)
	st := &memStore{v: map[string][]byte{}}
	b := board(t, dev, st, "a")
	if b.Revision() != sysRev(oldK, oldI) {
		t.Fatalf("factory revision %q", b.Revision())
	}
	h := header("alix2d13", newK, newI)
	s := stream(t, h, newK, newI)
	got, err := ReadHeader(s)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := b.Receive(got, s, Tally{Passed: 5, Failed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != Pending || rec.Slot != "b" || rec.Message() != "upgrade to "+h.Revision+" pending" {
		t.Errorf("record %+v, message %q", rec, rec.Message())
	}
	if once, _ := b.Card.BootOnce(); once != "b" {
		t.Errorf("BOOTONCE %q, want b", once)
	}
	if d, _ := b.Card.Default(); d != "a" {
		t.Errorf("default %q before the commit", d)
	}
	// The slot holds the system, then zeros.
	e := b.Card.ext[slots.Kernel("b")]
	if !bytes.Equal(dev.b[e.Offset:e.Offset+int64(len(newK))], newK) || dev.b[e.Offset+int64(len(newK))] != 0 || dev.b[e.Offset+e.Size-1] != 0 {
		t.Error("slot b's kernel is not the new kernel followed by zeros")
	}
	// The new system's boot: the loader cleared BOOTONCE.
	loaderBoots(t, dev)
	nb := board(t, dev, st, "b")
	if act, msg := nb.Early(); act != Prove {
		t.Fatalf("new system's Early: %v %q", act, msg)
	}
	ok := func(context.Context) error { return nil }
	if err := nb.Prove(context.Background(), Checks{SelfTest: &Tally{Passed: 5, Failed: 1}, WAN: ok, SSH: ok}); err != nil {
		t.Fatal(err)
	}
	if d, _ := nb.Card.Default(); d != "b" {
		t.Errorf("default %q after the commit, want b", d)
	}
	r, _ := nb.Record()
	if r.Message() != "upgrade to "+h.Revision+" committed" || nb.Revision() != h.Revision {
		t.Errorf("after the commit: %q, revision %q", r.Message(), nb.Revision())
	}
	// ocf log says so (the card's log).
	if n := len(st.log); n == 0 || st.log[n-1] != r.Message() {
		t.Errorf("the card's log after the commit: %q, want %q last", st.log, r.Message())
	}
	if !bytes.Equal(metadata(t, dev.b), meta) {
		t.Error("the upgrade changed the FAT metadata")
	}
	fsckClean(t, dev.b)
	// And the next upgrade goes to slot a.
	h2 := header("alix2d13", oldK, oldI)
	s2 := stream(t, h2, oldK, oldI)
	g2, _ := ReadHeader(s2)
	if r2, err := nb.Receive(g2, s2, Tally{Passed: 5, Failed: 1}); err != nil || r2.Slot != "a" || r2.From != h.Revision {
		t.Errorf("second upgrade: %+v %v", r2, err)
	}
}

// loaderBoots does what SYSLINUX does with BOOTONCE: boot it and clear it.
func loaderBoots(t *testing.T, dev *memDev) string {
	t.Helper()
	s, err := loaderBootsErr(dev)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func loaderBootsErr(dev *memDev) (string, error) {
	c, err := OpenCard(dev, int64(len(dev.b)))
	if err != nil {
		return "", err
	}
	once, err := c.BootOnce()
	if err != nil {
		return "", err
	}
	if once == "" {
		return c.Default()
	}
	return once, adv.Write(dev, c.advOffset(), adv.ADV{})
}

func fsckClean(t *testing.T, b []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "p")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("fsck.fat", "-n", p).CombinedOutput(); err != nil {
		t.Errorf("fsck.fat -n: %v\n%s", err, out)
	}
}

func TestRollBackReasons(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("no DHCP lease on eth0") }
	for _, tc := range []struct {
		name   string
		checks *Checks // nil: the new system never got to prove itself
		early  bool    // the new system reached its boot sequence
		want   string
	}{
		{"kernel panic", nil, false, NoStart},
		{"hang in the boot sequence", nil, true, Started},
		{"self-test worse", &Checks{SelfTest: &Tally{Passed: 4, Failed: 2}, WAN: ok, SSH: ok}, true, "the new system's self-test is worse than the old one's (4 passed, 2 failed; before: 5 passed, 1 failed)"},
		{"no network", &Checks{SelfTest: &Tally{Passed: 5, Failed: 1}, WAN: down, SSH: ok}, true, "no network: no DHCP lease on eth0"},
		{"no SSH", &Checks{SelfTest: &Tally{Passed: 6}, WAN: ok, SSH: down}, true, "SSH does not answer: no DHCP lease on eth0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &memDev{b: bootPartition(t, oldK, oldI)}
			st := &memStore{v: map[string][]byte{}}
			b := board(t, dev, st, "a")
			h := header("alix2d13", newK, newI)
			s := stream(t, h, newK, newI)
			g, _ := ReadHeader(s)
			if _, err := b.Receive(g, s, Tally{Passed: 5, Failed: 1}); err != nil {
				t.Fatal(err)
			}
			if got := loaderBoots(t, dev); got != "b" {
				t.Fatalf("loader booted %s", got)
			}
			nb := board(t, dev, st, "b")
			if tc.early {
				nb.Early()
			}
			if tc.checks != nil {
				if err := nb.Prove(context.Background(), *tc.checks); err == nil {
					t.Fatal("Prove passed")
				}
			}
			// The reset: the loader boots the old default by itself.
			if got := loaderBoots(t, dev); got != "a" {
				t.Fatalf("after the failed trial the loader boots %s", got)
			}
			ob := board(t, dev, st, "a")
			act, msg := ob.Early()
			want := "upgrade to " + h.Revision + " rolled back: " + tc.want
			if act != RollBack || msg != want {
				t.Errorf("old system: %v %q, want %q", act, msg, want)
			}
			if ob.Revision() != sysRev(oldK, oldI) {
				t.Errorf("old system's revision %q", ob.Revision())
			}
			if act, _ := ob.Early(); act != Nothing {
				t.Errorf("the next boot acts again: %v", act)
			}
		})
	}
}

func TestAnotherBoardRefusedBeforeWriting(t *testing.T) {
	dev := &memDev{b: bootPartition(t, oldK, oldI)}
	st := &memStore{v: map[string][]byte{}}
	b := board(t, dev, st, "a")
	h := header("net5501", newK, newI)
	s := stream(t, h, newK, newI)
	g, _ := ReadHeader(s)
	_, err := b.Receive(g, s, Tally{})
	if err == nil || dev.writes != 0 || len(st.v) != 0 {
		t.Errorf("err %v, %d writes, store %v", err, dev.writes, st.v)
	}
	big := bytes.Repeat([]byte{1}, 2<<20)
	h = header("alix2d13", big, newI)
	if _, err := b.Receive(h, stream(t, h, big, newI), Tally{}); err == nil || dev.writes != 0 {
		t.Errorf("a kernel larger than the slot: err %v, %d writes", err, dev.writes)
	}
	if _, err := ReadHeader(bytes.NewBufferString("hello\n")); err == nil {
		t.Error("a stream without the magic line read")
	}
}

// A stream cut short or whose sha256 does not match is refused, and the
// record says refused and why (ocf upgrade status; ocf log), not "being
// written"; nothing is armed and the next boot changes nothing.
func TestRefusedStream(t *testing.T) {
	h := header("alix2d13", newK, newI)
	full := stream(t, h, newK, newI).Bytes()
	bad := append([]byte(nil), full...)
	bad[len(bad)-10] ^= 0xff
	for _, tc := range []struct {
		name   string
		stream []byte
		want   string
	}{
		{"truncated", full[:len(full)-len(newI)/2], "refused: "},
		{"sha256 mismatch", bad, "refused: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &memDev{b: bootPartition(t, oldK, oldI)}
			st := &memStore{v: map[string][]byte{}}
			b := board(t, dev, st, "a")
			s := bytes.NewBuffer(tc.stream)
			g, err := ReadHeader(s)
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.Receive(g, s, Tally{Passed: 5})
			if err == nil {
				t.Fatal("the stream was taken")
			}
			r, _ := b.Record()
			msg := r.Message()
			if r.State != Refused || !strings.Contains(msg, "upgrade to "+h.Revision+" refused: "+err.Error()) || strings.Contains(msg, "being written") {
				t.Errorf("the record after %v: %+v, message %q", err, r, msg)
			}
			if len(st.log) == 0 || st.log[len(st.log)-1] != msg {
				t.Errorf("the card's log %q lacks %q", st.log, msg)
			}
			if once, _ := b.Card.BootOnce(); once != "" {
				t.Errorf("BOOTONCE %q after a refusal", once)
			}
			if act, _ := board(t, dev, st, "a").Early(); act != Nothing || b.Revision() != sysRev(oldK, oldI) {
				t.Errorf("the next boot: %v, revision %q", act, b.Revision())
			}
		})
	}
}

// A power cut at every write of an upgrade and its commit: every time
// the loader boots a slot holding a whole system (old or new), the FAT
// metadata is unchanged, and the next boots settle the record.
func TestPowerCutAtEveryWrite(t *testing.T) {
	base := bootPartition(t, oldK, oldI)
	meta := metadata(t, base)
	systems := map[string]bool{sysRev(oldK, oldI): true, sysRev(newK, newI): true}
	ok := func(context.Context) error { return nil }
	for cut := 1; ; cut++ {
		dev := &memDev{b: append([]byte(nil), base...), cutAt: cut}
		st := &memStore{v: map[string][]byte{}}
		b := board(t, dev, st, "a")
		h := header("alix2d13", newK, newI)
		s := stream(t, h, newK, newI)
		g, _ := ReadHeader(s)
		_, err := b.Receive(g, s, Tally{Passed: 5})
		if err == nil {
			_, err = loaderBootsErr(dev)
		}
		if err == nil {
			nb := board(t, dev, st, "b")
			nb.Early()
			err = nb.Prove(context.Background(), Checks{SelfTest: &Tally{Passed: 5}, WAN: ok, SSH: ok})
		}
		if err == nil {
			if cut < 3 {
				t.Fatalf("only %d writes in an upgrade", cut)
			}
			t.Logf("%d power-cut points", cut-1)
			return
		}
		if !errors.Is(err, errCut) {
			t.Fatalf("cut at write %d: %v", cut, err)
		}
		dev.cutAt = 0
		if !bytes.Equal(metadata(t, dev.b), meta) {
			t.Fatalf("cut at write %d: FAT metadata changed", cut)
		}
		slot := loaderBoots(t, dev)
		c, _ := OpenCard(dev, int64(len(dev.b)))
		k := dev.b[c.ext[slots.Kernel(slot)].Offset:]
		i := dev.b[c.ext[slots.Initrd(slot)].Offset:]
		var bootsWhole bool
		for _, sys := range [][2][]byte{{oldK, oldI}, {newK, newI}} {
			if bytes.HasPrefix(k, sys[0]) && bytes.HasPrefix(i, sys[1]) {
				bootsWhole = true
			}
		}
		if !bootsWhole {
			t.Fatalf("cut at write %d: the loader boots slot %s, which holds no whole system", cut, slot)
		}
		nb := board(t, dev, st, slot)
		act, msg := nb.Early()
		if act == Prove {
			if err := nb.Prove(context.Background(), Checks{SelfTest: &Tally{Passed: 5}, WAN: ok, SSH: ok}); err != nil {
				t.Fatalf("cut at write %d: %v", cut, err)
			}
		}
		if !systems[nb.Revision()] {
			t.Errorf("cut at write %d: revision %q after the reboot (%s)", cut, nb.Revision(), msg)
		}
		// Settled: a write the card failed while the store still took
		// the record (memDev cuts, memStore does not) reads refused.
		if r, _ := nb.Record(); r != nil && r.State != Committed && r.State != RolledBack && r.State != Refused {
			t.Errorf("cut at write %d: booted slot %s and the record stays %q (%s)", cut, slot, r.State, msg)
		}
	}
}

// TestStepsAnnounced checks each step is said (Logf: the console) before
// its write, with the card still as before it: the QEMU power-cut test
// (e2e TestUpgradePowerCuts) kills at these lines and expects what they
// promise.
func TestStepsAnnounced(t *testing.T) {
	dev := &memDev{b: bootPartition(t, oldK, oldI)}
	st := &memStore{v: map[string][]byte{}}
	h := header("alix2d13", newK, newI)
	var seen []string
	var b *Board
	logf := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		r, _ := b.Record()
		once, _ := b.Card.BootOnce()
		def, _ := b.Card.Default()
		state := ""
		if r != nil {
			state = r.State
		}
		seen = append(seen, fmt.Sprintf("%s | record %s, once %q, default %s", line, state, once, def))
	}
	b = board(t, dev, st, "a")
	b.Logf = logf
	s := stream(t, h, newK, newI)
	got, err := ReadHeader(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Receive(got, s, Tally{Passed: 5}); err != nil {
		t.Fatal(err)
	}
	loaderBoots(t, dev)
	b = board(t, dev, st, "b")
	b.Logf = logf
	if act, _ := b.Early(); act != Prove {
		t.Fatalf("Early: %v", act)
	}
	ok := func(context.Context) error { return nil }
	if err := b.Prove(context.Background(), Checks{SelfTest: &Tally{Passed: 5}, WAN: ok, SSH: ok}); err != nil {
		t.Fatal(err)
	}
	r := h.Revision
	want := []string{
		"upgrade: writing " + r + " into slot b | record writing, once \"\", default a",
		"upgrade: " + r + " written to slot b; reading it back to check its sha256 | record writing, once \"\", default a",
		"upgrade: " + r + " verified; arming the one-time boot of slot b | record pending, once \"\", default a",
		"upgrade to " + r + " pending: slot b boots once at the next reset | record pending, once \"b\", default a",
		"upgrade: " + r + " proved itself; making slot b the default | record pending, once \"\", default a",
		"upgrade to " + r + " committed | record committed, once \"\", default b",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps said:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}
