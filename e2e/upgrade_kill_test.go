package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bu "github.com/ocfw/ocfw/boot/upgrade"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/plan"
)

// A cut is one moment of an upgrade at which the power is cut, and
// which system must come up after it.
type cut struct {
	name string
	// sent: cut once this many bytes of the stream went into ssh (a
	// fraction of the stream when < 1, -1 for all of it).
	sent float64
	// at: cut at the n-th time this console text shows after the
	// upgrade's upload began; after: that long after it.
	at    string
	n     int
	after time.Duration
	// since: count at's occurrences only after this text's first.
	since string
	// want: "old" (the system the upload came to), "new" (the one it
	// brought, on trial or committed) or "either".
	want string
	// unless: the guest may race past the moment to this step (it runs
	// on for the few milliseconds the kill or stop takes); if the
	// console shows it, either system is the right one.
	unless string
}

// biosPrefix marks a cut's text as the BIOS's (SeaBIOS's debug port,
// in a file) rather than the console's: the loader prints nothing on
// the serial console, the BIOS says when it hands over to it.
const biosPrefix = "bios:"

// upgradeCuts are the moments, in the order one upgrade reaches them:
// the upload and its checks on the old system, the reset, the new
// system's one-time boot and its commit. The firmware says each step on
// the console before it starts it (boot/upgrade's Receive and Prove, the
// store's writes).
var upgradeCuts = []cut{
	{name: "stream early (1 MiB into ssh)", sent: 1 << 20, want: "old"},
	{name: "stream middle (half into ssh)", sent: 0.5, want: "old"},
	{name: "stream end (all into ssh)", sent: -1, want: "old", unless: "arming the one-time boot"},
	{name: "sha256 check", at: "reading it back to check its sha256", n: 1, want: "old"},
	{name: "pending record write", at: "store: writing value upgrade", n: 2, want: "old", unless: "arming the one-time boot"},
	{name: "arming BOOTONCE (ADV write)", at: "arming the one-time boot", n: 1, want: "either"},
	{name: "armed, before the reset", at: "boots once at the next reset", n: 1, want: "new"},
	{name: "the reset into the trial", at: "resetting: booting the new system once", n: 1, want: "new"},
	{name: "the loader starting (the BIOS boots the card)", at: biosPrefix + "Booting from 0000:7c00", n: 1, want: "either"},
	{name: "the trial's kernel (loader cleared BOOTONCE)", at: "Kernel command line:", n: 1, want: "old"},
	{name: "the trial's boot sequence, start", at: "on trial: it commits itself", n: 1, want: "old"},
	{name: "the trial's boot sequence, done", at: plan.MarkDone, n: 1, want: "old", unless: "proved itself; making slot"},
	{name: "commit: DEFAULT rewrite", at: "proved itself; making slot", n: 1, want: "either"},
	{name: "commit: its record", since: "proved itself; making slot", at: "store: writing value upgrade", n: 1, want: "new"},
	{name: "just after the commit", at: " committed", n: 1, want: "new"},
}

// A cutStep is a cut (its number in upgradeCuts) in a chain: killed
// (QEMU killed; the card then boots, and the system it boots settles
// before the next step uploads again) or copied (the card copied with
// QEMU stopped for a moment, vmtest.CutCopy, which leaves on the copy
// what a kill then would; the copy is checked as a killed card is, and
// the same upgrade goes on to the chain's next step).
type cutStep struct {
	num    int
	killed bool
}

// cutChains are the cuts, each chain on a card of its own that starts
// as the old system in slot a, the two run side by side. An upgrade is
// a chain's steps up to and including a killed one, in upgradeCuts'
// order; the next upgrade starts from the system the kill left (from
// slot b when it was the new one). Boots, not cuts, are what the suite
// pays for (issue 29): one cut a boot was 24 boots and 13 uploads, these
// are 7 boots (and 3 trial boots) and 5 uploads. Every write the
// upgrade makes is killed or copied, and those the loader reads
// (mustKill) are killed.
var cutChains = [][]cutStep{
	{{1, false}, {2, false}, {3, false}, {4, false}, {5, true}, {6, true}, {13, true}},
	{{7, false}, {8, false}, {9, false}, {10, true}, {11, false}, {12, false}, {13, false}, {14, false}, {15, true}},
}

