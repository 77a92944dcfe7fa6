package ike

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// fakeClock is moved by the tests; Endpoint.Tick reads it.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

type packet struct {
	from, to netip.AddrPort
	data     []byte
}

// fakeNet carries datagrams between fakeConns in memory, in order, with
// an optional NAT rewriting the sources of some addresses and a filter
// that may drop or duplicate packets.
type fakeNet struct {
	t      testing.TB
	queue  []packet
	conns  map[netip.AddrPort]*fakeConn
	nat    map[netip.AddrPort]netip.AddrPort // inside -> outside
	filter func(p packet) int                // copies to deliver: 0 drops, 2 duplicates
	sent   []packet                          // every packet as it left its sender (after NAT)
}

type fakeConn struct {
	n    *fakeNet
	addr netip.AddrPort
	ep   *Endpoint
	natt bool
}

func (c *fakeConn) ReadFrom([]byte) (int, netip.AddrPort, error) {
	return 0, netip.AddrPort{}, errors.New("fake conn: read by the test")
}
func (c *fakeConn) WriteTo(b []byte, to netip.AddrPort) error {
	from := c.addr
	if o, ok := c.n.nat[from]; ok {
		from = o
	}
	p := packet{from: from, to: to, data: append([]byte(nil), b...)}
	c.n.sent = append(c.n.sent, p)
	c.n.queue = append(c.n.queue, p)
	return nil
}
func (c *fakeConn) LocalAddr() netip.AddrPort { return c.addr }
func (c *fakeConn) Close() error              { return nil }

func newFakeNet(t testing.TB) *fakeNet {
	return &fakeNet{t: t, conns: map[netip.AddrPort]*fakeConn{}, nat: map[netip.AddrPort]netip.AddrPort{}}
}

func (n *fakeNet) conn(addr string, natt bool) *fakeConn {
	c := &fakeConn{n: n, addr: netip.MustParseAddrPort(addr), natt: natt}
	n.conns[c.addr] = c
	return c
}

// flush delivers until the network is quiet.
func (n *fakeNet) flush() {
	for i := 0; len(n.queue) > 0; i++ {
		if i > 10000 {
			n.t.Fatal("the endpoints keep talking: a message loop")
		}
		p := n.queue[0]
		n.queue = n.queue[1:]
		copies := 1
		if n.filter != nil {
			copies = n.filter(p)
		}
		to := p.to
		for in, out := range n.nat {
			if out == to {
				to = in
			}
		}
		c := n.conns[to]
		if c == nil || c.ep == nil {
			continue
		}
		for range copies {
			c.ep.HandlePacket(c.natt, p.data, p.from)
		}
	}
}

// ikeOf decodes a sent packet's IKE header, skipping the non-ESP marker.
func ikeOf(p packet) (Header, bool) {
	b := p.data
	if p.to.Port() == 4500 || p.from.Port()%1000 == 500 && p.from.Port() > 4000 {
		if len(b) < 4 || !bytes.Equal(b[:4], nonESPMarker) {
			return Header{}, false
		}
		b = b[4:]
	}
	h, err := DecodeHeader(b)
	return h, err == nil
}

type fakeSink struct {
	installed []ChildSA
	deleted   []ChildSA
}

func (s *fakeSink) Install(c ChildSA) error { s.installed = append(s.installed, c); return nil }
func (s *fakeSink) Delete(c ChildSA) error  { s.deleted = append(s.deleted, c); return nil }

// live is what the kernel holds now: installed and not deleted.
func (s *fakeSink) live() []ChildSA {
	var out []ChildSA
	for _, c := range s.installed {
		gone := false
		for _, d := range s.deleted {
			if d.InSPI == c.InSPI {
				gone = true
			}
		}
		if !gone {
			out = append(out, c)
		}
	}
	return out
}

type side struct {
	ep   *Endpoint
	cfg  Config
	sink *fakeSink
	conn *fakeConn
	natt *fakeConn
}

type pair struct {
	t     testing.TB
	net   *fakeNet
	clock *fakeClock
	a, b  *side
	logs  []string
}

var (
	aAddr = "192.0.2.1"
	bAddr = "198.51.100.2"
)

func suiteIKE(encr Transform, integ, prf uint16, groups ...DHGroup) []Proposal {
	ts := []Transform{encr, T(TransformINTEG, integ, 0), T(TransformPRF, prf, 0)}
	for _, g := range groups {
		ts = append(ts, T(TransformDH, uint16(g), 0))
	}
	return []Proposal{{Protocol: ProtoIKE, Transforms: ts}}
}

