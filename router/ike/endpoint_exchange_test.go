package ike

import (
	"bytes"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"
)

// requests counts the requests of an exchange that left addr's side
// (responses when resp).
func (n *fakeNet) count(exch ExchangeType, resp bool, from netip.Addr) int {
	c := 0
	for _, p := range n.sent {
		if h, ok := ikeOf(p); ok && h.Exchange == exch && h.Response() == resp && p.from.Addr() == from {
			c++
		}
	}
	return c
}

var (
	aIP = netip.MustParseAddr(aAddr)
	bIP = netip.MustParseAddr(bAddr)
)

func TestEndpointWrongPSK(t *testing.T) {
	p := newPair(t, func(a, b *Config) { b.Peers[0].PSK = []byte("another key entirely, also long") })
	ok := p.run(5*time.Second, func() bool {
		return p.a.ep.Status()[0].LastError != "" && p.b.ep.Status()[0].LastError != ""
	})
	if !ok {
		t.Fatal("no error surfaced on both sides")
	}
	// A (the initiator) is told AUTHENTICATION_FAILED; B finds A's AUTH
	// wrong. Each says which, and where to look.
	want := map[string]string{"A": "the peer rejected our pre-shared key", "B": "the peer's AUTH did not verify: do both ends have the same psk file?"}
	for name, s := range map[string]*side{"A": p.a, "B": p.b} {
		st := s.ep.Status()[0]
		if !strings.Contains(st.LastError, want[name]) || !strings.Contains(st.LastError, "psk file") {
			t.Errorf("%s: error %q, want %q and the psk file", name, st.LastError, want[name])
		}
		if len(s.sink.installed) != 0 || len(established(s)) != 0 {
			t.Errorf("%s: CHILD SAs %d, established SAs %d after a failed AUTH", name, len(s.sink.installed), len(established(s)))
		}
		if strings.Contains(st.LastError, "correct horse") || strings.Contains(st.LastError, "another key") {
			t.Errorf("%s: the error shows the PSK", name)
		}
	}
}

// TestEndpointWrongIdentity: B accepts A, A refuses B's identity and
// tells it; both end without a CHILD SA and say why.
func TestEndpointWrongIdentity(t *testing.T) {
	p := newPair(t, func(a, b *Config) { b.Peers[0].LocalID = Identity{IDType: ID_FQDN, Data: []byte("b.example")} })
	p.run(3*time.Second, func() bool { return false })
	if e := p.a.ep.Status()[0].LastError; !strings.Contains(e, `the peer is "b.example"`) {
		t.Errorf("A's error %q", e)
	}
	if e := p.b.ep.Status()[0].LastError; !strings.Contains(e, "the peer rejected our pre-shared key") {
		t.Errorf("B's error %q", e)
	}
	if len(p.b.sink.installed) != 1 || len(p.b.sink.live()) != 0 || len(p.a.sink.installed) != 0 {
		t.Errorf("CHILD SAs: B installed %d, live %d; A installed %d", len(p.b.sink.installed), len(p.b.sink.live()), len(p.a.sink.installed))
	}
}

func TestEndpointRetransmission(t *testing.T) {
	p := newPair(t, nil)
	type key struct {
		x    ExchangeType
		resp bool
	}
	seen := map[key]int{}
	p.net.filter = func(pk packet) int {
		h, _ := ikeOf(pk)
		k := key{h.Exchange, h.Response()}
		seen[k]++
		// Lose the first IKE_SA_INIT request, the first IKE_SA_INIT
		// response (B answers the retransmission from its cache) and the
		// first IKE_AUTH response.
		if k == (key{IKE_SA_INIT, false}) && seen[k] == 1 || k == (key{IKE_SA_INIT, true}) && seen[k] == 1 || k == (key{IKE_AUTH, true}) && seen[k] == 1 {
			return 0
		}
		return 1
	}
	p.mustComeUp()
	if n := p.net.count(IKE_SA_INIT, false, aIP); n != 3 {
		t.Errorf("IKE_SA_INIT sent %d times, want 3", n)
	}
	var spirs []uint64
	for _, pk := range p.net.sent {
		if h, _ := ikeOf(pk); h.Exchange == IKE_SA_INIT && h.Response() {
			spirs = append(spirs, h.SPIr)
		}
	}
	if len(spirs) != 2 || spirs[0] != spirs[1] || len(p.b.ep.sas) != 1 {
		t.Errorf("B's IKE_SA_INIT answers carry SPIs %x and B holds %d SAs: want one SA, answered twice", spirs, len(p.b.ep.sas))
	}
	// The IKE_AUTH retransmission is answered from the cache: B sent
	// two responses but installed one CHILD SA.
	if n := p.net.count(IKE_AUTH, true, bIP); n != 2 {
		t.Errorf("B answered IKE_AUTH %d times, want 2", n)
	}
	if len(p.b.sink.installed) != 1 {
		t.Errorf("B installed %d CHILD SAs, want 1", len(p.b.sink.installed))
	}
}

