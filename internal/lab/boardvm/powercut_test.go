package boardvm

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/build"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"
)

// writeTime stretches each of the firmware's writes so the test can cut
// the power inside one.
const writeTime = time.Second

var (
	imgOnce sync.Once
	imgPath string
	imgMan  *firmware.Manifest
	imgErr  error
	imgDir  string
)

// powerImage builds, once, an ALIX image with one cipher, no speed table,
// no ESP run (8 s of every boot that gets past the self-test, writing
// nothing) and writes stretched to writeTime: a short boot whose every
// write the test can land in.
func powerImage(t *testing.T) (string, *firmware.Manifest) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the firmware and boots QEMU many times; -short")
	}
	if err := firmware.CheckTools(plan.BootBIOSCF); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	if err := qemu.Installed("i386"); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	for _, tool := range []string{"fsck.fat", "mcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			labtest.SkipOrFail(t, "%s not installed (dosfstools, mtools)", tool)
		}
	}
	imgOnce.Do(func() {
		cat, err := boards.Embedded()
		if err != nil {
			imgErr = err
			return
		}
		pl, err := cat.Resolve(boards.Request{Board: "alix2d13", Ciphers: []string{"aes-128-cbc"}})
		if err != nil {
			imgErr = err
			return
		}
		deb, err := debian.CachedKernel(pl.Kernel.Package, pl.Kernel.Arch, "")
		if err != nil {
			imgErr = fmt.Errorf("skip: %w", err)
			return
		}
		imgDir, imgErr = os.MkdirTemp("", "ocfw-powercut-")
		if imgErr != nil {
			return
		}
		imgPath = filepath.Join(imgDir, "alix.img")
		var res *build.Result
		res, imgErr = build.Build(context.Background(), pl, build.Options{Output: imgPath, Kernel: deb,
			SourceDateEpoch: 1700000000, Tool: "ocfw test",
			Boot: plan.Options{SpeedBudget: "0s", ESPBudget: "0s", TestWriteTime: writeTime.String()}})
		if imgErr == nil {
			imgMan = res.Manifest
		}
	})
	if imgErr != nil {
		if strings.HasPrefix(imgErr.Error(), "skip: ") {
			labtest.SkipOrFail(t, "%v", imgErr)
		}
		t.Fatal(imgErr)
	}
	return imgPath, imgMan
}

func TestMain(m *testing.M) {
	code := m.Run()
	if imgDir != "" {
		os.RemoveAll(imgDir)
	}
	os.Exit(code)
}

// copyImage gives a test its own copy of the built image.
func copyImage(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// dataPart returns the data partition's bytes.
func dataPart(t *testing.T, img string, m *firmware.Manifest) []byte {
	t.Helper()
	d := m.Layout[2]
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, d.Size)
	if _, err := f.ReadAt(b, d.Offset); err != nil {
		t.Fatal(err)
	}
	return b
}

// fsckData runs the user's check, fsck.fat -n, on the data partition;
// the dirty bit counts as a failure.
func fsckData(t *testing.T, part []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data.fat")
	if err := os.WriteFile(p, part, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("fsck.fat", "-n", p).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("Dirty bit")) {
		return fmt.Sprintf("fsck.fat -n: %v\n%s", err, out)
	}
	return ""
}

func start(t *testing.T, img string) *qemu.VM {
	t.Helper()
	return vmtest.Start(t, img, vmtest.Options{Timeout: 4 * time.Minute})
}

// cut is a moment to pull the plug: after the console shows marker
// ("" = power-on), within [lo, hi).
type cut struct {
	name   string
	marker string
	lo, hi time.Duration
}

var cuts = []cut{
	{"kernel booting", "", 1500 * time.Millisecond, 4 * time.Second},
	{"boot sequence starting, before the data partition", "ocfw: boot sequence starting", 0, 300 * time.Millisecond},
	{"inside the boot-counter write", "ocfw: store: writing boot counter", writeTime / 10, writeTime * 9 / 10},
	{"during the self-test", "ocfw: self-testing", 0, 2 * time.Second},
	{"inside the report write", "ocfw: store: writing report of boot", writeTime / 10, writeTime * 9 / 10},
	{"inside the state write naming the report", "ocfw: store: writing state naming", writeTime / 10, writeTime * 9 / 10},
	{"inside the policy write", "ocfw: store: writing value policy", writeTime / 10, writeTime * 9 / 10},
	{"after the shell starts", plan.MarkDone, 500 * time.Millisecond, 2 * time.Second},
}