func suiteESP(encr Transform, integ uint16, groups ...DHGroup) []Proposal {
	ts := []Transform{encr, T(TransformINTEG, integ, 0)}
	for _, g := range groups {
		ts = append(ts, T(TransformDH, uint16(g), 0))
	}
	ts = append(ts, T(TransformESN, ESN_NO, 0), T(TransformESN, ESN_YES, 0))
	return []Proposal{{Protocol: ProtoESP, Transforms: ts}}
}

var aes128T = T(TransformENCR, ENCR_AES_CBC, 128)

func peerCfg(name, local, remote string, lts, rts string) Peer {
	return Peer{Name: name, Local: netip.MustParseAddrPort(local + ":500"), Remote: netip.MustParseAddrPort(remote + ":500"),
		PSK:     []byte("correct horse battery staple, long enough"),
		IKE:     suiteIKE(aes128T, AUTH_HMAC_SHA2_256_128, PRF_HMAC_SHA2_256, Curve25519),
		Child:   suiteESP(aes128T, AUTH_HMAC_SHA2_256_128),
		LocalTS: []netip.Prefix{netip.MustParsePrefix(lts)}, RemoteTS: []netip.Prefix{netip.MustParsePrefix(rts)}}
}

// newPair makes A (initiator) and B (responder) on a fake network; mod
// may change both configurations before the endpoints are made.
func newPair(t testing.TB, mod func(a, b *Config)) *pair {
	n := newFakeNet(t)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	pa := peerCfg("b", aAddr, bAddr, "10.1.0.0/24", "10.2.0.0/24")
	pa.Initiate = true
	pb := peerCfg("a", bAddr, aAddr, "10.2.0.0/24", "10.1.0.0/24")
	ca := Config{Peers: []Peer{pa}, Clock: clock}
	cb := Config{Peers: []Peer{pb}, Clock: clock}
	if mod != nil {
		mod(&ca, &cb)
	}
	p := &pair{t: t, net: n, clock: clock}
	p.a = p.makeSide(ca, aAddr)
	p.b = p.makeSide(cb, bAddr)
	return p
}

func (p *pair) makeSide(cfg Config, addr string) *side {
	fs := &fakeSink{}
	return p.makeSideWith(cfg, addr, fs, fs)
}

