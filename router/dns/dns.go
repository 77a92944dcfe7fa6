// Package dns is the LAN's DNS forwarder: it answers LAN clients from the
// WAN's resolvers (set at runtime, as the WAN's DHCP lease gives them),
// caches answers in a bounded table and counts their TTLs down, answers
// the LAN's own names (DHCP clients, the router) itself, and refuses
// anyone outside the LAN so the router is not an open resolver. It
// listens on UDP and TCP (RFC 7766).
//
// Messages are parsed with golang.org/x/net/dns/dnsmessage. Each reply is
// rebuilt from the upstream's answer: the client's ID and question, TTLs
// counted down, the client's EDNS (or none), and cut to the size the
// client can take. miekg/dns would do more and cost the small boards'
// flash far more.
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

// Limits on what the forwarder holds, for a board with 32 MiB of RAM.
const (
	// maxConcurrent bounds the UDP queries being forwarded at once.
	maxConcurrent = 32
	// ednsSize is the UDP payload size offered to clients and upstreams
	// (the 2020 DNS flag day's value: no IP fragmentation).
	ednsSize = 1232
	// noEDNSSize is what a client without EDNS can take over UDP.
	noEDNSSize = 512
	// maxTCPSize is the largest DNS message (its 2-byte length).
	maxTCPSize = 65535
)

// Config sets a forwarder up.
type Config struct {
	// Allowed are the client networks answered (the LAN); others get
	// REFUSED. Reverse names of their IPv4 addresses are answered
	// locally (PTR from Hosts), never forwarded.
	Allowed []netip.Prefix
	// Upstreams are tried in order; SetUpstreams changes them.
	Upstreams []netip.AddrPort
	// Timeout bounds one upstream's answer; 0 means 2 s.
	Timeout time.Duration
	// CacheSize bounds the cache's answers; 0 means 512.
	CacheSize int
	// CacheBytes bounds the cache's bytes; 0 means 1 MiB.
	CacheBytes int
	// MaxTTL caps how long an answer is kept; 0 means 1 hour.
	MaxTTL time.Duration
	// Domain is the LAN's local domain ("lan"): its names are answered
	// from Hosts, authoritatively, and never forwarded. Empty: none.
	Domain string
	// Hosts lists the LAN's names (DHCP clients, static leases, the
	// router itself) when a local name is asked; on a name listed twice
	// the first wins. Names that are not RFC 1123 labels are ignored.
	Hosts func() []Host
	// MaxTCP bounds the TCP connections open at once; 0 means 16.
	MaxTCP int
	// TCPIdle closes a TCP connection with no query for this long; 0
	// means 10 s.
	TCPIdle time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Logf, when set, gets problems (no upstream answering).
	Logf func(format string, args ...any)
	// Dial opens the connections to upstreams; nil means a net.Dialer.
	// (The router's tests run it in a network namespace of their own.)
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// Host is one LAN name and its address.
type Host struct {
	Name string // a single label: "laptop"
	Addr netip.Addr
}

// Stats are counters for the router's status.
type Stats struct {
	Queries, CacheHits, Upstream, UpstreamFailures, UpstreamTCP, Refused, Malformed, Local uint64
	// TCPRejected are TCP connections closed at once: MaxTCP were open.
	TCPRejected uint64
}

// Forwarder answers DNS queries.
type Forwarder struct {
	cfg    Config
	domain string // lower case, no trailing dot

	mu         sync.Mutex
	upstreams  []netip.AddrPort
	clients    []netip.Prefix // Config.Allowed, until SetAllowed
	cache      map[cacheKey]*entry
	order      []placed // oldest first, for eviction
	seq        uint64
	cacheBytes int

	queries, hits, upstream, failures, upTCP, refused, malformed, local, tcpRejected atomic.Uint64
}

// New makes a forwarder.
func New(cfg Config) *Forwarder {
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 512
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = 1 << 20
	}
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = time.Hour
	}
	if cfg.MaxTCP == 0 {
		cfg.MaxTCP = 16
	}
	if cfg.TCPIdle == 0 {
		cfg.TCPIdle = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	f := &Forwarder{cfg: cfg, cache: map[cacheKey]*entry{}, domain: strings.Trim(strings.ToLower(cfg.Domain), ".")}
	f.SetUpstreams(cfg.Upstreams)
	f.SetAllowed(cfg.Allowed)
	return f
}