func TestEndpointRetransmitBackoff(t *testing.T) {
	p := newPair(t, nil)
	p.net.filter = func(packet) int { return 0 } // B never hears anything
	var times []time.Duration
	start := p.clock.t
	p.run(40*time.Second, func() bool {
		if n := p.net.count(IKE_SA_INIT, false, aIP); n > len(times) {
			times = append(times, p.clock.t.Sub(start))
		}
		return false
	})
	if len(times) < 6 {
		t.Fatalf("%d sends of IKE_SA_INIT in 40s, want 6", len(times))
	}
	// 0, 0.5, 1.5, 3.5, 7.5, 15.5 s: doubling from 500ms.
	for i := 2; i < 6; i++ {
		gap, prev := times[i]-times[i-1], times[i-1]-times[i-2]
		if gap < 2*prev-200*time.Millisecond || gap > 2*prev+200*time.Millisecond {
			t.Errorf("gaps %v: not doubling", times)
			break
		}
	}
	if !strings.Contains(p.a.ep.Status()[0].LastError, "not answering") {
		t.Errorf("A's error %q, want the peer not answering", p.a.ep.Status()[0].LastError)
	}
}

func TestEndpointDuplicatedRequest(t *testing.T) {
	p := newPair(t, nil)
	p.net.filter = func(pk packet) int {
		if h, _ := ikeOf(pk); !h.Response() {
			return 2 // every request arrives twice
		}
		return 1
	}
	p.mustComeUp()
	if err := p.a.ep.RekeyChild("b"); err != nil {
		t.Fatal(err)
	}
	p.run(2*time.Second, func() bool { return false })
	p.checkChildren()
	// One IKE_AUTH processed (one child), the duplicate answered from the
	// cache; the rekey made one new CHILD SA, not two.
	if n := p.net.count(IKE_AUTH, true, bIP); n != 2 {
		t.Errorf("B sent %d IKE_AUTH responses, want 2 (one cached)", n)
	}
	if n := len(p.b.sink.installed); n != 2 {
		t.Errorf("B installed %d CHILD SAs for IKE_AUTH and one rekey, want 2", n)
	}
}

func TestEndpointOutOfWindowDropped(t *testing.T) {
	p := newPair(t, nil)
	p.mustComeUp()
	sa := p.b.ep.current("a")
	before := sa.expectID
	// A valid request from A with a message ID ahead of the window.
	asa := p.a.ep.current("b")
	pkt, err := asa.out.Seal(Header{SPIi: asa.spii, SPIr: asa.spir, Exchange: INFORMATIONAL, Flags: asa.flags(false), MessageID: asa.nextID + 5}, nil, nil, p.a.ep.cfg.Rand)
	if err != nil {
		t.Fatal(err)
	}
	sent := len(p.net.sent)
	p.b.ep.HandlePacket(false, pkt, netip.MustParseAddrPort(aAddr+":500"))
	if len(p.net.sent) != sent || sa.expectID != before {
		t.Error("B answered or advanced its window for a request outside it")
	}
}

func TestEndpointCookie(t *testing.T) {
	p := newPair(t, nil)
	p.b.ep.cfg.CookieThreshold = 0 // every IKE_SA_INIT needs a cookie
	p.mustComeUp()
	var first, second *Message
	for _, pk := range p.net.sent {
		if h, _ := ikeOf(pk); h.Exchange == IKE_SA_INIT {
			m, err := Decode(pk.data)
			if err != nil {
				t.Fatal(err)
			}
			if h.Response() && first == nil {
				first = m
			}
			if !h.Response() && pk.from.Addr() == aIP && notify(m.Payloads, COOKIE) != nil {
				second = m
			}
		}
	}
	if first == nil || len(first.Payloads) != 1 || notify(first.Payloads, COOKIE) == nil {
		t.Fatal("B's first answer is not a lone COOKIE")
	}
	if second == nil || second.Payloads[0].(*Notify).Notify != COOKIE {
		t.Fatal("A did not retry with the COOKIE first")
	}
	if !bytes.Equal(second.Payloads[0].(*Notify).Data, first.Payloads[0].(*Notify).Data) {
		t.Error("A returned another cookie than B's")
	}
}

func TestEndpointInvalidKE(t *testing.T) {
	p := newPair(t, func(a, b *Config) {
		a.Peers[0].IKE = suiteIKE(aes128T, AUTH_HMAC_SHA2_256_128, PRF_HMAC_SHA2_256, Curve25519, ECP256)
		b.Peers[0].IKE = suiteIKE(aes128T, AUTH_HMAC_SHA2_256_128, PRF_HMAC_SHA2_256, ECP256)
	})
	p.mustComeUp()
	if sa := established(p.a)[0]; !strings.Contains(sa.Proposal, "ECP-256") {
		t.Errorf("A's IKE SA %s, want ECP-256", sa.Proposal)
	}
	found := false
	for _, pk := range p.net.sent {
		if h, _ := ikeOf(pk); h.Exchange == IKE_SA_INIT && h.Response() {
			m, _ := Decode(pk.data)
			if n := notify(m.Payloads, INVALID_KE_PAYLOAD); n != nil {
				g, err := n.Group()
				found = err == nil && g == ECP256
			}
		}
	}
	if !found {
		t.Error("B never answered INVALID_KE_PAYLOAD naming ECP-256")
	}
}

