package ike

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

type saState int

const (
	stateInit        saState = iota // initiator: IKE_SA_INIT sent
	stateAuth                       // initiator: IKE_AUTH sent
	stateHalfOpen                   // responder: IKE_SA_INIT answered
	stateEstablished                // authenticated
	stateRekeyed                    // replaced by a newer IKE SA; waits for its delete
	stateClosing                    // failed or deleted: answers retransmissions only
	stateDeleting                   // we sent its delete
)

// retiring reports an SA that is on its way out but still answers.
func (s saState) retiring() bool { return s == stateRekeyed || s == stateDeleting }

func (s saState) String() string {
	return [...]string{"connecting", "authenticating", "half-open", "established", "rekeyed", "closing", "deleting"}[s]
}

// ikeSA is one IKE SA and its two windows of size 1 (RFC 7296 2.3): the
// requests we send (nextID, pending, queue) and the ones we answer
// (expectID and the cached last response).
type ikeSA struct {
	peer      *peerState
	initiator bool // the original initiator of this SA
	spii      uint64
	spir      uint64
	state     saState
	remote    netip.AddrPort
	natt      bool // talking on the NAT-T port
	natLocal  bool // we are behind a NAT
	natRemote bool // the peer is behind a NAT
	// childless: the peer announced CHILDLESS_IKEV2_SUPPORTED in its
	// IKE_SA_INIT, so its IKE_AUTH may carry no CHILD SA (RFC 6023).
	childless bool

	suite     *Suite
	keys      *IKEKeys
	out, in   *SKCipher
	ni, nr    []byte
	dh        *DHKey
	group     DHGroup
	cookie    []byte
	initTries int    // IKE_SA_INIT restarts after COOKIE or INVALID_KE_PAYLOAD
	initReq   []byte // IKE_SA_INIT request as sent (initiator) or received
	initResp  []byte
	peerID    Identity

	nextID   uint32
	pending  *request
	queue    []*request
	expectID uint32
	lastResp []byte
	lastID   uint32
	haveLast bool

	children []*child
	// first CHILD SA offered in IKE_AUTH (initiator)
	authChild *child

	created, established, lastRekey, lastIn, lastKeepalive time.Time
	rekeyAt, expire                                        time.Time
	rekeying                                               bool      // our IKE rekey is outstanding
	next                                                   *ikeSA    // the SA that replaced this one
	parent                                                 *ikeSA    // the SA this one replaced
	childRetryAt                                           time.Time // the first CHILD SA failed: try again then
	creatingChild                                          bool
	// dupWait: a duplicate of another IKE SA with the peer (dedupe),
	// which its initiator, the peer, should delete before expire.
	dupWait bool
	err     string
	// peerPFS: the peer has offered a Diffie-Hellman group for a CHILD
	// SA on this IKE SA (or its predecessor); noPFS: it refused our PFS
	// rekey, so ours go without KE, as the IKE_AUTH CHILD SA did.
	peerPFS, noPFS bool
	// pfsGroup: our CHILD proposals list no group (pfs: false) and the
	// peer demands PFS (Libreswan's pfs=yes refuses a rekey without KE):
	// our CREATE_CHILD_SA requests carry a KE in this group. pfsTried:
	// a KE was offered to this peer after it refused none, so a refusal
	// of none is not redone with one again on this IKE SA.
	pfsGroup DHGroup
	pfsTried bool
}

// request is one exchange we start. build makes its payloads when the
// window opens (so nonces and keys are fresh); handle gets the response's
// payloads; failed is called when the retransmissions run out (nil: the
// peer is declared dead).
type request struct {
	exch   ExchangeType
	build  func() []Payload
	handle func(m *Message, pkt []byte, ps []Payload)
	// movable requests (CHILD SA deletes) go over to the successor when
	// the IKE SA is rekeyed before they were sent; abort undoes what
	// queueing the others promised (a rekey marked as running).
	movable bool
	abort   func()
	// liveness marks an empty INFORMATIONAL (DPD): unanswered, it says
	// the peer is down rather than naming the exchange.
	liveness bool
	id       uint32
	pkt      []byte
	sent     int
	next     time.Time
}

