package ike

import (
	"bytes"
	"fmt"
	"net/netip"
	"sort"
	"time"
)

// halfOpenTimeout is how long a responder keeps an SA whose IKE_AUTH has
// not come.
const halfOpenTimeout = 30 * time.Second

func (e *Endpoint) replyInit(natt bool, spii uint64, n *Notify, to netip.AddrPort) {
	m := &Message{Header: Header{SPIi: spii, Exchange: IKE_SA_INIT, Flags: FlagResponse}, Payloads: []Payload{n}}
	if pkt, err := m.Encode(); err == nil {
		e.sendTo(natt, pkt, to)
	}
}

func (e *Endpoint) handleInitRequest(natt bool, pkt []byte, from netip.AddrPort) {
	h, _ := DecodeHeader(pkt)
	if h.SPIi == 0 || h.MessageID != 0 {
		return
	}
	if sa := e.half[halfKey{h.SPIi, from}]; sa != nil {
		if bytes.Equal(sa.initReq, pkt) {
			e.sendTo(natt, sa.initResp, from) // a retransmission: the cached answer
		}
		return
	}
	p := e.peerByAddr(from.Addr())
	if p == nil {
		return // not a configured peer
	}
	if e.knownInitiator(h.SPIi, from) {
		// A replay (or a late retransmission) of the IKE_SA_INIT of an
		// SA past half-open: it gets no second slot (RFC 7296 2.1,
		// 2.2: the SPI names the SA it made), and no answer, as the
		// IKE_SA_INIT response is no longer what the SA holds.
		return
	}
	m, err := Decode(pkt)
	if err != nil {
		return
	}
	ps := m.Payloads
	sap, ok1 := first[*SA](ps)
	ke, ok2 := first[*KE](ps)
	ni, ok3 := first[*Nonce](ps)
	if !ok1 || !ok2 || !ok3 {
		e.replyInit(natt, h.SPIi, &Notify{Notify: INVALID_SYNTAX}, from)
		return
	}
	// Denial of service from a peer's address (issue 28): anyone can
	// send IKE_SA_INIT in a peer's name, and each answered one holds a
	// half-open SA for halfOpenTimeout. So a cookie (RFC 7296 2.6) is
	// asked for as soon as the peer's address holds one half-open SA,
	// or the endpoint CookieThreshold of them: a spoofed flood then
	// costs no state, and the peer, which sees our answers, pays one
	// round trip more. Half-open SAs never count against an
	// established peer's SAs (MaxSAsPerPeer), nor stop our own
	// initiation (hasActive).
	half, mine := e.halfOpen(), e.halfOpenOf(p)
	c, isN := ps[0].(*Notify)
	cookied := isN && c.Notify == COOKIE && e.validCookie(c.Data, h.SPIi, ni.Data, from)
	if !cookied && (half >= e.cfg.CookieThreshold || len(mine) > 0) {
		// No state until the initiator returns our cookie as the
		// first payload.
		e.replyInit(natt, h.SPIi, &Notify{Notify: COOKIE, Data: e.makeCookie(h.SPIi, ni.Data, from)}, from)
		return
	}
	if n := len(e.sasOf(p)) - len(mine); n >= e.cfg.MaxSAsPerPeer {
		e.dropInit(p, "%d IKE SAs with this peer", n)
		return
	}
	var evict *ikeSA
	if half >= e.cfg.MaxHalfOpen || len(mine) >= e.cfg.MaxSAsPerPeer {
		if !cookied || len(mine) == 0 {
			e.dropInit(p, "%d half-open SAs", half)
			return
		}
		// The sender proved it sees the peer's address: its request
		// takes the place of the peer address's oldest half-open SA
		// (below, once it is answered), so the memory stays bounded
		// and the newest attempt, the peer's, goes on.
		evict = mine[0]
	}
	if err := CheckOffer(sap.Proposals, false); err != nil {
		e.replyInit(natt, h.SPIi, &Notify{Notify: INVALID_SYNTAX}, from)
		return
	}
	chosen, err := Choose(offer(p.cfg.IKE, ProtoIKE, nil, false), sap.Proposals)
	if err != nil {
		p.lastErr = "a peer's IKE proposals matched none of ours (NO_PROPOSAL_CHOSEN)"
		e.replyInit(natt, h.SPIi, &Notify{Notify: NO_PROPOSAL_CHOSEN}, from)
		return
	}
	suite, err := SuiteFrom(chosen)
	if err != nil {
		e.replyInit(natt, h.SPIi, &Notify{Notify: NO_PROPOSAL_CHOSEN}, from)
		return
	}
	if ke.Group != suite.DH {
		e.replyInit(natt, h.SPIi, InvalidKE(suite.DH), from)
		return
	}
	dh, err := GenerateDH(suite.DH, e.cfg.Rand)
	if err != nil {
		return
	}
	gir, err := dh.Shared(ke.Data)
	if err != nil {
		e.replyInit(natt, h.SPIi, &Notify{Notify: INVALID_SYNTAX}, from)
		return
	}
	now := e.now()
	sa := &ikeSA{peer: p, spii: h.SPIi, spir: e.newSPI(), state: stateHalfOpen, remote: from, natt: natt,
		suite: suite, ni: append([]byte(nil), ni.Data...), nr: e.random(32), created: now, lastIn: now,
		initReq: append([]byte(nil), pkt...), expectID: 1, nextID: 0}
	sa.expire = now.Add(halfOpenTimeout)
	sa.keys, err = suite.DeriveIKE(suite.SKEYSEED(sa.ni, sa.nr, gir), sa.ni, sa.nr, sa.spii, sa.spir)
	if err == nil {
		sa.out, sa.in, err = suite.Directions(sa.keys, false)
	}
	if err != nil {
		return
	}
	local := e.localAddr(p, natt)
	sa.natLocal, sa.natRemote = natDetect(ps, sa.spii, 0, from, local)
	sa.childless = notify(ps, CHILDLESS_IKEV2_SUPPORTED) != nil
	chosen.SPI = nil
	out := []Payload{&SA{[]Proposal{chosen}}, &KE{Group: suite.DH, Data: dh.Public()}, &Nonce{Data: sa.nr}}
	if notify(ps, NAT_DETECTION_SOURCE_IP) != nil {
		out = append(out, e.natd(sa.spii, sa.spir, local, from)...)
	}
	// We take IKE_AUTH without a CHILD SA (RFC 6023): Libreswan's
	// reauthentication and charon's childless=force send one.
	out = append(out, &Notify{Notify: CHILDLESS_IKEV2_SUPPORTED})
	rm := &Message{Header: Header{SPIi: sa.spii, SPIr: sa.spir, Exchange: IKE_SA_INIT, Flags: FlagResponse}, Payloads: out}
	resp, err := rm.Encode()
	if err != nil {
		return
	}
	sa.initResp = resp
	if evict != nil {
		e.removeSA(evict, "")
	}
	e.sas[sa.spir] = sa
	e.half[halfKey{sa.spii, from}] = sa
	e.sendTo(natt, resp, from)
}

