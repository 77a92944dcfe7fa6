package ipsec

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// Modules are the kernel modules a tunnel needs, in load order, as
// Debian's 6.1 kernels build them; built-in ones (cbc, hmac, sha1_generic,
// sha256_generic in the 686 flavour) are listed for kernels that have them
// as modules and are skipped where built in. The order matters without
// modprobe: adding an SA fails with ENOENT until drbg is loaded (ESP's IV
// generators seed from the default RNG), and drbg needs ctr and
// sha512_generic before it. des_generic (with libdes) serves des-ede3-cbc;
// authencesn is the AEAD template ESP uses for SAs with extended sequence
// numbers (without it such an SA fails with ENOENT, "Kernel was unable to
// initialize cryptographic operations"). The list lives in the catalog
// (catalog.TunnelModules), which the firmware's plan loads at boot.
var Modules = catalog.TunnelModuleNames()

// SA is one direction of a tunnel: an ESP security association with
// manual keys.
type SA struct {
	// Src and Dst are the outer (WAN) addresses the ESP packets travel
	// between. In a Tunnel they may be left zero: Out runs Local to
	// Remote and In Remote to Local.
	Src, Dst netip.Addr
	// SPI names the SA at its receiver; 256 or more (RFC 4303 reserves
	// 1-255). The two ends use the same SPI for one direction: A's Out
	// is B's In.
	SPI uint32
	// Cipher is one of Ciphers() (e.g. "aes-128-cbc"), Auth one of
	// Auths() (e.g. "hmac-sha1"); the keys are exactly their KeySize.
	Cipher, Auth    string
	EncKey, AuthKey []byte
	// ReplayWindow is the anti-replay window in packets (0 turns the
	// check off; at most 32768). ESN turns on 64-bit extended sequence
	// numbers (RFC 4303), which need a window of at least 1.
	ReplayWindow uint32
	ESN          bool
	// Seq is where a newly installed SA's counter starts, so that a
	// restart neither repeats nor trails: on an outbound SA the last
	// sequence number taken as sent (the next packet carries Seq+1), on
	// an inbound one the highest taken as received (the anti-replay
	// window ends there, and with ESN the high 32 bits of the next
	// numbers are inferred from it). Above 2^32-1 only with ESN; with no
	// replay window it is ignored (the kernel keeps no counter then). An
	// SA already installed with the same keys keeps its own counters.
	Seq uint64
	// Encap, when set, carries the SA's ESP in UDP between these ports
	// (RFC 3948: a NAT between the ends); the receiving socket needs
	// UDP_ENCAP_ESPINUDP. In a Tunnel it may be left nil: the tunnel's
	// Encap decides.
	Encap *UDPEncap
	// ReqID ties the SA to its policies' templates; 0 means its SPI. In
	// a Tunnel it may be left 0: the tunnel's ReqID decides.
	ReqID uint32
	// HardLifetime, when set, makes the kernel delete the SA this long
	// after it was added (whole seconds, at least one): an IKE-keyed
	// SA's backstop, a bit above its rekey time, so that an endpoint
	// that stopped rekeying cannot keep using one key for ever. 0 means
	// no limit (manual keys).
	HardLifetime time.Duration
	// crossFamily: the inner (selector) family differs from the outer
	// one, e.g. IPv6 nets over IPv4 WAN addresses; set by resolve.
	crossFamily bool
}

// reqid is the SA's request ID in the kernel.
func (sa SA) reqid() uint32 {
	if sa.ReqID != 0 {
		return sa.ReqID
	}
	return sa.SPI
}

// UDPEncap is a pair of UDP ports ESP travels between (NAT traversal):
// the sender's and the receiver's.
type UDPEncap struct{ SrcPort, DstPort uint16 }