// TestUpgradePowerCuts cuts the power at 15 moments of upgrades and
// their commits (upgradeCuts), on two cards side by side (cutChains):
// the stream into the inactive slot (early, middle, end), its sha256
// check, the pending record, the ADV write arming BOOTONCE, the reset,
// the loader, the trial's kernel and boot sequence, the commit's DEFAULT
// rewrite and record, and just after. After each cut both partitions
// pass fsck.fat -n, the card's state (ADV, DEFAULT, the store's record)
// says which system the loader boots, that system is the one the moment
// allows, the store's reports and host key are kept; after each kill
// the card boots the system it says, which settles, and SSH answers
// with the host key it had.
func TestUpgradePowerCuts(t *testing.T) {
	needEndToEnd(t)
	side := parallel(t, len(cutChains)) // a guest for each chain, if there are that many
	dir, key, site := upgradeSite(t)
	oldImg, newImg := upgradeImages(t, dir, site)
	streams := map[string][]byte{} // revision → what ocf upgrade receive reads
	var revs []string
	for _, img := range []string{oldImg, newImg} {
		rev, s := upgradeStream(t, img)
		streams[rev] = s
		revs = append(revs, rev)
	}
	if revs[0] == revs[1] {
		t.Fatalf("both systems are %s", revs[0])
	}
	for i, chain := range cutChains {
		t.Run(fmt.Sprintf("chain-%d", i+1), func(t *testing.T) {
			if side > 1 {
				t.Parallel() // the slots are the parent's: it took one for each
			}
			card := filepath.Join(dir, fmt.Sprintf("card-%d.img", i+1))
			must(t, copyFile(oldImg, card))
			runCuts(t, card, filepath.Join(dir, fmt.Sprintf("chain-%d", i+1)), key, streams, revs, chain)
		})
	}
}

// mustKill are the cuts in the writes whose outcome the loader
// (SYSLINUX, not the firmware) reads: the ADV arming BOOTONCE and the
// DEFAULT rewrite. A copy's state is read by the test's own code; these
// are killed, so the boot after them is the loader's word on them.
var mustKill = []int{6, 13}

// TestCutChains checks the chains (no guest): every cut in one of them,
// each upgrade's steps in the order an upgrade reaches them, each chain
// ending in a kill, and a kill in each write.
func TestCutChains(t *testing.T) {
	seen := map[int]bool{}
	killed := map[int]bool{}
	for _, chain := range cutChains {
		for k, st := range chain {
			if st.num < 1 || st.num > len(upgradeCuts) {
				t.Errorf("step %d: %d is not a cut", k, st.num)
				continue
			}
			seen[st.num] = true
			if st.killed {
				killed[st.num] = true
			}
			if k > 0 && !chain[k-1].killed && chain[k-1].num >= st.num {
				t.Errorf("chain %v: cut %d follows cut %d in one upgrade", chain, st.num, chain[k-1].num)
			}
		}
		if len(chain) == 0 || !chain[len(chain)-1].killed {
			t.Errorf("chain %v does not end in a kill", chain)
		}
	}
	if len(seen) != len(upgradeCuts) {
		t.Errorf("%d of the %d cuts in the chains", len(seen), len(upgradeCuts))
	}
	for _, num := range mustKill {
		if !killed[num] {
			t.Errorf("cut %d (%s) is a write no chain kills in", num, upgradeCuts[num-1].name)
		}
	}
}

