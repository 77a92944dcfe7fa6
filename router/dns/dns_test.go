package dns

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// upstream is a fake resolver on 127.0.0.1 answering A queries for
// name with addr and the given TTL; it counts what it is asked.
type upstream struct {
	conn  net.PacketConn
	asked atomic.Int32
	ttl   uint32
}

func newUpstream(t *testing.T, ttl uint32) *upstream {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{conn: c, ttl: ttl}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			u.asked.Add(1)
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, _ := p.Question()
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: u.ttl}, dnsmessage.AResource{A: [4]byte{198, 51, 100, 7}})
			out, _ := b.Finish()
			c.WriteTo(out, from)
		}
	}()
	return u
}

func (u *upstream) addr() netip.AddrPort {
	return netip.MustParseAddrPort(u.conn.LocalAddr().String())
}

func mkQuery(t testing.TB, id uint16, name string) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// answer parses a reply: its ID, rcode and A records.
func answer(t *testing.T, m []byte) (uint16, dnsmessage.RCode, []netip.Addr) {
	t.Helper()
	var p dnsmessage.Parser
	h, err := p.Start(m)
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	p.SkipAllQuestions()
	var as []netip.Addr
	for {
		rh, err := p.AnswerHeader()
		if err != nil {
			break
		}
		if rh.Type == dnsmessage.TypeA {
			r, _ := p.AResource()
			as = append(as, netip.AddrFrom4(r.A))
		} else {
			p.SkipAnswer()
		}
	}
	return h.ID, h.RCode, as
}

var lanClient = &net.UDPAddr{IP: net.IPv4(192, 168, 1, 50), Port: 5353}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time         { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration)    { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func lan() []netip.Prefix               { return []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")} }
func ctxT(t *testing.T) context.Context { return context.Background() }

func TestForwardCacheAndExpiry(t *testing.T) {
	up := newUpstream(t, 60)
	clk := &clock{now: time.Unix(1700000000, 0)}
	f := New(Config{Allowed: lan(), Upstreams: []netip.AddrPort{up.addr()}, Now: clk.Now})
	id, rc, as := answer(t, f.Answer(ctxT(t), mkQuery(t, 0x1234, "example.test."), lanClient))
	if id != 0x1234 || rc != dnsmessage.RCodeSuccess || len(as) != 1 || as[0].String() != "198.51.100.7" {
		t.Fatalf("first answer: id %x rcode %v %v", id, rc, as)
	}
	// Cached: the upstream is not asked again, and the reply carries the
	// second client's ID.
	id, _, as = answer(t, f.Answer(ctxT(t), mkQuery(t, 0x4321, "EXAMPLE.test."), lanClient))
	if id != 0x4321 || len(as) != 1 || up.asked.Load() != 1 {
		t.Errorf("second answer: id %x, %v, upstream asked %d times", id, as, up.asked.Load())
	}
	// After the TTL the answer is fetched again.
	clk.add(61 * time.Second)
	answer(t, f.Answer(ctxT(t), mkQuery(t, 1, "example.test."), lanClient))
	if up.asked.Load() != 2 {
		t.Errorf("after the TTL the upstream was asked %d times, want 2", up.asked.Load())
	}
	if st := f.Stats(); st.Queries != 3 || st.CacheHits != 1 || st.Upstream != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestUpstreamFailover(t *testing.T) {
	dead, err := net.ListenPacket("udp4", "127.0.0.1:0") // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	up := newUpstream(t, 60)
	f := New(Config{Allowed: lan(), Timeout: 300 * time.Millisecond,
		Upstreams: []netip.AddrPort{netip.MustParseAddrPort(dead.LocalAddr().String()), up.addr()}})
	if _, rc, as := answer(t, f.Answer(ctxT(t), mkQuery(t, 7, "a.test."), lanClient)); rc != dnsmessage.RCodeSuccess || len(as) != 1 {
		t.Errorf("with the first upstream dead: rcode %v %v", rc, as)
	}
	// No upstream answering: SERVFAIL, not silence.
	f.SetUpstreams([]netip.AddrPort{netip.MustParseAddrPort(dead.LocalAddr().String())})
	if _, rc, _ := answer(t, f.Answer(ctxT(t), mkQuery(t, 8, "b.test."), lanClient)); rc != dnsmessage.RCodeServerFailure {
		t.Errorf("all upstreams dead: rcode %v, want SERVFAIL", rc)
	}
	f.SetUpstreams(nil)
	if _, rc, _ := answer(t, f.Answer(ctxT(t), mkQuery(t, 9, "c.test."), lanClient)); rc != dnsmessage.RCodeServerFailure {
		t.Errorf("no upstream: rcode %v, want SERVFAIL", rc)
	}
}

func TestNotAnOpenResolver(t *testing.T) {
	up := newUpstream(t, 60)
	f := New(Config{Allowed: lan(), Upstreams: []netip.AddrPort{up.addr()}})
	wan := &net.UDPAddr{IP: net.IPv4(203, 0, 113, 9), Port: 53}
	if _, rc, as := answer(t, f.Answer(ctxT(t), mkQuery(t, 1, "x.test."), wan)); rc != dnsmessage.RCodeRefused || len(as) != 0 {
		t.Errorf("a WAN client: rcode %v %v, want REFUSED", rc, as)
	}
	if up.asked.Load() != 0 {
		t.Error("a refused query reached the upstream")
	}
}

// Over a real socket, end to end.
func TestServe(t *testing.T) {
	up := newUpstream(t, 60)
	f := New(Config{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Upstreams: []netip.AddrPort{up.addr()}})
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Serve(ctx, c) }()
	cl, err := net.Dial("udp4", c.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cl.SetDeadline(time.Now().Add(5 * time.Second))
	cl.Write(mkQuery(t, 42, "served.test."))
	buf := make([]byte, 1500)
	n, err := cl.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if id, rc, as := answer(t, buf[:n]); id != 42 || rc != dnsmessage.RCodeSuccess || len(as) != 1 {
		t.Errorf("served: id %d rcode %v %v", id, rc, as)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
}

func TestCacheBounded(t *testing.T) {
	up := newUpstream(t, 600)
	f := New(Config{Allowed: lan(), Upstreams: []netip.AddrPort{up.addr()}, CacheSize: 4})
	for i := 0; i < 20; i++ {
		f.Answer(ctxT(t), mkQuery(t, uint16(i), string(rune('a'+i))+".test."), lanClient)
	}
	f.mu.Lock()
	n := len(f.cache)
	f.mu.Unlock()
	if n != 4 {
		t.Errorf("cache holds %d answers, bound 4", n)
	}
}

func FuzzAnswer(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 5})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("seed.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	f.Add(q)
	fw := New(Config{Allowed: lan(), Timeout: time.Millisecond, Domain: "lan", // no upstream: never leaves the process
		Hosts: func() []Host {
			return []Host{{"gw", netip.MustParseAddr("192.168.1.1")}, {"x\x00", netip.MustParseAddr("192.168.1.2")}}
		}})
	f.Fuzz(func(t *testing.T, m []byte) {
		r := fw.Answer(context.Background(), m, lanClient)
		if r != nil {
			var p dnsmessage.Parser
			if _, err := p.Start(r); err != nil {
				t.Errorf("a reply that does not parse: %v", err)
			}
			if len(r) > ednsSize {
				t.Errorf("a UDP reply of %d bytes, over %d", len(r), ednsSize)
			}
		}
	})
}
