package ike

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"
)

// Conn is the datagram socket an Endpoint speaks through: a UDP socket on
// the board, an in-memory network in tests.
type Conn interface {
	ReadFrom(b []byte) (int, netip.AddrPort, error)
	WriteTo(b []byte, to netip.AddrPort) error
	LocalAddr() netip.AddrPort
	Close() error
}

// Clock tells the time; tests pass a fake one and call Endpoint.Tick.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// ChildSASink puts CHILD SAs into the kernel (router/ipsec on the board, a
// recorder in tests). Install is called once both directions' keys are
// known; Delete when the SA is replaced, deleted by either side, or its
// IKE SA dies.
type ChildSASink interface {
	Install(ChildSA) error
	Delete(ChildSA) error
}

// TrafficSink is a ChildSASink that can also tell when the kernel last
// received ESP on a CHILD SA: the liveness check is then needed only when
// nothing at all came from the peer (RFC 7296 2.4). ok false: unknown.
type TrafficSink interface {
	LastInbound(ChildSA) (t time.Time, ok bool)
}

// Encap is UDP encapsulation of ESP (RFC 3948): the ports ESP-in-UDP
// travels between, set when a NAT was detected.
type Encap struct {
	LocalPort, RemotePort uint16
}

// ChildSA is one negotiated ESP SA pair in tunnel mode. In is what the peer
// sends to us (our SPI), Out what we send. Printing it shows no key.
type ChildSA struct {
	Peer              string
	InSPI, OutSPI     uint32
	Encr              Encr
	Integ             Integ
	ESN               bool
	InEncr, InInteg   []byte
	OutEncr, OutInteg []byte
	// Local and Remote are the tunnel's outer addresses; with Encap the
	// remote port is the NAT's.
	Local, Remote     netip.Addr
	LocalTS, RemoteTS []netip.Prefix
	Encap             *Encap
	// Lifetime is the configured CHILD SA lifetime: the endpoint rekeys
	// before it ends; the sink may set it as the kernel SA's hard limit.
	Lifetime time.Duration
	// ReplacesOut, set on a CHILD SA the peer's rekey made (we answered
	// it), is the outbound SPI of the SA it replaces. The peer installs
	// its new inbound SA only once it has our answer, and deletes the old
	// SA after: a sink should take the new inbound SA at once but go on
	// sending on the old one until that delete (its Delete), as
	// strongSwan does, or the packets sent between are lost.
	ReplacesOut uint32
}

func (c ChildSA) String() string {
	enc := ""
	if c.Encap != nil {
		enc = fmt.Sprintf(" udp-encap %d->%d", c.Encap.LocalPort, c.Encap.RemotePort)
	}
	return fmt.Sprintf("CHILD SA %s in %08x out %08x %s/%s esn=%v %v<->%v%s", c.Peer, c.InSPI, c.OutSPI, c.Encr, c.Integ, c.ESN, c.LocalTS, c.RemoteTS, enc)
}

// Format keeps every verb from printing the keys.
func (c ChildSA) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// Peer is the configuration of one tunnel's IKE peer.
type Peer struct {
	Name string
	// Local is our address (its port is ignored: the Endpoint's sockets
	// decide); Remote the peer's IKE address, port 500 when zero.
	Local, Remote netip.AddrPort
	// RemoteNATTPort is where the peer listens for NAT-T (4500 when zero).
	RemoteNATTPort uint16
	// LocalID and RemoteID default to Local's and Remote's addresses
	// (AddrIdentity).
	LocalID, RemoteID Identity
	PSK               []byte
	// IKE and Child are the proposals in order of preference. A DH
	// transform in Child turns on PFS for CHILD SA rekeys (the first CHILD
	// SA, made in IKE_AUTH, never has its own exchange of keys).
	IKE, Child []Proposal
	// LocalTS and RemoteTS are the tunnel's subnets; a peer must propose
	// exactly these (no narrowing beyond that).
	LocalTS, RemoteTS []netip.Prefix
	// Lifetimes: rekeying starts Margin (plus up to Jitter) before the end.
	IKELifetime, ChildLifetime time.Duration
	Margin, Jitter             time.Duration
	// DPD is the liveness check interval: an empty INFORMATIONAL after
	// this long without inbound traffic. Zero turns it off.
	DPD time.Duration
	// Initiate makes the Endpoint start the IKE SA (and restart it after
	// a failure or a dead peer, RetryInterval later).
	Initiate bool
}