func TestEndpointTSUnacceptable(t *testing.T) {
	p := newPair(t, func(a, b *Config) { b.Peers[0].RemoteTS = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")} })
	p.run(3*time.Second, func() bool { return false })
	if len(established(p.a)) != 1 || len(p.a.sink.installed) != 0 || len(p.b.sink.installed) != 0 {
		t.Fatal("want the IKE SA up and no CHILD SA")
	}
	if e := p.b.ep.Status()[0].LastError; !strings.Contains(e, "TS_UNACCEPTABLE") {
		t.Errorf("B's error %q", e)
	}
	if e := p.a.ep.Status()[0].LastError; !strings.Contains(e, "TS_UNACCEPTABLE") {
		t.Errorf("A's error %q", e)
	}
	// B's subnets are put right: A asks again and the CHILD SA comes up
	// on the same IKE SA.
	spi := established(p.a)[0].SPIi
	p.b.ep.peers[0].cfg.RemoteTS = p.a.cfg.Peers[0].LocalTS
	if !p.run(35*time.Second, p.up) {
		t.Fatal("A did not ask again for the CHILD SA")
	}
	p.checkChildren()
	if established(p.a)[0].SPIi != spi || p.a.ep.Status()[0].LastError != "" || p.b.ep.Status()[0].LastError != "" {
		t.Errorf("CHILD SA on another IKE SA, or the error stays: %+v", p.a.ep.Status())
	}
}

// testChildRekey sets a lifetime on one side (or both) and runs past it.
func testChildRekey(t *testing.T, mod func(a, b *Config), prep ...func(*pair)) *pair {
	p := newPair(t, mod)
	for _, f := range prep {
		f(p)
	}
	p.mustComeUp()
	oa, ob := p.checkChildren()
	ok := p.run(12*time.Minute, func() bool {
		la := p.a.sink.live()
		return len(p.a.sink.installed) >= 2 && len(la) == 1 && la[0].InSPI != oa.InSPI && len(p.b.sink.live()) == 1
	})
	if !ok {
		t.Fatalf("no CHILD SA rekey: A installed %d, live %d; B installed %d, live %d",
			len(p.a.sink.installed), len(p.a.sink.live()), len(p.b.sink.installed), len(p.b.sink.live()))
	}
	na, nb := p.checkChildren()
	if na.InSPI == oa.InSPI || nb.InSPI == ob.InSPI || bytes.Equal(na.OutEncr, oa.OutEncr) {
		t.Error("the rekeyed CHILD SA kept the old SPIs or keys")
	}
	want := 2
	if p.a.ep.rfcCollisions {
		want = 3 // both rekeys completed, one of them deleted again
	}
	if len(p.a.sink.installed) != want || len(p.b.sink.installed) != want {
		t.Errorf("installed A %d, B %d: want %d", len(p.a.sink.installed), len(p.b.sink.installed), want)
	}
	if len(established(p.a)) != 1 || len(established(p.b)) != 1 {
		t.Error("the IKE SA did not survive the CHILD SA rekey")
	}
	return p
}

func TestEndpointChildRekey(t *testing.T) {
	short := func(c *Config) { c.Peers[0].ChildLifetime, c.Peers[0].Margin = 10*time.Minute, time.Minute }
	t.Run("initiator", func(t *testing.T) {
		p := testChildRekey(t, func(a, b *Config) { short(a) })
		replacesOut(t, p.b.sink, p.a.sink)
	})
	t.Run("responder", func(t *testing.T) {
		p := testChildRekey(t, func(a, b *Config) { short(b) })
		replacesOut(t, p.a.sink, p.b.sink)
	})
	t.Run("collision", func(t *testing.T) {
		p := testChildRekey(t, func(a, b *Config) { short(a); short(b) })
		bothRekeyed(t, p)
	})
	t.Run("collision-both-complete", func(t *testing.T) {
		// As with strongSwan: neither end refuses, the lowest nonce decides.
		p := testChildRekey(t, func(a, b *Config) { short(a); short(b) }, func(p *pair) {
			p.a.ep.rfcCollisions, p.b.ep.rfcCollisions = true, true
		})
		bothRekeyed(t, p)
	})
	t.Run("pfs", func(t *testing.T) {
		testChildRekey(t, func(a, b *Config) {
			short(b)
			a.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, ECP256)
			b.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, ECP256)
		})
	})
}

func testIKERekey(t *testing.T, mod func(a, b *Config), prep ...func(*pair)) *pair {
	p := newPair(t, mod)
	for _, f := range prep {
		f(p)
	}
	p.mustComeUp()
	old := established(p.a)[0]
	oa, _ := p.checkChildren()
	ok := p.run(25*time.Minute, func() bool {
		a, b := established(p.a), established(p.b)
		return len(a) == 1 && len(b) == 1 && a[0].SPIi != old.SPIi && b[0].SPIi == a[0].SPIi &&
			len(p.a.ep.Status()[0].SAs) == 1 && len(p.b.ep.Status()[0].SAs) == 1
	})
	if !ok {
		t.Fatalf("no IKE SA rekey: A %+v B %+v", p.a.ep.Status(), p.b.ep.Status())
	}
	na, _ := p.checkChildren()
	if na.InSPI != oa.InSPI {
		t.Error("the IKE rekey replaced the CHILD SA; it should move it")
	}
	// The new IKE SA works: a CHILD SA rekey runs on it.
	if err := p.b.ep.RekeyChild("a"); err != nil {
		t.Fatal(err)
	}
	p.run(2*time.Second, func() bool { return false })
	if na, _ = p.checkChildren(); na.InSPI == oa.InSPI {
		t.Error("no CHILD SA rekey over the new IKE SA")
	}
	return p
}

