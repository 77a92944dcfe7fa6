package sshd

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// gate decides which connections may start logging in, as OpenSSH's
// MaxStartups and PerSourceMaxStartups do, and keeps the count of
// logged-in ones apart: a connection that has not logged in never takes
// a logged-in connection's place.
//
// A new connection is never refused for want of room: when its source
// already holds perSource unauthenticated connections, or the table
// holds max, the stalest one (of that source, or of all) is closed to
// make room for it. Stalest is, first, the oldest that has not even
// sent its identification line; then the one heard from longest ago.
// So whatever silent or stalled connections are held, from any address
// including the admin's own, the admin's next try gets in, and a client
// busy logging in (heard from a moment ago) is the last to go. Room is
// never refused, so nothing can hold the table against newcomers; the
// bounds keep memory and goroutines bounded, and the grace times (idle.go)
// close what is held even when nobody comes.
type gate struct {
	max, perSource int
	maxLoggedIn    int
	logf           func(string, ...any)
	every          time.Duration // how often refusals are summarised

	mu       sync.Mutex
	starting map[*startup]struct{}
	bySource map[netip.Prefix]int
	loggedIn int
	counts   map[string]int // refusal reason -> count since the last summary
	sources  map[netip.Prefix]struct{}
	timer    *time.Timer // pending summary; nil when none
}

// startup is one unauthenticated connection in the gate.
type startup struct {
	conn   net.Conn
	source netip.Prefix
	since  time.Time
	// heard is when bytes last came from the client (Unix
	// nanoseconds), set by the connection's reader (idleConn).
	heard atomic.Int64
	ident bool // sent its identification line
	gone  bool // left the table (logged in, ended or evicted)
}

// maxSummarySources bounds the distinct sources a summary counts.
const maxSummarySources = 256

// Reasons a connection ended without a login, as summarised.
const (
	whySilent = "silent, timed out"
	whyNoAuth = "no login attempt"
)

// whyEvicted is the reason for a connection the gate closed to make
// room: silent or stalled, for a newcomer from the same source or from
// anywhere.
func whyEvicted(st *startup, sameSource bool) string {
	kind := "stalled"
	if !st.ident {
		kind = "silent"
	}
	if sameSource {
		return kind + " closed for a newer one from the same source"
	}
	return kind + " closed to make room"
}

func newGate(max, perSource, maxLoggedIn int, logf func(string, ...any)) *gate {
	return &gate{
		max: max, perSource: perSource, maxLoggedIn: maxLoggedIn,
		logf: logf, every: time.Minute,
		starting: map[*startup]struct{}{},
		bySource: map[netip.Prefix]int{},
		counts:   map[string]int{},
		sources:  map[netip.Prefix]struct{}{},
	}
}

// sourceOf is the source an address counts against: the IPv4 address,
// or the IPv6 /64 (one host usually has a whole /64 to pick from).
func sourceOf(a net.Addr) netip.Prefix {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// admit takes c into the table, closing the stalest connection of its
// source or of the table when either is full.
func (g *gate) admit(c net.Conn) *startup {
	src := sourceOf(c.RemoteAddr())
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bySource[src] >= g.perSource {
		g.evictLocked(g.stalestLocked(&src), true)
	}
	if len(g.starting) >= g.max {
		g.evictLocked(g.stalestLocked(nil), false)
	}
	now := time.Now()
	st := &startup{conn: c, source: src, since: now}
	st.heard.Store(now.UnixNano())
	g.starting[st] = struct{}{}
	g.bySource[src]++
	return st
}

// stalestLocked is the connection to close first, of src's when src is
// not nil: the oldest silent one, else the one heard from longest ago.
func (g *gate) stalestLocked(src *netip.Prefix) *startup {
	var old *startup
	before := func(a, b *startup) bool {
		if a.ident != b.ident {
			return !a.ident
		}
		if !a.ident {
			return a.since.Before(b.since)
		}
		return a.heard.Load() < b.heard.Load()
	}
	for st := range g.starting {
		if src != nil && st.source != *src {
			continue
		}
		if old == nil || before(st, old) {
			old = st
		}
	}
	return old
}

func (g *gate) evictLocked(st *startup, sameSource bool) {
	if st == nil {
		return
	}
	g.removeLocked(st)
	st.conn.Close()
	g.countLocked(whyEvicted(st, sameSource), st.source)
}

func (g *gate) removeLocked(st *startup) {
	if st.gone {
		return
	}
	st.gone = true
	delete(g.starting, st)
	if g.bySource[st.source]--; g.bySource[st.source] <= 0 {
		delete(g.bySource, st.source)
	}
}

// identSeen marks st as one that talks SSH: evicted after the silent ones.
func (g *gate) identSeen(st *startup) {
	g.mu.Lock()
	st.ident = true
	g.mu.Unlock()
}

// ended takes st out of the table: it ended without a login. why, if
// not "", counts it in the summary instead of a line of its own.
func (g *gate) ended(st *startup, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !st.gone && why != "" {
		g.countLocked(why, st.source)
	}
	g.removeLocked(st)
}

// evicted reports whether st was closed by the gate to make room.
func (g *gate) evicted(st *startup) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, in := g.starting[st]
	return st.gone && !in
}

// login moves st from the unauthenticated table to the logged-in count,
// or reports false when maxLoggedIn connections are logged in already.
func (g *gate) login(st *startup) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(st)
	if g.loggedIn >= g.maxLoggedIn {
		return false
	}
	g.loggedIn++
	return true
}

func (g *gate) logout() {
	g.mu.Lock()
	g.loggedIn--
	g.mu.Unlock()
}

// countLocked counts a refusal for the next summary, which is logged
// g.every after the first refusal of a quiet period: a flood costs one
// line a minute, not one per connect.
func (g *gate) countLocked(why string, src netip.Prefix) {
	g.counts[why]++
	// Distinct sources are remembered up to a bound: a flood from
	// many addresses must not grow the map without end.
	if len(g.sources) < maxSummarySources {
		g.sources[src] = struct{}{}
	}
	if g.timer == nil {
		g.timer = time.AfterFunc(g.every, g.summarise)
	}
}

func (g *gate) summarise() {
	g.mu.Lock()
	var parts []string
	for why, n := range g.counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, why))
	}
	sort.Strings(parts)
	var srcs []string
	for p := range g.sources {
		if p.IsSingleIP() {
			srcs = append(srcs, p.Addr().String())
		} else {
			srcs = append(srcs, p.String())
		}
	}
	sort.Strings(srcs)
	nsrc := fmt.Sprint(len(srcs))
	if len(srcs) >= maxSummarySources {
		nsrc += " or more"
	}
	if len(srcs) > 3 {
		srcs = append(srcs[:3], "...")
	}
	clear(g.counts)
	clear(g.sources)
	g.timer = nil
	g.mu.Unlock()
	if len(parts) > 0 {
		g.logf("ssh: in the last %v, connections that did not log in: %s; %s source(s): %s",
			g.every, strings.Join(parts, ", "), nsrc, strings.Join(srcs, " "))
	}
}

// stop logs what is counted now and cancels the pending summary.
func (g *gate) stop() {
	g.mu.Lock()
	t := g.timer
	g.mu.Unlock()
	if t != nil && t.Stop() {
		g.summarise()
	}
}