// Config is an Endpoint's configuration.
type Config struct {
	Peers []Peer
	// Conn is the IKE socket (port 500 on the board); NATT the NAT-T
	// socket (4500), optional: without it a NAT is detected but the ports
	// do not switch.
	Conn, NATT Conn
	Clock      Clock     // real time when nil
	Rand       io.Reader // crypto/rand when nil
	Sink       ChildSASink
	// Logf receives one line per event; never a key or the PSK. It is
	// called with the endpoint locked: it must not call back into it.
	Logf func(format string, args ...any)

	// Retransmission: first after RetransmitBase, doubling, Retries sends
	// in all (defaults 500ms and 6).
	RetransmitBase time.Duration
	Retries        int
	// CookieThreshold: half-open SAs from which IKE_SA_INIT needs a COOKIE
	// (default 8; from a peer's address that holds one already, it always
	// does); MaxHalfOpen: above it new ones are dropped (64), or one
	// with a valid COOKIE replaces its peer's oldest half-open SA;
	// MaxSAsPerPeer: IKE SAs one peer may hold besides half-open ones,
	// and half-open ones from its address (4); MaxChildSAs: CHILD SAs per
	// IKE SA (8).
	CookieThreshold, MaxHalfOpen, MaxSAsPerPeer, MaxChildSAs int
	// Keepalive is the NAT keepalive interval when we are behind a NAT
	// (default 20s); RetryInterval the wait before an initiator tries
	// again (default 30s).
	Keepalive, RetryInterval time.Duration
}

// Endpoint runs IKEv2 for a set of peers, as initiator and responder. All
// its state is behind one mutex: packets and timer ticks are handled one
// at a time.
type Endpoint struct {
	mu      sync.Mutex
	cfg     Config
	peers   []*peerState
	sas     map[uint64]*ikeSA // by our SPI
	half    map[halfKey]*ikeSA
	secret  [32]byte
	secretV byte
	closed  bool
	// lastDropLog rate-limits the line about dropped IKE_SA_INITs;
	// lastUnauth the unauthenticated INVALID_MAJOR_VERSION answers.
	lastDropLog, lastUnauth time.Time
	// rfcCollisions turns off the TEMPORARY_FAILURE answer of an original
	// initiator to a colliding rekey: both rekeys then complete and the
	// redundant SA is deleted by nonces, as strongSwan does (RFC 7296
	// 2.8.1, 2.8.2). Tests set it to check that path.
	rfcCollisions bool
	// keepDuplicates makes the endpoint keep every IKE SA with a peer
	// (no dedupe), as strongSwan does with unique=no: tests stand it in
	// for such a peer.
	keepDuplicates bool
	// refuseChildRekeys answers every CHILD SA rekey NO_PROPOSAL_CHOSEN:
	// tests stand it in for a peer whose proposals fit none of our
	// rekeys, to check the fallback to a fresh CHILD SA.
	refuseChildRekeys bool
	// demandPFS, when set, answers a CREATE_CHILD_SA for a CHILD SA
	// (rekey or new) without KE: tests stand it in for Libreswan's
	// pfs=yes, which answers NO_PROPOSAL_CHOSEN, or for a peer naming
	// its group with INVALID_KE_PAYLOAD.
	demandPFS *Notify
}

type halfKey struct {
	spii uint64
	from netip.AddrPort
}

// peerState is a configured peer and what outlives its IKE SAs.
type peerState struct {
	cfg             Peer
	contacted       bool // an IKE_AUTH with INITIAL_CONTACT went out since start
	lastErr         string
	retryAt         time.Time
	lastEstablished time.Time
}