// authRequest is the responder's IKE_AUTH: check the peer's identity and
// AUTH, answer with ours and the first CHILD SA.
func (e *Endpoint) authRequest(sa *ikeSA, natt bool, ps []Payload, from netip.AddrPort) ([]Payload, func()) {
	p := sa.peer
	idi, ok1 := first[*IDi](ps)
	auth, ok2 := first[*Auth](ps)
	if !ok1 || !ok2 {
		return []Payload{&Notify{Notify: INVALID_SYNTAX}}, func() { e.closeSA(sa, "IKE_AUTH without IDi or AUTH") }
	}
	fail := func(reason string) ([]Payload, func()) {
		return []Payload{&Notify{Notify: AUTHENTICATION_FAILED}}, func() { e.closeSA(sa, reason) }
	}
	if idi.IDType != p.cfg.RemoteID.IDType || !bytes.Equal(idi.Data, p.cfg.RemoteID.Data) {
		return fail(fmt.Sprintf("authentication failed: the peer says it is %s, the configuration says %s", idi.Identity, p.cfg.RemoteID))
	}
	signed := SignedOctets(sa.suite.PRF, sa.initReq, sa.nr, sa.keys.Pi, idi.Body())
	if auth.Method != AuthSharedKeyMIC || VerifyPSK(sa.suite.PRF, p.cfg.PSK, signed, auth.Data) != nil {
		return fail(authBadPeerPSK)
	}
	if notify(ps, INITIAL_CONTACT) != nil {
		// The peer restarted: whatever it had with us before is gone.
		// Only SAs established before this one's IKE_SA_INIT came can be
		// from before the restart: one that came up since was made with
		// the restarted peer (both ends initiating at once, the peer's
		// INITIAL_CONTACT overtaken by our own exchange), and is a
		// duplicate for dedupe to settle at both ends alike, not stale.
		// (SAs not yet established have no peer id to match.)
		for _, old := range e.sasOf(p) {
			if old != sa && old.peerID.IDType == idi.IDType && bytes.Equal(old.peerID.Data, idi.Data) && old.established.Before(sa.created) {
				e.logf("ike %s: INITIAL_CONTACT: deleting the older IKE SA %016x_%016x", p.cfg.Name, old.spii, old.spir)
				e.removeSA(old, "")
			}
		}
	}
	e.established(sa, idi.Identity)
	myAuth := PSKAuth(sa.suite.PRF, p.cfg.PSK, SignedOctets(sa.suite.PRF, sa.initResp, sa.ni, sa.keys.Pr, p.cfg.LocalID.Body()))
	out := []Payload{&IDr{p.cfg.LocalID}, &Auth{Method: AuthSharedKeyMIC, Data: myAuth}}
	if sa.childless && !hasChildPayloads(ps) {
		// A childless IKE_AUTH (RFC 6023): the IKE SA alone; the peer
		// asks for CHILD SAs with CREATE_CHILD_SA.
		e.logf("ike %s: childless IKE_AUTH: the CHILD SA comes by CREATE_CHILD_SA", p.cfg.Name)
		// If it does not come, the configured tunnel asks for it
		// itself rather than stay without one.
		sa.childRetryAt = e.now().Add(childlessWait)
		return out, nil
	}
	childPs, _, err := e.respondChild(sa, ps, nil, true, sa.ni, sa.nr, nil)
	if err != nil {
		sa.err = err.Error()
		p.lastErr = sa.err
	}
	return append(out, childPs...), nil
}