// replacesOut checks that the responder of a CHILD SA rekey tells its
// sink which outbound SA the new one replaces (the peer installs its new
// inbound SA only once it has the answer), and that neither the first
// CHILD SA nor the initiator's successor says so.
func replacesOut(t *testing.T, responder, initiator *fakeSink) {
	t.Helper()
	r, i := responder.installed, initiator.installed
	if len(r) != 2 || len(i) != 2 {
		t.Fatalf("installed %d and %d CHILD SAs, want 2 each", len(r), len(i))
	}
	if r[0].ReplacesOut != 0 || i[0].ReplacesOut != 0 || i[1].ReplacesOut != 0 {
		t.Errorf("ReplacesOut set where nothing waits: %08x %08x %08x", r[0].ReplacesOut, i[0].ReplacesOut, i[1].ReplacesOut)
	}
	if r[1].ReplacesOut != r[0].OutSPI {
		t.Errorf("the responder's successor replaces out %08x, want %08x", r[1].ReplacesOut, r[0].OutSPI)
	}
}

// bothRekeyed checks a collision happened: both ends sent a
// CREATE_CHILD_SA request at the same moment.
func bothRekeyed(t *testing.T, p *pair) {
	t.Helper()
	var ta, tb time.Duration = -1, -1
	for i, pk := range p.net.sent {
		if h, _ := ikeOf(pk); h.Exchange == CREATE_CHILD_SA && !h.Response() {
			if pk.from.Addr() == aIP && ta < 0 {
				ta = time.Duration(i)
			}
			if pk.from.Addr() == bIP && tb < 0 {
				tb = time.Duration(i)
			}
		}
	}
	if ta < 0 || tb < 0 || ta-tb > 1 || tb-ta > 1 {
		t.Errorf("no collision: first CREATE_CHILD_SA requests at packets %d and %d", ta, tb)
	}
}

func TestEndpointIKERekey(t *testing.T) {
	short := func(c *Config) { c.Peers[0].IKELifetime, c.Peers[0].Margin = 20*time.Minute, 2*time.Minute }
	t.Run("initiator", func(t *testing.T) { testIKERekey(t, func(a, b *Config) { short(a) }) })
	t.Run("responder", func(t *testing.T) { testIKERekey(t, func(a, b *Config) { short(b) }) })
	t.Run("collision", func(t *testing.T) {
		p := testIKERekey(t, func(a, b *Config) { short(a); short(b) })
		bothRekeyed(t, p)
	})
	t.Run("collision-both-complete", func(t *testing.T) {
		p := testIKERekey(t, func(a, b *Config) { short(a); short(b) }, func(p *pair) {
			p.a.ep.rfcCollisions, p.b.ep.rfcCollisions = true, true
		})
		bothRekeyed(t, p)
	})
}

func TestEndpointDPD(t *testing.T) {
	p := newPair(t, func(a, b *Config) { a.Peers[0].DPD = 30 * time.Second })
	p.mustComeUp()
	// Alive: the check is answered and nothing changes.
	p.run(40*time.Second, func() bool { return false })
	if n := p.net.count(INFORMATIONAL, true, bIP); n == 0 || len(established(p.a)) != 1 {
		t.Fatalf("B answered %d liveness checks; A established %d", n, len(established(p.a)))
	}
	// B goes away: after DPD and the retransmissions A declares it dead.
	p.b.conn.ep, p.b.natt.ep = nil, nil
	ok := p.run(90*time.Second, func() bool { return len(p.a.ep.Status()[0].SAs) == 0 || len(p.a.sink.live()) == 0 })
	if !ok {
		t.Fatal("A never declared B dead")
	}
	if e := p.a.ep.Status()[0].LastError; !regexp.MustCompile(`^no answer to liveness checks for [0-9]+ s: peer down\?$`).MatchString(e) {
		t.Errorf("A's error %q, want no answer to liveness checks for N s: peer down?", e)
	}
	if len(p.a.sink.live()) != 0 {
		t.Error("A kept the CHILD SA of a dead peer")
	}
}

func TestEndpointRestartInitialContact(t *testing.T) {
	p := newPair(t, nil)
	p.mustComeUp()
	oldB := p.b.sink.live()[0]
	// A restarts: a new endpoint on the same addresses, knowing nothing.
	p.a = p.makeSide(p.a.cfg, aAddr)
	p.mustComeUp()
	st := p.b.ep.Status()[0]
	if len(st.SAs) != 1 {
		t.Fatalf("B holds %d IKE SAs after A's restart, want 1", len(st.SAs))
	}
	deleted := false
	for _, d := range p.b.sink.deleted {
		deleted = deleted || d.InSPI == oldB.InSPI
	}
	if !deleted {
		t.Error("B did not delete the stale CHILD SA")
	}
	found := false
	for _, pk := range p.net.sent {
		if h, _ := ikeOf(pk); h.Exchange == IKE_AUTH && !h.Response() {
			found = true
		}
	}
	if !found {
		t.Fatal("no IKE_AUTH seen")
	}
}

