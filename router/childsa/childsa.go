// Package childsa puts an IKEv2 endpoint's CHILD SAs into the kernel as
// router/ipsec tunnels, with the order of installs and deletes a rekey
// needs so that no packet is sent on an SA the peer cannot read yet. The
// router's tunnels and the lab's IKE runs (internal/lab/worldvm) share it,
// so that the lab's rekey tests see the router's behaviour.
package childsa

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/ocfw/ocfw/router/ike"
	"github.com/ocfw/ocfw/router/ipsec"
)

// ReplayWindow is the anti-replay window of the IKEv2 tunnels'
// inbound SAs, in packets: the manual tunnels' and strongSwan's (its
// charon.replay_window is 32 by default, 128 in docs/tunnels.md).
const ReplayWindow = 128

// XFRM is what the CHILD SA sink needs of router/ipsec's Handle; tests
// give it a recorder.
type XFRM interface {
	Install(ipsec.Tunnel) error
	Remove(ipsec.Tunnel) error
	RemoveSAs(ipsec.Tunnel) error
	Counters(ipsec.Tunnel) (ipsec.TunnelCounters, error)
}

// Sink puts the IKEv2 endpoint's CHILD SAs into the kernel as
// router/ipsec tunnels: the same SAs and policies a manual tunnel gets,
// keyed by IKE instead of a key file. It is an ike.ChildSASink and an
// ike.TrafficSink (the kernel's inbound packet counter tells when ESP
// last came from the peer, so that the liveness check stays quiet while
// traffic flows).
type Sink struct {
	x   XFRM
	now func() time.Time

	mu   sync.Mutex
	kids map[uint32]*childRun // by our inbound SPI
	// owner is, per pair of subnets, the inbound SPI of the CHILD SA the
	// policies point at (the newest installed).
	owner map[[2]netip.Prefix]uint32
	// reqids is, per pair of subnets, the request ID all its CHILD SAs
	// share (the first one's inbound SPI) while any runs: the in and fwd
	// policies accept what the peer still sends on the old SA of a rekey
	// until it switches, and the out policy takes the newest out SA.
	reqids map[[2]netip.Prefix]uint32
}

// childRun is one CHILD SA in the kernel.
type childRun struct {
	peer      string
	t         ipsec.Tunnel
	installed time.Time
	// What LastInbound last read from the kernel, and when the inbound
	// packet count last grew.
	inPackets uint64
	read      time.Time
	lastIn    time.Time
	// replaces is, for a successor of the peer's rekey whose outbound SA
	// waits (ike.ChildSA.ReplacesOut), the old SA's outbound SPI; 0 once
	// it sends. kernel is the tunnel as the kernel has it meanwhile: the
	// new inbound SA with the old outbound one.
	replaces uint32
	kernel   ipsec.Tunnel
}

// New is a sink that installs through x (router/ipsec's Handle).
func New(x XFRM) *Sink {
	return &Sink{x: x, now: time.Now, kids: map[uint32]*childRun{}, owner: map[[2]netip.Prefix]uint32{}, reqids: map[[2]netip.Prefix]uint32{}}
}