func (sa *ikeSA) flags(response bool) Flags {
	f := Flags(0)
	if sa.initiator {
		f |= FlagInitiator
	}
	if response {
		f |= FlagResponse
	}
	return f
}

func (sa *ikeSA) ourSPI() uint64 {
	if sa.initiator {
		return sa.spii
	}
	return sa.spir
}

// queueRequest adds an exchange behind the one in flight.
func (e *Endpoint) queueRequest(sa *ikeSA, r *request) {
	sa.queue = append(sa.queue, r)
	e.pump(sa)
}

// pump sends the next queued request when the window is free.
func (e *Endpoint) pump(sa *ikeSA) {
	for sa.pending == nil && len(sa.queue) > 0 && e.sas[sa.ourSPI()] == sa {
		r := sa.queue[0]
		sa.queue = sa.queue[1:]
		ps := r.build()
		if ps == nil {
			continue // no longer needed (e.g. the CHILD SA went away)
		}
		r.id = sa.nextID
		pkt, err := sa.out.Seal(Header{SPIi: sa.spii, SPIr: sa.spir, Exchange: r.exch, Flags: sa.flags(false), MessageID: r.id}, nil, ps, e.cfg.Rand)
		if err != nil {
			e.logf("ike %s: %s request: %v", sa.peer.cfg.Name, r.exch, err)
			continue
		}
		sa.nextID++
		r.pkt = pkt
		e.transmit(sa, r)
	}
}

func (e *Endpoint) transmit(sa *ikeSA, r *request) {
	sa.pending = r
	r.sent = 1
	r.next = e.now().Add(e.cfg.RetransmitBase)
	e.send(sa, r.pkt)
}

// retransmit resends the request in flight on its backoff schedule; when
// the tries are spent the peer is dead.
func (e *Endpoint) retransmit(sa *ikeSA, now time.Time) {
	r := sa.pending
	if r == nil || now.Before(r.next) {
		return
	}
	if r.sent >= e.cfg.Retries {
		if r.liveness {
			e.dead(sa, fmt.Sprintf("no answer to liveness checks for %d s: peer down?", int(now.Sub(e.lastHeard(sa)).Seconds())))
			return
		}
		// The sends were base, 2 base, 4 base... apart, and the last
		// waited its turn too.
		waited := e.cfg.RetransmitBase * time.Duration(1<<r.sent-1)
		e.dead(sa, fmt.Sprintf("peer not answering: %s unanswered, %d sends over %v", r.exch.String(), r.sent, waited))
		return
	}
	r.next = now.Add(e.cfg.RetransmitBase << r.sent)
	r.sent++
	e.send(sa, r.pkt)
}

func (e *Endpoint) handleResponse(sa *ikeSA, natt bool, pkt []byte, m *Message, from netip.AddrPort) {
	r := sa.pending
	if r == nil || m.MessageID != r.id || m.Exchange != r.exch {
		return // not the answer we wait for: a late duplicate, or forged
	}
	ps := m.Payloads
	if m.Exchange != IKE_SA_INIT {
		var err error
		if ps, err = sa.in.Open(pkt, m); err != nil {
			e.logf("ike %s: dropped a response: %v", sa.peer.cfg.Name, err)
			return
		}
	}
	sa.lastIn = e.now()
	sa.pending = nil
	r.handle(m, pkt, ps)
	e.pump(sa)
}

