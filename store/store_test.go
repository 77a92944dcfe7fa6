package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/store"
)

const partSize = 12 << 20

var (
	partOnce sync.Once
	partImg  []byte
	partErr  error
)

// partition is a fresh data partition as the build makes it (mkfs.fat and
// mtools), built once per test binary.
func partition(t *testing.T) []byte {
	t.Helper()
	partOnce.Do(func() {
		p := filepath.Join(os.TempDir(), fmt.Sprintf("ocfw-store-test-%d.img", os.Getpid()))
		defer os.Remove(p)
		if partErr = firmware.DataPartition(context.Background(), p, partSize, "OCFWDATA", 1700000000); partErr == nil {
			partImg, partErr = os.ReadFile(p)
		}
	})
	if partErr != nil {
		if !strings.Contains(partErr.Error(), "not found") {
			t.Fatal(partErr)
		}
		labtest.SkipOrFail(t, "no data partition to test on (mkfs.fat, mtools): %v", partErr)
	}
	return append([]byte(nil), partImg...)
}

// memDev is a partition in memory that can lose power: after budget bytes
// it writes only part of the write in hand (possibly mid-sector) and then
// nothing more.
type memDev struct {
	b      []byte
	budget int64 // < 0: unlimited
	dead   bool
}

var errPowerCut = errors.New("power cut")

func (d *memDev) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(d.b)) {
		return 0, errors.New("read past the end")
	}
	return copy(p, d.b[off:]), nil
}

func (d *memDev) WriteAt(p []byte, off int64) (int, error) {
	if d.dead {
		return 0, errPowerCut
	}
	n := int64(len(p))
	if d.budget >= 0 && n > d.budget {
		copy(d.b[off:], p[:d.budget])
		d.dead = true
		return int(d.budget), errPowerCut
	}
	if d.budget >= 0 {
		d.budget -= n
	}
	return copy(d.b[off:], p), nil
}

func (d *memDev) Sync() error {
	if d.dead {
		return errPowerCut
	}
	return nil
}

func reportJSON(boot int) []byte {
	return []byte(fmt.Sprintf(`{"version":1,"boot":%d,"note":"%s"}`, boot, strings.Repeat("r", 100*boot)))
}