func TestEndpointDelete(t *testing.T) {
	p := newPair(t, func(a, b *Config) { a.Peers[0].Initiate = false })
	p.a.ep.Initiate("b")
	p.mustComeUp()
	p.b.ep.Delete("a")
	p.run(2*time.Second, func() bool { return false })
	for name, s := range map[string]*side{"A": p.a, "B": p.b} {
		if len(s.ep.Status()[0].SAs) != 0 || len(s.sink.live()) != 0 {
			t.Errorf("%s still holds SAs after the delete", name)
		}
	}
}

func TestEndpointNAT(t *testing.T) {
	pub := "203.0.113.9"
	p := newPair(t, func(a, b *Config) {
		a.Peers[0].LocalID = Identity{IDType: ID_FQDN, Data: []byte("a.example")}
		b.Peers[0].RemoteID = a.Peers[0].LocalID
		b.Peers[0].Remote = netip.MustParseAddrPort(pub + ":500")
	})
	// A sits behind a NAT that maps its ports to others.
	p.net.nat[netip.MustParseAddrPort(aAddr+":500")] = netip.MustParseAddrPort(pub + ":40500")
	p.net.nat[netip.MustParseAddrPort(aAddr+":4500")] = netip.MustParseAddrPort(pub + ":44500")
	p.mustComeUp()
	sa, sb := established(p.a)[0], established(p.b)[0]
	if !sa.NATLocal || !sa.UDPEncap || !sb.NATRemote || !sb.UDPEncap || sb.NATLocal {
		t.Errorf("NAT flags: A %+v, B %+v", sa, sb)
	}
	ca, cb := p.checkChildren()
	if ca.Encap == nil || *ca.Encap != (Encap{4500, 4500}) || cb.Encap == nil || *cb.Encap != (Encap{4500, 44500}) {
		t.Errorf("UDP encapsulation: A %v, B %v", ca.Encap, cb.Encap)
	}
	if sb.Remote.String() != pub+":44500" {
		t.Errorf("B talks to %s, want the NAT's 4500 mapping", sb.Remote)
	}
	// IKE_AUTH went to 4500 with the non-ESP marker.
	for _, pk := range p.net.sent {
		if len(pk.data) > 4 && bytes.Equal(pk.data[:4], nonESPMarker) {
			if h, _ := DecodeHeader(pk.data[4:]); h.Exchange == IKE_AUTH && pk.to.Port() != 4500 && pk.from.Port() != 4500 {
				t.Errorf("IKE_AUTH from %s to %s", pk.from, pk.to)
			}
		}
		if h, err := DecodeHeader(pk.data); err == nil && h.Exchange == IKE_AUTH {
			t.Errorf("IKE_AUTH sent on port 500 (%s -> %s) behind a NAT", pk.from, pk.to)
		}
	}
	// Keepalives: A, behind the NAT, sends 0xff to B's 4500 every 20s.
	n0 := len(p.net.sent)
	p.run(25*time.Second, func() bool { return false })
	keep := 0
	for _, pk := range p.net.sent[n0:] {
		if len(pk.data) == 1 && pk.data[0] == 0xff && pk.to.Port() == 4500 && pk.from.String() == pub+":44500" {
			keep++
		}
	}
	if keep != 1 {
		t.Errorf("%d NAT keepalives in 25s, want 1", keep)
	}
}

func TestEndpointBoundedState(t *testing.T) {
	p := newPair(t, func(a, b *Config) {
		a.Peers[0].Initiate = false
		b.MaxSAsPerPeer = 3
	})
	// Only IKE_SA_INIT reaches B: its SAs stay half-open.
	onlyInit := func(pk packet) int {
		if h, _ := ikeOf(pk); h.Exchange != IKE_SA_INIT {
			return 0
		}
		return 1
	}
	p.net.filter = onlyInit
	for range 20 {
		p.a.ep.Initiate("b")
	}
	p.net.flush()
	if n := len(p.b.ep.sas); n != 3 {
		t.Errorf("B holds %d SAs for one peer, cap 3", n)
	}
	p2 := newPair(t, func(a, b *Config) {
		a.Peers[0].Initiate = false
		b.MaxHalfOpen, b.MaxSAsPerPeer, b.CookieThreshold = 5, 100, 100
	})
	p2.net.filter = onlyInit
	for range 20 {
		p2.a.ep.Initiate("b")
	}
	p2.net.flush()
	if n := p2.b.ep.halfOpen(); n != 5 {
		t.Errorf("B holds %d half-open SAs, cap 5", n)
	}
}

func TestEndpointConfigErrors(t *testing.T) {
	n := newFakeNet(t)
	good := peerCfg("b", aAddr, bAddr, "10.1.0.0/24", "10.2.0.0/24")
	for name, mod := range map[string]func(p *Peer){
		"margin":  func(p *Peer) { p.ChildLifetime, p.Margin = time.Minute, time.Minute },
		"no psk":  func(p *Peer) { p.PSK = nil },
		"no name": func(p *Peer) { p.Name = "" },
	} {
		p := good
		mod(&p)
		if _, err := New(Config{Peers: []Peer{p}, Conn: n.conn(aAddr+":500", false)}); err == nil || !strings.Contains(err.Error(), "ike: peer") {
			t.Errorf("%s: error %v", name, err)
		}
	}
	if _, err := New(Config{Peers: []Peer{good}, Conn: n.conn(aAddr+":500", false)}); err != nil {
		t.Errorf("a good peer refused: %v", err)
	}
}

