package ike

import (
	"net/netip"
	"testing"
)

// FuzzEndpoint feeds arbitrary datagrams to a responder that holds an
// established IKE SA with a peer, on both sockets, from the peer's
// address: nothing may panic, and the SA count stays within the caps.
// The seeds are real messages of an exchange (IKE_SA_INIT, IKE_AUTH,
// INFORMATIONAL, a keepalive, ESP-looking data).
func FuzzEndpoint(f *testing.F) {
	p := newPair(f, nil)
	p.a.ep.cfg.Logf, p.b.ep.cfg.Logf = func(string, ...any) {}, func(string, ...any) {}
	p.run(5e9, p.up)
	if !p.up() {
		f.Fatal("no IKE SA to fuzz against")
	}
	p.b.ep.Delete("a") // an INFORMATIONAL to seed with
	p.net.flush()
	for _, pk := range p.net.sent {
		f.Add(pk.data, pk.to.Port() == 4500)
	}
	f.Add([]byte{0xff}, true)
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5}, true)
	// Bring a fresh SA up for the fuzzed packets to land on.
	p.a.ep.Initiate("b")
	p.net.flush()
	from := netip.MustParseAddrPort(aAddr + ":500")
	f.Fuzz(func(t *testing.T, b []byte, natt bool) {
		p.b.ep.HandlePacket(natt, b, from)
		p.b.ep.Tick()
		p.net.queue = nil
		p.net.sent = p.net.sent[:0]
		if n := len(p.b.ep.sas); n > p.b.ep.cfg.MaxSAsPerPeer {
			t.Fatalf("%d IKE SAs, cap %d", n, p.b.ep.cfg.MaxSAsPerPeer)
		}
	})
}

// FuzzEndpointInner gets past the ICV: the fuzzed bytes are the payloads
// inside the Encrypted payload of a request A sends B on their IKE SA,
// sealed with A's keys and numbered in B's window, so B's handlers for
// CREATE_CHILD_SA, INFORMATIONAL and IKE_AUTH see arbitrary (decodable)
// payloads. Nothing may panic; the CHILD SAs B holds stay bounded.
func FuzzEndpointInner(f *testing.F) {
	quiet := func(p *pair) *pair {
		p.a.ep.cfg.Logf, p.b.ep.cfg.Logf = func(string, ...any) {}, func(string, ...any) {}
		return p
	}
	p := quiet(newPair(f, nil))
	p.run(5e9, p.up)
	if !p.up() {
		f.Fatal("no IKE SA to fuzz against")
	}
	// Seeds: the inner payloads of a CHILD SA rekey, a delete, a DPD.
	asa := p.a.ep.current("b")
	c := asa.children[0]
	seed := func(x ExchangeType, ps []Payload) {
		first, b, err := EncodePayloads(ps)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(x), byte(first), b)
	}
	off := offer(asa.peer.cfg.Child, ProtoESP, be32(0x1234), false)
	seed(CREATE_CHILD_SA, []Payload{&Notify{Protocol: ProtoESP, SPI: be32(c.sa.InSPI), Notify: REKEY_SA}, &SA{off},
		&Nonce{Data: make([]byte, 32)}, &TSi{selectors(asa.peer.cfg.LocalTS)}, &TSr{selectors(asa.peer.cfg.RemoteTS)}})
	seed(CREATE_CHILD_SA, []Payload{&SA{offer(asa.peer.cfg.IKE, ProtoIKE, be64(77), false)}, &Nonce{Data: make([]byte, 32)},
		&KE{Group: Curve25519, Data: make([]byte, 32)}})
	seed(INFORMATIONAL, []Payload{&Delete{Protocol: ProtoESP, SPISize: 4, SPIs: [][]byte{be32(c.sa.InSPI)}}})
	seed(INFORMATIONAL, []Payload{&Delete{Protocol: ProtoIKE}})
	seed(IKE_AUTH, []Payload{&Notify{Notify: AUTHENTICATION_FAILED}})
	f.Fuzz(func(t *testing.T, x byte, first byte, inner []byte) {
		asa := p.a.ep.current("b")
		bsa := p.b.ep.current("a")
		if asa == nil || bsa == nil || asa.spii != bsa.spii {
			p = quiet(newPair(t, nil))
			p.run(5e9, p.up)
			if asa, bsa = p.a.ep.current("b"), p.b.ep.current("a"); asa == nil || bsa == nil {
				t.Fatal("no IKE SA")
			}
		}
		ps, err := DecodePayloads(PayloadType(first), inner)
		if err != nil {
			return
		}
		exch := IKE_SA_INIT + ExchangeType(x%4)
		pkt, err := asa.out.Seal(Header{SPIi: asa.spii, SPIr: asa.spir, Exchange: exch, Flags: asa.flags(false), MessageID: bsa.expectID}, nil, ps, p.a.ep.cfg.Rand)
		if err != nil {
			return
		}
		p.b.ep.HandlePacket(bsa.natt, pkt, asa.remote)
		p.net.queue = nil
		p.net.sent = p.net.sent[:0]
		if n := len(p.b.sink.live()); n > p.b.ep.cfg.MaxChildSAs {
			t.Fatalf("B holds %d CHILD SAs, cap %d", n, p.b.ep.cfg.MaxChildSAs)
		}
	})
}
