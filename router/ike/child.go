package ike

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// child is a CHILD SA as the endpoint tracks it.
type child struct {
	sa       ChildSA
	offer    []Proposal // what we proposed, while we initiate it
	suite    string
	created  time.Time
	rekeyAt  time.Time
	rekeying bool // our CREATE_CHILD_SA for it is out
	replaced bool // a rekey made its successor; its delete is on the way
	gone     bool // deleted from the kernel
	// lowNonce is the lower nonce of the exchange that made it; peerNew
	// the successor the peer made while our own rekey of it was out (a
	// collision both ends completed, RFC 7296 2.8.1).
	lowNonce []byte
	peerNew  *child
	// rekeyFails counts refused rekeys in a row: the wait before the
	// next try doubles with each (rekeyRetry up to rekeyRetryMax).
	rekeyFails int
}

func lower(a, b []byte) []byte {
	if bytes.Compare(a, b) < 0 {
		return a
	}
	return b
}

// rekeyRetry is the wait before a refused rekey (TEMPORARY_FAILURE, a
// collision we lost, a group we must change) is tried again.
const rekeyRetry = 5 * time.Second

// rekeyRetryMax caps the backoff of refused rekeys.
const rekeyRetryMax = time.Minute

// childRecreate is the wait before an IKE SA left without a CHILD SA (the
// peer deleted it) makes a new one: a peer rekeying or reauthenticating
// makes its own within it.
const childRecreate = 2 * time.Second

// childlessWait is how long a responder to a childless IKE_AUTH waits
// for the peer's CREATE_CHILD_SA before making the CHILD SA itself.
const childlessWait = 5 * time.Second

// offersGroupAny reports a DH transform other than NONE in ps.
func offersGroupAny(ps []Proposal) bool {
	for _, p := range ps {
		for _, t := range p.Transforms {
			if t.Type == TransformDH && t.ID != 0 {
				return true
			}
		}
	}
	return false
}

// listsDH reports a DH transform, NONE too, in ps.
func listsDH(ps []Proposal) bool {
	for _, p := range ps {
		if hasType(p, TransformDH) {
			return true
		}
	}
	return false
}

// withPFS adds the groups we implement to proposals that list none,
// first the peer's KE group when it is one of them.
func withPFS(ps []Proposal, peers DHGroup) []Proposal {
	groups := []DHGroup{Curve25519, ECP256, MODP2048}
	if peers.PublicLen() > 0 {
		groups = append([]DHGroup{peers}, groups...)
	}
	for i := range ps {
		for j, g := range groups {
			if j > 0 && g == peers {
				continue // already first
			}
			ps[i].Transforms = append(ps[i].Transforms, T(TransformDH, uint16(g), 0))
		}
	}
	return ps
}

// childGroup is the group of the KE our next CREATE_CHILD_SA for a
// CHILD SA on sa carries, 0 for none: the first group of the CHILD
// proposals (pfs), none once the peer refused our PFS, or, when they
// list no group (pfs: false), the one a peer that demands PFS took.
func childGroup(sa *ikeSA) DHGroup {
	if sa.noPFS {
		return 0
	}
	if g := firstGroup(sa.peer.cfg.Child); g != 0 {
		return g
	}
	if listsDH(sa.peer.cfg.Child) {
		return 0 // NONE outright: never PFS
	}
	return sa.pfsGroup
}

// childOffer is our ESP offer for a CREATE_CHILD_SA whose KE is in g:
// without DH transforms when g is 0 (the offer IKE_AUTH made); with the
// configured groups under PFS; and when the proposals list no group, the
// peer demanding PFS, with g first and then every group we implement.
func childOffer(p *peerState, spi []byte, g DHGroup) []Proposal {
	if g == 0 {
		return offer(p.cfg.Child, ProtoESP, spi, true)
	}
	if listsDH(p.cfg.Child) {
		return offer(p.cfg.Child, ProtoESP, spi, false)
	}
	return withPFS(offer(p.cfg.Child, ProtoESP, spi, false), g)
}

// pfsFallbacks bounds how often one CREATE_CHILD_SA of ours is redone in
// another group (or without one) after a refusal: none, then the IKE SA's
// group, then the one the peer names.
const pfsFallbacks = 2