// New checks the configuration and makes an Endpoint; Start (or the
// tests' Tick) begins the initiators' exchanges.
func New(cfg Config) (*Endpoint, error) {
	if cfg.Conn == nil {
		return nil, errors.New("ike: endpoint without a socket")
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defi := func(d *int, v int) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.RetransmitBase, 500*time.Millisecond)
	defi(&cfg.Retries, 6)
	if cfg.Retries < 1 || cfg.Retries > 12 || cfg.RetransmitBase < 0 {
		return nil, fmt.Errorf("ike: %d retransmissions from %v: want 1..12 from a positive interval", cfg.Retries, cfg.RetransmitBase)
	}
	defi(&cfg.CookieThreshold, 8)
	defi(&cfg.MaxHalfOpen, 64)
	defi(&cfg.MaxSAsPerPeer, 4)
	defi(&cfg.MaxChildSAs, 8)
	def(&cfg.Keepalive, 20*time.Second)
	def(&cfg.RetryInterval, 30*time.Second)
	e := &Endpoint{cfg: cfg, sas: map[uint64]*ikeSA{}, half: map[halfKey]*ikeSA{}}
	if _, err := io.ReadFull(cfg.Rand, e.secret[:]); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for i, p := range cfg.Peers {
		if p.Name == "" || names[p.Name] {
			return nil, fmt.Errorf("ike: peer %d: empty or repeated name %q", i+1, p.Name)
		}
		names[p.Name] = true
		if !p.Remote.Addr().IsValid() || !p.Local.Addr().IsValid() {
			return nil, fmt.Errorf("ike: peer %s: local and remote addresses are required", p.Name)
		}
		if len(p.PSK) == 0 || len(p.IKE) == 0 || len(p.Child) == 0 || len(p.LocalTS) == 0 || len(p.RemoteTS) == 0 {
			return nil, fmt.Errorf("ike: peer %s: PSK, IKE and CHILD proposals and both subnets are required", p.Name)
		}
		if p.Remote.Port() == 0 {
			p.Remote = netip.AddrPortFrom(p.Remote.Addr(), 500)
		}
		if p.RemoteNATTPort == 0 {
			p.RemoteNATTPort = 4500
		}
		if p.LocalID.IDType == 0 {
			p.LocalID = AddrIdentity(p.Local.Addr())
		}
		if p.RemoteID.IDType == 0 {
			p.RemoteID = AddrIdentity(p.Remote.Addr())
		}
		def(&p.IKELifetime, 4*time.Hour)
		def(&p.ChildLifetime, time.Hour)
		if p.Margin == 0 {
			p.Margin = p.ChildLifetime / 10
		}
		if p.Margin < 0 || p.Jitter < 0 || p.Margin+p.Jitter >= min(p.ChildLifetime, p.IKELifetime) {
			return nil, fmt.Errorf("ike: peer %s: rekey margin %v plus jitter %v must be shorter than both lifetimes (IKE %v, CHILD %v)",
				p.Name, p.Margin, p.Jitter, p.IKELifetime, p.ChildLifetime)
		}
		e.peers = append(e.peers, &peerState{cfg: p})
	}
	return e, nil
}

func (e *Endpoint) now() time.Time { return e.cfg.Clock.Now() }

func (e *Endpoint) logf(format string, args ...any) { e.cfg.Logf(format, args...) }

func (e *Endpoint) random(n int) []byte {
	b := make([]byte, n)
	if _, err := io.ReadFull(e.cfg.Rand, b); err != nil {
		panic("ike: random source failed: " + err.Error())
	}
	return b
}

func (e *Endpoint) newSPI() uint64 {
	for {
		s := binary.BigEndian.Uint64(e.random(8))
		if s != 0 && e.sas[s] == nil {
			return s
		}
	}
}

func (e *Endpoint) newChildSPI() uint32 {
	for {
		// The kernel reserves SPIs 1..255 (RFC 4303 2.1).
		if s := binary.BigEndian.Uint32(e.random(4)); s > 255 {
			return s
		}
	}
}

// Run reads both sockets and ticks the timers until Close; it returns the
// first socket error after Close as nil.
func (e *Endpoint) Run() error {
	errc := make(chan error, 2)
	read := func(c Conn, natt bool) {
		buf := make([]byte, MaxMessage)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				errc <- err
				return
			}
			e.HandlePacket(natt, buf[:n], from)
		}
	}
	go read(e.cfg.Conn, false)
	if e.cfg.NATT != nil {
		go read(e.cfg.NATT, true)
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-errc:
			e.mu.Lock()
			closed := e.closed
			e.mu.Unlock()
			if closed {
				return nil
			}
			return err
		case <-t.C:
			e.Tick()
		}
	}
}

// Close closes the sockets (the IKE SAs are left for the peer's DPD: a
// restart announces itself with INITIAL_CONTACT).
func (e *Endpoint) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	err := e.cfg.Conn.Close()
	if e.cfg.NATT != nil {
		e.cfg.NATT.Close()
	}
	return err
}

// nonESPMarker precedes IKE on the NAT-T port (RFC 3948 2.2).
var nonESPMarker = []byte{0, 0, 0, 0}