// outside returns the bytes of img that are not inside the store's files:
// the FAT, directories, and everything else the board must never change.
func outside(t *testing.T, img []byte) []byte {
	t.Helper()
	fsys, err := fat.Open(bytes.NewReader(img), 0, int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	c := append([]byte(nil), img...)
	for _, f := range store.Files() {
		e, err := fsys.Extent(store.Dir + "/" + f.Name)
		if err != nil {
			t.Fatal(err)
		}
		for i := e.Offset; i < e.Offset+e.Size; i++ {
			c[i] = 0
		}
	}
	return c
}

func TestStoreKeepsReportsAndNeverTouchesTheFileSystem(t *testing.T) {
	img := partition(t)
	before := outside(t, img)
	dev := &memDev{b: img, budget: -1}
	for boot := 1; boot <= 14; boot++ {
		st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := st.BeginBoot()
		if err != nil || n != boot {
			t.Fatalf("boot %d: BeginBoot %d, %v", boot, n, err)
		}
		if _, err := st.PutReport(n, reportJSON(n)); err != nil {
			t.Fatal(err)
		}
		if err := st.SetValue("policy", map[string]int{"boot": n}); err != nil {
			t.Fatal(err)
		}
		if err := st.Log(fmt.Sprintf("boot %d done", n)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := store.Load(readerOf(t, dev.b))
	if err != nil {
		t.Fatal(err)
	}
	if c.State.Boot != 14 || len(c.Reports) != store.Keep || len(c.Problems) != 0 {
		t.Fatalf("after 14 boots: boot %d, %d reports, problems %v", c.State.Boot, len(c.Reports), c.Problems)
	}
	for i, r := range c.Reports {
		if want := 14 - i; r.Boot != want || !bytes.Equal(r.JSON, reportJSON(want)) {
			t.Errorf("report %d: boot %d (%s), want boot %d", i, r.Boot, r.File, want)
		}
	}
	var pol map[string]int
	if ok, err := c.State.Value("policy", &pol); !ok || err != nil || pol["boot"] != 14 {
		t.Errorf("policy value: %v %v %v", pol, ok, err)
	}
	if len(c.Log) != 14 || c.Log[13].Text != "boot 14 done" {
		t.Errorf("log: %d records", len(c.Log))
	}
	if !bytes.Equal(outside(t, dev.b), before) {
		t.Error("the store changed bytes outside its files (FAT metadata or other files)")
	}
	fsckClean(t, dev.b)
	// A slot reads as JSON on a PC: the report, then spaces.
	rd := readerOf(t, dev.b)
	raw, _ := rd(c.Reports[0].File)
	if got := bytes.TrimRight(raw, " \n"); !bytes.Equal(got, reportJSON(14)) {
		t.Errorf("slot file is not the report padded with spaces")
	}
}

// TestPowerCutAtEveryPoint cuts the power at hundreds of points through
// boots that each take a number, write a report, the policy and a log
// line, and checks after each cut what the board will find next.
func TestPowerCutAtEveryPoint(t *testing.T) {
	fresh := partition(t)
	before := outside(t, fresh)
	// Measure the bytes a run of boots writes, then cut at many points.
	const boots = 12
	run := func(dev *memDev) (committed []int, inflight int) {
		for boot := 1; boot <= boots; boot++ {
			st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
			if err != nil {
				t.Fatalf("open after %d boots: %v", boot-1, err)
			}
			n, err := st.BeginBoot()
			if err != nil {
				return committed, -1
			}
			if _, err := st.PutReport(n, reportJSON(n)); err != nil {
				return committed, n
			}
			committed = append(committed, n)
			if st.SetValue("policy", n) != nil || st.Log("done") != nil {
				return committed, 0
			}
		}
		return committed, 0
	}
	probe := &memDev{b: append([]byte(nil), fresh...), budget: 1 << 40}
	run(probe)
	total := int64(1<<40) - probe.budget
	step := total / 400
	if testing.Short() {
		step = total / 40
	}
	for cut := int64(0); cut < total; cut += step + int64(cut%509) {
		dev := &memDev{b: append([]byte(nil), fresh...), budget: cut}
		committed, inflight := run(dev)
		// The board powers up again.
		dev.dead, dev.budget = false, -1
		st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
		if err != nil {
			t.Fatalf("cut at %d: the store does not open: %v", cut, err)
		}
		c := st.Contents()
		got := map[int]bool{}
		for _, r := range c.Reports {
			if !bytes.Equal(r.JSON, reportJSON(r.Boot)) {
				t.Fatalf("cut at %d: report of boot %d reads back changed", cut, r.Boot)
			}
			got[r.Boot] = true
		}
		// Every kept report that was committed reads back; only the oldest
		// may have made way for an in-flight one that reached the card.
		keep := committed
		if len(keep) > store.Keep {
			keep = keep[len(keep)-store.Keep:]
		}
		missing := 0
		for _, b := range keep {
			if !got[b] {
				missing++
			}
		}
		if missing > 0 && !(missing == 1 && inflight > 0 && got[inflight] && len(keep) == store.Keep && !got[keep[0]]) {
			t.Fatalf("cut at %d: committed %v, read back %v", cut, keep, got)
		}
		last := 0
		if len(committed) > 0 {
			last = committed[len(committed)-1]
		}
		if c.State.Boot < last {
			t.Fatalf("cut at %d: boot counter %d went back below %d", cut, c.State.Boot, last)
		}
		n, err := st.BeginBoot()
		if err != nil || n != c.State.Boot+1 || n <= last {
			t.Fatalf("cut at %d: next boot %d (%v) after counter %d, last report %d", cut, n, err, c.State.Boot, last)
		}
		if !bytes.Equal(outside(t, dev.b), before) {
			t.Fatalf("cut at %d: bytes outside the store's files changed", cut)
		}
	}
	fsckClean(t, fresh)
}

func TestOpenRefusesAChangedPartition(t *testing.T) {
	fresh := partition(t)
	fsys, err := fat.Open(bytes.NewReader(fresh), 0, int64(len(fresh)))
	if err != nil {
		t.Fatal(err)
	}
	ext, err := fsys.Extent(store.Dir + "/" + store.SlotName(3))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mtools := func(img []byte, args ...string) []byte {
		p := filepath.Join(dir, "p.img")
		if err := os.WriteFile(p, img, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "IMG", p)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1", "MTOOLSRC=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	zeroBoot := append([]byte(nil), fresh...)
	copy(zeroBoot, make([]byte, 512))
	fatOff := int(fsys.ReservedSectors * fsys.BytesPerSector)
	// The first FAT's entry for a store file's cluster points elsewhere.
	brokenFAT := append([]byte(nil), fresh...)
	c := uint32((ext.Offset-fsys.MetadataBytes())/fsys.ClusterBytes()) + 2
	brokenFAT[fatOff+int(c)*2] ^= 0x55
	for _, tc := range []struct {
		name string
		img  []byte
		want string
	}{
		{"boot sector zeroed", zeroBoot, "not a FAT file system"},
		{"FAT entry damaged", brokenFAT, ""},
		{"slot deleted", mtools(fresh, "mdel", "-i", "IMG", "::/ocfw/"+store.SlotName(3)), "no such file"},
		{"state file replaced by a short one", mtools(fresh, "sh", "-c", "printf x > "+dir+"/x && mcopy -o -i IMG "+dir+"/x ::/ocfw/"+store.StateB), "want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &memDev{b: append([]byte(nil), tc.img...), budget: -1}
			_, err := store.Open(dev, int64(len(dev.b)), store.Options{})
			if !errors.Is(err, store.ErrLayout) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v; want ErrLayout mentioning %q", err, tc.want)
			}
			if !bytes.Equal(dev.b, tc.img) {
				t.Error("a refused partition was changed")
			}
		})
	}
}

func readerOf(t *testing.T, img []byte) store.ReadFileFunc {
	fsys, err := fat.Open(bytes.NewReader(img), 0, int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) ([]byte, error) { return fsys.ReadFile(store.Dir+"/"+name, 4<<20) }
}

func fsckClean(t *testing.T, img []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fsck.img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("fsck.fat", "-n", p).CombinedOutput()
	if err != nil {
		t.Errorf("fsck.fat -n: %v\n%s", err, out)
	}
}

// A file the user did not put on the card reads as fs.ErrNotExist, so
// the boot and the router compare with the standard error.
func TestReadFileMissingIsNotExist(t *testing.T) {
	img := partition(t)
	st, err := store.Open(&memDev{b: img, budget: -1}, int64(len(img)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.ReadFile("no-such-file.json", 1<<10)
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, fat.ErrNotExist) {
		t.Fatalf("ReadFile of a missing file: %v, want an error matching fs.ErrNotExist and fat.ErrNotExist", err)
	}
}

// extent is where a store file lies in img.
func extent(t *testing.T, img []byte, name string) fat.Extent {
	t.Helper()
	fsys, err := fat.Open(bytes.NewReader(img), 0, int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	e, err := fsys.Extent(store.Dir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// bootN runs boots from..to on dev: a number, a report, and (withValue) a
// value.
func bootN(t *testing.T, dev *memDev, from, to int, withValue bool) {
	t.Helper()
	for boot := from; boot <= to; boot++ {
		st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := st.BeginBoot()
		if err != nil || n != boot {
			t.Fatalf("BeginBoot: %d, %v; want %d", n, err, boot)
		}
		if _, err := st.PutReport(n, reportJSON(n)); err != nil {
			t.Fatal(err)
		}
		if withValue {
			if err := st.SetValue("ssh_host_key", fmt.Sprintf("key of boot %d", n)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// damage breaks a state copy's checksum as a failing card does: a byte
// of its payload changes, the header still checks.
func damage(t *testing.T, dev *memDev, name string) {
	t.Helper()
	e := extent(t, dev.b, name)
	dev.b[e.Offset+40] ^= 0x5a
}

// reportsIntact checks that the reports of boots 1..last read back byte
// for byte, whatever the state says, straight from their slots.
func reportsIntact(t *testing.T, dev *memDev, last int) {
	t.Helper()
	found := map[int]bool{}
	for i := 1; i <= store.Slots; i++ {
		e := extent(t, dev.b, store.SlotName(i))
		b := bytes.TrimRight(dev.b[e.Offset:e.Offset+e.Size], " \n")
		for boot := 1; boot <= last; boot++ {
			if bytes.Equal(b, reportJSON(boot)) {
				found[boot] = true
			}
		}
	}
	for boot := 1; boot <= last; boot++ {
		if !found[boot] {
			t.Errorf("the report of boot %d is no longer in any slot", boot)
		}
	}
}

// TestLostStateNeverReusesABootOrSlot: with both state copies damaged
// (a failing card, not a power cut) the store says the state was lost,
// continues after the newest report in the slots, and overwrites none.
func TestLostStateNeverReusesABootOrSlot(t *testing.T) {
	for _, tc := range []struct {
		name string
		hurt func(t *testing.T, dev *memDev)
	}{
		{"payload checksums broken", func(t *testing.T, dev *memDev) {
			damage(t, dev, store.StateA)
			damage(t, dev, store.StateB)
		}},
		{"one copy zeroed, the other's header gone", func(t *testing.T, dev *memDev) {
			a, b := extent(t, dev.b, store.StateA), extent(t, dev.b, store.StateB)
			copy(dev.b[a.Offset:], make([]byte, 512))
			copy(dev.b[b.Offset:], bytes.Repeat([]byte{0xff}, 512))
		}},
		{"headers overwritten", func(t *testing.T, dev *memDev) {
			for _, name := range []string{store.StateA, store.StateB} {
				e := extent(t, dev.b, name)
				copy(dev.b[e.Offset:], bytes.Repeat([]byte{0xff}, 512))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &memDev{b: partition(t), budget: -1}
			bootN(t, dev, 1, 3, true)
			tc.hurt(t, dev)
			st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := st.Contents()
			if !c.Lost || !st.StateLost() || len(c.Problems) == 0 || !strings.Contains(c.Problems[0], "STATE WAS LOST") {
				t.Fatalf("lost %v, problems %q", c.Lost, c.Problems)
			}
			for _, p := range c.Problems {
				if strings.Contains(p, "the other copy is used") {
					t.Errorf("a lost state is described as a power cut: %q", p)
				}
			}
			if _, ok := c.State.Values["ssh_host_key"]; ok {
				t.Error("a value survived a lost state")
			}
			n, err := st.BeginBoot()
			if err != nil || n != 4 {
				t.Fatalf("the boot after the loss takes number %d (%v), want 4", n, err)
			}
			if _, err := st.PutReport(n, reportJSON(n)); err != nil {
				t.Fatal(err)
			}
			reportsIntact(t, dev, 4)
			// The next boot finds a whole state naming all four.
			st, err = store.Open(dev, int64(len(dev.b)), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c = st.Contents()
			if c.Lost || len(c.Problems) != 0 || len(c.Reports) != 4 || c.Reports[0].Boot != 4 || c.Reports[3].Boot != 1 {
				t.Fatalf("after recovery: lost %v, %d reports, problems %q", c.Lost, len(c.Reports), c.Problems)
			}
		})
	}
}

// TestDamagedCopyTellsCutFromDamage: one copy bad is what a power cut
// leaves when it is the newest, damage when it is the older; either way
// the other copy is used and the message says which.
func TestDamagedCopyTellsCutFromDamage(t *testing.T) {
	dev := &memDev{b: partition(t), budget: -1}
	bootN(t, dev, 1, 3, false)
	c, err := store.Load(readerOf(t, dev.b))
	if err != nil {
		t.Fatal(err)
	}
	newest, older := c.From, store.StateA
	if newest == store.StateA {
		older = store.StateB
	}
	t.Run("older", func(t *testing.T) {
		d := &memDev{b: append([]byte(nil), dev.b...), budget: -1}
		damage(t, d, older)
		c, err := store.Load(readerOf(t, d.b))
		if err != nil {
			t.Fatal(err)
		}
		if c.Lost || len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "older") || !strings.Contains(c.Problems[0], "nothing is lost") || len(c.Reports) != 3 {
			t.Fatalf("lost %v, %d reports, problems %q", c.Lost, len(c.Reports), c.Problems)
		}
	})
	t.Run("newest", func(t *testing.T) {
		// The newest record named report 3; the older one only took
		// boot number 3. Report 3 must survive the next boot.
		d := &memDev{b: append([]byte(nil), dev.b...), budget: -1}
		damage(t, d, newest)
		st, err := store.Open(d, int64(len(d.b)), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := st.Contents()
		if c.Lost || len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "the newest, is torn or damaged") {
			t.Fatalf("lost %v, problems %q", c.Lost, c.Problems)
		}
		n, err := st.BeginBoot()
		if err != nil || n != 4 {
			t.Fatalf("next boot %d, %v; want 4", n, err)
		}
		if _, err := st.PutReport(n, reportJSON(n)); err != nil {
			t.Fatal(err)
		}
		reportsIntact(t, d, 4)
	})
}

// TestAValueNeverCrowdsOutTheReports: values that grow until the state
// is full are refused alone; the boot counter, the reports and small
// values go on being written (a client filling the leases once made
// every later commit fail, the boot's report with them).
func TestAValueNeverCrowdsOutTheReports(t *testing.T) {
	dev := &memDev{b: partition(t), budget: -1}
	st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.BeginBoot(); err != nil {
		t.Fatal(err)
	}
	// Leases grow 2 KiB at a time until the store refuses them.
	var refused error
	for i := 1; i < 64 && refused == nil; i++ {
		refused = st.SetValue("leases", strings.Repeat("l", i*2048))
	}
	if refused == nil || !strings.Contains(refused.Error(), "leases") {
		t.Fatalf("a value of 128 KiB was taken: %v", refused)
	}
	if err := st.SetValue("ssh_host_key", "small"); err != nil {
		t.Fatalf("a small value after the refusal: %v", err)
	}
	for boot := 2; boot <= 14; boot++ {
		n, err := st.BeginBoot()
		if err != nil || n != boot {
			t.Fatalf("boot %d: %d, %v", boot, n, err)
		}
		if _, err := st.PutReport(n, reportJSON(n)); err != nil {
			t.Fatalf("boot %d's report: %v", n, err)
		}
	}
	c, err := store.Load(readerOf(t, dev.b))
	if err != nil {
		t.Fatal(err)
	}
	var l string
	if ok, _ := c.State.Value("leases", &l); !ok || len(l) < 32<<10 || len(c.Reports) != store.Keep || c.State.Boot != 14 {
		t.Fatalf("leases kept %d bytes, %d reports, boot %d", len(l), len(c.Reports), c.State.Boot)
	}
}

// TestTornFirstWriteIsANote: a cut during the very first write leaves one
// copy torn and the other blank; nothing was kept yet, so the store
// starts afresh and says so as a note, not as damage.
func TestTornFirstWriteIsANote(t *testing.T) {
	dev := &memDev{b: partition(t), budget: 36} // the header and a part of the payload
	st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.BeginBoot(); err == nil {
		t.Fatal("the cut write succeeded")
	}
	dev.dead, dev.budget = false, -1
	st, err = store.Open(dev, int64(len(dev.b)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := st.Contents()
	if c.Lost || len(c.Problems) != 0 || len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "first state record is torn") {
		t.Fatalf("lost %v, problems %q, notes %q", c.Lost, c.Problems, c.Notes)
	}
	if n, err := st.BeginBoot(); err != nil || n != 1 {
		t.Fatalf("BeginBoot after the torn first write: %d, %v", n, err)
	}
}

// TestReportUpdateReplacesTheBootsReport: a second report for the same
// boot (the boot's report with its tunnels once they settled) replaces
// the first without touching its slot, and a power cut at any point of
// that write leaves the old report or the new one, never neither, with
// every other report intact and the next boot writing on.
func TestReportUpdateReplacesTheBootsReport(t *testing.T) {
	fresh := partition(t)
	base := &memDev{b: fresh, budget: -1}
	bootN(t, base, 1, 12, false) // the slots in rotation, boot 3 on let go
	updated := []byte(`{"version":4,"boot":12,"tunnels":{"list":[{"name":"a-b","state":"up"}]}}`)
	update := func(dev *memDev) error {
		st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.PutReport(12, updated)
		return err
	}
	check := func(dev *memDev, what string) (gotNew bool) {
		t.Helper()
		st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		c := st.Contents()
		if len(c.Reports) != store.Keep {
			t.Fatalf("%s: %d reports kept, want %d", what, len(c.Reports), store.Keep)
		}
		for i, r := range c.Reports {
			if want := 12 - i; r.Boot != want {
				t.Fatalf("%s: report %d is boot %d's, want %d's", what, i, r.Boot, want)
			}
			switch {
			case r.Boot == 12 && bytes.Equal(r.JSON, updated):
				gotNew = true
			case !bytes.Equal(r.JSON, reportJSON(r.Boot)):
				t.Fatalf("%s: boot %d's report reads %.80q", what, r.Boot, r.JSON)
			}
		}
		// The next boot goes on, in a slot of its own.
		n, err := st.BeginBoot()
		if err != nil || n != 13 {
			t.Fatalf("%s: next boot %d, %v", what, n, err)
		}
		if _, err := st.PutReport(n, reportJSON(n)); err != nil {
			t.Fatalf("%s: next boot's report: %v", what, err)
		}
		if r := st.Contents().Reports; r[0].Boot != 13 || r[1].Boot != 12 || len(r) != store.Keep {
			t.Fatalf("%s: after the next boot, reports %v ... (%d)", what, r[0].Slot, len(r))
		}
		return gotNew
	}
	whole := &memDev{b: append([]byte(nil), base.b...), budget: 1 << 40}
	if err := update(whole); err != nil {
		t.Fatal(err)
	}
	total := int64(1<<40) - whole.budget
	whole.budget = -1
	if !check(whole, "after the update") {
		t.Fatal("the update did not replace boot 12's report")
	}
	for cut := int64(0); cut < total; cut += total/60 + 1 {
		dev := &memDev{b: append([]byte(nil), base.b...), budget: cut}
		if update(dev) == nil {
			t.Fatalf("cut at %d of %d: the update finished", cut, total)
		}
		dev.dead, dev.budget = false, -1
		check(dev, fmt.Sprintf("cut at %d of %d", cut, total))
	}
}