// TestEndpointBothInitiate: both ends configured to initiate start at the
// same moment; one IKE SA and one CHILD SA pair remain.
func TestEndpointBothInitiate(t *testing.T) {
	p := newPair(t, func(a, b *Config) { b.Peers[0].Initiate = true })
	ok := p.run(10*time.Second, func() bool {
		return p.up() && len(p.a.ep.Status()[0].SAs) == 1 && len(p.b.ep.Status()[0].SAs) == 1
	})
	if !ok {
		t.Fatalf("A %+v, B %+v", p.a.ep.Status(), p.b.ep.Status())
	}
	p.checkChildren()
	if p.net.count(IKE_SA_INIT, false, aIP) == 0 || p.net.count(IKE_SA_INIT, false, bIP) == 0 {
		t.Error("not both ends initiated")
	}
	// The duplicate's CHILD SA went into the kernel only at the end that
	// answered it (until its delete): its initiator, deleting it, never
	// pointed its policies at it.
	if n := len(p.a.sink.installed) + len(p.b.sink.installed); n != 3 {
		t.Errorf("installed A %d, B %d: want three in all, one of them deleted", len(p.a.sink.installed), len(p.b.sink.installed))
	}
	// The duplicate's delete is no failure: no error in the status, no
	// retry pause.
	for name, s := range map[string]*side{"A": p.a, "B": p.b} {
		if e := s.ep.Status()[0].LastError; e != "" {
			t.Errorf("%s's status after the duplicate's delete: %q", name, e)
		}
	}
}

// TestEndpointDuplicateKeptByPeer: both ends initiate at once and the
// peer keeps duplicates (strongSwan with unique=no). The duplicate the
// peer made is deleted by us after waiting for the peer's delete; the
// one we made, at once. Either way one IKE SA and one pair of CHILD SAs
// remain. Which SA is the duplicate follows the nonces: the test runs
// until it has seen both cases.
func TestEndpointDuplicateKeptByPeer(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 64 && len(seen) < 2; i++ {
		p := newPair(t, func(a, b *Config) { b.Peers[0].Initiate = true })
		p.b.ep.keepDuplicates = true
		ok := p.run(time.Minute, func() bool {
			return p.up() && len(p.a.ep.Status()[0].SAs) == 1 && len(p.b.ep.Status()[0].SAs) == 1
		})
		if !ok {
			t.Fatalf("run %d: A %+v, B %+v", i, p.a.ep.Status(), p.b.ep.Status())
		}
		p.checkChildren()
		for _, l := range p.logs {
			switch {
			case strings.HasPrefix(l, aAddr) && strings.Contains(l, "the peer kept the duplicate IKE SA"):
				seen["peer's"] = true
			case strings.HasPrefix(l, aAddr) && strings.Contains(l, "a duplicate, the peer and we made one each at once"):
				seen["ours"] = true
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("in 64 runs A deleted only %v duplicates", seen)
	}
}

// TestEndpointInitialContactOvertaken: a restarted B sends IKE_AUTH with
// INITIAL_CONTACT, which reaches A only after an IKE SA A started meanwhile
// came up with the new B. That SA is no leftover of B's old life: A keeps
// it, and the duplicate is settled alike at both ends (before, A dropped
// it silently while B kept it as the one to stay: no tunnel).
func TestEndpointInitialContactOvertaken(t *testing.T) {
	p := newPair(t, func(a, b *Config) { a.Peers[0].Initiate = false })
	var held []packet
	p.net.filter = func(pk packet) int {
		if h, ok := ikeOf(pk); ok && h.Exchange == IKE_AUTH && !h.Response() && pk.from.Addr() == bIP {
			held = append(held, pk)
			return 0
		}
		return 1
	}
	p.b.ep.Initiate("a")
	p.net.flush()
	if len(held) != 1 {
		t.Fatalf("B's IKE_AUTH not held: %d", len(held))
	}
	p.a.ep.Initiate("b")
	p.net.flush()
	if len(established(p.a)) != 1 || len(established(p.b)) != 1 {
		t.Fatalf("A's own IKE SA is not up: A %+v, B %+v", p.a.ep.Status(), p.b.ep.Status())
	}
	p.net.filter = nil
	p.net.queue = append(p.net.queue, held...)
	ok := p.run(5*time.Second, func() bool {
		return p.up() && len(p.a.ep.Status()[0].SAs) == 1 && len(p.b.ep.Status()[0].SAs) == 1
	})
	if !ok {
		t.Fatalf("no single IKE SA: A %+v, B %+v", p.a.ep.Status(), p.b.ep.Status())
	}
	p.checkChildren()
	for _, l := range p.logs {
		if strings.Contains(l, "INITIAL_CONTACT: deleting") {
			t.Errorf("INITIAL_CONTACT removed an SA made after the restart: %s", l)
		}
	}
}

// TestEndpointReconnectAfterDelete: an initiator whose IKE SA the peer
// deleted comes back, after the retry interval rather than at once.
func TestEndpointReconnectAfterDelete(t *testing.T) {
	p := newPair(t, nil)
	p.mustComeUp()
	p.b.ep.Delete("a")
	p.run(5*time.Second, func() bool { return false })
	if len(p.a.ep.Status()[0].SAs) != 0 || !strings.Contains(p.a.ep.Status()[0].LastError, "deleted by the peer") {
		t.Fatalf("A after the delete: %+v", p.a.ep.Status())
	}
	if !p.run(30*time.Second, p.up) {
		t.Fatal("A did not come back within the retry interval")
	}
	p.checkChildren()
}

// TestEndpointRekeyInvalidKE: the rekey's responder wants another DH group
// than the rekey's KE; the rekey is redone in that group, for the IKE SA
// and for a CHILD SA with PFS.
func TestEndpointRekeyInvalidKE(t *testing.T) {
	p := newPair(t, func(a, b *Config) {
		// B starts the SA: A, responding, gets its preferred group 31;
		// when A rekeys, B prefers 19.
		a.Peers[0].Initiate, b.Peers[0].Initiate = false, true
		a.Peers[0].IKE = suiteIKE(aes128T, AUTH_HMAC_SHA2_256_128, PRF_HMAC_SHA2_256, Curve25519, ECP256)
		b.Peers[0].IKE = suiteIKE(aes128T, AUTH_HMAC_SHA2_256_128, PRF_HMAC_SHA2_256, ECP256, Curve25519)
		a.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, Curve25519, ECP256)
		b.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, ECP256)
	})
	p.mustComeUp()
	if sa := established(p.a)[0]; !strings.Contains(sa.Proposal, "Curve25519") {
		t.Fatalf("first IKE SA %s, want Curve25519", sa.Proposal)
	}
	oa, _ := p.checkChildren()
	if err := p.a.ep.RekeyChild("b"); err != nil {
		t.Fatal(err)
	}
	p.run(2*time.Second, func() bool { return false })
	if na, _ := p.checkChildren(); na.InSPI == oa.InSPI {
		t.Error("the CHILD SA rekey did not recover from INVALID_KE_PAYLOAD")
	}
	if err := p.a.ep.RekeyIKE("b"); err != nil {
		t.Fatal(err)
	}
	p.run(2*time.Second, func() bool { return false })
	sa := established(p.a)
	if len(sa) != 1 || !strings.Contains(sa[0].Proposal, "ECP-256") || len(established(p.b)) != 1 {
		t.Fatalf("after the IKE rekey A has %+v", sa)
	}
	p.checkChildren()
}