// makeSideWith gives the endpoint sink; fs is the recorder inside it.
func (p *pair) makeSideWith(cfg Config, addr string, sink ChildSASink, fs *fakeSink) *side {
	s := &side{cfg: cfg, sink: fs}
	s.conn = p.net.conn(addr+":500", false)
	s.natt = p.net.conn(addr+":4500", true)
	cfg.Conn, cfg.NATT, cfg.Sink = s.conn, s.natt, sink
	cfg.Logf = func(f string, args ...any) {
		line := fmt.Sprintf(addr+" "+f, args...)
		p.logs = append(p.logs, line)
		p.t.Log(line)
	}
	ep, err := New(cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	s.ep = ep
	s.conn.ep, s.natt.ep = ep, ep
	return s
}

// step moves the clock, ticks both ends and delivers.
func (p *pair) step(d time.Duration) {
	p.clock.t = p.clock.t.Add(d)
	p.a.ep.Tick()
	p.b.ep.Tick()
	p.net.flush()
}

// run steps in 100ms until cond holds or limit of fake time passed.
func (p *pair) run(limit time.Duration, cond func() bool) bool {
	p.net.flush()
	for end := p.clock.t.Add(limit); p.clock.t.Before(end); {
		if cond() {
			return true
		}
		p.step(100 * time.Millisecond)
	}
	return cond()
}

func established(s *side) []SAStatus {
	var out []SAStatus
	for _, ps := range s.ep.Status() {
		for _, sa := range ps.SAs {
			if sa.State == "established" {
				out = append(out, sa)
			}
		}
	}
	return out
}

func (p *pair) up() bool {
	a, b := established(p.a), established(p.b)
	return len(a) == 1 && len(b) == 1 && len(a[0].Children) == 1 && len(b[0].Children) == 1
}

// checkChildren: each side has exactly one live CHILD SA in its sink, and
// they are the two halves of one pair: SPIs and keys crosswise.
func (p *pair) checkChildren() (ChildSA, ChildSA) {
	p.t.Helper()
	la, lb := p.a.sink.live(), p.b.sink.live()
	if len(la) != 1 || len(lb) != 1 {
		p.t.Fatalf("live CHILD SAs: A %d, B %d, want 1 each", len(la), len(lb))
	}
	a, b := la[0], lb[0]
	if a.InSPI != b.OutSPI || a.OutSPI != b.InSPI {
		p.t.Fatalf("SPIs do not pair: A in %08x out %08x, B in %08x out %08x", a.InSPI, a.OutSPI, b.InSPI, b.OutSPI)
	}
	if !bytes.Equal(a.OutEncr, b.InEncr) || !bytes.Equal(a.InEncr, b.OutEncr) || !bytes.Equal(a.OutInteg, b.InInteg) || !bytes.Equal(a.InInteg, b.OutInteg) {
		p.t.Fatal("CHILD SA keys do not pair crosswise")
	}
	if bytes.Equal(a.OutEncr, a.InEncr) || len(a.OutEncr) != a.Encr.KeyLen || len(a.OutInteg) != a.Integ.KeyLen {
		p.t.Fatal("CHILD SA keys: both directions equal, or of the wrong length")
	}
	return a, b
}

func (p *pair) mustComeUp() {
	p.t.Helper()
	if !p.run(10*time.Second, p.up) {
		p.t.Fatalf("no IKE SA came up: A %+v, B %+v", p.a.ep.Status(), p.b.ep.Status())
	}
	p.checkChildren()
}

func TestEndpointSuites(t *testing.T) {
	cases := []struct {
		name  string
		encr  Transform
		integ uint16
		prf   uint16
		group DHGroup
	}{
		{"aes128-sha256-x25519", T(TransformENCR, ENCR_AES_CBC, 128), AUTH_HMAC_SHA2_256_128, PRF_HMAC_SHA2_256, Curve25519},
		{"aes192-sha1-ecp256", T(TransformENCR, ENCR_AES_CBC, 192), AUTH_HMAC_SHA1_96, PRF_HMAC_SHA1, ECP256},
		{"aes256-sha256-modp2048", T(TransformENCR, ENCR_AES_CBC, 256), AUTH_HMAC_SHA2_256_128, PRF_HMAC_SHA1, MODP2048},
		{"3des-sha1-x25519", T(TransformENCR, ENCR_3DES, 0), AUTH_HMAC_SHA1_96, PRF_HMAC_SHA2_256, Curve25519},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, func(a, b *Config) {
				for _, cfg := range []*Config{a, b} {
					cfg.Peers[0].IKE = suiteIKE(c.encr, c.integ, c.prf, c.group)
					cfg.Peers[0].Child = suiteESP(c.encr, c.integ)
				}
			})
			p.mustComeUp()
			ca, _ := p.checkChildren()
			want := (&Suite{Encr: ca.Encr, Integ: ca.Integ}).String()
			sa := established(p.a)[0]
			if !strings.HasPrefix(sa.Proposal, want) || !strings.Contains(sa.Proposal, c.group.String()) {
				t.Errorf("A's IKE SA runs %q, want %s with %s", sa.Proposal, want, c.group)
			}
			if k, _ := c.encr.KeyLength(); ca.Encr.ID != c.encr.ID || (k != 0 && ca.Encr.KeyLen*8 != int(k)) || ca.Integ.ID != c.integ {
				t.Errorf("CHILD SA %s, want the configured suite", ca)
			}
			if _, cb := p.checkChildren(); ca.ESN || cb.ESN {
				t.Error("ESN on, but the responder lists ESN_NO first and its order decides")
			}
			if got := established(p.b)[0].PeerID; got != aAddr {
				t.Errorf("B sees peer %q, want %s", got, aAddr)
			}
		})
	}
}

// TestEndpointLogsNoSecrets: across a good negotiation, a rekey and a
// wrong PSK, no log line or status holds the PSK or a key.
func TestEndpointLogsNoSecrets(t *testing.T) {
	p := newPair(t, nil)
	p.mustComeUp()
	p.a.ep.RekeyChild("b")
	p.run(time.Second, func() bool { return false })
	q := newPair(t, func(a, b *Config) { b.Peers[0].PSK = []byte("a different secret, equally long!") })
	q.run(2*time.Second, func() bool { return false })
	var secrets [][]byte
	for _, c := range append(p.a.sink.installed, p.b.sink.installed...) {
		secrets = append(secrets, c.InEncr, c.InInteg, c.OutEncr, c.OutInteg)
	}
	secrets = append(secrets, p.a.cfg.Peers[0].PSK, q.b.cfg.Peers[0].PSK)
	text := strings.Join(append(p.logs, q.logs...), "\n") + fmt.Sprintf("%+v %+v %#v", p.a.ep.Status(), q.b.ep.Status(), p.a.sink.installed)
	for _, s := range secrets {
		if bytes.Contains([]byte(text), s) || strings.Contains(text, hex.EncodeToString(s)) || strings.Contains(text, fmt.Sprint(s)) {
			t.Fatal("a secret appears in the logs or the status")
		}
	}
	if len(p.logs) == 0 || len(q.logs) == 0 {
		t.Fatal("nothing logged: the test checks nothing")
	}
}
