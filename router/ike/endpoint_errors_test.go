package ike

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// TestEndpointAuthenticatedUnparsable: a request whose ICV verifies but
// whose payloads do not parse is answered (RFC 7296 2.21.2, 3.10.1):
// INVALID_SYNTAX, or UNSUPPORTED_CRITICAL_PAYLOAD naming the payload's
// type; the window moves on, a retransmission gets the same answer, and
// a request with a broken ICV still gets none. Before issue 28 all of
// them went unanswered.
func TestEndpointAuthenticatedUnparsable(t *testing.T) {
	shortNonce := &Raw{T: PayloadNonce, Body: []byte{1, 2, 3}}
	cases := []struct {
		name   string
		exch   ExchangeType
		inner  []Payload
		want   NotifyType
		data   []byte
		forged bool
	}{
		{"short nonce in CREATE_CHILD_SA", CREATE_CHILD_SA, []Payload{shortNonce}, INVALID_SYNTAX, nil, false},
		{"short nonce in INFORMATIONAL", INFORMATIONAL, []Payload{shortNonce}, INVALID_SYNTAX, nil, false},
		{"unknown critical payload", INFORMATIONAL, []Payload{&Raw{T: 200, Critical: true, Body: []byte{9}}}, UNSUPPORTED_CRITICAL_PAYLOAD, []byte{200}, false},
		{"unknown critical payload, broken ICV", INFORMATIONAL, []Payload{&Raw{T: 200, Critical: true, Body: []byte{9}}}, 0, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, nil)
			p.mustComeUp()
			asa, bsa := p.a.ep.current("b"), p.b.ep.current("a")
			id, before := asa.nextID, bsa.expectID
			pkt, err := asa.out.Seal(Header{SPIi: asa.spii, SPIr: asa.spir, Exchange: c.exch, Flags: asa.flags(false), MessageID: id}, nil, c.inner, p.a.ep.cfg.Rand)
			if err != nil {
				t.Fatal(err)
			}
			if c.forged {
				pkt[len(pkt)-1] ^= 1
			}
			from := netip.MustParseAddrPort(aAddr + ":500")
			answers := func() []packet {
				sent := len(p.net.sent)
				p.b.ep.HandlePacket(false, pkt, from)
				return p.net.sent[sent:]
			}
			got := answers()
			if c.forged {
				if len(got) != 0 || bsa.expectID != before {
					t.Fatalf("B answered (%d packets) or moved its window for a request with a broken ICV", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("B sent %d packets for an authenticated request that does not parse, want 1 answer", len(got))
			}
			m, err := Decode(got[0].data)
			if err != nil {
				t.Fatal(err)
			}
			if !m.Response() || m.MessageID != id || m.Exchange != c.exch {
				t.Fatalf("answer %v #%d response=%v, want the response to %v #%d", m.Exchange, m.MessageID, m.Response(), c.exch, id)
			}
			ps, err := asa.in.Open(got[0].data, m)
			if err != nil {
				t.Fatal(err)
			}
			n := notify(ps, c.want)
			if n == nil || len(ps) != 1 || !bytes.Equal(n.Data, c.data) {
				t.Fatalf("answer payloads %v, want only %s with data %v", ps, c.want, c.data)
			}
			if bsa.expectID != before+1 {
				t.Errorf("B's window at %d, want %d", bsa.expectID, before+1)
			}
			again := answers()
			if len(again) != 1 || !bytes.Equal(again[0].data, got[0].data) {
				t.Error("a retransmission did not get the cached answer")
			}
			if bsa.state != stateEstablished {
				t.Errorf("B's IKE SA is %s after an unparsable %s, want established", bsa.state, c.exch)
			}
		})
	}
}