// trafficSink reports ESP arriving on every CHILD SA at the fake clock's now.
type trafficSink struct {
	fakeSink
	clock *fakeClock
}

func (s *trafficSink) LastInbound(ChildSA) (time.Time, bool) { return s.clock.t, true }

// TestEndpointDPDQuietWithTraffic: while the kernel sees ESP from the peer,
// no liveness check is sent.
func TestEndpointDPDQuietWithTraffic(t *testing.T) {
	p := newPair(t, func(a, b *Config) { a.Peers[0].DPD = 10 * time.Second })
	ts := &trafficSink{clock: p.clock}
	p.a = p.makeSideWith(p.a.cfg, aAddr, ts, &ts.fakeSink)
	p.mustComeUp()
	p.run(60*time.Second, func() bool { return false })
	if n := p.net.count(INFORMATIONAL, false, aIP); n != 0 {
		t.Errorf("A sent %d liveness checks while ESP kept arriving", n)
	}
	// The ESP stops: the checks start.
	p.a.ep.cfg.Sink = &ts.fakeSink
	p.run(15*time.Second, func() bool { return false })
	if n := p.net.count(INFORMATIONAL, false, aIP); n == 0 {
		t.Error("no liveness check once the traffic stopped")
	}
}

// TestEndpointResponseOnRequestPort: strongSwan sends IKE_AUTH from and
// to port 4500 even without a NAT (RFC 7296 2.23 allows it); the
// response must come back from the port the request reached, to the port
// it came from (2.11), with the non-ESP marker. Found against charon
// 5.9.8 (internal/lab/strongswan), which answered from 500 to 500 before.
func TestEndpointResponseOnRequestPort(t *testing.T) {
	p := newPair(t, nil)
	aNATT := netip.MustParseAddrPort(aAddr + ":4500")
	bIKE := netip.MustParseAddrPort(bAddr + ":500")
	p.net.filter = func(pk packet) int {
		h, ok := ikeOf(pk)
		if !ok || h.Exchange != IKE_AUTH || h.Response() || pk.to != bIKE {
			return 1
		}
		// Float the request as strongSwan does: from A's 4500 to B's.
		p.b.ep.HandlePacket(true, append(append([]byte(nil), nonESPMarker...), pk.data...), aNATT)
		return 0
	}
	p.mustComeUp()
	var resp *packet
	for i, pk := range p.net.sent {
		if h, ok := ikeOf(pk); ok && h.Exchange == IKE_AUTH && h.Response() {
			resp = &p.net.sent[i]
		}
	}
	if resp == nil {
		t.Fatal("no IKE_AUTH response sent")
	}
	if resp.from != netip.MustParseAddrPort(bAddr+":4500") || resp.to != aNATT || !bytes.HasPrefix(resp.data, nonESPMarker) {
		t.Errorf("IKE_AUTH response %v -> %v (marker %v), want %s:4500 -> %v with the non-ESP marker",
			resp.from, resp.to, bytes.HasPrefix(resp.data, nonESPMarker), bAddr, aNATT)
	}
	// No NAT: the CHILD SA's ESP is not UDP-encapsulated.
	if _, b := p.checkChildren(); b.Encap != nil {
		t.Errorf("B's CHILD SA has UDP encapsulation without a NAT: %s", b)
	}
}

