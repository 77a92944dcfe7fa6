package e2e

import (
	"flag"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The parallel tests here each keep guests busy for minutes to half an
// hour, and the package's time is that of its longest run of them. go
// test's own -parallel limit starts whichever paused tests wake first
// (seen: the last declared, then the others in no fixed order), so the
// longest could start last and run on alone. Instead TestMain lifts go
// test's limit and the tests take guest slots from this pool, which has
// as many as go test would have run tests at once (-parallel, GOMAXPROCS
// by default: one busy TCG guest a core) and hands them out longest
// test first.

// longestFirst ranks the parallel tests by how long they hold their
// guests, measured (docs/testing.md): a free slot goes to the
// highest-ranked waiting test (a subtest ranks as its test), unranked
// ones after them in the order they asked.
//
// The two-slot tests come first: at the start both slots are free, later
// one would wait for both to drain.
var longestFirst = []string{
	"TestUpgradePowerCuts", // two guests: its two chains of cuts
	"TestIPsecEndToEnd",    // two routers booting together
	"TestUpgradeRollbacks",
	"TestPushConfig",
	"TestIKEv2AgainstStrongswan",
	"TestRunKeepsCard",
	"TestEndToEnd",
	"TestRouterEndToEnd",
	"TestEndToEndEngineChoice",
	"TestEndToEndBadEngine",
}

// gatherTime is how long the pool waits after the first request before
// it hands out a slot: go test releases all paused parallel tests at
// once, and within this they have all asked, so the ranking decides
// rather than the order they woke in.
const gatherTime = time.Second

type guestPool struct {
	mu       sync.Mutex
	capacity int // slots in all; 0 until TestMain set it
	free     int
	gather   time.Duration
	first    time.Time // the first request
	timer    bool      // a grant is scheduled for the end of gather
	waiting  []*guestRequest
	asked    int // requests so far, for their order
}

type guestRequest struct {
	rank, order, n int
	granted        chan struct{}
}

var guests = &guestPool{}

// liftParallel makes the pool the limit on parallel tests: its capacity
// is go test's -parallel (as given, or GOMAXPROCS), and go test's own
// limit is raised past the number of tests.
func (p *guestPool) liftParallel() {
	if !flag.Parsed() {
		flag.Parse()
	}
	p.capacity = runtime.GOMAXPROCS(0)
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			p.capacity = n
		}
		f.Value.Set("1000")
	}
	p.free = p.capacity
	p.gather = gatherTime
}

// parallel marks t parallel and returns once up to n guest slots are
// its (never more than the pool has), until t and its subtests end. It
// returns how many it got: a test that runs guests side by side runs as
// many as that.
func parallel(t *testing.T, n int) int {
	t.Helper()
	t.Parallel()
	start := time.Now()
	got, release := guests.take(t.Name(), n)
	if w := time.Since(start); w > 2*gatherTime {
		t.Logf("waited %v for %d guest slots", w.Round(time.Second), got)
	}
	t.Cleanup(release)
	return got
}

// take waits for n slots (at most the pool's capacity) for the test
// called name, and returns how many and the function that gives them
// back.
func (p *guestPool) take(name string, n int) (int, func()) {
	p.mu.Lock()
	if p.capacity == 0 { // no TestMain (a test binary built otherwise): no pool
		p.mu.Unlock()
		return 1, func() {}
	}
	n = min(max(n, 1), p.capacity)
	top, _, _ := strings.Cut(name, "/") // a subtest ranks as its test
	rank := slices.Index(longestFirst, top)
	if rank < 0 {
		rank = len(longestFirst)
	}
	r := &guestRequest{rank: rank, order: p.asked, n: n, granted: make(chan struct{})}
	p.asked++
	p.waiting = append(p.waiting, r)
	if p.first.IsZero() {
		p.first = time.Now()
	}
	p.grantLocked()
	p.mu.Unlock()
	<-r.granted
	var once sync.Once
	return n, func() {
		once.Do(func() {
			p.mu.Lock()
			p.free += n
			p.grantLocked()
			p.mu.Unlock()
		})
	}
}

