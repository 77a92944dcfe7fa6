package router

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/router/childsa"
	"github.com/ocfw/ocfw/router/ike"
	"github.com/ocfw/ocfw/site"
)

// The IKEv2 tunnels run in one ike.Endpoint for the box, on UDP 500 and
// 4500 of the WAN's address; its CHILD SAs go into the kernel through a
// childsa.Sink. The endpoint is made when the WAN holds the tunnels' local
// address and made again when that or the set of ready tunnels changes.

// CipherDriver is the boot's engine choice for one cipher: the kernel
// driver an SA made now binds (the engine the self-test proved, or
// software).
type CipherDriver struct {
	Cipher   string `json:"cipher"`             // catalog name, aes-128-cbc
	Driver   string `json:"driver"`             // e.g. geode-aes-cbc, cbc(aes-generic)
	Hardware bool   `json:"hardware,omitempty"` // a hardware engine
}

// SetCipherDrivers tells the router the boot's engine choice, before
// CryptoSettled: IKEv2 tunnels propose the ciphers of the proven
// hardware engines first, and `ocf net` names each SA's driver.
func (r *Router) SetCipherDrivers(ds []CipherDriver) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drivers = slices.Clone(ds)
}

// driverOf is the driver the engine choice gave cipher ("" unknown).
func (r *Router) driverOf(cipher string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.drivers {
		if d.Cipher == cipher {
			if d.Hardware {
				return d.Driver + " (hardware)"
			}
			return d.Driver
		}
	}
	return ""
}

// fastestCiphers are the ciphers a proven hardware engine serves, in
// the engine choice's order: what PreferCiphers puts first.
func (r *Router) fastestCiphers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.drivers {
		if d.Hardware {
			out = append(out, d.Cipher)
		}
	}
	return out
}

// ikeRun is the running endpoint.
type ikeRun struct {
	ep     *ike.Endpoint
	sink   *childsa.Sink
	locals []netip.Addr
	key    string // the addresses and peers it was made for
	done   chan struct{}
}

// readTunnelIKE resolves an IKEv2 tunnel's settings and reads its PSK
// from the card: the octets (kept in memory only), or why the tunnel
// cannot run. No message quotes the PSK.
func (r *Router) readTunnelIKE(t site.Tunnel) (*site.IKE, []byte, string) {
	const where = "the card's ocfw folder"
	k, err := r.Site().IKE(t)
	if err != nil {
		return nil, nil, err.Error()
	}
	files := r.files()
	if files == nil {
		return nil, nil, fmt.Sprintf("no data partition: the PSK file %s is read from %s", t.PSK, where)
	}
	data, err := files.ReadFile(t.PSK, site.MaxTunnelPSKSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Sprintf("no PSK file %s in %s (make it with ocfw tunnel psk and copy it beside site.json)", t.PSK, where)
	case err != nil:
		return nil, nil, fmt.Sprintf("PSK file %s: %v", t.PSK, err)
	}
	p, errs := site.TunnelPSKFor(t, data)
	if len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return nil, nil, strings.Join(msgs, "; ")
	}
	return k, p.Octets(), ""
}

// ikeProposals turns the site's proposals into IKE's: for the IKE SA
// (esp false) each with its PRFs and groups; for CHILD SAs with ESN
// offered (preferred, as manual tunnels use it) and, with pfs, the IKE
// SA's groups for the rekeys' own Diffie-Hellman.
func ikeProposals(ps []site.Proposal, esp bool, pfs []site.Transform) []ike.Proposal {
	var out []ike.Proposal
	for _, p := range ps {
		q := ike.Proposal{Protocol: ike.ProtoIKE}
		if esp {
			q.Protocol = ike.ProtoESP
		}
		add := func(trs []site.Transform) {
			for _, tr := range trs {
				q.Transforms = append(q.Transforms, ike.T(ike.TransformType(tr.Type), tr.ID, uint16(tr.KeyBits)))
			}
		}
		add(p.Encr)
		add(p.Integ)
		if esp {
			add(pfs)
			q.Transforms = append(q.Transforms, ike.T(ike.TransformESN, ike.ESN_YES, 0), ike.T(ike.TransformESN, ike.ESN_NO, 0))
		} else {
			add(p.PRF)
			add(p.DH)
		}
		out = append(out, q)
	}
	return out
}