// Tunnel is a site-to-site ESP tunnel in tunnel mode between two WAN
// addresses, carrying traffic between two subnets. Only packets from
// LocalNet to RemoteNet are sent through it, so the box needs a route
// to RemoteNet (via the WAN gateway, or the peer) for the kernel to
// find before the policy applies, and the box's own packets go through
// it only if that route gives them a LocalNet source address (a route's
// preferred source); the firewall must let ESP (IP protocol 50) in from
// Remote and forward RemoteNet <-> LocalNet.
type Tunnel struct {
	Name          string       // for messages, e.g. "site-b"
	Local, Remote netip.Addr   // WAN addresses, this box's and the peer's
	LocalNet      netip.Prefix // the subnet behind this box
	RemoteNet     netip.Prefix // the subnet behind the peer
	Out, In       SA           // this box's sending and receiving SAs
	// Encap puts both SAs' ESP into UDP (NAT traversal, RFC 3948):
	// SrcPort is this box's port (4500), DstPort the peer's (behind a
	// NAT, the NAT's). nil: plain ESP.
	Encap *UDPEncap
	// ReqID, when not 0, is both SAs' and the policies' request ID
	// instead of each SA's SPI: give a rekeyed tunnel's successor the
	// same one (as strongSwan does), and the in policy accepts what the
	// peer still sends on the old SA until it switches, while the out
	// policy takes the newest SA. 0: each SA its own SPI, so that a
	// policy matches exactly one SA.
	ReqID uint32
}

// Validate reports everything wrong with t at once (nil if nothing).
func (t Tunnel) Validate() error {
	_, _, err := t.resolve()
	return err
}

// resolve validates t and returns its SAs with the outer addresses
// filled in.
func (t Tunnel) resolve() (out, in SA, err error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if t.Name == "" {
		bad("no name")
	}
	if !t.Local.IsValid() || !t.Remote.IsValid() {
		bad("local and remote WAN addresses are both needed")
	} else if t.Local.Is4() != t.Remote.Is4() || t.Local.Is4In6() || t.Remote.Is4In6() {
		bad("local %s and remote %s: one address family for both", t.Local, t.Remote)
	} else if t.Local == t.Remote {
		bad("local and remote WAN address are the same (%s)", t.Local)
	}
	for _, n := range []struct {
		what string
		p    netip.Prefix
	}{{"local net", t.LocalNet}, {"remote net", t.RemoteNet}} {
		switch {
		case !n.p.IsValid():
			bad("%s missing", n.what)
		case n.p != n.p.Masked():
			bad("%s %s has host bits set (did you mean %s?)", n.what, n.p, n.p.Masked())
		}
	}
	// The nets may be of the other family than the WAN addresses (IPv6
	// over IPv4 or the reverse: RFC 4301 tunnel mode), but both of one.
	if t.LocalNet.IsValid() && t.RemoteNet.IsValid() && t.LocalNet.Addr().Is4() != t.RemoteNet.Addr().Is4() {
		bad("local net %s and remote net %s: one address family for both", t.LocalNet, t.RemoteNet)
	}
	if t.LocalNet.IsValid() && t.RemoteNet.IsValid() && t.LocalNet.Overlaps(t.RemoteNet) {
		bad("local net %s and remote net %s overlap", t.LocalNet, t.RemoteNet)
	}
	out, in = t.Out, t.In
	fill := func(dir string, sa *SA, src, dst netip.Addr) {
		if !sa.Src.IsValid() {
			sa.Src = src
		}
		if !sa.Dst.IsValid() {
			sa.Dst = dst
		}
		if sa.Src != src || sa.Dst != dst {
			bad("SA %s runs %s -> %s, want %s -> %s (the tunnel's WAN addresses)", dir, sa.Src, sa.Dst, src, dst)
		}
		for _, e := range sa.check() {
			bad("SA %s: %v", dir, e)
		}
	}
	fill("out", &out, t.Local, t.Remote)
	fill("in", &in, t.Remote, t.Local)
	if e := t.Encap; e != nil {
		if e.SrcPort == 0 || e.DstPort == 0 {
			bad("UDP encapsulation %d -> %d: both ports are needed", e.SrcPort, e.DstPort)
		}
		if out.Encap == nil {
			out.Encap = &UDPEncap{e.SrcPort, e.DstPort}
		}
		if in.Encap == nil {
			in.Encap = &UDPEncap{e.DstPort, e.SrcPort}
		}
	}
	for _, sa := range []*SA{&out, &in} {
		sa.crossFamily = t.LocalNet.IsValid() && t.Local.IsValid() && t.LocalNet.Addr().Is4() != t.Local.Is4()
		if sa.ReqID == 0 {
			sa.ReqID = t.ReqID
		}
	}
	if len(errs) > 0 {
		return SA{}, SA{}, fmt.Errorf("tunnel %s: %w", t.Name, errors.Join(errs...))
	}
	return out, in, nil
}

