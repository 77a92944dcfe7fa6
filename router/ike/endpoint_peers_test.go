package ike

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Issue 28 points 1, 2 and 4: the peers people have (charon's default
// ESP proposals, Libreswan's restarts and reauthentication) keep a tunnel.

func shortChild(c *Config) { c.Peers[0].ChildLifetime, c.Peers[0].Margin = 10*time.Minute, time.Minute }

// TestEndpointChildRekeyPeerWithoutPFS: A asks for PFS (a DH group in its
// ESP proposals), B is charon with esp_proposals = default (none). Before
// issue 28 A refused B's rekey without KE, and B refused A's with KE while
// A retried every 5 s until the hard lifetime ended the tunnel.
func TestEndpointChildRekeyPeerWithoutPFS(t *testing.T) {
	pfs := func(a, b *Config) { a.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, ECP256) }
	t.Run("peer-rekeys-without-KE", func(t *testing.T) {
		p := testChildRekey(t, func(a, b *Config) { pfs(a, b); shortChild(b) })
		replacesOut(t, p.a.sink, p.b.sink)
	})
	t.Run("our-PFS-rekey-refused", func(t *testing.T) {
		// B lists DH NONE outright: a rekey with KE is refused, as
		// charon's esp_proposals = default does.
		p := testChildRekey(t, func(a, b *Config) {
			pfs(a, b)
			b.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, DHGroup(0))
			shortChild(a)
		})
		replacesOut(t, p.b.sink, p.a.sink)
		refused := 0
		for _, l := range p.logs {
			if strings.Contains(l, "the peer refused PFS") {
				refused++
			}
		}
		if refused != 1 {
			t.Errorf("A fell back from PFS %d times, want once", refused)
		}
	})
	t.Run("peer-rekeys-with-KE", func(t *testing.T) {
		// Roles swapped: ocfw without PFS (A), Libreswan's pfs=yes (B).
		p := testChildRekey(t, func(a, b *Config) {
			b.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, ECP256)
			shortChild(b)
		})
		replacesOut(t, p.a.sink, p.b.sink)
		if c := p.a.ep.Status()[0].SAs[0].Children[0]; !strings.Contains(c.Proposal, "ECP-256") {
			t.Errorf("the rekeyed CHILD SA: %s, want PFS in ECP-256", c.Proposal)
		}
	})
	t.Run("peer-that-offered-PFS-drops-it", func(t *testing.T) {
		// B rekeyed with a group once, then rekeys without KE: refused,
		// the peer does not get to drop PFS it offered.
		p := newPair(t, func(a, b *Config) {
			a.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, ECP256)
			b.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, ECP256)
		})
		p.mustComeUp()
		for _, noPFS := range []bool{false, true} {
			oa, _ := p.checkChildren()
			p.b.ep.mu.Lock()
			for _, sa := range p.b.ep.sas {
				sa.noPFS = noPFS
			}
			p.b.ep.mu.Unlock()
			if err := p.b.ep.RekeyChild("a"); err != nil {
				t.Fatal(err)
			}
			p.run(time.Second, func() bool { return false })
			if na, _ := p.checkChildren(); (na.InSPI != oa.InSPI) == noPFS {
				t.Errorf("rekey without PFS %v: CHILD SA replaced %v", noPFS, na.InSPI != oa.InSPI)
			}
		}
	})
}

