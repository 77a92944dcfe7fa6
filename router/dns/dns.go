// Package dns is the LAN's DNS forwarder: it answers LAN clients from the
// WAN's resolvers (set at runtime, as the WAN's DHCP lease gives them),
// caches answers for their TTL in a bounded table, and refuses anyone
// outside the LAN so the router is not an open resolver.
//
// Messages are parsed with golang.org/x/net/dns/dnsmessage, only as far
// as the question and the TTLs: the answer bytes are relayed as the
// upstream sent them (with the client's ID). miekg/dns would do more and
// cost the small boards' flash far more.
package dns

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Config sets a forwarder up.
type Config struct {
	// Allowed are the client networks answered (the LAN); others get
	// REFUSED.
	Allowed []netip.Prefix
	// Upstreams are tried in order; SetUpstreams changes them.
	Upstreams []netip.AddrPort
	// Timeout bounds one upstream's answer; 0 means 2 s.
	Timeout time.Duration
	// CacheSize bounds the cache; 0 means 512 answers.
	CacheSize int
	// MaxTTL caps how long an answer is kept; 0 means 1 hour.
	MaxTTL time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Logf, when set, gets problems (no upstream answering).
	Logf func(format string, args ...any)
}

// Stats are counters for the router's status.
type Stats struct {
	Queries, CacheHits, Upstream, UpstreamFailures, Refused, Malformed uint64
}

// Forwarder answers DNS queries.
type Forwarder struct {
	cfg Config

	mu        sync.Mutex
	upstreams []netip.AddrPort
	cache     map[cacheKey]*entry
	order     []cacheKey // insertion order, for eviction

	queries, hits, upstream, failures, refused, malformed atomic.Uint64
}

type cacheKey struct {
	name  string
	typ   dnsmessage.Type
	class dnsmessage.Class
}

type entry struct {
	msg     []byte // the answer, ID zeroed
	expires time.Time
}

// New makes a forwarder.
func New(cfg Config) *Forwarder {
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 512
	}
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &Forwarder{cfg: cfg, cache: map[cacheKey]*entry{}}
	f.SetUpstreams(cfg.Upstreams)
	return f
}

// SetUpstreams replaces the resolvers asked, e.g. after a new WAN lease,
// and drops the cache (the new resolvers may answer differently).
func (f *Forwarder) SetUpstreams(u []netip.AddrPort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upstreams = append([]netip.AddrPort(nil), u...)
	f.cache = map[cacheKey]*entry{}
	f.order = nil
}

// Stats returns the counters.
func (f *Forwarder) Stats() Stats {
	return Stats{Queries: f.queries.Load(), CacheHits: f.hits.Load(), Upstream: f.upstream.Load(),
		UpstreamFailures: f.failures.Load(), Refused: f.refused.Load(), Malformed: f.malformed.Load()}
}

// ListenAndServe answers on UDP at each address ("192.168.1.1:53") until
// ctx is done.
func (f *Forwarder) ListenAndServe(ctx context.Context, addrs []string) error {
	var conns []net.PacketConn
	for _, a := range addrs {
		c, err := net.ListenPacket("udp4", a)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return err
		}
		conns = append(conns, c)
	}
	errs := make(chan error, len(conns))
	for _, c := range conns {
		go func(c net.PacketConn) { errs <- f.Serve(ctx, c) }(c)
	}
	var first error
	for range conns {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// maxConcurrent bounds the queries being forwarded at once.
const maxConcurrent = 32

// Serve answers queries on c until ctx is done.
func (f *Forwarder) Serve(ctx context.Context, c net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	sem := make(chan struct{}, maxConcurrent)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		buf := make([]byte, 1500)
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // overloaded: the client retries
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if reply := f.Answer(ctx, buf[:n], from); reply != nil {
				c.WriteTo(reply, from)
			}
		}()
	}
}

// Answer turns one query from a client into the reply to send, or nil
// to drop it (malformed).
func (f *Forwarder) Answer(ctx context.Context, q []byte, from net.Addr) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		f.malformed.Add(1)
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		f.malformed.Add(1)
		return nil
	}
	f.queries.Add(1)
	if !f.allowed(from) {
		f.refused.Add(1)
		return errorReply(h, qs[0], dnsmessage.RCodeRefused)
	}
	key := cacheKey{strings.ToLower(qs[0].Name.String()), qs[0].Type, qs[0].Class}
	if ans := f.cached(key); ans != nil {
		f.hits.Add(1)
		return withID(ans, h.ID)
	}
	ans, ok := f.forward(ctx, q)
	if !ok {
		f.failures.Add(1)
		return errorReply(h, qs[0], dnsmessage.RCodeServerFailure)
	}
	f.store(key, ans)
	return withID(ans, h.ID)
}