// cutBoots are the cut moments (indexes in cuts) of TestPowerCut's
// boots, each in the order the boot reaches them: the last one of a
// boot kills QEMU, the ones before it are copies of the card taken with
// QEMU stopped for a moment (vmtest.CutCopy: what a kill then would
// leave), checked as a kill's card is while the boot runs on. Every
// write is killed in at least one boot; each boot's moments are a write
// apart, so one moment's random delay does not run into the next.
var cutBoots = [][]int{
	{0, 2, 5}, // kernel, inside the boot counter; killed inside the state write
	{1, 4},    // boot sequence starting; killed inside the report write
	{3, 6},    // self-test; killed inside the policy write
	{0, 2},    // kernel; killed inside the boot counter write
	{4, 5, 7}, // report, state; killed after the shell starts
}

// cutSchedule is cutBoots cut to n moments, or with boots of one killed
// write each added (cycling through the writes) up to n.
func cutSchedule(n int) [][]int {
	var out [][]int
	for _, b := range cutBoots {
		if n <= 0 {
			return out
		}
		b = b[:min(len(b), n)]
		out = append(out, b)
		n -= len(b)
	}
	for i := 0; n > 0; i, n = i+1, n-1 {
		out = append(out, []int{[]int{2, 4, 5, 6}[i%4]})
	}
	return out
}

// TestCutSchedule: the schedule has the moments asked for, each boot's
// in the order a boot reaches them, and the default one kills inside
// every write.
func TestCutSchedule(t *testing.T) {
	for _, n := range []int{1, 2, 3, 12, 13, 30} {
		got := 0
		for _, b := range cutSchedule(n) {
			got += len(b)
			for i := 1; i < len(b); i++ {
				if b[i] <= b[i-1] {
					t.Errorf("n=%d: boot %v: not in boot order", n, b)
				}
			}
		}
		if got != n {
			t.Errorf("cutSchedule(%d) has %d moments", n, got)
		}
	}
	killed := map[int]bool{}
	for _, b := range cutSchedule(12) {
		killed[b[len(b)-1]] = true
	}
	for i, c := range cuts {
		if strings.HasPrefix(c.name, "inside") && !killed[i] {
			t.Errorf("no boot is killed %s", c.name)
		}
	}
}