// TestEndpointChildRekeyRefusedFallsBack: B refuses every rekey of the
// CHILD SA. A tries again with a growing pause, says why in its status,
// and makes a fresh CHILD SA before the old one's hard lifetime ends,
// then deletes the old one: one pair of CHILD SAs all along.
func TestEndpointChildRekeyRefusedFallsBack(t *testing.T) {
	p := newPair(t, func(a, b *Config) { shortChild(a) })
	p.b.ep.refuseChildRekeys = true
	p.mustComeUp()
	oa, _ := p.checkChildren()
	created := p.clock.t
	var why string
	ok := p.run(11*time.Minute, func() bool {
		if e := p.a.ep.Status()[0].LastError; strings.Contains(e, "rekey failed") {
			why = e
		}
		la := p.a.sink.live()
		return len(la) == 1 && la[0].InSPI != oa.InSPI && len(p.b.sink.live()) == 1
	})
	if !ok {
		t.Fatalf("no new CHILD SA: A live %d installed %d, status %+v", len(p.a.sink.live()), len(p.a.sink.installed), p.a.ep.Status())
	}
	if end := created.Add(10 * time.Minute); p.clock.t.After(end) {
		t.Errorf("the new CHILD SA came %v after the old one's hard lifetime", p.clock.t.Sub(end))
	}
	if !strings.Contains(why, "NO_PROPOSAL_CHOSEN") {
		t.Errorf("A's status never said why the rekey failed: %q", why)
	}
	p.checkChildren()
	tries := p.net.count(CREATE_CHILD_SA, false, aIP)
	// Rekeys 5, 10, 20 s apart in the minute before the lifetime ends,
	// then the fresh CHILD SA: not one every 5 s.
	if tries < 3 || tries > 6 {
		t.Errorf("A sent %d CREATE_CHILD_SA requests: want a few, backing off", tries)
	}
	if len(established(p.a)) != 1 || len(established(p.b)) != 1 {
		t.Error("the IKE SA did not survive")
	}
}

// TestEndpointChildDeletedByPeer: B deletes the CHILD SA (swanctl
// --terminate --child); A, whose tunnel initiates, makes a new one with
// CREATE_CHILD_SA within seconds, on the same IKE SA. Before issue 28 A
// sat at zero CHILD SAs with no error.
func TestEndpointChildDeletedByPeer(t *testing.T) {
	p := newPair(t, nil)
	p.mustComeUp()
	oa, _ := p.checkChildren()
	spi := established(p.a)[0].SPIi
	p.b.ep.mu.Lock()
	for _, sa := range p.b.ep.sas {
		for _, c := range sa.children {
			p.b.ep.deleteChild(sa, c)
		}
	}
	p.b.ep.mu.Unlock()
	p.net.flush()
	if len(p.a.sink.live()) != 0 {
		t.Fatal("A kept the CHILD SA the peer deleted")
	}
	if e := p.a.ep.Status()[0].LastError; !strings.Contains(e, "the peer deleted the CHILD SA") {
		t.Errorf("A's status while without a CHILD SA: %q", e)
	}
	if !p.run(5*time.Second, p.up) {
		t.Fatalf("no new CHILD SA within 5 s: A %+v", p.a.ep.Status())
	}
	na, _ := p.checkChildren()
	if na.InSPI == oa.InSPI || established(p.a)[0].SPIi != spi {
		t.Error("the CHILD SA is the old one, or on another IKE SA")
	}
	if e := p.a.ep.Status()[0].LastError; e != "" {
		t.Errorf("A's status with the new CHILD SA: %q", e)
	}
}

// lowestNonce is the lower of an IKE SA's nonces, which decides
// duplicates made at once (dedupe).
func lowestNonce(sa *ikeSA) []byte {
	if bytes.Compare(sa.ni, sa.nr) < 0 {
		return sa.ni
	}
	return sa.nr
}

// TestEndpointPeerRestartWithoutInitialContact: A restarts and comes back
// without INITIAL_CONTACT (Libreswan's default). B keeps the new IKE SA
// even when it loses the nonce tie-break, and the old one, whose peer has
// forgotten it, is gone within 30 s: one IKE SA, one pair of CHILD SAs, no
// error. Before issue 28 B kept the stale SA and deleted the live one.
// The runs go on until the new SA has lost the tie-break in one.
func TestEndpointPeerRestartWithoutInitialContact(t *testing.T) {
	lost := false
	for i := 0; i < 32 && !lost; i++ {
		p := newPair(t, nil)
		p.mustComeUp()
		var old *ikeSA
		for _, sa := range p.b.ep.sas {
			old = sa
		}
		p.a = p.makeSide(p.a.cfg, aAddr)
		p.a.ep.peers[0].contacted = true // no INITIAL_CONTACT
		ok := p.run(30*time.Second, func() bool { return p.up() && len(p.b.ep.Status()[0].SAs) == 1 })
		if !ok {
			t.Fatalf("run %d: B after A's restart: %+v", i, p.b.ep.Status())
		}
		var cur *ikeSA
		for _, sa := range p.b.ep.sas {
			cur = sa
		}
		if cur == old {
			t.Fatalf("run %d: B kept the stale IKE SA", i)
		}
		p.checkChildren()
		if e := p.b.ep.Status()[0].LastError; e != "" {
			t.Errorf("run %d: B's status: %q", i, e)
		}
		lost = bytes.Compare(lowestNonce(cur), lowestNonce(old)) < 0
	}
	if !lost {
		t.Error("in 32 runs the new IKE SA never lost the tie-break")
	}
}