// runCuts boots card, the old system, and cuts its power at each step
// of chain in turn; dir is the chain's own (the BIOS's logs).
func runCuts(t *testing.T, card, dir, key string, streams map[string][]byte, revs []string, chain []cutStep) {
	must(t, os.MkdirAll(dir, 0o755))
	b := newUpgradeBox(t, key)
	boots := 1
	b.restart(t, card, "old", filepath.Join(dir, "bios-0.log"))
	running := b.settle(t, revs[0], "a")
	// The site has no RSA host key (routerSite): the store holds its
	// ed25519 key once SSH answers, and every cut must keep it as it is.
	before := cardFacts(t, card)
	start := time.Now()
	var up *upload // the upgrade under way, nil before its first step
	var from, to string
	var mark, biosMark int
	for _, st := range chain {
		i, c := st.num-1, upgradeCuts[st.num-1]
		vm := b.vm
		if up == nil {
			from, to = running, revs[0]
			if from == revs[0] {
				to = revs[1]
			}
			mark, biosMark = len(vm.Console()), len(b.bios())
			up = b.startUpload(t, streams[to])
		}
		text := func() string {
			if strings.HasPrefix(c.at, biosPrefix) {
				return b.bios()[biosMark:]
			}
			return vm.Console()[mark:]
		}
		at := strings.TrimPrefix(c.at, biosPrefix)
		var seen string
		if c.sent != 0 {
			select {
			case <-up.sendUpTo(c.sent):
			case <-time.After(10 * time.Minute):
			}
			// The daemon has begun writing: the cut lands in the slot's write.
			for deadline := time.Now().Add(5 * time.Minute); !strings.Contains(vm.Console()[mark:], "into slot") && time.Now().Before(deadline); {
				time.Sleep(3 * time.Millisecond)
			}
			seen = fmt.Sprintf("%d of %d bytes into ssh", up.n(), len(streams[to]))
		} else {
			up.sendUpTo(0) // all of it, and the end of the input
			count := func() int {
				con := text()
				if c.since != "" {
					i := strings.Index(con, c.since)
					if i < 0 {
						return 0
					}
					con = con[i:]
				}
				return strings.Count(con, at)
			}
			deadline := time.Now().Add(15 * time.Minute)
			for count() < c.n && time.Now().Before(deadline) && !vm.Exited() {
				time.Sleep(3 * time.Millisecond)
			}
			if count() < c.n {
				vm.Kill()
				t.Fatalf("cut %d (%s): %q (%d) never came on the console:\n%s", i+1, c.name, c.at, c.n, vm.Tail(40))
			}
			time.Sleep(c.after)
			seen = lastLine(text(), at)
		}
		cardNow, how := card, "killed"
		if st.killed {
			vm.Kill()
			up.stop()
			up = nil
		} else {
			cardNow, how = filepath.Join(dir, "cut.img"), "copied"
			vmtest.CutCopy(t, vm, card, cardNow)
		}
		tail := qemuTail(vm.Console()[mark:], 3)
		if strings.HasPrefix(c.at, biosPrefix) {
			tail = qemuTail(text(), 3) + "\n  and on the serial console:\n" + tail
		}

		// The card as the power cut left it.
		fsckImage(t, cardNow)
		after := cardFacts(t, cardNow)
		after.sameData(t, before)
		rev := after.bootRevision()
		t.Logf("cut %2d (%s) at %s (%v): %s; last console lines:\n%s\n→ the loader boots slot %s (%s%s), record %q",
			i+1, how, c.name, time.Since(start).Round(time.Second), seen, tail, after.boots(), rev, map[bool]string{true: ", on trial"}[after.trial()], after.rec.Message())
		want := c.want
		if c.unless != "" && strings.Contains(vm.Console()[mark:], c.unless) {
			t.Logf("cut %d: the guest reached %q before the cut: either system will do", i+1, c.unless)
			want = "either"
		}
		switch {
		case rev != from && rev != to:
			t.Fatalf("cut %d (%s): the card boots %s: neither the old %s nor the new %s", i+1, c.name, rev, from, to)
		case want == "old" && rev != from, want == "new" && rev != to:
			t.Errorf("cut %d (%s): the card boots %s, want the %s system", i+1, c.name, rev, want)
		}
		if !st.killed {
			os.Remove(cardNow)
			continue // the upgrade goes on to the next step
		}

		// What the card says comes up.
		boots++
		b.restart(t, card, fmt.Sprintf("cut-%d", i+1), filepath.Join(dir, fmt.Sprintf("bios-%d.log", i+1)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		m, err := b.vm.WaitForRegexp(ctx, regexp.MustCompile(`Kernel command line:.*`+regexp.QuoteMeta("ocfw.slot=")+`([ab])`))
		cancel()
		if err != nil {
			t.Fatalf("cut %d: after the cut: %v", i+1, err)
		} else if m[1] != after.boots() {
			t.Fatalf("cut %d: slot %s boots, the card said %s", i+1, m[1], after.boots())
		}
		trial := after.trial()
		running = b.settle(t, "", after.boots())
		if !trial && running != rev {
			t.Errorf("cut %d: %s runs, the card said %s", i+1, running, rev)
		}
		if trial && running != to {
			t.Errorf("cut %d: %s runs after the trial, want %s committed", i+1, running, to)
		}
		before = cardFacts(t, card)
		t.Logf("cut %2d: %s came up and settled: %s", i+1, running, before.rec.Message())
	}
	t.Logf("cuts %v in %v, %d boots (not counting the trials')", chain, time.Since(start).Round(time.Second), boots)
}

// upgradeStream is what `ocfw upgrade` sends for img: the header, the
// kernel, the initramfs.
func upgradeStream(t *testing.T, img string) (string, []byte) {
	t.Helper()
	sys, err := firmware.OpenSystem(img)
	must(t, err)
	defer sys.Close()
	m := sys.Manifest
	var s bytes.Buffer
	must(t, bu.WriteHeader(&s, bu.Header{Board: m.Board, Revision: m.System.Revision,
		Kernel: bu.FileSum{Size: m.System.Kernel.Size, SHA256: m.System.Kernel.SHA256},
		Initrd: bu.FileSum{Size: m.System.Initrd.Size, SHA256: m.System.Initrd.SHA256}}))
	_, err = io.Copy(&s, sys.Reader())
	must(t, err)
	return m.System.Revision, s.Bytes()
}

// restart boots the card (again, after a cut): the same forward and
// known hosts, so a changed host key fails ssh. The BIOS's debug port
// goes to biosLog.
func (b *upgradeBox) restart(t *testing.T, img, name, biosLog string) {
	t.Helper()
	b.args = []string{"-chardev", "file,id=biosdbg,path=" + biosLog, "-device", "isa-debugcon,iobase=0x402,chardev=biosdbg"}
	b.boot(t, img, name)
}

// bios is what the BIOS said so far on its debug port, "" before the
// first restart.
func (b *upgradeBox) bios() string {
	for i, a := range b.args {
		if p, ok := strings.CutPrefix(a, "file,id=biosdbg,path="); ok && i > 0 {
			s, _ := os.ReadFile(p)
			return string(s)
		}
	}
	return ""
}

// settle waits for the running system to finish its boot, prove itself
// if it is on trial and answer ocf upgrade status with a settled record;
// it returns the revision, which must be rev (and the slot slot) when
// given.
func (b *upgradeBox) settle(t *testing.T, rev, slot string) string {
	t.Helper()
	// Asked only once a boot sequence is done (ocf upgrade status waits
	// for it): every ssh login before costs the booting guest a key
	// exchange.
	waitCount(t, b.vm, plan.MarkDone, 1, 12*time.Minute)
	var out string
	var err error
	for deadline := time.Now().Add(12 * time.Minute); time.Now().Before(deadline); time.Sleep(3 * time.Second) {
		out, err = b.trySSH("ocf upgrade status")
		if err == nil && !strings.Contains(out, " pending") && !strings.Contains(out, "being written") {
			break
		}
		if b.vm.Exited() {
			break
		}
	}
	if err != nil || strings.Contains(out, " pending") || strings.Contains(out, "being written") {
		t.Fatalf("the box never settled: %v\n%s\n%s", err, out, b.vm.Tail(40))
	}
	got := regexp.MustCompile(`(?m)^revision (\S+)`).FindStringSubmatch(out)
	s := regexp.MustCompile(`(?m)^slot (\S+)`).FindStringSubmatch(out)
	if got == nil || s == nil {
		t.Fatalf("ocf upgrade status: %s", out)
	}
	if (rev != "" && got[1] != rev) || (slot != "" && s[1] != slot) {
		t.Fatalf("runs %s from slot %s, want %s from slot %s:\n%s", got[1], s[1], rev, slot, out)
	}
	if !strings.Contains(b.vm.Console(), "ocfw: system "+got[1]+" from slot "+s[1]) {
		t.Errorf("the console does not say system %s from slot %s", got[1], s[1])
	}
	return got[1]
}

// An upload is ocf upgrade receive over ssh, fed a stream in stages:
// up to a number of bytes, held there while a cut is taken, then on.
type upload struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	stages chan stage
	sent   atomic.Int64
	total  int64
	out    bytes.Buffer
	done   chan error
	closed sync.Once
}

// A stage is how far the upload goes next, and a channel closed once
// it got there.
type stage struct {
	limit   int64
	end     bool // close the input once the stream is all in
	reached chan struct{}
}

func (u *upload) n() int64 { return u.sent.Load() }

// startUpload starts ocf upgrade receive over ssh, to be fed stream as
// sendUpTo says.
func (b *upgradeBox) startUpload(t *testing.T, stream []byte) *upload {
	t.Helper()
	u := &upload{stages: make(chan stage, 1), done: make(chan error, 1)}
	u.cmd = exec.Command(b.sshPath, "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+b.knownHosts, "-o", "StrictHostKeyChecking=accept-new",
		"-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "-p", strconv.Itoa(b.port), "-i", b.key, "root@127.0.0.1", "ocf upgrade receive")
	u.cmd.Stdout, u.cmd.Stderr = &u.out, &u.out
	in, err := u.cmd.StdinPipe()
	must(t, err)
	u.in = in
	must(t, u.cmd.Start())
	go func() {
		var n int64
		failed := false
		for st := range u.stages {
			for !failed && n < min(st.limit, int64(len(stream))) {
				k := min(int64(32<<10), st.limit-n)
				if _, err := in.Write(stream[n : n+k]); err != nil {
					failed = true // the box is gone: what follows is the cut's
					break
				}
				n += k
				u.sent.Store(n)
			}
			if st.end && n == int64(len(stream)) {
				u.close()
			}
			close(st.reached)
		}
	}()
	go func() { u.done <- u.cmd.Wait() }()
	u.total = int64(len(stream))
	return u
}

// sendUpTo lets the upload go on until limit bytes went into ssh (a
// fraction of the stream when < 1; -1: all of it; 0: all of it and the
// end of the input), and returns a channel closed once they have.
func (u *upload) sendUpTo(limit float64) <-chan struct{} {
	st := stage{limit: u.total, end: limit == 0, reached: make(chan struct{})}
	switch {
	case limit > 0 && limit < 1:
		st.limit = int64(limit * float64(u.total))
	case limit >= 1:
		st.limit = int64(limit)
	}
	u.stages <- st
	return st.reached
}

func (u *upload) close() { u.closed.Do(func() { u.in.Close() }) }

// stop ends the upload's ssh: its box is gone.
func (u *upload) stop() {
	close(u.stages)
	u.close()
	select {
	case <-u.done:
	case <-time.After(2 * time.Second):
		u.cmd.Process.Kill()
		<-u.done
	}
}

// facts are what a card says after a cut: its record, DEFAULT, BOOTONCE,
// and what the data partition keeps.
type facts struct {
	rec           *bu.Record
	def, once     string
	factory       string
	bootN, newest int
	reports       int
	hostKeys      map[string]string
	problems      []string
}

func cardFacts(t *testing.T, img string) *facts {
	t.Helper()
	info, err := firmware.Inspect(img)
	must(t, err)
	f, err := os.Open(img)
	must(t, err)
	defer f.Close()
	var boot *firmware.PartitionInfo
	for i := range info.Partitions {
		if info.Partitions[i].Bootable {
			boot = &info.Partitions[i]
		}
	}
	if boot == nil {
		t.Fatalf("%s: no boot partition", img)
	}
	c, err := bu.OpenCard(readOnlyPart{f, boot.Offset}, boot.Size)
	must(t, err)
	x := &facts{factory: c.FactoryRevision(), hostKeys: map[string]string{}}
	if x.def, err = c.Default(); err != nil {
		t.Fatal(err)
	}
	if x.once, err = c.BootOnce(); err != nil {
		t.Fatal(err)
	}
	st := vmtest.Store(t, img) // torn records are Problems: a cut may leave one, the next boot ignores it
	var r bu.Record
	if ok, err := st.State.Value(bu.RecordName, &r); err != nil {
		t.Errorf("the store's upgrade record: %v", err)
	} else if ok {
		x.rec = &r
	}
	x.bootN, x.reports, x.problems = st.State.Boot, len(st.Reports), st.Problems
	if len(st.Reports) > 0 {
		x.newest = st.Reports[0].Boot
	}
	for name, v := range st.State.Values {
		if strings.Contains(strings.ToLower(name), "host") {
			x.hostKeys[name] = string(v)
		}
	}
	return x
}

// boots is the slot the loader boots: BOOTONCE's, else DEFAULT's.
func (x *facts) boots() string {
	if x.once != "" {
		return x.once
	}
	return x.def
}

// trial says the boot to come is a new system's one-time boot.
func (x *facts) trial() bool {
	a, _ := bu.Decide(x.rec, x.boots(), x.def)
	return a == bu.Prove
}

// bootRevision is the revision in the slot the loader boots.
func (x *facts) bootRevision() string {
	if x.rec != nil && x.rec.Slots[x.boots()] != "" {
		return x.rec.Slots[x.boots()]
	}
	return x.factory
}

// sameData checks the data partition kept what it had: the boot
// counter and the newest report, the host keys.
func (x *facts) sameData(t *testing.T, before *facts) {
	t.Helper()
	if len(x.problems) > 0 {
		t.Logf("the store after the cut (torn records ignored, as designed): %v", x.problems)
	}
	if x.bootN < before.bootN || x.newest < before.newest || x.reports < min(before.reports, 1) {
		t.Errorf("the store lost boots or reports: boot %d, newest report %d, %d reports; before: %d, %d, %d",
			x.bootN, x.newest, x.reports, before.bootN, before.newest, before.reports)
	}
	if len(before.hostKeys) == 0 {
		t.Errorf("no host key in the store")
	}
	for k, v := range before.hostKeys {
		if x.hostKeys[k] != v {
			t.Errorf("the store's %s changed after the cut", k)
		}
	}
}

// readOnlyPart is a partition of an image file for bu.OpenCard, which
// only reads while it checks.
type readOnlyPart struct {
	f   *os.File
	off int64
}

func (p readOnlyPart) ReadAt(b []byte, off int64) (int, error) { return p.f.ReadAt(b, p.off+off) }
func (p readOnlyPart) WriteAt([]byte, int64) (int, error) {
	return 0, errors.New("read-only")
}
func (p readOnlyPart) Sync() error { return nil }

// lastLine is the console line holding the n-th text, for the log.
func lastLine(con, text string) string {
	i := strings.LastIndex(con, text)
	if i < 0 {
		return ""
	}
	s := con[:i]
	j := strings.LastIndex(s, "\n")
	rest := con[i:]
	if k := strings.IndexByte(rest, '\n'); k >= 0 {
		rest = rest[:k]
	}
	return strings.TrimSpace(strings.ReplaceAll(s[j+1:]+rest, "\r", ""))
}

func qemuTail(con string, n int) string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(con, "\r", ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