// SetAllowed replaces the client networks answered: the LAN's IPv6
// prefixes change with the ISP's delegation.
func (f *Forwarder) SetAllowed(ps []netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clients = append([]netip.Prefix(nil), ps...)
}

// SetUpstreams replaces the resolvers asked, e.g. after a new WAN lease,
// and drops the cache (the new resolvers may answer differently).
func (f *Forwarder) SetUpstreams(u []netip.AddrPort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upstreams = append([]netip.AddrPort(nil), u...)
	f.cache = map[cacheKey]*entry{}
	f.order = nil
	f.cacheBytes = 0
}

// Stats returns the counters.
func (f *Forwarder) Stats() Stats {
	return Stats{Queries: f.queries.Load(), CacheHits: f.hits.Load(), Upstream: f.upstream.Load(),
		UpstreamFailures: f.failures.Load(), UpstreamTCP: f.upTCP.Load(), Refused: f.refused.Load(),
		Malformed: f.malformed.Load(), Local: f.local.Load(), TCPRejected: f.tcpRejected.Load()}
}

// ListenAndServe answers on UDP and TCP at each address
// ("192.168.1.1:53", "[fd12:3456:789a::1]:53") until ctx is done.
func (f *Forwarder) ListenAndServe(ctx context.Context, addrs []string) error {
	var closers []func() error
	var runs []func() error
	fail := func(err error) error {
		for _, c := range closers {
			c()
		}
		return err
	}
	for _, a := range addrs {
		// The family the address is of: a v4 address never listens
		// on a dual-stack socket, a v6 one (the LAN's ULA or
		// delegated router address) only on v6.
		udp, tcp := "udp4", "tcp4"
		if ap, err := netip.ParseAddrPort(a); err == nil && ap.Addr().Is6() && !ap.Addr().Is4In6() {
			udp, tcp = "udp6", "tcp6"
		}
		c, err := net.ListenPacket(udp, a)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, c.Close)
		l, err := net.Listen(tcp, a)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, l.Close)
		runs = append(runs, func() error { return f.Serve(ctx, c) }, func() error { return f.ServeTCP(ctx, l) })
	}
	errs := make(chan error, len(runs))
	for _, run := range runs {
		go func() { errs <- run() }()
	}
	var first error
	for range runs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Serve answers UDP queries on c until ctx is done.
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

// Answer turns one UDP query from a client into the reply to send, or
// nil to drop it (malformed).
func (f *Forwarder) Answer(ctx context.Context, q []byte, from net.Addr) []byte {
	return f.reply(ctx, q, from, false)
}

// query is what a client asked, and how it can take the answer.
type query struct {
	h    dnsmessage.Header
	q    dnsmessage.Question
	edns bool
	size int // the client's EDNS UDP size
	do   bool
}

func parseQuery(m []byte) (query, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(m)
	if err != nil || h.Response {
		return query{}, false
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return query{}, false
	}
	qu := query{h: h, q: qs[0]}
	if p.SkipAllAnswers() != nil || p.SkipAllAuthorities() != nil {
		return qu, true
	}
	for {
		rh, err := p.AdditionalHeader()
		if err != nil {
			break // done, or a broken additional section: answered without EDNS
		}
		if rh.Type == dnsmessage.TypeOPT {
			qu.edns, qu.size, qu.do = true, int(rh.Class), rh.DNSSECAllowed()
			break
		}
		if p.SkipAdditional() != nil {
			break
		}
	}
	return qu, true
}

// limit is the largest reply the client takes over UDP: 512 bytes
// without EDNS, else its EDNS size within 512..ednsSize.
func (qu query) limit() int {
	if !qu.edns || qu.size < noEDNSSize {
		return noEDNSSize
	}
	return min(qu.size, ednsSize)
}