// reauth has B, the peer, reauthenticate (RFC 7296 2.8.3) as charon with
// make_before_break does: a new IKE SA with its CHILD SA, then the delete
// of the old one; with childless, as Libreswan: a childless IKE_AUTH,
// then CREATE_CHILD_SA, then the delete. A answers the new SA; the first
// one A made itself when aFirst. A must end with the new IKE SA alone and
// never show the tunnel down.
func reauth(t *testing.T, childless, aFirst bool) (lost bool) {
	p := newPair(t, func(a, b *Config) {
		if !aFirst {
			a.Peers[0].Initiate, b.Peers[0].Initiate = false, true
		}
	})
	p.b.ep.keepDuplicates = true
	if !p.run(10*time.Second, p.up) {
		t.Fatalf("no IKE SA: %+v", p.a.ep.Status())
	}
	var old, oldA *ikeSA
	for _, sa := range p.b.ep.sas {
		old = sa
	}
	for _, sa := range p.a.ep.sas {
		oldA = sa
	}
	if childless {
		// The IKE_AUTH's CHILD SA payloads go; B, answered childless,
		// asks for its CHILD SA by CREATE_CHILD_SA.
		p.net.filter = stripChildFromAuth(t, p.b, p.a, bIP)
	}
	p.step(time.Second) // later than the first SA, as a reauthentication is
	p.b.ep.mu.Lock()
	p.b.ep.initiate(p.b.ep.peers[0])
	p.b.ep.mu.Unlock()
	var newB *ikeSA
	deleted := false
	down := ""
	for end := p.clock.t.Add(40 * time.Second); p.clock.t.Before(end); p.step(100 * time.Millisecond) {
		p.b.ep.mu.Lock()
		for _, sa := range p.b.ep.sas {
			if sa != old && sa.state == stateEstablished {
				newB = sa
			}
		}
		if newB != nil && len(newB.children) > 0 && !deleted {
			deleted = true
			p.b.ep.deleteSA(old)
		}
		p.b.ep.mu.Unlock()
		if st := p.a.ep.Status()[0]; deleted || newB != nil {
			if s := stateOf(st); s != "up" && down == "" {
				down = s
			}
		}
		if deleted && len(p.a.ep.Status()[0].SAs) == 1 && p.up() {
			break
		}
	}
	if childless {
		seen := false
		for _, l := range p.logs {
			seen = seen || strings.Contains(l, "childless IKE_AUTH: the CHILD SA comes by CREATE_CHILD_SA")
		}
		if !seen {
			t.Fatal("the reauthentication's IKE_AUTH was not childless")
		}
	}
	if down != "" {
		t.Errorf("A showed the tunnel %q during the reauthentication", down)
	}
	st := p.a.ep.Status()[0]
	if len(st.SAs) != 1 || !p.up() || st.LastError != "" {
		t.Fatalf("A after the reauthentication: %+v", st)
	}
	p.checkChildren()
	var cur *ikeSA
	for _, sa := range p.a.ep.sas {
		cur = sa
	}
	if cur == oldA {
		t.Fatal("A kept the old IKE SA")
	}
	return bytes.Compare(lowestNonce(cur), lowestNonce(oldA)) < 0
}

// stateOf is router's ikeState: what `ocf net` shows for the tunnel.
func stateOf(ps PeerStatus) string {
	for _, sa := range ps.SAs {
		if sa.State == "established" && len(sa.Children) > 0 {
			return "up"
		}
	}
	if ps.LastError != "" {
		return "down: " + ps.LastError
	}
	return "connecting"
}