// HandlePacket processes one datagram received on the IKE socket (natt
// false) or the NAT-T socket. It never panics on any input.
func (e *Endpoint) HandlePacket(natt bool, pkt []byte, from netip.AddrPort) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if natt {
		if len(pkt) == 1 && pkt[0] == 0xff {
			return // NAT keepalive (RFC 3948 2.3)
		}
		if len(pkt) < 4 || binary.BigEndian.Uint32(pkt) != 0 {
			return // ESP: the kernel's, not ours
		}
		pkt = pkt[4:]
	}
	h, err := DecodeHeader(pkt)
	if err != nil {
		if h.Version>>4 > 2 && len(pkt) >= HeaderLen {
			e.invalidMajorVersion(natt, h, from)
		}
		return
	}
	if h.Exchange == IKE_SA_INIT && !h.Response() && h.SPIr == 0 {
		e.handleInitRequest(natt, pkt, from)
		return
	}
	// Our SPI is the one of the side we are: the I flag marks the sender
	// as the original initiator, so we are the responder then.
	ours := h.SPIi
	if h.Initiator() {
		ours = h.SPIr
	}
	sa := e.sas[ours]
	if sa == nil || sa.spii != h.SPIi || (h.Exchange != IKE_SA_INIT && sa.spir != h.SPIr) {
		return
	}
	m, err := Decode(pkt)
	if err != nil {
		e.logf("ike %s: dropped a message that does not parse: %v", sa.peer.cfg.Name, err)
		return
	}
	if h.Response() {
		e.handleResponse(sa, natt, pkt, m, from)
	} else {
		e.handleRequest(sa, natt, pkt, m, from)
	}
}

// invalidMajorVersion answers a request of a later IKE version (RFC
// 7296 2.5: drop it, and say which version we speak, 2.0, in the
// answer's header). The answer is unauthenticated, so it goes only to a
// configured peer's address and at most once a second (1.5, 2.21.1): a
// spoofed flood must not make us a reflector.
func (e *Endpoint) invalidMajorVersion(natt bool, h Header, from netip.AddrPort) {
	if h.Response() || e.peerByAddr(from.Addr()) == nil {
		return
	}
	now := e.now()
	if now.Sub(e.lastUnauth) < time.Second {
		return
	}
	e.lastUnauth = now
	flags := FlagResponse
	if !h.Initiator() {
		flags |= FlagInitiator // the sender is the responder: we are its initiator
	}
	m := &Message{Header: Header{SPIi: h.SPIi, SPIr: h.SPIr, Exchange: h.Exchange, Flags: flags, MessageID: h.MessageID},
		Payloads: []Payload{&Notify{Notify: INVALID_MAJOR_VERSION}}}
	if pkt, err := m.Encode(); err == nil {
		e.logf("ike: a request of IKE version %d.%d from %v: answered INVALID_MAJOR_VERSION", h.Version>>4, h.Version&0xf, from)
		e.sendTo(natt, pkt, from)
	}
}

// send writes an IKE message to the SA's peer, on the NAT-T port with the
// marker once the SA switched.
func (e *Endpoint) send(sa *ikeSA, pkt []byte) {
	if sa.natt && e.cfg.NATT != nil {
		b := append(append(make([]byte, 0, len(pkt)+4), nonESPMarker...), pkt...)
		if err := e.cfg.NATT.WriteTo(b, sa.remote); err != nil {
			e.logf("ike %s: send: %v", sa.peer.cfg.Name, err)
		}
		return
	}
	if err := e.cfg.Conn.WriteTo(pkt, sa.remote); err != nil {
		e.logf("ike %s: send: %v", sa.peer.cfg.Name, err)
	}
}

// sendTo answers on the socket a request came in on (stateless replies:
// COOKIE, INVALID_KE_PAYLOAD).
func (e *Endpoint) sendTo(natt bool, pkt []byte, to netip.AddrPort) {
	c := e.cfg.Conn
	if natt && e.cfg.NATT != nil {
		c = e.cfg.NATT
		pkt = append(append([]byte(nil), nonESPMarker...), pkt...)
	}
	c.WriteTo(pkt, to)
}

func (e *Endpoint) peerByAddr(a netip.Addr) *peerState {
	for _, p := range e.peers {
		if p.cfg.Remote.Addr().Unmap() == a.Unmap() {
			return p
		}
	}
	return nil
}

func (e *Endpoint) peerByName(name string) *peerState {
	for _, p := range e.peers {
		if p.cfg.Name == name {
			return p
		}
	}
	return nil
}

func (e *Endpoint) sasOf(p *peerState) []*ikeSA {
	var out []*ikeSA
	for _, sa := range e.sas {
		if sa.peer == p {
			out = append(out, sa)
		}
	}
	return out
}

func (e *Endpoint) halfOpen() int {
	n := 0
	for _, sa := range e.sas {
		if sa.state == stateHalfOpen {
			n++
		}
	}
	return n
}