// TestPowerCut pulls the plug at 12 or more moments spread over one
// image's boot sequence, several inside each write: in five boots, each
// killed (SIGKILL to QEMU) at its last moment and copied with QEMU
// stopped at the others (cutBoots). After every cut it checks what a
// user and the next boot would find: fsck.fat -n clean (dirty bit
// included), every report of an earlier boot unchanged, the boot
// counter never going back; then a whole boot writes the next boot
// number's report. That boot is the last cut boot itself when its last
// moment is in no write (after the shell starts): that moment is then
// copied, not killed, and the boot goes on (one boot fewer; it comes
// right after a kill all the same). OCFW_POWERCUT_KILLS sets the number
// of cut moments (30 or more for a thorough run by hand).
func TestPowerCut(t *testing.T) {
	// Its cuts follow one another on one card; the other boot tests run
	// beside it, each with its own copy.
	t.Parallel()
	built, m := powerImage(t)
	img := copyImage(t, built)
	kills := 12
	if v := os.Getenv("OCFW_POWERCUT_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("OCFW_POWERCUT_KILLS=%q: want a positive number", v)
		}
		kills = n
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("%d cuts, seed %d", kills, seed)

	seen := map[int][]byte{} // boot -> report bytes, as first read back
	lastBoot := 0
	check := func(when, img string) *store.Contents {
		t.Helper()
		part := dataPart(t, img, m)
		if msg := fsckData(t, part); msg != "" {
			t.Fatalf("%s: %s", when, msg)
		}
		c := vmtest.Store(t, img)
		got := map[int][]byte{}
		for _, r := range c.Reports {
			got[r.Boot] = r.JSON
		}
		// A report may be let go only once Keep newer ones are kept.
		for b, js := range seen {
			g, ok := got[b]
			switch {
			case ok && !bytes.Equal(g, js):
				t.Fatalf("%s: the report of boot %d changed", when, b)
			case !ok && len(c.Reports) < store.Keep:
				t.Fatalf("%s: the report of boot %d is gone (%d kept)", when, b, len(c.Reports))
			}
		}
		for b, js := range got {
			if _, ok := seen[b]; !ok {
				seen[b] = js
			}
		}
		if c.State.Boot < lastBoot {
			t.Fatalf("%s: boot counter %d went back from %d", when, c.State.Boot, lastBoot)
		}
		lastBoot = c.State.Boot
		return c
	}
	check("the built image", img)
	n := 0
	sched := cutSchedule(kills)
	// The last boot's last moment, when it is in no write ("after the
	// shell starts"), is copied rather than killed, and that boot goes on
	// as the boot after the cuts: one boot fewer, and still a whole boot
	// right after a kill (the one before it).
	final := sched[len(sched)-1]
	goesOn := !strings.HasPrefix(cuts[final[len(final)-1]].name, "inside")
	var vm *qemu.VM
	afterKill := 0 // the boot counter on the card after the last kill
	for bootNo, boot := range sched {
		vm = start(t, img)
		for j, ci := range boot {
			n++
			k := cuts[ci]
			delay := k.lo + time.Duration(rng.Int63n(int64(k.hi-k.lo)+1))
			if k.marker != "" {
				if err := vm.WaitFor(context.Background(), k.marker); err != nil {
					vm.Kill()
					t.Fatalf("cut %d (%s): never saw %q: %v\n%s", n, k.name, k.marker, err, vm.Tail(30))
				}
				time.Sleep(delay)
			} else {
				time.Sleep(delay - vm.Elapsed()) // after power-on
			}
			kill := j == len(boot)-1 && !(bootNo == len(sched)-1 && goesOn)
			card, how := img, "killed"
			if !kill {
				card, how = filepath.Join(t.TempDir(), "cut.img"), "copied"
				vmtest.CutCopy(t, vm, img, card)
			} else {
				vm.Kill()
			}
			when := fmt.Sprintf("cut %d (boot %d, %s), %s, %v after %q (%v after power-on)", n, bootNo+1, how, k.name, delay, k.marker, vm.Elapsed().Round(time.Millisecond))
			c := check(when, card)
			t.Logf("%s: counter %d, %d reports, notes %d", when, c.State.Boot, len(c.Reports), len(c.Problems))
			if kill {
				afterKill = c.State.Boot
			}
			if card != img {
				os.Remove(card)
			}
		}
	}

	// Power comes back for good: the next boot takes the next number and
	// writes its report; nothing earlier changed.
	if !goesOn {
		vm = start(t, img)
	}
	// (Its last cut may have waited for the shell already.)
	if !strings.Contains(vm.Console(), plan.MarkDone) {
		if err := vm.WaitFor(context.Background(), plan.MarkDone); err != nil {
			t.Fatalf("the boot after the cuts: %v\n%s", err, vm.Tail(40))
		}
	}
	want := fmt.Sprintf("%s/ocfw/", plan.MarkReportWritten)
	if !strings.Contains(vm.Console(), want) || !strings.Contains(vm.Console(), fmt.Sprintf("(boot %d)", afterKill+1)) {
		t.Errorf("the boot after the cuts did not write report %d:\n%s", afterKill+1, vm.Tail(30))
	}
	vm.Send("poweroff\n")
	vm.Wait()
	vm.Kill()
	c := check("after the last boot", img)
	if c.Reports[0].Boot != lastBoot || c.State.Boot != lastBoot {
		t.Errorf("newest report is of boot %d, counter %d", c.Reports[0].Boot, c.State.Boot)
	}
}