// TestEndpointUnparsableIKEAuth: an IKE_AUTH that verifies but does not
// parse gets INVALID_SYNTAX and makes no IKE SA (RFC 7296 2.21.2).
func TestEndpointUnparsableIKEAuth(t *testing.T) {
	p := newPair(t, nil)
	p.net.filter = func(pk packet) int {
		if h, _ := ikeOf(pk); h.Exchange == IKE_AUTH {
			return 0
		}
		return 1
	}
	p.step(100 * time.Millisecond)
	var asa, bsa *ikeSA
	for _, sa := range p.a.ep.sas {
		asa = sa
	}
	for _, sa := range p.b.ep.sas {
		bsa = sa
	}
	if asa == nil || asa.state != stateAuth || bsa == nil {
		t.Fatal("A did not get to IKE_AUTH")
	}
	pkt, err := asa.out.Seal(Header{SPIi: asa.spii, SPIr: asa.spir, Exchange: IKE_AUTH, Flags: asa.flags(false), MessageID: 1}, nil,
		[]Payload{&IDi{asa.peer.cfg.LocalID}, &Raw{T: PayloadNonce, Body: []byte{1}}}, p.a.ep.cfg.Rand)
	if err != nil {
		t.Fatal(err)
	}
	sent := len(p.net.sent)
	p.b.ep.HandlePacket(false, pkt, netip.MustParseAddrPort(aAddr+":500"))
	got := p.net.sent[sent:]
	if len(got) != 1 {
		t.Fatalf("B sent %d packets, want the INVALID_SYNTAX answer", len(got))
	}
	m, err := Decode(got[0].data)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := asa.in.Open(got[0].data, m)
	if err != nil || notify(ps, INVALID_SYNTAX) == nil {
		t.Fatalf("answer %v (%v), want INVALID_SYNTAX", ps, err)
	}
	if bsa.state != stateClosing {
		t.Errorf("B's SA is %s, want closing", bsa.state)
	}
}

// TestEndpointInvalidMajorVersion: a request of IKE version 3 from a
// peer's address is answered INVALID_MAJOR_VERSION with 2.0 in the
// header (RFC 7296 2.5), at most once a second (the answer is
// unauthenticated, 1.5); a response, an older version or a stranger's
// packet gets nothing.
func TestEndpointInvalidMajorVersion(t *testing.T) {
	p := newPair(t, func(a, b *Config) { a.Peers[0].Initiate = false })
	msg := func(version uint8, flags Flags) []byte {
		b := make([]byte, HeaderLen)
		binary.BigEndian.PutUint64(b, 0x1122334455667788)
		b[17], b[18], b[19] = version, byte(IKE_SA_INIT), byte(flags)
		binary.BigEndian.PutUint32(b[24:], HeaderLen)
		return b
	}
	peer := netip.MustParseAddrPort(aAddr + ":500")
	stranger := netip.MustParseAddrPort("203.0.113.9:500")
	steps := []struct {
		name  string
		pkt   []byte
		from  netip.AddrPort
		after time.Duration
		want  bool
	}{
		{"version 3.0 request", msg(0x30, FlagInitiator), peer, 0, true},
		{"again at once: rate-limited", msg(0x30, FlagInitiator), peer, 100 * time.Millisecond, false},
		{"a second later", msg(0x31, FlagInitiator), peer, time.Second, true},
		{"a response", msg(0x30, FlagResponse), peer, 2 * time.Second, false},
		{"version 1 (IKEv1)", msg(0x10, 0), peer, 2 * time.Second, false},
		{"a stranger", msg(0x30, FlagInitiator), stranger, 2 * time.Second, false},
	}
	for _, s := range steps {
		p.clock.t = p.clock.t.Add(s.after)
		sent := len(p.net.sent)
		p.b.ep.HandlePacket(false, s.pkt, s.from)
		got := p.net.sent[sent:]
		if !s.want {
			if len(got) != 0 {
				t.Errorf("%s: B answered", s.name)
			}
			continue
		}
		if len(got) != 1 {
			t.Fatalf("%s: B sent %d packets, want one INVALID_MAJOR_VERSION", s.name, len(got))
		}
		m, err := Decode(got[0].data)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if m.Version != Version || !m.Response() || m.SPIi != 0x1122334455667788 || m.Exchange != IKE_SA_INIT || got[0].to != s.from ||
			len(m.Payloads) != 1 || notify(m.Payloads, INVALID_MAJOR_VERSION) == nil {
			t.Errorf("%s: answer %+v to %v, want version 2.0 INVALID_MAJOR_VERSION to %v", s.name, m, got[0].to, s.from)
		}
	}
}