// Tunnel is a CHILD SA as router/ipsec's tunnel: tunnel mode, one
// subnet each side (what the site's tunnels negotiate), the negotiated
// ESN, ReplayWindow, and ESP in UDP when IKE moved to the NAT-T port.
func Tunnel(c ike.ChildSA) (ipsec.Tunnel, error) {
	if len(c.LocalTS) != 1 || len(c.RemoteTS) != 1 {
		return ipsec.Tunnel{}, fmt.Errorf("%s: %d local and %d remote subnets, want one each (the site's tunnel)", c, len(c.LocalTS), len(c.RemoteTS))
	}
	cipher, err := childCipher(c.Encr)
	if err != nil {
		return ipsec.Tunnel{}, fmt.Errorf("%s: %w", c, err)
	}
	auth, err := childAuth(c.Integ)
	if err != nil {
		return ipsec.Tunnel{}, fmt.Errorf("%s: %w", c, err)
	}
	hard := childHardLifetime(c.Lifetime)
	sa := func(spi uint32, ek, ak []byte) ipsec.SA {
		return ipsec.SA{SPI: spi, Cipher: cipher, Auth: auth, EncKey: ek, AuthKey: ak, ReplayWindow: ReplayWindow, ESN: c.ESN,
			HardLifetime: hard}
	}
	t := ipsec.Tunnel{Name: c.Peer, Local: c.Local, Remote: c.Remote, LocalNet: c.LocalTS[0], RemoteNet: c.RemoteTS[0],
		Out: sa(c.OutSPI, c.OutEncr, c.OutInteg), In: sa(c.InSPI, c.InEncr, c.InInteg)}
	if e := c.Encap; e != nil {
		t.Out.Encap = &ipsec.UDPEncap{SrcPort: e.LocalPort, DstPort: e.RemotePort}
		t.In.Encap = &ipsec.UDPEncap{SrcPort: e.RemotePort, DstPort: e.LocalPort}
	}
	if err := t.Validate(); err != nil {
		return ipsec.Tunnel{}, err
	}
	return t, nil
}

// childHardLifetime is the kernel's hard lifetime of a CHILD SA whose
// configured lifetime is life: the endpoint rekeys before life ends
// (its margin early), the peer by its own settings, so 10% above life
// (strongSwan's default life_time over rekey_time) leaves either room,
// and an SA nobody rekeyed — an endpoint stuck or gone — dies in the
// kernel instead of carrying one key for ever. 0 (unknown): no limit.
func childHardLifetime(life time.Duration) time.Duration {
	if life <= 0 {
		return 0
	}
	return life + life/10
}

// childCipher is the catalog's name (router/ipsec's) of an IKE cipher.
func childCipher(e ike.Encr) (string, error) {
	switch {
	case e.ID == ike.ENCR_AES_CBC && (e.KeyLen == 16 || e.KeyLen == 24 || e.KeyLen == 32):
		return fmt.Sprintf("aes-%d-cbc", e.KeyLen*8), nil
	case e.ID == ike.ENCR_3DES:
		return "des-ede3-cbc", nil
	}
	return "", fmt.Errorf("cipher %s has no kernel ESP name here", e)
}

// childAuth is the catalog's name of an IKE integrity algorithm.
func childAuth(i ike.Integ) (string, error) {
	switch i.ID {
	case ike.AUTH_HMAC_SHA1_96:
		return "hmac-sha1", nil
	case ike.AUTH_HMAC_SHA2_256_128:
		return "hmac-sha256", nil
	}
	return "", fmt.Errorf("integrity %s has no kernel ESP name here", i)
}

func subnets(t ipsec.Tunnel) [2]netip.Prefix { return [2]netip.Prefix{t.LocalNet, t.RemoteNet} }