func (sa SA) check() []error {
	var errs []error
	if sa.SPI < 256 {
		errs = append(errs, fmt.Errorf("spi %#x: 256 or more (1-255 are reserved)", sa.SPI))
	}
	if c, err := CipherAlgorithm(sa.Cipher); err != nil {
		errs = append(errs, err)
	} else if len(sa.EncKey) != c.KeySize {
		errs = append(errs, fmt.Errorf("%s key is %d bytes, want %d", sa.Cipher, len(sa.EncKey), c.KeySize))
	}
	if a, err := AuthAlgorithm(sa.Auth); err != nil {
		errs = append(errs, err)
	} else if len(sa.AuthKey) != a.KeySize {
		errs = append(errs, fmt.Errorf("%s key is %d bytes, want %d", sa.Auth, len(sa.AuthKey), a.KeySize))
	}
	if sa.HardLifetime < 0 {
		errs = append(errs, fmt.Errorf("hard lifetime %v: want 0 (none) or more", sa.HardLifetime))
	}
	switch {
	case sa.ReplayWindow > maxReplayWindow:
		errs = append(errs, fmt.Errorf("replay window %d: at most %d", sa.ReplayWindow, maxReplayWindow))
	case sa.ESN && sa.ReplayWindow == 0:
		errs = append(errs, errors.New("extended sequence numbers need a replay window"))
	}
	return errs
}

// msg is the NEWSA content for a checked SA. Its reqid is its SPI (unless
// ReqID says otherwise): that
// ties each policy template to exactly this tunnel's SA even when two
// tunnels share a peer.
func (sa SA) msg() saMsg {
	c, _ := CipherAlgorithm(sa.Cipher)
	a, _ := AuthAlgorithm(sa.Auth)
	m := saMsg{
		src: sa.Src, dst: sa.Dst, spi: sa.SPI, reqid: sa.reqid(), mode: modeTunnel,
		cryptName: c.Kernel, cryptKey: sa.EncKey,
		authName: a.Kernel, authKey: sa.AuthKey, truncBits: a.TruncBits,
		replayWindow: sa.ReplayWindow, esn: sa.ESN, crossFamily: sa.crossFamily,
	}
	if sa.ReplayWindow > 0 {
		m.oseq, m.seq = sa.Seq, sa.Seq
	}
	if sa.Encap != nil {
		m.encapSport, m.encapDport = sa.Encap.SrcPort, sa.Encap.DstPort
	}
	if sa.HardLifetime > 0 {
		m.hardSecs = uint64(max(sa.HardLifetime.Round(time.Second), time.Second) / time.Second)
	}
	return m
}

// same reports whether an installed SA already is what m asks for.
func (s *saState) same(m saMsg) bool {
	return s.src == m.src && s.dst == m.dst && s.spi == m.spi && s.reqid == m.reqid && s.mode == m.mode &&
		s.cryptName == m.cryptName && bytes.Equal(s.cryptKey, m.cryptKey) &&
		s.authName == m.authName && bytes.Equal(s.authKey, m.authKey) && s.truncBits == m.truncBits &&
		s.replayWindow == m.replayWindow && s.esn == m.esn &&
		s.encapSport == m.encapSport && s.encapDport == m.encapDport
}