// ikeIdentity is a site id as IKE's ID payload body.
func ikeIdentity(id site.Identity) ike.Identity {
	if id.Type == site.IDIPv4 || id.Type == site.IDIPv6 {
		if a, err := netip.ParseAddr(id.Value); err == nil {
			return ike.AddrIdentity(a)
		}
	}
	return ike.Identity{IDType: ike.IDType(id.Type), Data: []byte(id.Value)}
}

// ikePeer is an IKEv2 tunnel as the endpoint's peer. fastest are the
// ciphers the proven engines serve (site.PreferCiphers).
func ikePeer(k *site.IKE, psk []byte, fastest []string) ike.Peer {
	var groups []site.Transform
	if k.PFS {
		seen := map[uint16]bool{}
		for _, p := range k.IKEProposals {
			for _, g := range p.DH {
				if !seen[g.ID] {
					seen[g.ID] = true
					groups = append(groups, g)
				}
			}
		}
	}
	return ike.Peer{
		Name:     k.Name,
		Local:    netip.AddrPortFrom(k.Local, 500),
		Remote:   netip.AddrPortFrom(k.Peer, 500),
		LocalID:  ikeIdentity(k.LocalID),
		RemoteID: ikeIdentity(k.RemoteID),
		PSK:      psk,
		IKE:      ikeProposals(k.IKEProposals, false, nil),
		Child:    ikeProposals(site.PreferCiphers(k.ESPProposals, fastest), true, groups),
		LocalTS:  []netip.Prefix{k.LocalSubnet}, RemoteTS: []netip.Prefix{k.RemoteSubnet},
		IKELifetime: k.IKELifetime, ChildLifetime: k.ChildLifetime,
		DPD:      k.DPD,
		Initiate: true,
	}
}

// listenIKE opens the endpoint's sockets on each local address (the
// WAN's IPv4 one, its IPv6 one, or both): UDP 500, and UDP 4500 with
// UDP_ENCAP (ike.ESPInUDP) so that the kernel takes the ESP-in-UDP
// packets on it (RFC 3948) and hands IKE (after its zero marker) to the
// endpoint. Two families make one Conn each way (ike.MultiConn).
func listenIKE(locals []netip.Addr) (ike500, natt ike.Conn, err error) {
	var c500, c4500 []ike.Conn
	closeAll := func() {
		for _, c := range append(c500, c4500...) {
			c.Close()
		}
	}
	for _, local := range locals {
		a, b, err := listenIKEOn(local)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		c500, c4500 = append(c500, ike.UDPConn(a)), append(c4500, ike.UDPConn(b))
	}
	if len(c500) == 0 {
		return nil, nil, fmt.Errorf("IKE: no local address")
	}
	return ike.MultiConn(c500...), ike.MultiConn(c4500...), nil
}

