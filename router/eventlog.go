package router

import (
	"container/list"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ocfw/ocfw/store"
)

// Per-packet and per-connection events (a DHCP client the pool has no
// room for, an SSH connection refused, an upstream resolver failing) are
// caused by whoever sends packets, so they are rate-limited before they
// reach the console and the card: a token bucket per (kind, source), one
// per kind, and one for them all. What a bucket holds back is counted
// and said once a minute in one summary line per kind, so a flood costs
// a bounded number of lines and none of it goes unsaid.
const (
	eventWindow    = time.Minute // summaries cover this long
	eventKeyBurst  = 3           // lines one (kind, source) may log at once
	eventKeyEvery  = time.Minute // then one more per this long
	eventKindBurst = 10          // lines of one kind, from all sources
	eventKindEvery = 6 * time.Second
	eventAllBurst  = 30 // lines of all kinds
	eventAllEvery  = 2 * time.Second
	eventKeys      = 256 // (kind, source) buckets kept; the least recent go first
	eventSummaries = 5   // summary lines per window; further kinds share one line
	eventSources   = 1024
)

// So at most eventAllBurst lines at once and one per eventAllEvery (30 a
// minute) pass, plus at most eventSummaries+1 summaries a minute.

type bucket struct {
	tokens float64
	at     time.Time
}

// take refills b for the time since its last use and takes a token.
func (b *bucket) take(now time.Time, burst int, every time.Duration) bool {
	if b.at.IsZero() {
		b.tokens = float64(burst)
	} else {
		b.tokens = min(float64(burst), b.tokens+float64(now.Sub(b.at))/float64(every))
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

type eventKey struct{ kind, source string }

type keyEntry struct {
	key eventKey
	b   bucket
}

// held is what a window held back of one kind.
type held struct {
	n       int
	sources map[string]bool // up to eventSources
	many    bool            // more sources than that
	last    string          // the last line held back
}

// eventLimiter decides which events are logged; out gets the lines and
// the summaries.
type eventLimiter struct {
	mu    sync.Mutex
	now   func() time.Time
	out   func(line string)
	keys  map[eventKey]*list.Element // of *keyEntry, most recent first
	lru   *list.List
	kinds map[string]*bucket
	all   bucket
	held  map[string]*held
	order []string // kinds in the order they were first held back
	timer *time.Timer
}

func newEventLimiter(now func() time.Time, out func(line string)) *eventLimiter {
	return &eventLimiter{now: now, out: out, keys: map[eventKey]*list.Element{}, lru: list.New(),
		kinds: map[string]*bucket{}, held: map[string]*held{}}
}

// event logs line unless its kind, its (kind, source) or all events
// together are over their rate; then it is counted for the summary.
func (l *eventLimiter) event(kind, source, line string) {
	l.mu.Lock()
	now := l.now()
	k := eventKey{kind, source}
	e, ok := l.keys[k]
	if ok {
		l.lru.MoveToFront(e)
	} else {
		e = l.lru.PushFront(&keyEntry{key: k})
		l.keys[k] = e
		if l.lru.Len() > eventKeys {
			old := l.lru.Back()
			l.lru.Remove(old)
			delete(l.keys, old.Value.(*keyEntry).key)
		}
	}
	kb := l.kinds[kind]
	if kb == nil {
		kb = &bucket{}
		l.kinds[kind] = kb
	}
	// The line passes only when all three buckets have room.
	okKey := e.Value.(*keyEntry).b.take(now, eventKeyBurst, eventKeyEvery)
	okKind := okKey && kb.take(now, eventKindBurst, eventKindEvery)
	okAll := okKind && l.all.take(now, eventAllBurst, eventAllEvery)
	if okAll {
		l.mu.Unlock()
		l.out(line)
		return
	}
	h := l.held[kind]
	if h == nil {
		h = &held{sources: map[string]bool{}}
		l.held[kind] = h
		l.order = append(l.order, kind)
	}
	h.n++
	h.last = line
	if len(h.sources) < eventSources {
		h.sources[source] = true
	} else if !h.sources[source] {
		h.many = true
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(eventWindow, l.flush)
	}
	l.mu.Unlock()
}

// flush says what was held back since the last summary.
func (l *eventLimiter) flush() {
	l.mu.Lock()
	was, order := l.held, l.order
	l.held, l.order = map[string]*held{}, nil
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	var lines []string
	restN, restKinds := 0, 0
	for i, kind := range order {
		h := was[kind]
		if i >= eventSummaries {
			restN += h.n
			restKinds++
			continue
		}
		from := ""
		if n := len(h.sources); n > 1 || h.many {
			more := ""
			if h.many {
				more = " or more"
			}
			from = fmt.Sprintf(" from %s%s sources", thousands(n), more)
		}
		lines = append(lines, fmt.Sprintf("%s [and %s more like this%s not logged in the last minute]", h.last, thousands(h.n), from))
	}
	if restKinds > 0 {
		lines = append(lines, fmt.Sprintf("log: %s more lines of %d other kinds not logged in the last minute", thousands(restN), restKinds))
	}
	for _, line := range lines {
		l.out(line)
	}
}

// thousands writes n with commas: 1,204.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// eventf logs a per-packet or per-connection event of a kind (what
// happened: one call site, such as its format) from a source (who
// caused it: a MAC or an address), rate-limited. Rare events use logf.
func (r *Router) eventf(kind, source, format string, args ...any) {
	r.eventLimiter().event(kind, source, store.Printable(fmt.Sprintf(format, args...)))
}

// eventLimiter is the router's, made at its first use: its lines go to
// the recent events and Config.EventLog (or Log).
func (r *Router) eventLimiter() *eventLimiter {
	r.eventsOnce.Do(func() {
		r.limiter = newEventLimiter(time.Now, func(line string) {
			r.addEvent(line)
			if r.cfg.EventLog != nil {
				r.cfg.EventLog("%s", line)
			} else if r.cfg.Log != nil {
				r.cfg.Log("%s", line)
			}
		})
	})
	return r.limiter
}

// flushEvents says what the limiter holds back now (the router stops).
func (r *Router) flushEvents() { r.eventLimiter().flush() }

// serviceLog is the log callback for a service whose lines are caused
// by its clients (the DHCP server, SSH, DNS): each line is an event whose
// kind is its format and whose source is the first client address among
// its arguments (a MAC before an IP address), so the services themselves
// need not know of the limits.
func (r *Router) serviceLog() func(format string, args ...any) {
	return func(format string, args ...any) {
		r.eventf(format, sourceOf(args), format, args...)
	}
}

// sourceOf finds who caused an event in its arguments: a MAC address
// first, else an IP address (without its port), else "".
func sourceOf(args []any) string {
	ip := ""
	for _, a := range args {
		var s string
		switch v := a.(type) {
		case net.HardwareAddr:
			return v.String()
		case net.Addr:
			s = v.String()
		case netip.Addr:
			s = v.String()
		case netip.AddrPort:
			s = v.Addr().String()
		case net.IP:
			s = v.String()
		case string:
			s = v
		case fmt.Stringer:
			s = v.String()
		default:
			continue
		}
		if len(s) == 17 && strings.Count(s, ":") == 5 {
			if m, err := net.ParseMAC(s); err == nil {
				return m.String()
			}
		}
		if ip != "" {
			continue
		}
		if ap, err := netip.ParseAddrPort(s); err == nil {
			ip = ap.Addr().String()
		} else if a, err := netip.ParseAddr(s); err == nil {
			ip = a.String()
		}
	}
	return ip
}