// policies are the tunnel's three policies: out sends LocalNet ->
// RemoteNet through the out SA; in (delivered to this box) and fwd
// (forwarded to the LAN) accept RemoteNet -> LocalNet only from the in
// SA. More specific subnets get a lower number, which the kernel tries
// first, so a narrower tunnel wins over a wider one.
func (t Tunnel) policies(out, in SA) []policyMsg {
	prio := uint32(0x1000 - t.LocalNet.Bits() - t.RemoteNet.Bits())
	return []policyMsg{
		{src: t.LocalNet, dst: t.RemoteNet, dir: policyOut, priority: prio, tunnelSrc: out.Src, tunnelDst: out.Dst, reqid: out.reqid()},
		{src: t.RemoteNet, dst: t.LocalNet, dir: policyIn, priority: prio, tunnelSrc: in.Src, tunnelDst: in.Dst, reqid: in.reqid()},
		{src: t.RemoteNet, dst: t.LocalNet, dir: policyFwd, priority: prio, tunnelSrc: in.Src, tunnelDst: in.Dst, reqid: in.reqid()},
	}
}

var dirNames = map[uint8]string{policyIn: "in", policyOut: "out", policyFwd: "fwd"}

// Install sets the tunnel up: both SAs, then the out, in and fwd
// policies. It is idempotent: an SA already installed with the same
// algorithms, keys and window is left alone (its sequence numbers and
// counters keep running, so the peer's replay window stays in step); one
// that differs, e.g. after a key roll, is replaced; the policies are
// created or replaced.
func (h *Handle) Install(t Tunnel) error {
	out, in, err := t.resolve()
	if err != nil {
		return fmt.Errorf("ipsec: %w", err)
	}
	for _, sa := range []struct {
		dir string
		sa  SA
	}{{"out", out}, {"in", in}} {
		if err := h.installSA(sa.sa.msg()); err != nil {
			return fmt.Errorf("ipsec: tunnel %s: %s %s (spi %#x, %s -> %s): %w",
				t.Name, opOf(err), sa.dir, sa.sa.SPI, sa.sa.Src, sa.sa.Dst, err)
		}
	}
	for _, p := range t.policies(out, in) {
		body, err := encodePolicy(h.arch, p)
		if err == nil {
			_, err = h.request(msgUpdPolicy, body, true, 0)
		}
		if err != nil {
			return fmt.Errorf("ipsec: tunnel %s: add policy %s (%s -> %s): %w%s", t.Name, dirNames[p.dir], p.src, p.dst, err, hint(err, "add policy"))
		}
	}
	return nil
}

// saOpError remembers which step of installSA failed.
type saOpError struct {
	op  string
	err error
}

func (e *saOpError) Error() string { return e.err.Error() + hint(e.err, e.op) }
func (e *saOpError) Unwrap() error { return e.err }

func opOf(err error) string {
	var e *saOpError
	if errors.As(err, &e) {
		return e.op
	}
	return "add SA"
}

func (h *Handle) installSA(m saMsg) error {
	body, err := encodeNewSA(h.arch, m)
	if err != nil {
		return err
	}
	_, err = h.request(msgNewSA, body, true, 0)
	if !errors.Is(err, unix.EEXIST) {
		if err != nil {
			return &saOpError{"add SA", err}
		}
		return nil
	}
	cur, err := h.getSA(m.dst, m.spi)
	if err != nil {
		return &saOpError{"read existing SA", err}
	}
	if cur.same(m) {
		return nil
	}
	// Keys or algorithms changed: XFRM_MSG_UPDSA keeps an SA's
	// algorithms, so the old one goes and the new one comes.
	if err := h.delSA(m.dst, m.spi); err != nil {
		return &saOpError{"replace SA", err}
	}
	if _, err := h.request(msgNewSA, body, true, 0); err != nil {
		return &saOpError{"add SA", err}
	}
	return nil
}

func (h *Handle) getSA(dst netip.Addr, spi uint32) (*saState, error) {
	body, err := encodeSAID(h.arch, dst, spi)
	if err != nil {
		return nil, err
	}
	reply, err := h.request(msgGetSA, body, false, msgNewSA)
	if err != nil {
		return nil, err
	}
	return decodeSA(h.arch, reply)
}

func (h *Handle) delSA(dst netip.Addr, spi uint32) error {
	body, err := encodeSAID(h.arch, dst, spi)
	if err != nil {
		return err
	}
	_, err = h.request(msgDelSA, body, true, 0)
	return err
}