// listenUDP binds a UDP socket of local's family. An IPv6 one binds with
// IPV6_FREEBIND: the WAN's IPv6 address may still be tentative (duplicate
// address detection) or not yet there, and IKE for its tunnels should
// not fail for that; datagrams arrive once the address is.
func listenUDP(local netip.Addr, port uint16) (*net.UDPConn, error) {
	network := "udp4"
	var lc net.ListenConfig
	if local.Is6() {
		network = "udp6"
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_FREEBIND, 1)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	pc, err := lc.ListenPacket(context.Background(), network, netip.AddrPortFrom(local, port).String())
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

func listenIKEOn(local netip.Addr) (ike500, natt *net.UDPConn, err error) {
	ike500, err = listenUDP(local, 500)
	if err != nil {
		return nil, nil, fmt.Errorf("IKE socket on %s port 500: %w", local, err)
	}
	natt, err = listenUDP(local, 4500)
	if err != nil {
		ike500.Close()
		return nil, nil, fmt.Errorf("NAT-T socket on %s port 4500: %w", local, err)
	}
	if err := ike.ESPInUDP(natt); err != nil {
		ike500.Close()
		natt.Close()
		return nil, nil, fmt.Errorf("NAT-T socket on %s port 4500: UDP_ENCAP: %w", local, err)
	}
	return ike500, natt, nil
}

// ikeUp makes the endpoint run the ready IKEv2 tunnels (their peers),
// on their local addresses (the WAN's IPv4 one, its IPv6 one), unless it
// already does. It is called with ts.mu held.
func (r *Router) ikeUp(ts *tunnelSet, ready []*tunnelRun) {
	var names []string
	var locals []netip.Addr
	for _, t := range ready {
		names = append(names, t.site.Name)
		if !slices.Contains(locals, t.ike.Local) {
			locals = append(locals, t.ike.Local)
		}
	}
	// One socket per family: the site's checks hold a tunnel's local
	// end to the WAN's address of its family.
	slices.SortFunc(locals, func(a, b netip.Addr) int { return a.Compare(b) })
	var ls []string
	for _, l := range locals {
		ls = append(ls, l.String())
	}
	local := strings.Join(ls, " and ")
	key := local + " " + strings.Join(names, ",")
	if ts.ike != nil && ts.ike.key == key {
		return
	}
	r.ikeDown(ts)
	if len(ready) == 0 {
		return
	}
	fastest := r.fastestCiphers()
	var peers []ike.Peer
	for _, t := range ready {
		peers = append(peers, ikePeer(t.ike, t.psk, fastest))
	}
	down := func(why string) {
		for _, t := range ready {
			r.tunnelDown(t, why)
		}
	}
	c500, c4500, err := listenIKE(locals)
	if err != nil {
		down(err.Error())
		return
	}
	sink := childsa.New(ts.h)
	ep, err := ike.New(ike.Config{Peers: peers, Conn: c500, NATT: c4500, Sink: sink,
		Logf: func(format string, args ...any) { r.logf("ipsec: "+format, args...) }})
	if err != nil {
		c500.Close()
		c4500.Close()
		down(err.Error())
		return
	}
	run := &ikeRun{ep: ep, sink: sink, locals: locals, key: key, done: make(chan struct{})}
	ts.ike = run
	go func() {
		defer close(run.done)
		if err := ep.Run(); err != nil {
			r.logf("ipsec: the IKE endpoint stopped: %v", err)
		}
	}()
	for _, t := range ready {
		t.state, t.since = "connecting", time.Now()
	}
	r.logf("ipsec: IKEv2 on %s udp 500 and 4500 for tunnel(s) %s", local, strings.Join(names, ", "))
}

// ikeDown stops the endpoint, its CHILD SAs out of the kernel (the
// peers find out by their liveness checks, or by INITIAL_CONTACT when
// this end comes back). Called with ts.mu held.
func (r *Router) ikeDown(ts *tunnelSet) {
	run := ts.ike
	if run == nil {
		return
	}
	ts.ike = nil
	run.ep.Close()
	<-run.done
	if err := run.sink.RemoveAll(); err != nil {
		r.logf("ipsec: removing the IKEv2 tunnels' SAs: %v", err)
	}
}

// watchIKE follows the endpoint's IKE SAs into the tunnels' states and
// logs each change once: up (with the proposal), or down with the
// endpoint's reason (a wrong PSK, a dead peer, no proposal chosen).
func (r *Router) watchIKE(ts *tunnelSet) {
	if ts.ike == nil {
		return
	}
	for _, ps := range ts.ike.ep.Status() {
		t := ts.byName(ps.Name)
		if t == nil || t.ike == nil {
			continue
		}
		state := ikeState(ps)
		if state == t.state {
			continue
		}
		if strings.HasPrefix(state, "connecting") && strings.HasPrefix(t.state, "connecting") {
			continue
		}
		t.state, t.since = state, time.Now()
		r.logf("ipsec: tunnel %s %s", t.site.Name, state)
	}
}

// ikeWatch is how often the IKEv2 tunnels' states are followed: a
// tunnel is up, or says why not, within seconds of its IKE SA.
const ikeWatch = 2 * time.Second

// watchIKELocked is watchIKE for the ipsec service's ticker.
func (r *Router) watchIKELocked(ts *tunnelSet) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.ike == nil {
		return
	}
	r.watchIKE(ts)
	r.setIPsecService(ts, -1)
}