// stripChildFromAuth makes the IKE_AUTH requests of from (at fromIP) to
// to childless (RFC 6023) by rebuilding them without SA, TSi and TSr.
func stripChildFromAuth(t *testing.T, from, to *side, fromIP netip.Addr) func(packet) int {
	made := map[string]bool{}
	return func(pk packet) int {
		h, ok := ikeOf(pk)
		if !ok || made[string(pk.data)] || h.Exchange != IKE_AUTH || h.Response() || pk.from.Addr() != fromIP {
			return 1
		}
		bsa, asa := from.ep.sas[h.SPIi], to.ep.sas[h.SPIr]
		if bsa == nil || asa == nil || asa.in == nil {
			return 1
		}
		m, err := Decode(pk.data)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := asa.in.Open(pk.data, m)
		if err != nil {
			return 1
		}
		var keep []Payload
		for _, pl := range ps {
			if !hasChildPayloads([]Payload{pl}) {
				keep = append(keep, pl)
			}
		}
		pkt, err := bsa.out.Seal(m.Header, nil, keep, from.ep.cfg.Rand)
		if err != nil {
			t.Fatal(err)
		}
		made[string(pkt)] = true
		from.conn.n.queue = append(from.conn.n.queue, packet{from: pk.from, to: pk.to, data: pkt})
		return 0
	}
}

// TestEndpointReauthByPeer: the peer reauthenticates, make-before-break
// and childless, against A as responder; the runs go on until the new
// IKE SA has lost the nonce tie-break, where before issue 28 A kept the
// old SA, then lost it to the peer's delete: "down: deleted by the peer"
// while the new SA and its CHILD SA were up (the responder-state race).
func TestEndpointReauthByPeer(t *testing.T) {
	for _, c := range []struct {
		name             string
		childless, first bool
	}{
		{"make-before-break", false, false},
		{"childless", true, false},
		{"make-before-break-we-initiated", false, true},
		{"childless-we-initiated", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			lost := false
			for i := 0; i < 32 && !lost && !t.Failed(); i++ {
				lost = reauth(t, c.childless, c.first)
			}
			if !lost {
				t.Error("in 32 runs the new IKE SA never lost the tie-break")
			}
		})
	}
}

// TestEndpointChildlessResponderMakesChild: after a childless IKE_AUTH
// the peer is to ask for the CHILD SA; when its CREATE_CHILD_SA does not
// come (here: lost, every time), the responder, B, makes the CHILD SA
// itself a few seconds later rather than leave the tunnel without one.
func TestEndpointChildlessResponderMakesChild(t *testing.T) {
	p := newPair(t, nil)
	strip := stripChildFromAuth(t, p.a, p.b, aIP)
	p.net.filter = func(pk packet) int {
		if h, ok := ikeOf(pk); ok && h.Exchange == CREATE_CHILD_SA && !h.Response() && pk.from.Addr() == aIP {
			return 0
		}
		return strip(pk)
	}
	start := p.clock.t
	if !p.run(15*time.Second, p.up) {
		t.Fatalf("no CHILD SA: A %+v, B %+v", p.a.ep.Status(), p.b.ep.Status())
	}
	p.checkChildren()
	if d := p.clock.t.Sub(start); d < childlessWait || d > childlessWait+2*time.Second {
		t.Errorf("B made the CHILD SA %v after the IKE SA, want about %v", d, childlessWait)
	}
	if n := p.net.count(CREATE_CHILD_SA, false, bIP); n != 1 {
		t.Errorf("B sent %d CREATE_CHILD_SA requests, want 1", n)
	}
}