// TestEndpointOwnRequestsFollowFloat: once the peer floated to port 4500
// (strongSwan does for IKE_AUTH, NAT or not), the requests we start
// ourselves (CHILD SA and IKE SA rekeys, liveness checks, deletes) go
// from our 4500 to its 4500 with the non-ESP marker (RFC 7296 2.23, RFC
// 3948 2.2), never to its 500. Found against charon 5.9.8: ocfw as
// responder sent its rekeys and DPD to port 500.
func TestEndpointOwnRequestsFollowFloat(t *testing.T) {
	p := newPair(t, func(a, b *Config) { b.Peers[0].DPD = 20 * time.Second })
	aNATT := netip.MustParseAddrPort(aAddr + ":4500")
	bIKE := netip.MustParseAddrPort(bAddr + ":500")
	bNATT := netip.MustParseAddrPort(bAddr + ":4500")
	// A floats as strongSwan does: everything after IKE_SA_INIT from its
	// 4500 to B's 4500.
	p.net.filter = func(pk packet) int {
		h, ok := ikeOf(pk)
		if !ok || h.Exchange == IKE_SA_INIT || pk.to != bIKE {
			return 1
		}
		p.net.queue = append(p.net.queue, packet{from: aNATT, to: bNATT, data: append(append([]byte(nil), nonESPMarker...), pk.data...)})
		return 0
	}
	p.mustComeUp()
	n0 := len(p.net.sent)
	check := func(what string) {
		t.Helper()
		seen := 0
		for _, pk := range p.net.sent[n0:] {
			if pk.from.Addr() != bIP {
				continue
			}
			h, ok := ikeOf(pk)
			if !ok {
				if len(pk.data) > 0 && !(len(pk.data) == 1 && pk.data[0] == 0xff) {
					t.Errorf("%s: B sent %d bytes that are no IKE from %v to %v", what, len(pk.data), pk.from, pk.to)
				}
				continue
			}
			if h.Response() {
				continue
			}
			seen++
			if pk.from != bNATT || pk.to != aNATT || !bytes.HasPrefix(pk.data, nonESPMarker) {
				t.Errorf("%s: B's %s request went %v -> %v (marker %v), want %v -> %v with the non-ESP marker",
					what, h.Exchange, pk.from, pk.to, bytes.HasPrefix(pk.data, nonESPMarker), bNATT, aNATT)
			}
		}
		if seen == 0 {
			t.Errorf("%s: B sent no request", what)
		}
		n0 = len(p.net.sent)
	}
	if st := established(p.b)[0]; !st.UDPEncap || st.Remote != aNATT || st.NATLocal || st.NATRemote {
		t.Errorf("B after the float: %+v, want IKE on %v and no NAT", st, aNATT)
	}
	// No NAT: IKE moved to 4500 but ESP stays plain.
	if _, b := p.checkChildren(); b.Encap != nil {
		t.Errorf("B's CHILD SA has UDP encapsulation without a NAT: %s", b)
	}

	// B rekeys its CHILD SA, then the IKE SA; then, quiet, checks A's
	// liveness; every answer must come back for the SAs to stay up.
	oldIn := p.b.sink.live()[0].InSPI
	if err := p.b.ep.RekeyChild("a"); err != nil {
		t.Fatal(err)
	}
	if !p.run(5*time.Second, func() bool { l := p.b.sink.live(); return len(l) == 1 && l[0].InSPI != oldIn && p.up() }) {
		t.Fatalf("B's CHILD SA rekey did not complete: %+v", p.b.ep.Status())
	}
	check("CHILD SA rekey")
	oldSPI := established(p.b)[0].SPIr
	if err := p.b.ep.RekeyIKE("a"); err != nil {
		t.Fatal(err)
	}
	if !p.run(5*time.Second, func() bool {
		e := established(p.b)
		return p.up() && e[0].SPIi != oldSPI && e[0].SPIr != oldSPI && len(p.b.ep.Status()[0].SAs) == 1
	}) {
		t.Fatalf("B's IKE SA rekey did not complete: %+v", p.b.ep.Status())
	}
	check("IKE SA rekey")
	if st := established(p.b)[0]; !st.UDPEncap || st.Remote != aNATT {
		t.Errorf("B's new IKE SA talks to %v (on 4500: %v), want %v", st.Remote, st.UDPEncap, aNATT)
	}
	before := p.net.count(INFORMATIONAL, true, aIP)
	p.run(25*time.Second, func() bool { return p.net.count(INFORMATIONAL, true, aIP) > before })
	if p.net.count(INFORMATIONAL, true, aIP) == before {
		t.Fatal("A never answered B's liveness check")
	}
	check("liveness check")
	if len(established(p.b)) != 1 {
		t.Errorf("B lost its IKE SA: %+v", p.b.ep.Status())
	}
}