// grantLocked hands free slots to the waiting requests, best ranked
// first; one that does not fit yet holds back those after it, so a test
// that needs two slots is not overtaken for ever.
func (p *guestPool) grantLocked() {
	if wait := p.gather - time.Since(p.first); wait > 0 {
		if !p.timer {
			p.timer = true
			time.AfterFunc(wait, func() {
				p.mu.Lock()
				p.timer = false
				p.grantLocked()
				p.mu.Unlock()
			})
		}
		return
	}
	slices.SortFunc(p.waiting, func(a, b *guestRequest) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		return a.order - b.order
	})
	for len(p.waiting) > 0 && p.waiting[0].n <= p.free {
		r := p.waiting[0]
		p.waiting = p.waiting[1:]
		p.free -= r.n
		close(r.granted)
	}
}

// TestGuestPool checks the pool's order without a guest: slots go to the
// longest tests first whatever order they asked in, a two-slot test is
// not overtaken by one-slot tests after it, unranked tests go last in
// the order they asked, and a request is cut to the pool's size.
func TestGuestPool(t *testing.T) {
	// Both slots held while the tests ask, as if by tests already
	// running: the ranking alone decides who gets them.
	p := &guestPool{capacity: 2, free: 0, first: time.Now().Add(-time.Hour)}
	type grant struct {
		name    string
		n       int
		release func()
	}
	granted := make(chan grant, 8)
	ask := func(name string, n int) {
		p.mu.Lock()
		asked := p.asked
		p.mu.Unlock()
		go func() {
			got, release := p.take(name, n)
			granted <- grant{name, got, release}
		}()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			p.mu.Lock()
			in := p.asked > asked
			p.mu.Unlock()
			if in {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never asked", name)
			}
		}
	}
	next := func() grant {
		t.Helper()
		select {
		case g := <-granted:
			return g
		case <-time.After(time.Minute):
			t.Fatal("no slot granted")
			return grant{}
		}
	}
	none := func() {
		t.Helper()
		select {
		case g := <-granted:
			t.Fatalf("%s got a slot while none was free", g.name)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, r := range []struct {
		name string
		n    int
	}{{"TestEndToEndBadEngine", 1}, {"unranked-a", 1}, {"TestUpgradePowerCuts", 2}, {"TestUpgradeRollbacks", 1}, {"unranked-b", 1}} {
		ask(r.name, r.n)
	}
	none()
	p.mu.Lock()
	p.free = 2
	p.grantLocked()
	p.mu.Unlock()

	g := next()
	if g.name != "TestUpgradePowerCuts" || g.n != 2 {
		t.Fatalf("first grant: %s with %d slots, want TestUpgradePowerCuts with 2", g.name, g.n)
	}
	none()
	g.release()
	g.release() // twice: the slots come back once
	a, b := next(), next()
	if a.name > b.name {
		a, b = b, a
	}
	if a.name != "TestEndToEndBadEngine" || b.name != "TestUpgradeRollbacks" {
		t.Fatalf("after the first: %s and %s, want TestEndToEndBadEngine and TestUpgradeRollbacks", a.name, b.name)
	}
	none()
	a.release()
	if g := next(); g.name != "unranked-a" {
		t.Fatalf("then %s, want unranked-a (asked before unranked-b)", g.name)
	}
	none()
	b.release()
	if g := next(); g.name != "unranked-b" {
		t.Fatalf("last %s, want unranked-b", g.name)
	}

	// One slot in all: a test asking for two gets one.
	one := &guestPool{capacity: 1, free: 1}
	if n, release := one.take("TestUpgradePowerCuts", 2); n != 1 {
		t.Errorf("a pool of 1 gave %d slots", n)
	} else {
		release()
	}
}
