package ike

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"
)

// first returns the first payload of type T in ps.
func first[T Payload](ps []Payload) (T, bool) {
	for _, p := range ps {
		if t, ok := p.(T); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}

// notify returns the first Notify of type n.
func notify(ps []Payload, n NotifyType) *Notify {
	for _, p := range ps {
		if x, ok := p.(*Notify); ok && x.Notify == n {
			return x
		}
	}
	return nil
}

// errorNotify returns the first error Notify, if any.
func errorNotify(ps []Payload) *Notify {
	for _, p := range ps {
		if x, ok := p.(*Notify); ok && x.Notify.IsError() {
			return x
		}
	}
	return nil
}

// offer numbers proposals 1.. with the protocol and SPI, dropping the DH
// transforms when noDH (the first CHILD SA, made in IKE_AUTH, has no KE).
func offer(ps []Proposal, proto ProtocolID, spi []byte, noDH bool) []Proposal {
	out := make([]Proposal, 0, len(ps))
	for i, p := range ps {
		q := Proposal{Num: uint8(i + 1), Protocol: proto, SPI: spi}
		for _, t := range p.Transforms {
			if noDH && t.Type == TransformDH {
				continue
			}
			q.Transforms = append(q.Transforms, t)
		}
		out = append(out, q)
	}
	return out
}

// firstGroup is the DH group we send a KE for: the first one proposed.
func firstGroup(ps []Proposal) DHGroup {
	for _, p := range ps {
		for _, t := range p.Transforms {
			if t.Type == TransformDH && t.ID != 0 {
				return DHGroup(t.ID)
			}
		}
	}
	return 0
}

func offersGroup(ps []Proposal, g DHGroup) bool {
	for _, p := range ps {
		for _, t := range p.Transforms {
			if t.Type == TransformDH && DHGroup(t.ID) == g {
				return true
			}
		}
	}
	return false
}

func selectors(ps []netip.Prefix) Selectors {
	out := make(Selectors, 0, len(ps))
	for _, p := range ps {
		p = p.Masked()
		start := p.Addr()
		end := start.AsSlice()
		bits := p.Bits()
		for i := range end {
			for b := 0; b < 8; b++ {
				if i*8+b >= bits {
					end[i] |= 0x80 >> b
				}
			}
		}
		e, _ := netip.AddrFromSlice(end)
		out = append(out, TrafficSelector{EndPort: 0xffff, Start: start, End: e})
	}
	return out
}

func sameSelectors(a, b Selectors) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// localAddr is our address as the NAT detection hashes it: the configured
// one with the port of the socket the SA talks on.
func (e *Endpoint) localAddr(p *peerState, natt bool) netip.AddrPort {
	c := e.cfg.Conn
	if natt && e.cfg.NATT != nil {
		c = e.cfg.NATT
	}
	return netip.AddrPortFrom(p.cfg.Local.Addr(), c.LocalAddr().Port())
}

func (e *Endpoint) natd(spii, spir uint64, src, dst netip.AddrPort) []Payload {
	return []Payload{
		&Notify{Notify: NAT_DETECTION_SOURCE_IP, Data: NATDetectionHash(spii, spir, src)},
		&Notify{Notify: NAT_DETECTION_DESTINATION_IP, Data: NATDetectionHash(spii, spir, dst)},
	}
}

// natDetect compares the peer's NAT_DETECTION hashes with what it should
// have seen: a mismatch of the source is a NAT before the peer, of the
// destination one before us (RFC 7296 2.23).
func natDetect(ps []Payload, spii, spir uint64, peerSeen, ourAddr netip.AddrPort) (local, remote bool) {
	var srcMatch, anySrc bool
	for _, p := range ps {
		n, ok := p.(*Notify)
		if !ok {
			continue
		}
		switch n.Notify {
		case NAT_DETECTION_SOURCE_IP:
			anySrc = true
			if bytes.Equal(n.Data, NATDetectionHash(spii, spir, peerSeen)) {
				srcMatch = true
			}
		case NAT_DETECTION_DESTINATION_IP:
			local = !bytes.Equal(n.Data, NATDetectionHash(spii, spir, ourAddr))
		}
	}
	return local, anySrc && !srcMatch
}

// Initiate starts an IKE SA with the named peer now.
func (e *Endpoint) Initiate(name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.peerByName(name)
	if p == nil {
		return fmt.Errorf("ike: no peer %q", name)
	}
	e.initiate(p)
	return nil
}

func (e *Endpoint) initiate(p *peerState) {
	now := e.now()
	sa := &ikeSA{peer: p, initiator: true, spii: e.newSPI(), state: stateInit, remote: p.cfg.Remote,
		created: now, lastIn: now, group: firstGroup(p.cfg.IKE)}
	// A half-open initiator gives up like a half-open responder.
	sa.expire = now.Add(4 * e.retransmitSpan())
	e.sas[sa.spii] = sa
	p.retryAt = now.Add(e.cfg.RetryInterval)
	e.logf("ike %s: initiating IKE SA %016x", p.cfg.Name, sa.spii)
	e.sendInit(sa)
}

// sendInit sends (again) IKE_SA_INIT: after a COOKIE the same payloads
// behind it; after INVALID_KE_PAYLOAD a new KE in the asked group.
func (e *Endpoint) sendInit(sa *ikeSA) {
	p := sa.peer
	if sa.dh == nil || sa.dh.Group() != sa.group {
		dh, err := GenerateDH(sa.group, e.cfg.Rand)
		if err != nil {
			e.closeSA(sa, "Diffie-Hellman: "+err.Error())
			return
		}
		sa.dh = dh
		sa.ni = e.random(32)
	}
	var ps []Payload
	if sa.cookie != nil {
		ps = append(ps, &Notify{Notify: COOKIE, Data: sa.cookie})
	}
	ps = append(ps, &SA{offer(p.cfg.IKE, ProtoIKE, nil, false)}, &KE{Group: sa.group, Data: sa.dh.Public()}, &Nonce{Data: sa.ni})
	ps = append(ps, e.natd(sa.spii, 0, e.localAddr(p, false), sa.remote)...)
	ps = append(ps, &Notify{Notify: CHILDLESS_IKEV2_SUPPORTED}) // RFC 6023: we take childless IKE_AUTH
	m := &Message{Header: Header{SPIi: sa.spii, Exchange: IKE_SA_INIT, Flags: FlagInitiator}, Payloads: ps}
	pkt, err := m.Encode()
	if err != nil {
		e.closeSA(sa, err.Error())
		return
	}
	sa.initReq = pkt
	sa.nextID = 1
	e.transmit(sa, &request{exch: IKE_SA_INIT, pkt: pkt, handle: func(m *Message, pkt []byte, ps []Payload) {
		e.initResponse(sa, m, pkt, ps)
	}})
}

// maxInitRetries bounds COOKIE and INVALID_KE_PAYLOAD round trips.
const maxInitRetries = 3

func (e *Endpoint) initResponse(sa *ikeSA, m *Message, pkt []byte, ps []Payload) {
	p := sa.peer
	if n := notify(ps, COOKIE); n != nil {
		c, err := n.Cookie()
		if err != nil || sa.initTries >= maxInitRetries {
			e.closeSA(sa, "responder's COOKIE not usable")
			return
		}
		sa.cookie = append([]byte(nil), c...)
		sa.initTries++
		e.sendInit(sa)
		return
	}
	if n := notify(ps, INVALID_KE_PAYLOAD); n != nil {
		g, err := n.Group()
		if err != nil || g == sa.group || !offersGroup(p.cfg.IKE, g) || sa.initTries >= maxInitRetries {
			e.closeSA(sa, fmt.Sprintf("the peer asks for Diffie-Hellman group %d, which we do not propose", g))
			return
		}
		e.logf("ike %s: the peer wants %s: retrying", p.cfg.Name, g)
		sa.group = g
		sa.initTries++
		e.sendInit(sa)
		return
	}
	if n := errorNotify(ps); n != nil {
		e.closeSA(sa, fmt.Sprintf("the peer refused IKE_SA_INIT with %s: compare the IKE proposals at both ends", n.Notify))
		return
	}
	sap, ok1 := first[*SA](ps)
	ke, ok2 := first[*KE](ps)
	nr, ok3 := first[*Nonce](ps)
	if !ok1 || !ok2 || !ok3 || m.SPIr == 0 {
		e.closeSA(sa, "IKE_SA_INIT response without SA, KE or Nonce")
		return
	}
	chosen, err := CheckChosen(offer(p.cfg.IKE, ProtoIKE, nil, false), sap.Proposals)
	if err != nil {
		e.closeSA(sa, err.Error())
		return
	}
	suite, err := SuiteFrom(chosen)
	if err != nil || suite.DH != sa.group || ke.Group != sa.group {
		e.closeSA(sa, fmt.Sprintf("the responder chose a suite that does not match our KE (%v)", err))
		return
	}
	gir, err := sa.dh.Shared(ke.Data)
	if err != nil {
		e.closeSA(sa, "Diffie-Hellman: "+err.Error())
		return
	}
	sa.spir = m.SPIr
	sa.nr = append([]byte(nil), nr.Data...)
	sa.keys, err = suite.DeriveIKE(suite.SKEYSEED(sa.ni, sa.nr, gir), sa.ni, sa.nr, sa.spii, sa.spir)
	if err == nil {
		sa.out, sa.in, err = suite.Directions(sa.keys, true)
	}
	if err != nil {
		e.closeSA(sa, err.Error())
		return
	}
	sa.suite = suite
	sa.dh = nil
	sa.initResp = append([]byte(nil), pkt...)
	sa.natLocal, sa.natRemote = natDetect(ps, sa.spii, sa.spir, sa.remote, e.localAddr(p, false))
	if (sa.natLocal || sa.natRemote) && e.cfg.NATT != nil {
		// RFC 7296 2.23: IKE_AUTH and all after it go to port 4500.
		sa.natt = true
		sa.remote = netip.AddrPortFrom(sa.remote.Addr(), p.cfg.RemoteNATTPort)
		e.logf("ike %s: NAT detected (local %v, remote %v): switching to UDP %d", p.cfg.Name, sa.natLocal, sa.natRemote, p.cfg.RemoteNATTPort)
	} else if sa.natLocal || sa.natRemote {
		e.logf("ike %s: NAT detected but no NAT-T socket: ESP will not pass it", p.cfg.Name)
	}
	sa.state = stateAuth
	sa.nextID = 1
	e.queueRequest(sa, &request{exch: IKE_AUTH, build: func() []Payload { return e.buildAuth(sa) },
		handle: func(_ *Message, _ []byte, ps []Payload) { e.authResponse(sa, ps) }})
}

func (e *Endpoint) buildAuth(sa *ikeSA) []Payload {
	p := sa.peer
	c := &child{}
	c.sa.InSPI = e.newChildSPI()
	c.offer = offer(p.cfg.Child, ProtoESP, be32(c.sa.InSPI), true)
	sa.authChild = c
	ps := []Payload{&IDi{p.cfg.LocalID}}
	if !p.contacted && len(e.sasOf(p)) == 1 {
		// Only when this SA is all we have with the peer: while the peer
		// is making one with us at the same time, INITIAL_CONTACT would
		// make it drop that one.
		ps = append(ps, &Notify{Notify: INITIAL_CONTACT})
	}
	auth := PSKAuth(sa.suite.PRF, p.cfg.PSK, SignedOctets(sa.suite.PRF, sa.initReq, sa.nr, sa.keys.Pi, p.cfg.LocalID.Body()))
	return append(ps, &Auth{Method: AuthSharedKeyMIC, Data: auth}, &SA{c.offer},
		&TSi{selectors(p.cfg.LocalTS)}, &TSr{selectors(p.cfg.RemoteTS)})
}

// The two ways a PSK mismatch shows, in the words `ocf net` and the log
// give the owner: the peer refused our AUTH, or its AUTH fails here.
// Neither names a secret.
const (
	authRejectedPSK = "authentication failed: the peer rejected our pre-shared key (AUTHENTICATION_FAILED)"
	authBadPeerPSK  = "authentication failed: the peer's AUTH did not verify: do both ends have the same psk file?"
)

func (e *Endpoint) authResponse(sa *ikeSA, ps []Payload) {
	p := sa.peer
	idr, ok1 := first[*IDr](ps)
	auth, ok2 := first[*Auth](ps)
	if !ok1 || !ok2 {
		reason := "IKE_AUTH refused"
		if n := errorNotify(ps); n != nil {
			reason = fmt.Sprintf("IKE_AUTH refused with %s", n.Notify)
			if n.Notify == AUTHENTICATION_FAILED {
				reason = authRejectedPSK + ": do both ends have the same psk file, and the ids each expects?"
			}
		}
		e.closeSA(sa, reason)
		return
	}
	if idr.IDType != p.cfg.RemoteID.IDType || !bytes.Equal(idr.Data, p.cfg.RemoteID.Data) {
		e.rejectResponder(sa, fmt.Sprintf("authentication failed: the peer is %s, the configuration says %s", idr.Identity, p.cfg.RemoteID))
		return
	}
	signed := SignedOctets(sa.suite.PRF, sa.initResp, sa.ni, sa.keys.Pr, idr.Body())
	if auth.Method != AuthSharedKeyMIC || VerifyPSK(sa.suite.PRF, p.cfg.PSK, signed, auth.Data) != nil {
		e.rejectResponder(sa, authBadPeerPSK)
		return
	}
	e.established(sa, idr.Identity)
	c := sa.authChild
	sa.authChild = nil
	if sa.state != stateEstablished {
		// dedupe found it the duplicate and is deleting it: its CHILD SA
		// never goes into the kernel, so the policies stay with the SA
		// that is kept (the peer drops its half with the IKE SA).
		return
	}
	if err := e.finishChild(sa, c, ps, nil, sa.ni, sa.nr); err != nil {
		sa.err = err.Error()
		p.lastErr = sa.err
		sa.childRetryAt = e.now().Add(e.cfg.RetryInterval)
		e.logf("ike %s: IKE SA up, CHILD SA refused: %v", p.cfg.Name, err)
	}
}

// rejectResponder ends an IKE SA whose responder we do not accept. The
// responder considers it up, so it is told (RFC 7296 2.21.2), once and
// unanswered: the SA is gone here either way.
func (e *Endpoint) rejectResponder(sa *ikeSA, reason string) {
	if pkt, err := sa.out.Seal(Header{SPIi: sa.spii, SPIr: sa.spir, Exchange: INFORMATIONAL, Flags: sa.flags(false), MessageID: sa.nextID},
		nil, []Payload{&Notify{Notify: AUTHENTICATION_FAILED}}, e.cfg.Rand); err == nil {
		e.send(sa, pkt)
	}
	e.closeSA(sa, reason)
}

// established marks an SA authenticated and schedules its rekey.
func (e *Endpoint) established(sa *ikeSA, peerID Identity) {
	now := e.now()
	p := sa.peer
	sa.state = stateEstablished
	sa.peerID = Identity{IDType: peerID.IDType, Data: append([]byte(nil), peerID.Data...)}
	sa.established, sa.lastRekey, sa.lastIn, sa.lastKeepalive = now, now, now, now
	sa.expire = time.Time{}
	sa.rekeyAt = now.Add(p.cfg.IKELifetime - p.cfg.Margin - e.jitter(p))
	for k, v := range e.half {
		if v == sa {
			delete(e.half, k)
		}
	}
	if sa.initiator {
		p.contacted = true
	}
	p.lastErr = ""
	p.lastEstablished = now
	e.logf("ike %s: IKE SA %016x_%016x established with %s (%s)", p.cfg.Name, sa.spii, sa.spir, sa.peerID, sa.suite)
	e.dedupe(p)
}

// dedupe settles two ends that set up IKE SAs with each other at the same
// time (both configured to initiate, or both rekeying one SA and both
// completing): of two established SAs the one
// holding the lowest nonce is redundant, as for rekey collisions (RFC
// 7296 2.8.1), and its original initiator deletes it. Both ends apply the
// same rule, so exactly one SA stays and nobody waits.
func (e *Endpoint) dedupe(p *peerState) {
	if e.keepDuplicates {
		return
	}
	var up []*ikeSA
	for _, sa := range e.sasOf(p) {
		if sa.state == stateEstablished {
			up = append(up, sa)
		}
	}
	if len(up) < 2 {
		return
	}
	lowest := func(sa *ikeSA) []byte {
		if bytes.Compare(sa.ni, sa.nr) < 0 {
			return sa.ni
		}
		return sa.nr
	}
	// A replacement: an SA the peer started after another was up here
	// (a peer restarted without INITIAL_CONTACT, or reauthenticating,
	// RFC 7296 2.8.3) is no duplicate made at the same time; the peer
	// has abandoned the older one, whatever the nonces say. It waits,
	// though, while the new one carries no CHILD SA and the old one does
	// (Libreswan reauthenticates childless, then CREATE_CHILD_SA): the
	// tunnel never drops to zero CHILD SAs.
	newest := up[0]
	for _, sa := range up[1:] {
		if sa.created.After(newest.created) {
			newest = sa
		}
	}
	replacement := !newest.initiator
	for _, sa := range up {
		// Up only after the new one started: made at the same
		// time (both ends initiating), a duplicate for the nonces.
		if sa != newest && (!sa.established.Before(newest.created) || sa.parent != nil && sa.parent == newest.parent) {
			replacement = false
		}
	}
	if replacement {
		carries := false
		for _, sa := range up {
			carries = carries || sa != newest && len(sa.children) > 0
		}
		if len(newest.children) == 0 && carries {
			return // settled once it has its CHILD SA (fillChild)
		}
		for _, sa := range up {
			if sa == newest {
				continue
			}
			// The peer deletes it itself (make_before_break) or has
			// forgotten it (a restart): we delete it if it does not,
			// and bring it back if the peer deletes the new one instead.
			e.logf("ike %s: IKE SA %016x_%016x is replaced by the peer's %016x_%016x: the old one goes", p.cfg.Name, sa.spii, sa.spir, newest.spii, newest.spir)
			sa.state = stateDeleting
			sa.dupWait = true
			sa.expire = e.now().Add(e.cfg.RetransmitBase << 3)
		}
		return
	}
	keep := up[0]
	for _, sa := range up[1:] {
		if bytes.Compare(lowest(sa), lowest(keep)) > 0 {
			keep = sa
		}
	}
	for _, sa := range up {
		if sa == keep {
			continue
		}
		if sa.parent != nil && sa.parent == keep.parent {
			// Two rekeys of one IKE SA both completed (RFC 7296 2.8.2):
			// the CHILD SAs belong to the one that stays.
			keep.children = append(keep.children, sa.children...)
			sa.children = nil
			keep.parent.next = keep
		}
		if sa.initiator {
			e.logf("ike %s: deleting IKE SA %016x_%016x: a duplicate, the peer and we made one each at once", p.cfg.Name, sa.spii, sa.spir)
			e.deleteSA(sa)
		} else {
			// Its initiator deletes it, as soon as it has both: an ocfw
			// peer at once. A peer that keeps duplicates (strongSwan
			// with unique=no) never does: after dupWait we delete it
			// ourselves (Tick), so that one pair of CHILD SAs stays.
			// Until then its CHILD SA is live at both ends.
			sa.state = stateDeleting
			sa.dupWait = true
			sa.expire = e.now().Add(e.retransmitSpan())
		}
	}
}

// jitter is a random part of the margin, so both ends rarely rekey at once.
func (e *Endpoint) jitter(p *peerState) time.Duration {
	if p.cfg.Jitter <= 0 {
		return 0
	}
	return time.Duration(binary.BigEndian.Uint64(e.random(8)) % uint64(p.cfg.Jitter))
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
