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