// RemoveSAs deletes only the tunnel's two SAs, for a rekey: the
// successor's Install already pointed the same subnets' policies at its
// own SAs, so taking them away (as Remove does) would leave a moment in
// which packets are sent by the usual route, in the clear. What is
// already gone is fine.
func (h *Handle) RemoveSAs(t Tunnel) error {
	out, in, err := t.resolve()
	if err != nil {
		return fmt.Errorf("ipsec: %w", err)
	}
	var errs []error
	for _, sa := range []struct {
		dir string
		sa  SA
	}{{"out", out}, {"in", in}} {
		if err := h.delSA(sa.sa.Dst, sa.sa.SPI); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("delete SA %s (spi %#x): %w", sa.dir, sa.sa.SPI, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ipsec: tunnel %s: %w", t.Name, errors.Join(errs...))
	}
	return nil
}

// Remove takes the tunnel down: policies first (so no packet is sent in
// the clear meanwhile: without the out policy it is routed as usual,
// which for a private remote net means nowhere useful), then the SAs.
// What is already gone is fine; the other failures are all reported.
func (h *Handle) Remove(t Tunnel) error {
	out, in, err := t.resolve()
	if err != nil {
		return fmt.Errorf("ipsec: %w", err)
	}
	var errs []error
	for _, p := range t.policies(out, in) {
		body, err := encodePolicyID(h.arch, p.src, p.dst, p.dir)
		if err == nil {
			_, err = h.request(msgDelPolicy, body, true, 0)
		}
		if err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("delete policy %s (%s -> %s): %w", dirNames[p.dir], p.src, p.dst, err))
		}
	}
	for _, sa := range []struct {
		dir string
		sa  SA
	}{{"out", out}, {"in", in}} {
		if err := h.delSA(sa.sa.Dst, sa.sa.SPI); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("delete SA %s (spi %#x): %w", sa.dir, sa.sa.SPI, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ipsec: tunnel %s: %w", t.Name, errors.Join(errs...))
	}
	return nil
}

// gone reports whether a delete failed because there was nothing to
// delete: the kernel says ENOENT for a policy, ESRCH for an SA.
func gone(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) }

// SACounters are one SA's counters since it was installed, as the
// kernel keeps them. Bytes count the inner IP packets (before ESP on the
// way out, after it on the way in).
type SACounters struct {
	SPI             uint32
	Bytes, Packets  uint64
	ReplayDrops     uint32 // packets seen before (xfrm_stats.replay)
	WindowDrops     uint32 // packets older than the window (xfrm_stats.replay_window)
	IntegrityFailed uint32 // ICV mismatch: wrong key or tampering (xfrm_stats.integrity_failed)
	// Seq is the SA's sequence number (64 bits with ESN): on an
	// outbound SA the last one sent, on an inbound one the highest
	// received. 0 on an SA without a replay window.
	Seq uint64
}

// Errors is the number of packets the SA refused.
func (c SACounters) Errors() uint64 {
	return uint64(c.ReplayDrops) + uint64(c.WindowDrops) + uint64(c.IntegrityFailed)
}

// TunnelCounters are both directions' counters.
type TunnelCounters struct {
	Out, In SACounters
}

// Counters reads the tunnel's SA counters from the kernel.
func (h *Handle) Counters(t Tunnel) (TunnelCounters, error) {
	out, in, err := t.resolve()
	if err != nil {
		return TunnelCounters{}, fmt.Errorf("ipsec: %w", err)
	}
	var tc TunnelCounters
	for _, d := range []struct {
		dir string
		sa  SA
		c   *SACounters
	}{{"out", out, &tc.Out}, {"in", in, &tc.In}} {
		s, err := h.getSA(d.sa.Dst, d.sa.SPI)
		if err != nil {
			return TunnelCounters{}, fmt.Errorf("ipsec: tunnel %s: read SA %s (spi %#x): %w", t.Name, d.dir, d.sa.SPI, err)
		}
		*d.c = SACounters{SPI: s.spi, Bytes: s.bytes, Packets: s.packets,
			ReplayDrops: s.replayDrops, WindowDrops: s.windowDrops, IntegrityFailed: s.integrityFailed}
		if d.dir == "out" {
			d.c.Seq = s.oseq
		} else {
			d.c.Seq = s.seq
		}
	}
	return tc, nil
}