// ikeState is a tunnel's state from its IKE peer's: "up" with an
// established IKE SA carrying a CHILD SA, "down: why" after a failure,
// else connecting.
func ikeState(ps ike.PeerStatus) string {
	for _, sa := range ps.SAs {
		if sa.State == "established" && len(sa.Children) > 0 {
			return "up"
		}
	}
	if ps.LastError != "" {
		return "down: " + ps.LastError
	}
	return "connecting"
}

func (ts *tunnelSet) byName(name string) *tunnelRun {
	for _, t := range ts.list {
		if t.site.Name == name {
			return t
		}
	}
	return nil
}

// ikeStatus is an IKEv2 tunnel's IKE SAs for `ocf net`, with each
// CHILD SA's kernel counters and cipher driver. Called with ts.mu held.
func (ts *tunnelSet) ikeStatus(t *tunnelRun, driverOf func(string) string) []IKEState {
	if ts.ike == nil {
		return nil
	}
	var ps *ike.PeerStatus
	for _, p := range ts.ike.ep.Status() {
		if p.Name == t.site.Name {
			ps = &p
			break
		}
	}
	if ps == nil {
		return nil
	}
	now := time.Now()
	var out []IKEState
	for _, sa := range ps.SAs {
		st := IKEState{State: sa.State, Role: "responder", PeerID: peerID(sa.PeerID), Proposal: sa.Proposal,
			Established: stamp(sa.Established), LastRekey: stamp(sa.LastRekey), Error: sa.Error}
		if sa.Initiator {
			st.Role = "initiator"
		}
		if sa.Remote.IsValid() {
			st.Remote = sa.Remote.String()
		}
		switch {
		case sa.NATLocal && sa.NATRemote:
			st.NAT = "NAT at both ends"
		case sa.NATLocal:
			st.NAT = "this end behind a NAT"
		case sa.NATRemote:
			st.NAT = "the peer behind a NAT"
		}
		heard := sa.LastInbound
		for _, c := range sa.Children {
			cs := ChildState{Proposal: c.Proposal, Created: stamp(c.Created), Rekeyed: c.Rekeyed}
			if c.Encap != nil {
				cs.Encap = fmt.Sprintf("udp %d -> %d", c.Encap.LocalPort, c.Encap.RemotePort)
			}
			tc, x, ok, err := ts.ike.sink.Counters(c.InSPI)
			switch {
			case !ok:
				cs.Out, cs.In = &SAState{SPI: fmt.Sprintf("0x%08x", c.OutSPI)}, &SAState{SPI: fmt.Sprintf("0x%08x", c.InSPI)}
			case err != nil:
				cs.Error = "its SAs cannot be read: " + err.Error()
			default:
				cs.Out, cs.In = saState(tc.Out), saState(tc.In)
			}
			if ok {
				cs.Driver = driverOf(x.Out.Cipher)
			}
			if li, ok := ts.ike.sink.Heard(c.InSPI); ok && li.After(heard) {
				heard = li
			}
			st.Children = append(st.Children, cs)
		}
		if !heard.IsZero() && (sa.State == "established" || sa.State == "rekeyed") {
			st.Liveness = fmt.Sprintf("last heard %s ago", now.Sub(heard).Round(time.Second))
			if t.ike.DPD > 0 {
				st.Liveness += fmt.Sprintf(", liveness check after %s of silence", t.ike.DPD)
			}
			if !sa.Alive {
				st.Liveness += "; a request is unanswered, retrying"
			}
		}
		out = append(out, st)
	}
	return out
}

// peerID is an identity as the site config writes it: router/ike quotes
// names (ike.Identity's String), `ocf net` shows them as local_id and
// remote_id are written.
func peerID(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
