package ike

import (
	"net/netip"
	"testing"
	"time"
)

// TestEndpointChildlessAuth: both ends announce CHILDLESS_IKEV2_SUPPORTED
// in IKE_SA_INIT, and the responder takes an IKE_AUTH without SA, TSi
// and TSr (RFC 6023) as an IKE SA alone, with no error Notify; the CHILD
// SA then comes by CREATE_CHILD_SA. A's IKE_AUTH is rewritten in flight
// into a childless one, as Libreswan's reauthentication and charon's
// childless=force send it. Before issue 28 the answer was INVALID_SYNTAX
// and nothing announced the support.
func TestEndpointChildlessAuth(t *testing.T) {
	p := newPair(t, func(a, b *Config) { a.RetryInterval = 2 * time.Second })
	var auth []byte
	p.net.filter = func(pk packet) int {
		if h, _ := ikeOf(pk); h.Exchange == IKE_AUTH && !h.Response() && auth == nil {
			auth = pk.data
			return 0
		}
		return 1
	}
	p.step(100 * time.Millisecond)
	if auth == nil {
		t.Fatal("A sent no IKE_AUTH")
	}
	for _, pk := range p.net.sent {
		if h, _ := ikeOf(pk); h.Exchange == IKE_SA_INIT {
			m, err := Decode(pk.data)
			if err != nil {
				t.Fatal(err)
			}
			if notify(m.Payloads, CHILDLESS_IKEV2_SUPPORTED) == nil {
				t.Errorf("IKE_SA_INIT (response %v) from %v does not announce CHILDLESS_IKEV2_SUPPORTED", h.Response(), pk.from)
			}
		}
	}
	var asa, bsa *ikeSA
	for _, sa := range p.a.ep.sas {
		asa = sa
	}
	for _, sa := range p.b.ep.sas {
		bsa = sa
	}
	// A's own IKE_AUTH, without the CHILD SA's payloads.
	m, err := Decode(auth)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := bsa.in.Open(auth, m)
	if err != nil {
		t.Fatal(err)
	}
	var childless []Payload
	for _, pl := range ps {
		if !hasChildPayloads([]Payload{pl}) {
			childless = append(childless, pl)
		}
	}
	pkt, err := asa.out.Seal(m.Header, nil, childless, p.a.ep.cfg.Rand)
	if err != nil {
		t.Fatal(err)
	}
	sent := len(p.net.sent)
	p.b.ep.HandlePacket(false, pkt, netip.MustParseAddrPort(aAddr+":500"))
	if len(p.net.sent) != sent+1 {
		t.Fatalf("B sent %d packets for the childless IKE_AUTH, want its answer", len(p.net.sent)-sent)
	}
	ans := p.net.sent[sent]
	am, err := Decode(ans.data)
	if err != nil {
		t.Fatal(err)
	}
	aps, err := asa.in.Open(ans.data, am)
	if err != nil {
		t.Fatal(err)
	}
	if n := errorNotify(aps); n != nil || hasChildPayloads(aps) {
		t.Fatalf("B answered a childless IKE_AUTH with %v, want IDr and AUTH only", aps)
	}
	if bsa.state != stateEstablished || len(bsa.children) != 0 || bsa.err != "" {
		t.Fatalf("B's IKE SA: %s, %d CHILD SAs, error %q; want established, none, no error", bsa.state, len(bsa.children), bsa.err)
	}
	// A takes the answer and asks for its CHILD SA by CREATE_CHILD_SA.
	p.net.flush()
	if !p.run(10*time.Second, p.up) {
		t.Fatalf("no CHILD SA by CREATE_CHILD_SA: A %+v, B %+v", p.a.ep.Status(), p.b.ep.Status())
	}
	p.checkChildren()
	if n := p.net.count(CREATE_CHILD_SA, false, aIP); n != 1 {
		t.Errorf("%d CREATE_CHILD_SA requests from A, want 1", n)
	}
}

// TestEndpointReplayedInit: an IKE_SA_INIT replayed (same initiator
// SPI) while the SA it made is established opens no new slot and gets
// no answer (RFC 7296 2.1, 2.2); before issue 28 it made a new
// half-open SA each time.
func TestEndpointReplayedInit(t *testing.T) {
	p := newPair(t, nil)
	p.mustComeUp()
	var init packet
	for _, pk := range p.net.sent {
		if h, _ := ikeOf(pk); h.Exchange == IKE_SA_INIT && !h.Response() {
			init = pk
		}
	}
	for _, from := range []string{aAddr + ":500", aAddr + ":4500", aAddr + ":1500"} {
		sent, sas := len(p.net.sent), len(p.b.ep.sas)
		p.b.ep.HandlePacket(false, init.data, netip.MustParseAddrPort(from))
		if len(p.b.ep.sas) != sas || len(p.b.ep.half) != 0 || p.b.ep.halfOpen() != 0 {
			t.Errorf("replay from %s: B holds %d SAs (%d half-open), had %d", from, len(p.b.ep.sas), p.b.ep.halfOpen(), sas)
		}
		if len(p.net.sent) != sent {
			t.Errorf("replay from %s: B answered", from)
		}
	}
	p.run(time.Second, func() bool { return false })
	if !p.up() {
		t.Error("the established SA suffered from the replays")
	}
}