func (f *Forwarder) reply(ctx context.Context, raw []byte, from net.Addr, tcp bool) []byte {
	qu, ok := parseQuery(raw)
	if !ok {
		f.malformed.Add(1)
		return nil
	}
	f.queries.Add(1)
	limit := maxTCPSize
	if !tcp {
		limit = qu.limit()
	}
	if !f.allowed(from) {
		f.refused.Add(1)
		return render(errorMsg(dnsmessage.RCodeRefused), qu, 0, limit)
	}
	if qu.h.OpCode != 0 {
		return render(errorMsg(dnsmessage.RCodeNotImplemented), qu, 0, limit)
	}
	if m, ok := f.localAnswer(qu); ok {
		f.local.Add(1)
		return render(m, qu, 0, limit)
	}
	key := cacheKey{strings.ToLower(qu.q.Name.String()), qu.q.Type, qu.q.Class, qu.do, qu.h.CheckingDisabled}
	if m, age, ok := f.cached(key); ok {
		f.hits.Add(1)
		return render(m, qu, age, limit)
	}
	m, ok := f.forward(ctx, qu)
	if !ok {
		f.failures.Add(1)
		return render(errorMsg(dnsmessage.RCodeServerFailure), qu, 0, limit)
	}
	f.store(key, m)
	return render(m, qu, 0, limit)
}

func (f *Forwarder) allowed(from net.Addr) bool {
	var ap netip.AddrPort
	switch a := from.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		return false
	}
	a := ap.Addr().Unmap()
	f.mu.Lock()
	clients := f.clients
	f.mu.Unlock()
	for _, p := range clients {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func errorMsg(rc dnsmessage.RCode) *dnsmessage.Message {
	return &dnsmessage.Message{Header: dnsmessage.Header{RCode: rc}}
}

// render makes the reply to qu from m (an upstream's, the cache's or a
// local answer, not changed): the client's ID, flags and question, TTLs
// less age, an OPT record only when the client sent one, and, when the
// whole does not fit in limit bytes, the question alone with TC set (the
// client asks again over TCP).
func render(m *dnsmessage.Message, qu query, age time.Duration, limit int) []byte {
	out := dnsmessage.Message{Header: m.Header, Questions: []dnsmessage.Question{qu.q}}
	out.ID = qu.h.ID
	out.Response = true
	out.OpCode = qu.h.OpCode
	out.RecursionDesired = qu.h.RecursionDesired
	out.RecursionAvailable = true
	out.CheckingDisabled = qu.h.CheckingDisabled
	out.Truncated = false
	sub := uint32(age / time.Second)
	count := func(rs []dnsmessage.Resource) []dnsmessage.Resource {
		var o []dnsmessage.Resource
		for _, r := range rs {
			if r.Header.Type == dnsmessage.TypeOPT {
				continue // the upstream's, not the client's
			}
			r.Header.TTL -= min(r.Header.TTL, sub)
			o = append(o, r)
		}
		return o
	}
	out.Answers = count(m.Answers)
	out.Authorities = count(m.Authorities)
	out.Additionals = count(m.Additionals)
	var opt []dnsmessage.Resource
	if qu.edns {
		var rh dnsmessage.ResourceHeader
		rh.Name = dnsmessage.MustNewName(".")
		rh.SetEDNS0(ednsSize, dnsmessage.RCodeSuccess, qu.do)
		opt = []dnsmessage.Resource{{Header: rh, Body: &dnsmessage.OPTResource{}}}
		out.Additionals = append(out.Additionals, opt...)
	}
	b, err := out.Pack()
	if err == nil && len(b) <= limit {
		return b
	}
	out.Answers, out.Authorities, out.Additionals = nil, nil, opt
	out.Truncated = err == nil
	if err != nil {
		out.RCode = dnsmessage.RCodeServerFailure
	}
	b, err = out.Pack()
	if err != nil {
		return nil
	}
	return b
}