// hasChildPayloads reports any of the payloads that ask for a CHILD SA.
func hasChildPayloads(ps []Payload) bool {
	for _, p := range ps {
		switch p.(type) {
		case *SA, *TSi, *TSr:
			return true
		}
	}
	return false
}

// knownInitiator reports an IKE SA we answered for initiator SPI spii
// from from's address that is past half-open (those answer their
// retransmissions from e.half).
func (e *Endpoint) knownInitiator(spii uint64, from netip.AddrPort) bool {
	for _, sa := range e.sas {
		if !sa.initiator && sa.spii == spii && sa.remote.Addr().Unmap() == from.Addr().Unmap() {
			return true
		}
	}
	return false
}

// dropInit logs a dropped IKE_SA_INIT, one line a second at most: a
// flood must not flood the log.
func (e *Endpoint) dropInit(p *peerState, format string, args ...any) {
	if now := e.now(); now.Sub(e.lastDropLog) >= time.Second {
		e.lastDropLog = now
		e.logf("ike %s: IKE_SA_INIT dropped: "+format, append([]any{p.cfg.Name}, args...)...)
	}
}

// halfOpenOf is the responder's half-open SAs with peer p, oldest first.
func (e *Endpoint) halfOpenOf(p *peerState) []*ikeSA {
	var out []*ikeSA
	for _, sa := range e.sas {
		if sa.peer == p && sa.state == stateHalfOpen {
			out = append(out, sa)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].created.Before(out[j].created) })
	return out
}
