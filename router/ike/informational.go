package ike

import (
	"time"
)

// informationalRequest answers INFORMATIONAL: deletes of CHILD SAs (we
// answer with our halves' SPIs), a delete of the IKE SA, or nothing (a
// liveness check).
func (e *Endpoint) informationalRequest(sa *ikeSA, ps []Payload) ([]Payload, func()) {
	out := []Payload{}
	if notify(ps, AUTHENTICATION_FAILED) != nil {
		// The initiator did not accept our AUTH (RFC 7296 2.21.2).
		return out, func() { e.closeSA(sa, authRejectedPSK+": do both ends have the same psk file?") }
	}
	for _, p := range ps {
		d, ok := p.(*Delete)
		if !ok {
			continue
		}
		switch d.Protocol {
		case ProtoIKE:
			reason := "deleted by the peer"
			switch {
			case sa.state.retiring():
				reason = ""
			case e.otherEstablished(sa):
				// A duplicate the peer deleted (see dedupe): the tunnel
				// is up on the other, no failure and no retry pause.
				e.logf("ike %s: IKE SA %016x_%016x deleted by the peer; another carries on", sa.peer.cfg.Name, sa.spii, sa.spir)
				reason = ""
			case e.revive(sa):
				// The peer chose the SA we were waiting to see it
				// delete: its DELETE crossed the new SA (see dedupe).
				reason = ""
			}
			return []Payload{}, func() {
				e.removeSA(sa, reason)
				for _, o := range e.sasOf(sa.peer) {
					e.childless(o, "the peer deleted the IKE SA that carried the CHILD SA")
				}
			}
		case ProtoESP:
			var ours [][]byte
			for _, spi := range d.SPIs {
				if c := sa.childByOut(spi); c != nil {
					ours = append(ours, be32(c.sa.InSPI))
					e.forgetChild(c)
				}
			}
			if len(ours) > 0 {
				out = append(out, &Delete{Protocol: ProtoESP, SPISize: 4, SPIs: ours})
				e.childless(sa, "the peer deleted the CHILD SA")
			}
		}
	}
	return out, nil
}

// childless makes sure an established IKE SA left without a CHILD SA
// gets one again: the configured tunnel asks for it with CREATE_CHILD_SA
// (RFC 7296 1.3) childRecreate later, unless the peer makes one first;
// an end that does not initiate says why the tunnel carries nothing.
func (e *Endpoint) childless(sa *ikeSA, why string) {
	if sa.state != stateEstablished || len(sa.children) > 0 || sa.creatingChild {
		return
	}
	p := sa.peer
	if p.cfg.Initiate {
		why += ": making a new one"
		sa.childRetryAt = e.now().Add(childRecreate)
	} else {
		why += ": waiting for the peer to make a new one"
	}
	sa.err, p.lastErr = why, why
	e.logf("ike %s: %s", p.cfg.Name, why)
}

// timers runs an established SA's clocks: liveness check, rekeys, NAT
// keepalive.
func (e *Endpoint) timers(sa *ikeSA, now time.Time) {
	p := sa.peer
	if p.cfg.DPD > 0 && sa.pending == nil && len(sa.queue) == 0 && now.Sub(e.lastHeard(sa)) >= p.cfg.DPD {
		e.queueRequest(sa, &request{exch: INFORMATIONAL, liveness: true,
			build:  func() []Payload { return []Payload{} },
			handle: func(*Message, []byte, []Payload) {}})
	}
	if len(sa.children) == 0 && !sa.creatingChild && !sa.childRetryAt.IsZero() && !now.Before(sa.childRetryAt) {
		e.createChild(sa, nil)
	}
	if !sa.rekeying && !now.Before(sa.rekeyAt) {
		e.rekeyIKE(sa)
	}
	for _, c := range sa.children {
		if !c.rekeying && !c.replaced && !now.Before(c.rekeyAt) {
			e.rekeyChild(sa, c)
		}
	}
	if sa.natt && sa.natLocal && e.cfg.NATT != nil && now.Sub(sa.lastKeepalive) >= e.cfg.Keepalive {
		sa.lastKeepalive = now
		e.cfg.NATT.WriteTo([]byte{0xff}, sa.remote)
	}
}

// Delete sends a delete of the peer's IKE SA (and with it its CHILD SAs)
// and forgets it once answered, or when the peer does not answer.
func (e *Endpoint) Delete(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, sa := range e.sas {
		if sa.peer.cfg.Name == name && sa.state == stateEstablished {
			e.deleteSA(sa)
		}
	}
}

func (e *Endpoint) deleteSA(sa *ikeSA) {
	sa.state = stateDeleting // no new exchanges on it
	for _, c := range sa.children {
		e.uninstall(c)
	}
	sa.children = nil
	for _, r := range sa.queue {
		if r.abort != nil {
			r.abort()
		}
	}
	sa.queue = nil
	if e.otherEstablished(sa) {
		// Superseded (a duplicate, or replaced by the peer's new SA): a
		// peer that restarted has forgotten it and never answers, so
		// the delete gets a few sends, not the full retransmission span
		// with its "peer not answering" in the tunnel's status.
		sa.expire = e.now().Add(e.cfg.RetransmitBase << 4)
	}
	e.queueRequest(sa, &request{exch: INFORMATIONAL,
		build:  func() []Payload { return []Payload{&Delete{Protocol: ProtoIKE}} },
		handle: func(*Message, []byte, []Payload) { e.removeSA(sa, "") }})
}

// lastHeard is the latest IKE message or, if the sink knows, ESP packet
// from the peer.
func (e *Endpoint) lastHeard(sa *ikeSA) time.Time {
	last := sa.lastIn
	if ts, ok := e.cfg.Sink.(TrafficSink); ok {
		for _, c := range sa.children {
			if t, ok := ts.LastInbound(c.sa); ok && t.After(last) {
				last = t
			}
		}
	}
	return last
}

// revive brings back the SAs of sa's peer that dedupe set to wait for
// the peer's delete, when the peer deletes sa, the one kept, instead: the
// peer's choice stands, so the tunnel stays up on them.
func (e *Endpoint) revive(sa *ikeSA) bool {
	found := false
	for _, o := range e.sasOf(sa.peer) {
		if o != sa && o.dupWait && o.state == stateDeleting {
			o.state, o.dupWait, o.expire = stateEstablished, false, time.Time{}
			e.logf("ike %s: the peer deleted IKE SA %016x_%016x: %016x_%016x carries on", sa.peer.cfg.Name, sa.spii, sa.spir, o.spii, o.spir)
			found = true
		}
	}
	return found
}

// otherEstablished reports another established IKE SA with sa's peer.
func (e *Endpoint) otherEstablished(sa *ikeSA) bool {
	for _, o := range e.sasOf(sa.peer) {
		if o != sa && o.state == stateEstablished {
			return true
		}
	}
	return false
}