// pfsRetry decides whether a CREATE_CHILD_SA of ours for a CHILD SA,
// whose KE was in g (0: none) and that the peer refused with ps, is
// redone at once in another group, and in which (0: without KE). It
// records on sa what the next exchanges start with. why is the reason,
// for the status should the redone exchange fail too.
//
//   - INVALID_KE_PAYLOAD naming a group we propose, or, when our
//     proposals list none, any group we implement: that group.
//   - NO_PROPOSAL_CHOSEN to our PFS (charon's esp_proposals = default):
//     no KE, from now on, as IKE_AUTH made the SA.
//   - NO_PROPOSAL_CHOSEN to no KE while our proposals list no group
//     (pfs: false against Libreswan's pfs=yes): once per IKE SA, a KE in
//     the IKE SA's group, the one pluto takes for PFS when its esp= names
//     none.
func (e *Endpoint) pfsRetry(sa *ikeSA, g DHGroup, ps []Payload) (g2 DHGroup, why string, ok bool) {
	cfg := sa.peer.cfg.Child
	cur := latest(sa)
	if n := notify(ps, INVALID_KE_PAYLOAD); n != nil {
		g2, err := n.Group()
		if err != nil || g2 == g || !(offersGroup(cfg, g2) || !listsDH(cfg) && g2.PublicLen() > 0) {
			return 0, "", false
		}
		if !listsDH(cfg) {
			cur.pfsGroup, cur.noPFS = g2, false
		}
		return g2, fmt.Sprintf("the peer wants a KE in %s (INVALID_KE_PAYLOAD)", g2), true
	}
	if notify(ps, NO_PROPOSAL_CHOSEN) == nil {
		return 0, "", false
	}
	switch {
	case g != 0 && firstGroup(cfg) != 0:
		cur.noPFS = true
		return 0, "the peer refused PFS (NO_PROPOSAL_CHOSEN): redone without it, as at IKE_AUTH", true
	case g != 0:
		// Our KE for a peer that had refused none is refused too: back
		// to none; the backoff takes over.
		cur.pfsGroup = 0
		return 0, "", false
	case !listsDH(cfg) && !cur.pfsTried && cur.suite != nil:
		cur.pfsTried, cur.pfsGroup, cur.noPFS = true, cur.suite.DH, false
		return cur.suite.DH, fmt.Sprintf("the peer refused it without PFS (NO_PROPOSAL_CHOSEN): redone with a KE in the IKE SA's %s", cur.suite.DH), true
	}
	return 0, "", false
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// fillChild completes a CHILD SA from its suite and KEYMAT. weInitiated
// says whose nonce came first: the initiator of the exchange that made it
// sends with the "I" keys (RFC 7296 2.17).
func (e *Endpoint) fillChild(sa *ikeSA, c *child, cs *Suite, k *ChildKeys, weInitiated bool) {
	p := sa.peer
	c.sa.Peer = p.cfg.Name
	c.sa.Encr, c.sa.Integ, c.sa.ESN = cs.Encr, cs.Integ, cs.ESN
	c.sa.OutEncr, c.sa.OutInteg, c.sa.InEncr, c.sa.InInteg = k.EncrI, k.IntegI, k.EncrR, k.IntegR
	if !weInitiated {
		c.sa.OutEncr, c.sa.OutInteg, c.sa.InEncr, c.sa.InInteg = k.EncrR, k.IntegR, k.EncrI, k.IntegI
	}
	c.sa.Local, c.sa.Remote = p.cfg.Local.Addr(), sa.remote.Addr()
	c.sa.LocalTS, c.sa.RemoteTS = p.cfg.LocalTS, p.cfg.RemoteTS
	c.sa.Lifetime = p.cfg.ChildLifetime
	c.sa.Encap = nil
	// ESP goes into UDP only through a NAT (RFC 3948): a peer that
	// floated IKE to 4500 without one still gets plain ESP.
	if sa.natt && (sa.natLocal || sa.natRemote) {
		c.sa.Encap = &Encap{LocalPort: e.localAddr(p, true).Port(), RemotePort: sa.remote.Port()}
	}
	c.suite = cs.String()
	now := e.now()
	c.created = now
	c.rekeyAt = now.Add(p.cfg.ChildLifetime - p.cfg.Margin - e.jitter(p))
	// An exchange that ran on an IKE SA rekeyed meanwhile keeps its keys
	// (they come from that SA's SK_d) but its CHILD SA lives on the successor.
	cur := latest(sa)
	cur.children = append(cur.children, c)
	if e.cfg.Sink != nil {
		if err := e.cfg.Sink.Install(c.sa); err != nil {
			e.logf("ike %s: installing %s: %v", p.cfg.Name, c.sa, err)
		}
	}
	p.lastErr = "" // the tunnel carries traffic: earlier failures are history
	cur.err = ""
	e.logf("ike %s: %s installed", p.cfg.Name, c.sa)
	// A replacement IKE SA that came up without a CHILD SA (a childless
	// reauthentication) is settled against the old one only now.
	e.dedupe(p)
}

func (e *Endpoint) uninstall(c *child) {
	if c.gone {
		return
	}
	c.gone = true
	if e.cfg.Sink != nil {
		if err := e.cfg.Sink.Delete(c.sa); err != nil {
			e.logf("ike %s: deleting %s: %v", c.sa.Peer, c.sa, err)
		}
	}
}

// forgetChild deletes a CHILD SA wherever it is now (an IKE rekey moves
// children to the new IKE SA).
func (e *Endpoint) forgetChild(c *child) {
	for _, sa := range e.sas {
		for i, x := range sa.children {
			if x == c {
				sa.children = append(sa.children[:i:i], sa.children[i+1:]...)
				break
			}
		}
	}
	e.uninstall(c)
}

func (sa *ikeSA) childByOut(spi []byte) *child {
	if len(spi) != 4 {
		return nil
	}
	v := binary.BigEndian.Uint32(spi)
	for _, c := range sa.children {
		if c.sa.OutSPI == v {
			return c
		}
	}
	return nil
}

// finishChild is the initiator's end of a CHILD SA exchange (IKE_AUTH or
// CREATE_CHILD_SA): check the responder's choice and selectors, derive
// and install.
func (e *Endpoint) finishChild(sa *ikeSA, c *child, ps []Payload, dh *DHKey, ni, nr []byte) error {
	p := sa.peer
	if n := errorNotify(ps); n != nil {
		return fmt.Errorf("the peer refused the CHILD SA with %s", n.Notify)
	}
	sap, ok1 := first[*SA](ps)
	tsi, ok2 := first[*TSi](ps)
	tsr, ok3 := first[*TSr](ps)
	if !ok1 || !ok2 || !ok3 {
		return errors.New("CHILD SA answer without SA, TSi or TSr")
	}
	chosen, err := CheckChosen(c.offer, sap.Proposals)
	if err != nil {
		return err
	}
	cs, err := SuiteFrom(chosen)
	if err != nil {
		return err
	}
	if len(chosen.SPI) != 4 {
		return fmt.Errorf("the peer's ESP SPI has %d bytes", len(chosen.SPI))
	}
	if !sameSelectors(tsi.Selectors, selectors(p.cfg.LocalTS)) || !sameSelectors(tsr.Selectors, selectors(p.cfg.RemoteTS)) {
		return fmt.Errorf("the peer narrowed the traffic selectors to %v <-> %v", tsi.Selectors, tsr.Selectors)
	}
	var gir []byte
	if cs.DH != 0 {
		ke, ok := first[*KE](ps)
		if !ok || dh == nil || ke.Group != cs.DH || dh.Group() != cs.DH {
			return errors.New("the peer chose PFS without a matching KE")
		}
		if gir, err = dh.Shared(ke.Data); err != nil {
			return err
		}
	}
	k, err := DeriveChild(sa.suite.PRF, sa.keys.D, cs, gir, ni, nr)
	if err != nil {
		return err
	}
	c.sa.OutSPI = binary.BigEndian.Uint32(chosen.SPI)
	e.fillChild(sa, c, cs, k, true)
	return nil
}

// respondChild is the responder's end: choose, check the selectors, make
// and install the SA. nr, when set, is sent after the SA payload (as in
// CREATE_CHILD_SA). The answer is the payloads to send, or an error
// Notify with the reason.
func (e *Endpoint) respondChild(sa *ikeSA, ps []Payload, nrOut []byte, inAuth bool, ni, nr []byte, replaces *child) ([]Payload, *child, error) {
	p := sa.peer
	refuse := func(n *Notify, format string, args ...any) ([]Payload, *child, error) {
		return []Payload{n}, nil, fmt.Errorf(format, args...)
	}
	sap, ok1 := first[*SA](ps)
	tsi, ok2 := first[*TSi](ps)
	tsr, ok3 := first[*TSr](ps)
	if !ok1 || !ok2 || !ok3 {
		return refuse(&Notify{Notify: INVALID_SYNTAX}, "CHILD SA request without SA, TSi or TSr")
	}
	if err := CheckOffer(sap.Proposals, false); err != nil {
		return refuse(&Notify{Notify: NO_PROPOSAL_CHOSEN}, "CHILD SA offer: %v", err)
	}
	theirs := sap.Proposals
	if inAuth {
		// IKE_AUTH carries no KE: a DH transform offered there is ignored
		// (RFC 7296 1.2), as strongSwan does.
		theirs = withoutDH(theirs)
	}
	if offersGroupAny(sap.Proposals) {
		sa.peerPFS = true
	}
	chosen, err := Choose(offer(p.cfg.Child, ProtoESP, nil, inAuth), theirs)
	if _, hasKE := first[*KE](ps); err != nil && !inAuth && !hasKE && !offersGroupAny(theirs) && !sa.peerPFS {
		// A rekey without KE from a peer that never offered a group
		// (charon's esp_proposals = default): PFS is ours to ask for
		// in our rekeys, not to force on the peer's, as strongSwan and
		// Libreswan accept it too. A peer that did offer one does not
		// get to drop it.
		if chosen, err = Choose(offer(p.cfg.Child, ProtoESP, nil, true), withoutDH(theirs)); err == nil {
			e.logf("ike %s: CHILD SA without PFS: the peer offers no Diffie-Hellman group", p.cfg.Name)
		}
	}
	if ke, hasKE := first[*KE](ps); err != nil && !inAuth && hasKE && !listsDH(p.cfg.Child) {
		// Our tunnel asks for no PFS and the peer's rekey brings it
		// (Libreswan's default pfs=yes): taken in a group we implement,
		// the peer's own first, rather than refused, which would leave
		// the CHILD SA to its hard lifetime. Only a list that says
		// NONE outright refuses it.
		if chosen, err = Choose(withPFS(offer(p.cfg.Child, ProtoESP, nil, false), ke.Group), theirs); err == nil {
			e.logf("ike %s: CHILD SA with the peer's PFS: ours asks for none", p.cfg.Name)
			if cs, err := SuiteFrom(chosen); err == nil && cs.DH != 0 {
				// Our own rekeys carry a KE in it from now on: such
				// a peer refuses them without one.
				latest(sa).pfsGroup = cs.DH
			}
		}
	}
	if err != nil {
		return refuse(&Notify{Notify: NO_PROPOSAL_CHOSEN}, "the peer's ESP proposals match none of ours (NO_PROPOSAL_CHOSEN)")
	}
	cs, err := SuiteFrom(chosen)
	if err != nil {
		return refuse(&Notify{Notify: NO_PROPOSAL_CHOSEN}, "ESP proposal: %v", err)
	}
	if !sameSelectors(tsi.Selectors, selectors(p.cfg.RemoteTS)) || !sameSelectors(tsr.Selectors, selectors(p.cfg.LocalTS)) {
		return refuse(&Notify{Notify: TS_UNACCEPTABLE}, "the peer proposed traffic selectors %v <-> %v, not the configured subnets (TS_UNACCEPTABLE)", tsi.Selectors, tsr.Selectors)
	}
	var gir []byte
	var ke *KE
	if cs.DH != 0 {
		pke, ok := first[*KE](ps)
		if !ok || pke.Group != cs.DH {
			return refuse(InvalidKE(cs.DH), "the peer's PFS group is not %s", cs.DH)
		}
		dh, err := GenerateDH(cs.DH, e.cfg.Rand)
		if err == nil {
			gir, err = dh.Shared(pke.Data)
		}
		if err != nil {
			return refuse(&Notify{Notify: INVALID_SYNTAX}, "PFS: %v", err)
		}
		ke = &KE{Group: cs.DH, Data: dh.Public()}
	}
	k, err := DeriveChild(sa.suite.PRF, sa.keys.D, cs, gir, ni, nr)
	if err != nil {
		return refuse(&Notify{Notify: NO_PROPOSAL_CHOSEN}, "CHILD SA keys: %v", err)
	}
	c := &child{}
	c.sa.InSPI = e.newChildSPI()
	c.sa.OutSPI = binary.BigEndian.Uint32(chosen.SPI)
	if replaces != nil {
		c.sa.ReplacesOut = replaces.sa.OutSPI
	}
	chosen.SPI = be32(c.sa.InSPI)
	e.fillChild(sa, c, cs, k, false)
	out := []Payload{&SA{[]Proposal{chosen}}}
	if nrOut != nil {
		out = append(out, &Nonce{Data: nrOut})
	}
	if ke != nil {
		out = append(out, ke)
	}
	return append(out, &TSi{tsi.Selectors}, &TSr{tsr.Selectors}), c, nil
}

// createChildRequest answers CREATE_CHILD_SA: a CHILD SA rekey (REKEY_SA),
// a new CHILD SA, or an IKE SA rekey.
//
// Collisions (RFC 7296 2.25) are settled without waiting: when both ends
// rekey the same SA at once, the original initiator of the IKE SA
// answers TEMPORARY_FAILURE to the peer's request and completes its own;
// the original responder accepts the peer's request, and its own then
// fails harmlessly. Either way exactly one rekey happens and no side
// waits for the other.
func (e *Endpoint) createChildRequest(sa *ikeSA, ps []Payload) ([]Payload, func()) {
	temp := []Payload{&Notify{Notify: TEMPORARY_FAILURE}}
	sap, ok1 := first[*SA](ps)
	ni, ok2 := first[*Nonce](ps)
	if !ok1 || !ok2 || len(sap.Proposals) == 0 {
		return []Payload{&Notify{Notify: INVALID_SYNTAX}}, nil
	}
	if sa.state != stateEstablished {
		return temp, nil
	}
	if sap.Proposals[0].Protocol == ProtoIKE {
		return e.rekeyIKERequest(sa, sap, ni.Data, ps)
	}
	var old *child
	if n := notify(ps, REKEY_SA); n != nil {
		if n.Protocol != ProtoESP || len(n.SPI) != 4 {
			return []Payload{&Notify{Notify: INVALID_SYNTAX}}, nil
		}
		if old = sa.childByOut(n.SPI); old == nil {
			return []Payload{&Notify{Protocol: ProtoESP, SPI: n.SPI, Notify: CHILD_SA_NOT_FOUND}}, nil
		}
		if old.replaced || (old.rekeying && sa.initiator && !e.rfcCollisions) {
			return temp, nil
		}
		if e.refuseChildRekeys {
			return []Payload{&Notify{Notify: NO_PROPOSAL_CHOSEN}}, nil
		}
	}
	if _, hasKE := first[*KE](ps); e.demandPFS != nil && !hasKE {
		return []Payload{e.demandPFS}, nil
	}
	if len(sa.children) >= e.cfg.MaxChildSAs {
		// Bounded per IKE SA: a peer cannot make the kernel hold SAs
		// without end (a rekey makes two or three for a moment).
		return []Payload{&Notify{Notify: NO_ADDITIONAL_SAS}}, nil
	}
	nr := e.random(32)
	out, nc, err := e.respondChild(sa, ps, nr, false, ni.Data, nr, old)
	if err != nil {
		e.logf("ike %s: CREATE_CHILD_SA refused: %v", sa.peer.cfg.Name, err)
		return out, nil
	}
	nc.lowNonce = lower(ni.Data, nr)
	if old != nil {
		if old.rekeying {
			old.peerNew = nc
		}
		old.replaced = true // the peer deletes it next
		sa.lastRekey = e.now()
	}
	return out, nil
}

func (e *Endpoint) rekeyIKERequest(sa *ikeSA, sap *SA, ni []byte, ps []Payload) ([]Payload, func()) {
	p := sa.peer
	if sa.rekeying && sa.initiator && !e.rfcCollisions {
		return []Payload{&Notify{Notify: TEMPORARY_FAILURE}}, nil
	}
	if CheckOffer(sap.Proposals, true) != nil {
		return []Payload{&Notify{Notify: INVALID_SYNTAX}}, nil
	}
	chosen, err := Choose(offer(p.cfg.IKE, ProtoIKE, nil, false), sap.Proposals)
	if err != nil {
		return []Payload{&Notify{Notify: NO_PROPOSAL_CHOSEN}}, nil
	}
	suite, err := SuiteFrom(chosen)
	if err != nil {
		return []Payload{&Notify{Notify: NO_PROPOSAL_CHOSEN}}, nil
	}
	ke, ok := first[*KE](ps)
	if !ok || ke.Group != suite.DH {
		return []Payload{InvalidKE(suite.DH)}, nil
	}
	dh, err := GenerateDH(suite.DH, e.cfg.Rand)
	if err != nil {
		return []Payload{&Notify{Notify: TEMPORARY_FAILURE}}, nil
	}
	gir, err := dh.Shared(ke.Data)
	if err != nil {
		return []Payload{&Notify{Notify: INVALID_SYNTAX}}, nil
	}
	nr := e.random(32)
	ns := e.successor(sa, suite, false, binary.BigEndian.Uint64(chosen.SPI), e.newSPI(), ni, nr)
	if err := e.keySuccessor(sa, ns, gir); err != nil {
		return []Payload{&Notify{Notify: TEMPORARY_FAILURE}}, nil
	}
	chosen.SPI = be64(ns.spir)
	return []Payload{&SA{[]Proposal{chosen}}, &Nonce{Data: nr}, &KE{Group: suite.DH, Data: dh.Public()}},
		func() { e.adopt(sa, ns) }
}

// successor makes the IKE SA that replaces sa; whoever started the rekey
// is the new SA's initiator (RFC 7296 2.18).
func (e *Endpoint) successor(sa *ikeSA, suite *Suite, initiator bool, spii, spir uint64, ni, nr []byte) *ikeSA {
	return &ikeSA{peer: sa.peer, parent: sa, initiator: initiator, spii: spii, spir: spir, remote: sa.remote,
		natt: sa.natt, natLocal: sa.natLocal, natRemote: sa.natRemote, suite: suite, peerPFS: sa.peerPFS, noPFS: sa.noPFS,
		pfsGroup: sa.pfsGroup, pfsTried: sa.pfsTried,
		ni: append([]byte(nil), ni...), nr: append([]byte(nil), nr...), created: e.now()}
}

func (e *Endpoint) keySuccessor(old, ns *ikeSA, gir []byte) error {
	var err error
	seed := RekeySKEYSEED(old.suite.PRF, old.keys.D, gir, ns.ni, ns.nr)
	if ns.keys, err = ns.suite.DeriveIKE(seed, ns.ni, ns.nr, ns.spii, ns.spir); err != nil {
		return err
	}
	ns.out, ns.in, err = ns.suite.Directions(ns.keys, ns.initiator)
	return err
}

// adopt puts the new IKE SA in place of the old: the CHILD SAs move over,
// the old one waits for (or sends) its delete.
func (e *Endpoint) adopt(old, ns *ikeSA) {
	e.sas[ns.ourSPI()] = ns
	ns.children, old.children = old.children, nil
	old.state = stateRekeyed // before: the new SA is no duplicate of it
	e.established(ns, old.peerID)
	old.next = ns
	for _, r := range old.queue {
		if r.movable {
			ns.queue = append(ns.queue, r)
		} else if r.abort != nil {
			r.abort()
		}
	}
	old.queue = nil
	old.rekeying = false
	old.expire = e.now().Add(e.retransmitSpan())
	e.logf("ike %s: IKE SA rekeyed: %016x_%016x replaces %016x_%016x", ns.peer.cfg.Name, ns.spii, ns.spir, old.spii, old.spir)
	e.pump(ns)
}

// latest follows rekeys to the IKE SA that is current now.
func latest(sa *ikeSA) *ikeSA {
	for sa.next != nil {
		sa = sa.next
	}
	return sa
}

// RekeyIKE rekeys the peer's IKE SA now (normally its lifetime does).
func (e *Endpoint) RekeyIKE(name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	sa := e.current(name)
	if sa == nil {
		return fmt.Errorf("ike: no established IKE SA with %q", name)
	}
	e.rekeyIKE(sa)
	return nil
}

// RekeyChild rekeys the peer's CHILD SAs now.
func (e *Endpoint) RekeyChild(name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	sa := e.current(name)
	if sa == nil {
		return fmt.Errorf("ike: no established IKE SA with %q", name)
	}
	for _, c := range sa.children {
		if !c.replaced && !c.rekeying {
			e.rekeyChild(sa, c)
		}
	}
	return nil
}

func (e *Endpoint) current(name string) *ikeSA {
	for _, sa := range e.sas {
		if sa.peer.cfg.Name == name && sa.state == stateEstablished {
			return sa
		}
	}
	return nil
}

func (e *Endpoint) rekeyIKE(sa *ikeSA) { e.rekeyIKEGroup(sa, sa.suite.DH) }

// rekeyIKEGroup rekeys with a KE in group g: the current one first, then
// the one the peer asks for with INVALID_KE_PAYLOAD, if we propose it.
func (e *Endpoint) rekeyIKEGroup(sa *ikeSA, g DHGroup) {
	p := sa.peer
	sa.rekeying = true
	var dh *DHKey
	var ni []byte
	var spi uint64
	var off []Proposal
	e.queueRequest(sa, &request{exch: CREATE_CHILD_SA, abort: func() { sa.rekeying = false }, build: func() []Payload {
		if sa.state != stateEstablished {
			sa.rekeying = false
			return nil
		}
		var err error
		if dh, err = GenerateDH(g, e.cfg.Rand); err != nil {
			sa.rekeying = false
			return nil
		}
		spi, ni = e.newSPI(), e.random(32)
		off = offer(p.cfg.IKE, ProtoIKE, be64(spi), false)
		return []Payload{&SA{off}, &Nonce{Data: ni}, &KE{Group: dh.Group(), Data: dh.Public()}}
	}, handle: func(_ *Message, _ []byte, ps []Payload) {
		sa.rekeying = false
		retry := func(why string) {
			e.logf("ike %s: IKE SA rekey: %s", p.cfg.Name, why)
			if sa.state == stateEstablished {
				sa.rekeyAt = e.now().Add(rekeyRetry)
			}
		}
		if n := notify(ps, INVALID_KE_PAYLOAD); n != nil {
			if g2, err := n.Group(); err == nil && g2 != g && offersGroup(p.cfg.IKE, g2) && sa.state == stateEstablished {
				e.logf("ike %s: IKE SA rekey: the peer wants %s", p.cfg.Name, g2)
				e.rekeyIKEGroup(sa, g2)
				return
			}
		}
		if n := errorNotify(ps); n != nil {
			retry("the peer answered " + n.Notify.String())
			return
		}
		sap, ok1 := first[*SA](ps)
		nr, ok2 := first[*Nonce](ps)
		ke, ok3 := first[*KE](ps)
		if !ok1 || !ok2 || !ok3 {
			retry("answer without SA, Nonce or KE")
			return
		}
		chosen, err := CheckChosen(off, sap.Proposals)
		if err != nil || len(chosen.SPI) != 8 {
			retry(fmt.Sprintf("bad choice: %v", err))
			return
		}
		suite, err := SuiteFrom(chosen)
		if err != nil || suite.DH != dh.Group() || ke.Group != suite.DH {
			retry("the peer chose another Diffie-Hellman group")
			return
		}
		gir, err := dh.Shared(ke.Data)
		if err != nil {
			retry(err.Error())
			return
		}
		ns := e.successor(sa, suite, true, spi, binary.BigEndian.Uint64(chosen.SPI), ni, nr.Data)
		if err := e.keySuccessor(sa, ns, gir); err != nil {
			retry(err.Error())
			return
		}
		e.adopt(sa, ns)
		e.queueRequest(sa, &request{exch: INFORMATIONAL,
			build:  func() []Payload { return []Payload{&Delete{Protocol: ProtoIKE}} },
			handle: func(*Message, []byte, []Payload) { e.removeSA(sa, "") }})
	}})
}

func (e *Endpoint) rekeyChild(sa *ikeSA, c *child) {
	e.rekeyChildGroup(sa, c, childGroup(sa), 0, "")
}

// rekeyChildGroup rekeys a CHILD SA, with PFS in group g unless g is 0.
// tries counts the exchanges of this rekey redone in another group
// (pfsRetry), before the reason of the last one.
func (e *Endpoint) rekeyChildGroup(sa *ikeSA, c *child, g DHGroup, tries int, before string) {
	p := sa.peer
	c.rekeying = true
	nc := &child{}
	var dh *DHKey
	var ni []byte
	e.queueRequest(sa, &request{exch: CREATE_CHILD_SA, abort: func() { c.rekeying = false }, build: func() []Payload {
		if c.replaced || c.gone || sa.state != stateEstablished {
			c.rekeying = false
			return nil
		}
		nc.sa.InSPI = e.newChildSPI()
		// Without a KE the offer is the IKE_AUTH one: no DH transforms.
		nc.offer = childOffer(p, be32(nc.sa.InSPI), g)
		ni = e.random(32)
		ps := []Payload{&Notify{Protocol: ProtoESP, SPI: be32(c.sa.InSPI), Notify: REKEY_SA}, &SA{nc.offer}, &Nonce{Data: ni}}
		if g != 0 {
			var err error
			if dh, err = GenerateDH(g, e.cfg.Rand); err != nil {
				c.rekeying = false
				return nil
			}
			ps = append(ps, &KE{Group: g, Data: dh.Public()})
		}
		return append(ps, &TSi{selectors(p.cfg.LocalTS)}, &TSr{selectors(p.cfg.RemoteTS)})
	}, handle: func(_ *Message, _ []byte, ps []Payload) {
		c.rekeying = false
		if tries < pfsFallbacks && !c.replaced && !c.gone && latest(sa).state == stateEstablished {
			if g2, why, ok := e.pfsRetry(sa, g, ps); ok {
				e.logf("ike %s: CHILD SA rekey: %s", p.cfg.Name, why)
				e.rekeyChildGroup(latest(sa), c, g2, tries+1, why)
				return
			}
		}
		var err error
		if nr, ok := first[*Nonce](ps); ok {
			err = e.finishChild(sa, nc, ps, dh, ni, nr.Data)
		} else if n := errorNotify(ps); n != nil {
			err = fmt.Errorf("the peer answered %s", n.Notify)
		} else {
			err = errors.New("answer without a nonce")
		}
		if err != nil {
			if before != "" {
				err = fmt.Errorf("%w (before: %s)", err, before)
			}
			e.rekeyFailed(latest(sa), c, err, notify(ps, CHILD_SA_NOT_FOUND) != nil)
			return
		}
		c.rekeyFails = 0
		c.replaced = true
		nrp, _ := first[*Nonce](ps)
		nc.lowNonce = lower(ni, nrp.Data)
		latest(sa).lastRekey = e.now()
		e.deleteChild(latest(sa), c)
		if c.peerNew != nil && bytes.Compare(nc.lowNonce, c.peerNew.lowNonce) < 0 {
			// Both rekeys completed; ours holds the lowest nonce, so it is
			// the redundant one and ours to delete (RFC 7296 2.8.1).
			e.logf("ike %s: CHILD SA rekey collision: deleting our redundant %08x", p.cfg.Name, nc.sa.InSPI)
			e.deleteChild(latest(sa), nc)
		}
	}})
}

// rekeyFailed schedules the next try of a refused CHILD SA rekey, with a
// backoff, and says why in the status. A rekey that cannot come before
// the SA's lifetime ends (or that the peer no longer knows the SA for)
// gives way to a fresh CHILD SA, which the old one's delete follows: the
// kernel's hard lifetime must never end the tunnel.
func (e *Endpoint) rekeyFailed(sa *ikeSA, c *child, err error, notFound bool) {
	p := sa.peer
	if c.replaced || c.gone {
		e.logf("ike %s: CHILD SA rekey: %v", p.cfg.Name, err)
		return
	}
	c.rekeyFails++
	wait := min(rekeyRetry<<min(c.rekeyFails-1, 8), rekeyRetryMax)
	now := e.now()
	why := fmt.Sprintf("CHILD SA rekey failed %d time(s): %v", c.rekeyFails, err)
	if notFound || now.Add(wait).After(c.created.Add(p.cfg.ChildLifetime)) {
		why += "; making a new CHILD SA in its place"
		e.createChild(sa, c)
	} else {
		c.rekeyAt = now.Add(wait)
		why += fmt.Sprintf("; trying again in %v", wait)
	}
	sa.err, p.lastErr = why, why
	e.logf("ike %s: %s", p.cfg.Name, why)
}

// createChild makes a CHILD SA with CREATE_CHILD_SA: again the one the
// IKE_AUTH exchange did not make (the peer's selectors or proposals were
// fixed meanwhile, say), one the peer deleted, or, with old set, a fresh
// one in place of old, whose rekey failed.
func (e *Endpoint) createChild(sa *ikeSA, old *child) {
	e.createChildGroup(sa, old, groupWhenSent, 0, "")
}

// groupWhenSent, as createChildGroup's group, is childGroup's when the
// request goes out (an IKE SA rekey may come first).
const groupWhenSent = DHGroup(0xffff)

// createChildGroup is createChild with the KE in group g (0: none), tries
// and before as for rekeyChildGroup.
func (e *Endpoint) createChildGroup(sa *ikeSA, old *child, g DHGroup, tries int, before string) {
	p := sa.peer
	sa.creatingChild = true
	if old != nil {
		old.rekeying = true
	}
	done := func() {
		sa.creatingChild = false
		if old != nil {
			old.rekeying = false
		}
	}
	nc := &child{}
	var dh *DHKey
	var ni []byte
	e.queueRequest(sa, &request{exch: CREATE_CHILD_SA, abort: done, build: func() []Payload {
		if sa.state != stateEstablished || (old == nil && len(sa.children) > 0) || (old != nil && (old.replaced || old.gone)) {
			done()
			return nil
		}
		if g == groupWhenSent {
			g = childGroup(sa)
		}
		nc.sa.InSPI = e.newChildSPI()
		nc.offer = childOffer(p, be32(nc.sa.InSPI), g)
		ni = e.random(32)
		ps := []Payload{&SA{nc.offer}, &Nonce{Data: ni}}
		if g != 0 {
			var err error
			if dh, err = GenerateDH(g, e.cfg.Rand); err != nil {
				done()
				return nil
			}
			ps = append(ps, &KE{Group: g, Data: dh.Public()})
		}
		return append(ps, &TSi{selectors(p.cfg.LocalTS)}, &TSr{selectors(p.cfg.RemoteTS)})
	}, handle: func(_ *Message, _ []byte, ps []Payload) {
		done()
		if tries < pfsFallbacks && latest(sa).state == stateEstablished && (old == nil || !old.replaced && !old.gone) {
			if g2, why, ok := e.pfsRetry(sa, g, ps); ok {
				e.logf("ike %s: CHILD SA: %s", p.cfg.Name, why)
				e.createChildGroup(latest(sa), old, g2, tries+1, why)
				return
			}
		}
		var err error
		if nr, ok := first[*Nonce](ps); ok {
			err = e.finishChild(sa, nc, ps, dh, ni, nr.Data)
		} else if n := errorNotify(ps); n != nil {
			err = fmt.Errorf("the peer refused the CHILD SA with %s", n.Notify)
		} else {
			err = errors.New("answer without a nonce")
		}
		if err != nil {
			if before != "" {
				err = fmt.Errorf("%w (before: %s)", err, before)
			}
			sa.err, p.lastErr = err.Error(), err.Error()
			if old != nil {
				if !old.replaced && !old.gone {
					old.rekeyAt = e.now().Add(rekeyRetry)
				}
			} else {
				latest(sa).childRetryAt = e.now().Add(e.cfg.RetryInterval)
			}
			e.logf("ike %s: CHILD SA: %v", p.cfg.Name, err)
			return
		}
		sa.err, p.lastErr = "", ""
		sa.childRetryAt = time.Time{}
		if old != nil && !old.replaced && !old.gone {
			old.replaced = true
			e.deleteChild(latest(sa), old)
		}
	}})
}

// deleteChild sends the delete of a CHILD SA (our inbound SPI) and
// forgets it when answered.
func (e *Endpoint) deleteChild(sa *ikeSA, c *child) {
	e.queueRequest(sa, &request{exch: INFORMATIONAL, movable: true,
		build: func() []Payload {
			return []Payload{&Delete{Protocol: ProtoESP, SPISize: 4, SPIs: [][]byte{be32(c.sa.InSPI)}}}
		},
		handle: func(*Message, []byte, []Payload) { e.forgetChild(c) }})
}

// withoutDH copies proposals without their DH transforms, keeping numbers
// and SPIs.
func withoutDH(ps []Proposal) []Proposal {
	out := make([]Proposal, len(ps))
	for i, p := range ps {
		q := Proposal{Num: p.Num, Protocol: p.Protocol, SPI: p.SPI}
		for _, t := range p.Transforms {
			if t.Type != TransformDH {
				q.Transforms = append(q.Transforms, t)
			}
		}
		out[i] = q
	}
	return out
}