// TestDataPartitionProblems: with the data partition full, its FAT
// damaged, or its boot sector zeroed, the firmware boots to the shell and
// never makes things worse.
func TestDataPartitionProblems(t *testing.T) {
	t.Parallel()
	built, m := powerImage(t)
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, part []byte) []byte
		// inRAM: the report stays in RAM with this reason on the console;
		// "" means the store still works (its room was set aside).
		inRAM string
	}{
		{"full", fill, ""},
		{"FAT damaged", damageFAT, "not as the build made them"},
		{"boot sector zeroed", func(t *testing.T, part []byte) []byte { copy(part, make([]byte, 512)); return part }, "no FAT file system labelled OCFWDATA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			img := copyImage(t, built)
			part := tc.break_(t, dataPart(t, img, m))
			f, err := os.OpenFile(img, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt(part, m.Layout[2].Offset)
			f.Close()
			before := append([]byte(nil), part...)
			vm := start(t, img)
			if err := vm.WaitFor(context.Background(), plan.MarkDone); err != nil {
				t.Fatalf("%v\n%s", err, vm.Tail(40))
			}
			vm.Send("poweroff\n")
			vm.Wait()
			vm.Kill()
			con := vm.Console()
			after := dataPart(t, img, m)
			if tc.inRAM != "" {
				if !strings.Contains(con, plan.MarkReportRAM) || !strings.Contains(con, tc.inRAM) {
					t.Errorf("console does not say the report stays in RAM because %q:\n%s", tc.inRAM, qemu.TailLines(con, 40))
				}
				if !bytes.Equal(after, before) {
					t.Error("the firmware changed a data partition it refused")
				}
				return
			}
			if !strings.Contains(con, plan.MarkReportWritten) {
				t.Errorf("no report written on a full partition:\n%s", qemu.TailLines(con, 30))
			}
			if msg := fsckData(t, after); msg != "" {
				t.Error(msg)
			}
			// Only the store's own bytes changed.
			if !bytes.Equal(outsideStore(t, after), outsideStore(t, before)) {
				t.Error("bytes outside the store's files changed")
			}
		})
	}
}

// fill adds a user file that takes every free cluster.
func fill(t *testing.T, part []byte) []byte {
	fsys, err := fat.Open(bytes.NewReader(part), 0, int64(len(part)))
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for _, r := range fsys.UsedClusters() {
		used += r[1] - r[0]
	}
	free := int64(fsys.Clusters())*fsys.ClusterBytes() - used
	dir := t.TempDir()
	p, big := filepath.Join(dir, "p.fat"), filepath.Join(dir, "big")
	os.WriteFile(p, part, 0o644)
	os.WriteFile(big, bytes.Repeat([]byte("u"), int(free)), 0o644)
	cmd := exec.Command("mcopy", "-i", p, big, "::/BIG.DAT")
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1", "MTOOLSRC=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("filling the partition: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(p)
	if fs2, err := fat.Open(bytes.NewReader(b), 0, int64(len(b))); err == nil {
		var u int64
		for _, r := range fs2.UsedClusters() {
			u += r[1] - r[0]
		}
		if u != int64(fs2.Clusters())*fs2.ClusterBytes() {
			t.Fatalf("partition not full: %d of %d bytes used", u, int64(fs2.Clusters())*fs2.ClusterBytes())
		}
	}
	return b
}

// damageFAT changes the first FAT's entry for the first state file's
// first cluster, as a bad sector or a careless tool would.
func damageFAT(t *testing.T, part []byte) []byte {
	fsys, err := fat.Open(bytes.NewReader(part), 0, int64(len(part)))
	if err != nil {
		t.Fatal(err)
	}
	e, err := fsys.Extent(store.Dir + "/" + store.StateA)
	if err != nil {
		t.Fatal(err)
	}
	c := (e.Offset-fsys.MetadataBytes())/fsys.ClusterBytes() + 2
	at := int64(fsys.ReservedSectors*fsys.BytesPerSector) + c*2 // FAT16
	part[at] ^= 0x5a
	return part
}

// outsideStore blanks the store's files, leaving what the firmware must
// never change.
func outsideStore(t *testing.T, part []byte) []byte {
	fsys, err := fat.Open(bytes.NewReader(part), 0, int64(len(part)))
	if err != nil {
		t.Fatal(err)
	}
	c := append([]byte(nil), part...)
	for _, f := range store.Files() {
		e, err := fsys.Extent(store.Dir + "/" + f.Name)
		if err != nil {
			t.Fatal(err)
		}
		copy(c[e.Offset:e.Offset+e.Size], make([]byte, e.Size))
	}
	return c
}