func (e *Endpoint) handleRequest(sa *ikeSA, natt bool, pkt []byte, m *Message, from netip.AddrPort) {
	if sa.in == nil {
		return
	}
	if sa.haveLast && m.MessageID == sa.lastID {
		// A retransmission: answer with the cached response once the
		// ICV shows it is the peer's; never process it again.
		if _, err := sa.in.Open(pkt, m); authenticated(err) {
			e.sendTo(natt, sa.lastResp, from)
		}
		return
	}
	if m.MessageID != sa.expectID || sa.state == stateClosing {
		return // outside the window
	}
	ps, err := sa.in.Open(pkt, m)
	if !authenticated(err) {
		e.logf("ike %s: dropped a request: %v", sa.peer.cfg.Name, err)
		return
	}
	sa.lastIn = e.now()
	e.follow(sa, natt, from)
	switch m.Exchange {
	case IKE_AUTH:
		if sa.state != stateHalfOpen {
			return
		}
	case CREATE_CHILD_SA, INFORMATIONAL:
		if sa.state != stateEstablished && !sa.state.retiring() {
			return
		}
	default:
		return
	}
	var resp []Payload
	var after func()
	var bad *AuthenticError
	switch {
	case errors.As(err, &bad):
		// The peer's (the ICV verified) but it does not parse: the
		// answer says why (RFC 7296 2.21.2, 3.10.1) rather than
		// leaving the peer to retransmit into silence and call us
		// dead; the window moves on as for any answered request.
		e.logf("ike %s: %s request does not parse: %v", sa.peer.cfg.Name, m.Exchange, bad.Err)
		n := &Notify{Notify: bad.Err.Notify}
		if n.Notify == UNSUPPORTED_CRITICAL_PAYLOAD {
			n.Data = []byte{byte(bad.Err.Payload)} // 3.10.1: the payload's type
		}
		resp = []Payload{n}
		if m.Exchange == IKE_AUTH {
			// No IKE SA comes of an IKE_AUTH we cannot read (2.21.2).
			after = func() { e.closeSA(sa, "the peer's IKE_AUTH does not parse: "+bad.Err.Reason) }
		}
	case m.Exchange == IKE_AUTH:
		resp, after = e.authRequest(sa, natt, ps, from)
	case m.Exchange == CREATE_CHILD_SA:
		resp, after = e.createChildRequest(sa, ps)
	default:
		resp, after = e.informationalRequest(sa, ps)
	}
	out, err := sa.out.Seal(Header{SPIi: sa.spii, SPIr: sa.spir, Exchange: m.Exchange, Flags: sa.flags(true), MessageID: m.MessageID}, nil, resp, e.cfg.Rand)
	if err != nil {
		e.logf("ike %s: %s response: %v", sa.peer.cfg.Name, m.Exchange, err)
		return
	}
	sa.expectID++
	sa.lastResp, sa.lastID, sa.haveLast = out, m.MessageID, true
	// A response goes back the way its request came (RFC 7296 2.11):
	// strongSwan moves to port 4500 for IKE_AUTH with or without a NAT
	// (2.23 allows it), and a NAT's mapping is the request's.
	e.sendTo(natt, out, from)
	if after != nil {
		after()
	}
}

// authenticated reports an SK payload whose ICV verified: opened, or
// opened to payloads that do not parse.
func authenticated(err error) bool {
	var bad *AuthenticError
	return err == nil || errors.As(err, &bad)
}

// follow moves an SA to where an authenticated request came from (RFC
// 7296 2.23, RFC 3948): once the peer floated to the NAT-T port, with or
// without a NAT (strongSwan floats for IKE_AUTH either way), our own
// requests (rekeys, INFORMATIONAL, DPD) go from our 4500 to its 4500
// with the non-ESP marker too, never back to 500; behind a NAT a changed
// mapping moves them to the new one. Without a NAT the peer's address
// must stay the same: only the port floats.
func (e *Endpoint) follow(sa *ikeSA, natt bool, from netip.AddrPort) {
	if !natt || e.cfg.NATT == nil || from == sa.remote {
		return
	}
	nat := sa.natLocal || sa.natRemote
	if !nat && (sa.natt || from.Addr() != sa.remote.Addr()) {
		return
	}
	if !sa.natt {
		e.logf("ike %s: peer moved to UDP %d: our requests follow it", sa.peer.cfg.Name, from.Port())
	} else {
		e.logf("ike %s: the NAT's mapping moved to %v", sa.peer.cfg.Name, from)
	}
	sa.remote = from
	sa.natt = true
}