// Install puts a CHILD SA's SAs into the kernel and points its subnets'
// policies at it (a rekey's successor takes them over from the SA it
// replaces, with no moment without policy). All CHILD SAs of a pair of
// subnets share one request ID, so that during a rekey the kernel takes
// ESP on the old inbound SA and the new, and sends on the newest
// outbound SA in it. A successor of the peer's rekey
// (ike.ChildSA.ReplacesOut) gets its inbound SA only: the peer installs
// its own new inbound SA once it has our answer, so we go on sending on
// the old SA until the peer deletes it (Delete), as strongSwan does.
func (s *Sink) Install(c ike.ChildSA) error {
	t, err := Tunnel(c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := subnets(t)
	reqid, shared := s.reqids[key]
	if !shared {
		reqid = c.InSPI
	}
	t.ReqID = reqid
	k := &childRun{peer: c.Peer, t: t, kernel: t}
	if c.ReplacesOut != 0 {
		for _, o := range s.kids {
			if subnets(o.t) == key && o.t.Out.SPI == c.ReplacesOut && o.replaces == 0 {
				k.replaces = c.ReplacesOut
				k.kernel.Out = o.t.Out // in the kernel already: left as it is
				k.kernel.Encap = o.t.Encap
			}
		}
	}
	if err := s.x.Install(k.kernel); err != nil {
		return err
	}
	now := s.now()
	k.installed, k.read = now, now
	s.reqids[key] = reqid
	s.kids[c.InSPI] = k
	s.owner[key] = c.InSPI
	return nil
}

// Delete takes a CHILD SA out of the kernel. While another CHILD SA of
// the same subnets runs (a rekey), only the SAs go: the policies stay,
// pointed at the other one if they pointed at this; a successor whose
// outbound SA waited for this SA's end gets it first.
func (s *Sink) Delete(c ike.ChildSA) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.kids[c.InSPI]
	if !ok {
		return nil
	}
	delete(s.kids, c.InSPI)
	key := subnets(k.t)
	var other *childRun
	var otherSPI uint32
	var errs []error
	for spi, o := range s.kids {
		if subnets(o.t) != key {
			continue
		}
		if o.replaces != 0 && o.replaces == k.t.Out.SPI {
			// The peer deleted the SA it replaced: it has its new
			// inbound SA, so ours sends now.
			if err := s.x.Install(o.t); err != nil {
				errs = append(errs, err)
			} else {
				o.replaces, o.kernel = 0, o.t
			}
		}
		if other == nil || o.installed.After(other.installed) {
			other, otherSPI = o, spi
		}
	}
	if other == nil {
		delete(s.owner, key)
		delete(s.reqids, key)
		return errors.Join(append(errs, s.x.Remove(k.t))...)
	}
	if s.owner[key] == c.InSPI {
		if err := s.x.Install(other.kernel); err != nil {
			return errors.Join(append(errs, err)...)
		}
		s.owner[key] = otherSPI
	}
	// A successor still waiting never had its own outbound SA in the
	// kernel (deleting it finds it gone); the old one it sent on stays.
	return errors.Join(append(errs, s.x.RemoveSAs(k.t))...)
}

// minRead spaces the kernel reads of LastInbound: the endpoint asks at
// every tick while a liveness check is near.
const minRead = time.Second

// LastInbound is when the kernel's inbound SA of c last counted a
// packet more, to the second or so (it is read at most once a second).
func (s *Sink) LastInbound(c ike.ChildSA) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.kids[c.InSPI]
	if !ok {
		return time.Time{}, false
	}
	now := s.now()
	if now.Sub(k.read) >= minRead {
		k.read = now
		if tc, err := s.x.Counters(k.kernel); err == nil && tc.In.Packets > k.inPackets {
			k.inPackets, k.lastIn = tc.In.Packets, now
		}
	}
	return k.lastIn, !k.lastIn.IsZero()
}

// Counters reads the kernel's counters of our CHILD SA with inbound SPI
// spi, for the status.
func (s *Sink) Counters(spi uint32) (ipsec.TunnelCounters, ipsec.Tunnel, bool, error) {
	s.mu.Lock()
	k, ok := s.kids[spi]
	s.mu.Unlock()
	if !ok {
		return ipsec.TunnelCounters{}, ipsec.Tunnel{}, false, nil
	}
	tc, err := s.x.Counters(k.kernel)
	return tc, k.t, true, err
}

// RemoveAll takes every CHILD SA out of the kernel: the endpoint is
// being replaced (the WAN's address changed), its SAs are dead.
func (s *Sink) RemoveAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for spi, k := range s.kids {
		if err := s.x.Remove(k.t); err != nil && first == nil {
			first = err
		}
		delete(s.kids, spi)
	}
	clear(s.owner)
	return first
}

// Heard is what LastInbound found last for our inbound SPI spi,
// without reading the kernel.
func (s *Sink) Heard(spi uint32) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.kids[spi]
	if !ok || k.lastIn.IsZero() {
		return time.Time{}, false
	}
	return k.lastIn, true
}
