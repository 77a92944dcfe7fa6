package ike

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// flood sends spoofed IKE_SA_INITs to an endpoint in a peer's name: good
// proposals, KE and nonce, each with a new SPI, from an off-path sender
// that never sees the answers (they go to the real peer, which drops
// them: they name no SA of its own).
type flood struct {
	t    *testing.T
	to   *side
	from netip.AddrPort
	ike  []Proposal
	rate float64 // per second
	sent int
	n    uint64
}

func (f *flood) packet() []byte {
	f.n++
	dh, err := GenerateDH(Curve25519, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	nonce := binary.BigEndian.AppendUint64(make([]byte, 24), f.n)
	m := &Message{Header: Header{SPIi: 0x5000000000000000 | f.n, Exchange: IKE_SA_INIT, Flags: FlagInitiator},
		Payloads: []Payload{&SA{offer(f.ike, ProtoIKE, nil, false)}, &KE{Group: Curve25519, Data: dh.Public()}, &Nonce{Data: nonce}}}
	pkt, err := m.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	return pkt
}

// catchUp sends what the rate owes for elapsed time since the start.
func (f *flood) catchUp(elapsed time.Duration) {
	for due := int(elapsed.Seconds() * f.rate); f.sent < due; f.sent++ {
		f.to.ep.HandlePacket(false, f.packet(), f.from)
	}
}

// oneWay is the fake network's delay for the flood tests: a packet
// takes one hop, 10 ms, so an exchange is a 20 ms round trip and the
// cost of a cookie shows in the time.
const oneWay = 10 * time.Millisecond

// hop delivers the packets sent so far, not the answers they cause.
func (n *fakeNet) hop() {
	q := n.queue
	n.queue = nil
	for _, pk := range q {
		if c := n.conns[pk.to]; c != nil && c.ep != nil {
			c.ep.HandlePacket(c.natt, pk.data, pk.from)
		}
	}
}

// runFlooded runs the pair a hop at a time with the flood (if any) going
// on, until cond holds; it returns the time that took (more than
// limit: never). each is called at every hop.
func (p *pair) runFlooded(f *flood, start time.Time, limit time.Duration, cond func() bool, each func()) time.Duration {
	began := p.clock.t
	for p.clock.t.Sub(began) <= limit {
		if f != nil {
			f.catchUp(p.clock.t.Sub(start))
		}
		if each != nil {
			each()
		}
		if cond() {
			return p.clock.t.Sub(began)
		}
		p.clock.t = p.clock.t.Add(oneWay)
		p.a.ep.Tick()
		p.b.ep.Tick()
		p.net.hop()
	}
	return limit + time.Second
}

// TestEndpointFloodedResponder: spoofed IKE_SA_INITs in A's name, at 0.5
// and 10 a second for 45 s before A initiates and while it does,
// keep B's state bounded (one half-open SA of the flood's, every further
// one asked for a cookie, which the spoofer never sees, and A's own) and delay A's IKE SA by
// no more than one cookie round trip against the same start without the
// flood: on a network of 10 ms hops, at most 20 ms later, with at most
// one IKE_SA_INIT more and no retransmission. Before issue 28, 0.5/s filled the per-peer cap (4)
// before the cookie threshold (8) and A waited tens of seconds.
func TestEndpointFloodedResponder(t *testing.T) {
	type result struct {
		took  time.Duration
		inits int
	}
	measure := func(t *testing.T, rate float64) result {
		p := newPair(t, func(a, b *Config) { a.Peers[0].Initiate = false })
		var f *flood
		if rate > 0 {
			f = &flood{t: t, to: p.b, from: netip.MustParseAddrPort(aAddr + ":500"), ike: p.a.cfg.Peers[0].IKE, rate: rate}
		}
		start := p.clock.t
		maxHalf := 0
		bounded := func() {
			if n := p.b.ep.halfOpen(); n > maxHalf {
				maxHalf = n
			}
		}
		// 45 s: off the 30 s rhythm of half-open expiry, so that one
		// of the flood's is there when A initiates.
		p.runFlooded(f, start, 45*time.Second, func() bool { return false }, bounded)
		sent := len(p.net.sent)
		if err := p.a.ep.Initiate("b"); err != nil {
			t.Fatal(err)
		}
		took := p.runFlooded(f, start, time.Minute, p.up, bounded)
		if took > time.Minute {
			t.Fatalf("flood %.1f/s: A's IKE SA did not come up in a minute: A %+v", rate, p.a.ep.Status())
		}
		p.checkChildren()
		var r result
		r.took = took
		seen := map[string]bool{}
		for _, pk := range p.net.sent[sent:] {
			if h, ok := ikeOf(pk); ok && h.Exchange == IKE_SA_INIT && !h.Response() && pk.from.Addr() == aIP {
				r.inits++
				if seen[string(pk.data)] {
					t.Errorf("flood %.1f/s: A retransmitted its IKE_SA_INIT", rate)
				}
				seen[string(pk.data)] = true
			}
		}
		if rate > 0 && maxHalf > 2 {
			t.Errorf("flood %.1f/s: B held up to %d half-open SAs, want at most 2: the flood's first and A's (the rest asked for cookies)", rate, maxHalf)
		}
		if rate > 0 && f.sent < int(rate*45) {
			t.Fatalf("the flood sent %d, want %d", f.sent, int(rate*45))
		}
		t.Logf("flood %.1f/s (%d sent): A's IKE SA up after %v with %d IKE_SA_INIT requests; B held at most %d half-open SAs", rate, func() int {
			if f == nil {
				return 0
			}
			return f.sent
		}(), took, r.inits, maxHalf)
		return r
	}
	base := measure(t, 0)
	for _, rate := range []float64{0.5, 10} {
		t.Run(fmt.Sprintf("%.1f per second", rate), func(t *testing.T) {
			got := measure(t, rate)
			if got.took > base.took+2*oneWay {
				t.Errorf("A waited %v under the flood, %v without: more than one cookie round trip (%v) longer", got.took, base.took, 2*oneWay)
			}
			if got.inits > base.inits+1 {
				t.Errorf("A sent %d IKE_SA_INITs under the flood, %d without: more than one cookie round trip", got.inits, base.inits)
			}
		})
	}
}

// TestEndpointFloodedInitiator: spoofed IKE_SA_INITs in B's name at 10
// a second leave A's own re-initiation alone: B deletes the IKE SA, and
// A starts a new one when its retry interval is over, as without the
// flood. Before issue 28 the flood's half-open SAs counted as A's
// active SAs with B and A never initiated.
func TestEndpointFloodedInitiator(t *testing.T) {
	p := newPair(t, func(a, b *Config) { a.RetryInterval = 10 * time.Second })
	p.mustComeUp()
	f := &flood{t: t, to: p.a, from: netip.MustParseAddrPort(bAddr + ":500"), ike: p.b.cfg.Peers[0].IKE, rate: 10}
	start := p.clock.t
	p.b.ep.Delete("a")
	p.net.flush()
	deleted := p.clock.t
	if len(established(p.a)) != 0 {
		t.Fatal("A still has its IKE SA after B's delete")
	}
	took := p.runFlooded(f, start, time.Minute, p.up, nil)
	if took > 10*time.Second+4*oneWay+100*time.Millisecond {
		t.Fatalf("A's new IKE SA came up %v after B's delete under the flood, want at its retry interval, 10s", took)
	}
	p.checkChildren()
	t.Logf("flood of %d: A re-initiated and was up %v after the delete", f.sent, p.clock.t.Sub(deleted))
}