// Tick runs the timers: retransmissions, DPD, rekeys, keepalives,
// expiry of half-open SAs, initiators (re)starting. The board's Run calls
// it every 100ms; tests call it after moving their fake clock.
func (e *Endpoint) Tick() {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for _, sa := range e.allSAs() {
		if e.sas[sa.ourSPI()] != sa {
			continue
		}
		if !sa.expire.IsZero() && !now.Before(sa.expire) {
			if sa.dupWait {
				// A duplicate the peer kept (see dedupe): we delete it,
				// telling the peer, rather than drop it silently and
				// leave the peer sending on its CHILD SA.
				sa.dupWait, sa.expire = false, time.Time{}
				e.logf("ike %s: the peer kept the duplicate IKE SA %016x_%016x: deleting it", sa.peer.cfg.Name, sa.spii, sa.spir)
				e.deleteSA(sa)
				continue
			}
			e.removeSA(sa, "")
			continue
		}
		e.retransmit(sa, now)
		if e.sas[sa.ourSPI()] != sa || sa.state != stateEstablished {
			continue
		}
		e.timers(sa, now)
	}
	for _, p := range e.peers {
		if p.cfg.Initiate && now.After(p.retryAt) && !e.hasActive(p) {
			e.initiate(p)
		}
	}
}

func (e *Endpoint) allSAs() []*ikeSA {
	out := make([]*ikeSA, 0, len(e.sas))
	for _, sa := range e.sas {
		out = append(out, sa)
	}
	return out
}

// hasActive reports an IKE SA of the peer that is up or on its way. A
// half-open one is not: anyone can make one in the peer's name (a
// spoofed IKE_SA_INIT), and it must not keep us from initiating.
func (e *Endpoint) hasActive(p *peerState) bool {
	for _, sa := range e.sas {
		if sa.peer == p && sa.state <= stateEstablished && sa.state != stateHalfOpen {
			return true
		}
	}
	return false
}

// removeSA forgets an IKE SA and deletes its CHILD SAs from the kernel.
func (e *Endpoint) removeSA(sa *ikeSA, reason string) {
	for _, c := range sa.children {
		e.uninstall(c)
	}
	sa.children = nil
	if e.sas[sa.ourSPI()] == sa {
		delete(e.sas, sa.ourSPI())
	}
	for k, v := range e.half {
		if v == sa {
			delete(e.half, k)
		}
	}
	if reason != "" {
		if sa.peer.cfg.Initiate {
			// Not straight back: a peer that deletes us gets a pause.
			sa.peer.retryAt = e.now().Add(e.cfg.RetryInterval)
		}
		sa.peer.lastErr = reason
		e.logf("ike %s: IKE SA %016x_%016x closed: %s", sa.peer.cfg.Name, sa.spii, sa.spir, reason)
	}
}

// closeSA keeps a failed SA briefly to answer retransmissions of its last
// request from the cache, then removes it.
func (e *Endpoint) closeSA(sa *ikeSA, reason string) {
	for _, c := range sa.children {
		e.uninstall(c)
	}
	sa.children = nil
	sa.state = stateClosing
	sa.pending, sa.queue = nil, nil
	sa.err = reason
	sa.peer.lastErr = reason
	sa.expire = e.now().Add(e.retransmitSpan())
	if sa.peer.cfg.Initiate {
		sa.peer.retryAt = e.now().Add(e.cfg.RetryInterval)
	}
	e.logf("ike %s: IKE SA %016x_%016x failed: %s", sa.peer.cfg.Name, sa.spii, sa.spir, reason)
}

// dead is the end of retransmissions: the SA and its children go.
func (e *Endpoint) dead(sa *ikeSA, reason string) {
	if sa.state.retiring() {
		e.removeSA(sa, "") // its successor carries on, or we meant to delete it
		return
	}
	if sa.peer.cfg.Initiate {
		sa.peer.retryAt = e.now().Add(e.cfg.RetryInterval)
	}
	e.removeSA(sa, reason)
}

// retransmitSpan is how long a request is retried in all.
func (e *Endpoint) retransmitSpan() time.Duration {
	return e.cfg.RetransmitBase << e.cfg.Retries
}