func (f *Forwarder) allowed(from net.Addr) bool {
	ua, ok := from.(*net.UDPAddr)
	if !ok {
		return false
	}
	a, ok := netip.AddrFromSlice(ua.IP)
	if !ok {
		return false
	}
	a = a.Unmap()
	for _, p := range f.cfg.Allowed {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forward asks each upstream in turn; the first well-formed answer to
// this question wins.
func (f *Forwarder) forward(ctx context.Context, q []byte) ([]byte, bool) {
	f.mu.Lock()
	ups := append([]netip.AddrPort(nil), f.upstreams...)
	f.mu.Unlock()
	if len(ups) == 0 && f.cfg.Logf != nil {
		f.cfg.Logf("dns: no upstream resolver yet (the WAN has none)")
	}
	for _, u := range ups {
		f.upstream.Add(1)
		ans, err := exchange(ctx, u, q, f.cfg.Timeout)
		if err == nil {
			return ans, true
		}
		if f.cfg.Logf != nil {
			f.cfg.Logf("dns: upstream %s: %v", u, err)
		}
	}
	return nil, false
}

func exchange(ctx context.Context, u netip.AddrPort, q []byte, timeout time.Duration) ([]byte, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := d.DialContext(ctx, "udp", u.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write(q); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		// A reply to another question (spoofed, or late) is skipped.
		if err != nil || !h.Response || h.ID != id(q) {
			continue
		}
		return append([]byte(nil), buf[:n]...), nil
	}
}

func id(m []byte) uint16 { return uint16(m[0])<<8 | uint16(m[1]) }

func withID(m []byte, v uint16) []byte {
	out := append([]byte(nil), m...)
	out[0], out[1] = byte(v>>8), byte(v)
	return out
}

func errorReply(h dnsmessage.Header, q dnsmessage.Question, rc dnsmessage.RCode) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, RCode: rc})
	b.StartQuestions()
	b.Question(q)
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

func (f *Forwarder) cached(k cacheKey) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.cache[k]
	if e == nil {
		return nil
	}
	if !f.cfg.Now().Before(e.expires) {
		delete(f.cache, k)
		return nil
	}
	return e.msg
}

// store keeps an answer for its smallest TTL (capped); answers that are
// errors (other than NXDOMAIN) or carry no TTL are not kept.
func (f *Forwarder) store(k cacheKey, ans []byte) {
	var p dnsmessage.Parser
	h, err := p.Start(ans)
	if err != nil || (h.RCode != dnsmessage.RCodeSuccess && h.RCode != dnsmessage.RCodeNameError) || h.Truncated {
		return
	}
	if err := p.SkipAllQuestions(); err != nil {
		return
	}
	ttl := f.cfg.MaxTTL
	found := false
	min := func(rh dnsmessage.ResourceHeader) {
		found = true
		if t := time.Duration(rh.TTL) * time.Second; t < ttl {
			ttl = t
		}
	}
	for {
		rh, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return
		}
		min(rh)
		if err := p.SkipAnswer(); err != nil {
			return
		}
	}
	// NXDOMAIN and empty answers carry their TTL in the SOA.
	for {
		rh, err := p.AuthorityHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return
		}
		min(rh)
		if err := p.SkipAuthority(); err != nil {
			return
		}
	}
	if !found || ttl <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cache[k]; !ok {
		f.order = append(f.order, k)
	}
	f.cache[k] = &entry{msg: withID(ans, 0), expires: f.cfg.Now().Add(ttl)}
	for len(f.cache) > f.cfg.CacheSize && len(f.order) > 0 {
		old := f.order[0]
		f.order = f.order[1:]
		delete(f.cache, old)
	}
	if len(f.order) > 2*f.cfg.CacheSize {
		// Keys of expired entries pile up in order: compact it.
		var keep []cacheKey
		for _, k := range f.order {
			if _, ok := f.cache[k]; ok {
				keep = append(keep, k)
			}
		}
		f.order = keep
	}
}
