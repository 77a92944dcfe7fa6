package sshd

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"
)

// gate decides which connections may start logging in, as OpenSSH's
// MaxStartups and PerSourceMaxStartups do, and keeps the count of
// logged-in ones apart: a connection that has not logged in never takes
// a logged-in connection's place, and bare TCP connects (nothing sent)
// never push out a client that has begun to talk SSH.
//
// A new connection is refused when its source already holds perSource
// unauthenticated connections. From dropFrom unauthenticated
// connections on, the oldest one that has not even sent its
// identification line is closed to make room for the new one; only when
// every one has begun the protocol is the new one refused: at random,
// with a chance rising from 30 % at dropFrom to 100 % at max, so that a
// flood of clients that do talk SSH cannot keep the table full
// deterministically, and the login grace empties it.
type gate struct {
	max, perSource, dropFrom int
	maxLoggedIn              int
	logf                     func(string, ...any)
	every                    time.Duration // how often refusals are summarised

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
	ident  bool // sent its identification line
	gone   bool // left the table (logged in, ended or evicted)
}

// maxSummarySources bounds the distinct sources a summary counts.
const maxSummarySources = 256

// Refusal reasons, as summarised.
const (
	whyPerSource = "over the per-source limit"
	whyFull      = "refused, table full"
	whyDrop      = "refused, random early drop"
	whyEvicted   = "silent, closed to make room"
	whySilent    = "silent, timed out"
	whyNoAuth    = "no login attempt"
)

func newGate(max, perSource, dropFrom, maxLoggedIn int, logf func(string, ...any)) *gate {
	return &gate{
		max: max, perSource: perSource, dropFrom: dropFrom, maxLoggedIn: maxLoggedIn,
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

// admit takes c into the table, or refuses it (and closes it).
func (g *gate) admit(c net.Conn) *startup {
	src := sourceOf(c.RemoteAddr())
	g.mu.Lock()
	defer g.mu.Unlock()
	refuse := func(why string) *startup {
		c.Close()
		g.countLocked(why, src)
		return nil
	}
	if g.bySource[src] >= g.perSource {
		return refuse(whyPerSource)
	}
	if n := len(g.starting); n >= g.dropFrom {
		// Under pressure a connection that has sent nothing goes
		// first, before any chance is taken with one that may be
		// the admin's.
		if victim := g.oldestSilentLocked(); victim != nil {
			g.removeLocked(victim)
			victim.conn.Close()
			g.countLocked(whyEvicted, victim.source)
		} else if n >= g.max {
			return refuse(whyFull)
		} else if p := 0.3 + 0.7*float64(n-g.dropFrom)/float64(g.max-g.dropFrom); rand.Float64() < p {
			// 30 % at dropFrom, rising linearly to 100 % at max.
			return refuse(whyDrop)
		}
	}
	st := &startup{conn: c, source: src, since: time.Now()}
	g.starting[st] = struct{}{}
	g.bySource[src]++
	return st
}

func (g *gate) oldestSilentLocked() *startup {
	var old *startup
	for st := range g.starting {
		if !st.ident && (old == nil || st.since.Before(old.since)) {
			old = st
		}
	}
	return old
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

// identSeen marks st as one that talks SSH: no longer evictable.
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