// TestEndpointPeerKeepsOldSA: the peer starts a new IKE SA while the old
// one is up, then deletes the new one instead of the old (its own
// duplicate rule chose the old). A, which took the new one for a
// replacement and was waiting for the old one's delete, brings the old
// one back: the tunnel stays up on it, with no error and no new start.
func TestEndpointPeerKeepsOldSA(t *testing.T) {
	p := newPair(t, func(a, b *Config) { a.Peers[0].Initiate, b.Peers[0].Initiate = false, true })
	p.b.ep.keepDuplicates = true
	p.mustComeUp()
	oa, _ := p.checkChildren()
	var old *ikeSA
	for _, sa := range p.b.ep.sas {
		old = sa
	}
	p.step(time.Second)
	p.b.ep.mu.Lock()
	p.b.ep.initiate(p.b.ep.peers[0])
	p.b.ep.mu.Unlock()
	p.net.flush()
	replaced := false
	for _, l := range p.logs {
		replaced = replaced || strings.HasPrefix(l, aAddr) && strings.Contains(l, "is replaced by the peer's")
	}
	if !replaced {
		t.Fatalf("A did not take the new IKE SA for a replacement: %+v", p.a.ep.Status())
	}
	p.b.ep.mu.Lock()
	for _, sa := range p.b.ep.sas {
		if sa != old {
			p.b.ep.deleteSA(sa)
		}
	}
	p.b.ep.mu.Unlock()
	p.run(10*time.Second, func() bool { return false })
	st := p.a.ep.Status()[0]
	if len(st.SAs) != 1 || !p.up() || st.LastError != "" {
		t.Fatalf("A after the peer deleted the new IKE SA: %+v", st)
	}
	if na, _ := p.checkChildren(); na.InSPI != oa.InSPI {
		t.Error("A's CHILD SA is not the old one")
	}
}

// TestEndpointChildDeletedByInitiator: A, which initiates, deletes the
// CHILD SA; B does not initiate and so waits for A, saying so in its
// status (`ocf net`) rather than showing nothing.
func TestEndpointChildDeletedByInitiator(t *testing.T) {
	p := newPair(t, nil)
	p.mustComeUp()
	p.a.ep.mu.Lock()
	for _, sa := range p.a.ep.sas {
		for _, c := range sa.children {
			p.a.ep.deleteChild(sa, c)
		}
	}
	p.a.ep.mu.Unlock()
	p.net.flush()
	if e := p.b.ep.Status()[0].LastError; !strings.Contains(e, "waiting for the peer to make a new one") {
		t.Errorf("B's status without a CHILD SA: %q", e)
	}
	if n := p.net.count(CREATE_CHILD_SA, false, bIP); n != 0 {
		t.Errorf("B, which does not initiate, sent %d CREATE_CHILD_SA", n)
	}
}

// TestEndpointPeerDemandsPFS: A's tunnel asks for no PFS (pfs: false:
// its ESP proposals list no group), B demands it, as Libreswan's default
// pfs=yes does: B refuses a CREATE_CHILD_SA without KE. A redoes its rekey
// (or the CHILD SA it makes again after B deleted its one) at once with a
// KE, in the IKE SA's group or the one B names, and starts its later
// rekeys with it. Before, A retried the same proposal without KE with a
// backoff until the fresh-CHILD SA fallback, which B refused too, so the
// kernel's hard lifetime ended the tunnel (the Libreswan test's skipped
// pfs-pluto-yes-ocfw-no/ocfw-rekeys).
func TestEndpointPeerDemandsPFS(t *testing.T) {
	cases := []struct {
		name string
		// B's ESP groups and its answer to a request without KE.
		groups []DHGroup
		answer *Notify
		// The group the CHILD SA gets, and the CREATE_CHILD_SA requests
		// A sends for its first rekey (each refusal redone once more).
		want     DHGroup
		requests int
	}{
		// B takes the IKE SA's group (Curve25519), as pluto does.
		{"no-proposal-chosen", []DHGroup{Curve25519}, &Notify{Notify: NO_PROPOSAL_CHOSEN}, Curve25519, 2},
		// B wants another group: after the IKE SA's, the one it names.
		{"no-proposal-chosen-then-invalid-ke", []DHGroup{ECP256}, &Notify{Notify: NO_PROPOSAL_CHOSEN}, ECP256, 3},
		{"invalid-ke", []DHGroup{ECP256}, InvalidKE(ECP256), ECP256, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, func(a, b *Config) { b.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, c.groups...) })
			p.b.ep.demandPFS = c.answer
			p.mustComeUp()
			for i, want := range []int{c.requests, 1} {
				oa, _ := p.checkChildren()
				before := p.net.count(CREATE_CHILD_SA, false, aIP)
				if err := p.a.ep.RekeyChild("b"); err != nil {
					t.Fatal(err)
				}
				ok := p.run(3*time.Second, func() bool {
					la := p.a.sink.live()
					return len(la) == 1 && la[0].InSPI != oa.InSPI && len(p.b.sink.live()) == 1
				})
				if !ok {
					t.Fatalf("rekey %d: no new CHILD SA within 3 s: A %+v", i+1, p.a.ep.Status())
				}
				p.checkChildren()
				if got := established(p.a)[0].Children[0].Proposal; !strings.Contains(got, c.want.String()) {
					t.Errorf("rekey %d: the CHILD SA runs %s, want PFS in %s", i+1, got, c.want)
				}
				if n := p.net.count(CREATE_CHILD_SA, false, aIP) - before; n != want {
					t.Errorf("rekey %d: A sent %d CREATE_CHILD_SA requests, want %d", i+1, n, want)
				}
				if e := p.a.ep.Status()[0].LastError; e != "" {
					t.Errorf("rekey %d: A's status says %q once the CHILD SA is in", i+1, e)
				}
			}
		})
	}

	t.Run("new-child", func(t *testing.T) {
		// B deletes the CHILD SA; A makes a new one with CREATE_CHILD_SA
		// (no REKEY_SA), which B refuses without KE too.
		p := newPair(t, func(a, b *Config) { b.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, Curve25519) })
		p.b.ep.demandPFS = &Notify{Notify: NO_PROPOSAL_CHOSEN}
		p.mustComeUp()
		oa, _ := p.checkChildren()
		p.b.ep.mu.Lock()
		for _, sa := range p.b.ep.sas {
			for _, c := range sa.children {
				p.b.ep.deleteChild(sa, c)
			}
		}
		p.b.ep.mu.Unlock()
		if !p.run(5*time.Second, p.up) {
			t.Fatalf("no new CHILD SA within 5 s: A %+v", p.a.ep.Status())
		}
		na, _ := p.checkChildren()
		if na.InSPI == oa.InSPI || !strings.Contains(established(p.a)[0].Children[0].Proposal, "Curve25519") {
			t.Errorf("the CHILD SA: %+v, want a new one with PFS in Curve25519", established(p.a)[0].Children)
		}
	})

	t.Run("refused-with-KE-too", func(t *testing.T) {
		// B takes no KE either (its list says NONE outright): A's KE is
		// tried once, then the backoff as before, and A's status says
		// both refusals; the next try goes without KE only.
		p := newPair(t, func(a, b *Config) { b.Peers[0].Child = suiteESP(aes128T, AUTH_HMAC_SHA2_256_128, DHGroup(0)) })
		p.b.ep.demandPFS = &Notify{Notify: NO_PROPOSAL_CHOSEN}
		p.mustComeUp()
		oa, _ := p.checkChildren()
		before := p.net.count(CREATE_CHILD_SA, false, aIP)
		if err := p.a.ep.RekeyChild("b"); err != nil {
			t.Fatal(err)
		}
		var why string
		p.run(3*time.Second, func() bool {
			why = p.a.ep.Status()[0].LastError
			return why != ""
		})
		for _, s := range []string{"rekey failed 1 time(s)", "NO_PROPOSAL_CHOSEN", "without PFS", "with a KE in the IKE SA's Curve25519", "trying again in 5s"} {
			if !strings.Contains(why, s) {
				t.Errorf("A's status %q does not say %q", why, s)
			}
		}
		if n := p.net.count(CREATE_CHILD_SA, false, aIP) - before; n != 2 {
			t.Errorf("A sent %d CREATE_CHILD_SA requests for the rekey, want 2 (without KE, then with)", n)
		}
		before = p.net.count(CREATE_CHILD_SA, false, aIP)
		p.run(6*time.Second, func() bool { return false })
		if n := p.net.count(CREATE_CHILD_SA, false, aIP) - before; n != 1 {
			t.Errorf("A's next try sent %d CREATE_CHILD_SA requests, want 1", n)
		}
		if la := p.a.sink.live(); len(la) != 1 || la[0].InSPI != oa.InSPI {
			t.Errorf("A's CHILD SAs: %v, want the old one still", la)
		}
	})
}
