package router

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/router/ipsec"
)

// Files reads the files a user puts in the card's ocfw folder, beside
// site.json: the tunnels' key files. The board's store is one; a missing
// file's error wraps fs.ErrNotExist.
type Files interface {
	ReadFile(name string, max int64) ([]byte, error)
}

// DefaultCryptoWait bounds how long tunnels wait for the boot's engine
// choice (Config.WaitForCrypto): the boot sequence's own backstop.
const DefaultCryptoWait = 10 * time.Minute

// CryptoSettled says the kernel's engine choice is final for this boot
// (the self-test has run and its verdict is applied): the tunnels may
// bind their transforms now. Calling it again does nothing.
func (r *Router) CryptoSettled() {
	r.cryptoOnce.Do(func() {
		if r.cfg.WaitForCrypto {
			close(r.cryptoSettled)
		}
	})
}

// DefaultTunnelCheck is how often the router looks at the tunnels' SA
// counters to say when a peer sends nothing back or packets fail their
// integrity check.
const DefaultTunnelCheck = 20 * time.Second

// tunnelSet is the site's tunnels as the router runs them. One goroutine
// (the "ipsec" service) sets them up and watches them; Status reads them.
// Nothing here waits for a peer: manual keys need no answer from it, so
// a tunnel is up as soon as its SAs and policies are in the kernel.
type tunnelSet struct {
	kick chan struct{} // the WAN changed: set the tunnels up again

	mu   sync.Mutex
	h    *ipsec.Handle
	seqs *ipsec.Seqs // the sequence numbers in the store; nil without one
	list []*tunnelRun
	ike  *ikeRun // the IKEv2 tunnels' endpoint, while it runs
}

// tunnelRun is one site tunnel.
type tunnelRun struct {
	site   site.Tunnel
	addrs  site.TunnelAddrs // for the status even when down
	x      *ipsec.Tunnel    // nil until its key file was read and checked
	keyErr string           // why it has no keys, once read
	// ike and psk are an IKEv2 tunnel's settings and PSK (in memory
	// only), once read and checked.
	ike *site.IKE
	psk []byte

	state string // "up", or "down: why"
	since time.Time
	route string

	// What the watch last said, so that it says it once.
	silentSaid   bool
	integritySaw uint32
	windowSaw    uint32
	storeSaid    bool
	// problem is what the watch found wrong with the peer's packets,
	// for ocf net.
	problem string
}

// TunnelState is one tunnel in `ocf net`.
type TunnelState struct {
	Name         string `json:"name"`
	Local        string `json:"local,omitempty"`
	Peer         string `json:"peer"`
	LocalSubnet  string `json:"local_subnet,omitempty"`
	RemoteSubnet string `json:"remote_subnet"`
	// Keying is ikev2 or manual. A manual tunnel has Cipher, Auth and
	// Keys (its key file); an IKEv2 tunnel its PSK file and IKE SAs.
	Keying string `json:"keying,omitempty"`
	Cipher string `json:"cipher,omitempty"`
	Auth   string `json:"auth,omitempty"`
	Keys   string `json:"keys,omitempty"`
	PSK    string `json:"psk,omitempty"`
	// Driver is the kernel driver of a manual tunnel's cipher (the
	// boot's engine choice); "" unknown.
	Driver string     `json:"driver,omitempty"`
	IKE    []IKEState `json:"ike,omitempty"`
	// State is "up" or "down: why".
	State string `json:"state"`
	Since string `json:"since,omitempty"`
	Route string `json:"route,omitempty"`
	// Problem is what the peer's packets say is wrong, e.g. sequence
	// numbers behind the window or different keys.
	Problem string `json:"problem,omitempty"`
	// Out and In are the SAs' counters while the tunnel is up.
	Out *SAState `json:"out,omitempty"`
	In  *SAState `json:"in,omitempty"`
}

// SAState is one direction's SA counters: Bytes count the inner IP
// packets; Errors are the packets the SA refused (replayed, older than
// the window, failing the integrity check).
type SAState struct {
	SPI             string `json:"spi"`
	Packets         uint64 `json:"packets"`
	Bytes           uint64 `json:"bytes"`
	Errors          uint64 `json:"errors"`
	ReplayDrops     uint32 `json:"replay_drops"`
	WindowDrops     uint32 `json:"window_drops"`
	IntegrityFailed uint32 `json:"integrity_failed"`
}

// IKEState is one IKE SA of an IKEv2 tunnel: its state (connecting,
// authenticating, established, rekeyed, closing, ...), which end
// started it, the peer's identity and address, the chosen proposal,
// when it was made and last rekeyed, what is known of the peer's
// liveness, and its CHILD SAs. Error is why it failed.
type IKEState struct {
	State       string       `json:"state"`
	Role        string       `json:"role"`
	PeerID      string       `json:"peer_id,omitempty"`
	Remote      string       `json:"remote,omitempty"`
	Proposal    string       `json:"proposal,omitempty"`
	Established string       `json:"established,omitempty"`
	LastRekey   string       `json:"last_rekey,omitempty"`
	Liveness    string       `json:"liveness,omitempty"`
	NAT         string       `json:"nat,omitempty"`
	Error       string       `json:"error,omitempty"`
	Children    []ChildState `json:"children,omitempty"`
}

// ChildState is one CHILD SA: its proposal, the kernel driver its
// cipher runs on, ESP-in-UDP ports if any, and the kernel's counters.
type ChildState struct {
	Proposal string   `json:"proposal"`
	Driver   string   `json:"driver,omitempty"`
	Created  string   `json:"created,omitempty"`
	Encap    string   `json:"encap,omitempty"`
	Rekeyed  bool     `json:"rekeyed,omitempty"`
	Error    string   `json:"error,omitempty"`
	Out      *SAState `json:"out,omitempty"`
	In       *SAState `json:"in,omitempty"`
}

func saState(c ipsec.SACounters) *SAState {
	return &SAState{SPI: fmt.Sprintf("0x%08x", c.SPI), Packets: c.Packets, Bytes: c.Bytes, Errors: c.Errors(),
		ReplayDrops: c.ReplayDrops, WindowDrops: c.WindowDrops, IntegrityFailed: c.IntegrityFailed}
}

// startTunnels starts the ipsec service when the site has tunnels. It
// returns at once: the tunnels come up in the background when the WAN
// has its address (wanChanged kicks them) and the kernel's engine choice
// is settled (CryptoSettled), never on the boot's path.
func (r *Router) startTunnels(ctx context.Context) {
	s := r.Site()
	if len(s.Tunnels) == 0 {
		return
	}
	ts := &tunnelSet{kick: make(chan struct{}, 1)}
	ts.seqs = tunnelSeqs(r.cfg.Values)
	state := "down: " + errNoWAN.Error()
	if r.cfg.WaitForCrypto {
		state = "down: waiting for the crypto engines' self-test (the tunnels use the engines it proves)"
	}
	for _, t := range s.Tunnels {
		a, _ := s.TunnelAddrs(t)
		ts.list = append(ts.list, &tunnelRun{site: t, addrs: a, state: state, since: time.Now()})
	}
	r.svc.mu.Lock()
	r.svc.tunnels = ts
	r.svc.mu.Unlock()
	r.svc.set("ipsec", fmt.Sprintf("%d tunnel(s), waiting for the WAN's address", len(ts.list)))
	every := r.cfg.TunnelCheck
	if every <= 0 {
		every = DefaultTunnelCheck
	}
	r.goService("ipsec", ctx, func(ctx context.Context) error {
		select {
		case <-r.cryptoSettled:
		default:
			r.svc.set("ipsec", fmt.Sprintf("%d tunnel(s), waiting for the crypto engines' self-test", len(ts.list)))
			wait := r.cfg.CryptoWait
			if wait <= 0 {
				wait = DefaultCryptoWait
			}
			select {
			case <-r.cryptoSettled:
			case <-time.After(wait):
				r.logf("ipsec: no word of the crypto engines' self-test after %v: the tunnels come up with the kernel's engines as they are", wait)
			case <-ctx.Done():
				return nil
			}
			r.tunnelsUp(ts) // a kick during the wait was taken by nobody
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		ikeTick := time.NewTicker(ikeWatch)
		defer ikeTick.Stop()
		defer func() {
			ts.mu.Lock()
			r.ikeDown(ts)
			ts.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ikeTick.C:
				r.watchIKELocked(ts)
			case <-ts.kick:
				r.tunnelsUp(ts)
			case <-tick.C:
				r.watchTunnels(ts)
			}
		}
	})
}

// tunnelSeqs keeps the tunnels' sequence numbers in v; nil without a
// store. A store found lost lost them too: a key without a record then
// cannot start from 0.
func tunnelSeqs(v Values) *ipsec.Seqs {
	if v == nil {
		return nil
	}
	lost := ""
	if stateLost(v) {
		lost = "the card's store lost its state (no state copy was readable: damage, not a power cut)"
	}
	return ipsec.NewSeqs(v, lost)
}

// kickTunnels asks the ipsec service to set the tunnels up again (the
// WAN changed). It never blocks.
func (r *Router) kickTunnels() {
	r.svc.mu.Lock()
	ts := r.svc.tunnels
	r.svc.mu.Unlock()
	if ts == nil {
		return
	}
	select {
	case ts.kick <- struct{}{}:
	default: // one is pending already
	}
}

// tunnelsUp sets every tunnel up that can be: key file read and checked
// against the site, the WAN holding the tunnel's local address, a route
// to the remote subnet, the SAs and policies installed. A tunnel that
// cannot come up is logged and left down; the others go on. Installing
// is idempotent, so this runs again at every WAN change.
func (r *Router) tunnelsUp(ts *tunnelSet) {
	r.mu.Lock()
	wan := r.wan
	r.mu.Unlock()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.h == nil {
		h, err := ipsec.Open()
		if err != nil {
			for _, t := range ts.list {
				r.tunnelDown(t, fmt.Sprintf("no XFRM: %v", err))
			}
			r.svc.set("ipsec", "off: "+err.Error())
			return
		}
		ts.h = h
	}
	up := 0
	var ikeReady []*tunnelRun
	for _, t := range ts.list {
		if t.site.Mode() == site.KeyingIKEv2 {
			if t.ike == nil && t.keyErr == "" {
				t.ike, t.psk, t.keyErr = r.readTunnelIKE(t.site)
			}
			if t.ike == nil {
				r.tunnelDown(t, t.keyErr)
				continue
			}
			rt, err := tunnelRoute(r.Site(), t.addrs, wan, r.lan6Addrs())
			if err == nil {
				err = r.links.routeTo(r.wanIf, rt)
			}
			if err != nil {
				r.tunnelDown(t, err.Error())
				continue
			}
			t.route = rt.String()
			ikeReady = append(ikeReady, t)
			continue
		}
		if t.x == nil && t.keyErr == "" {
			t.x, t.keyErr = r.readTunnelKeys(t.site)
		}
		if t.x == nil {
			r.tunnelDown(t, t.keyErr)
			continue
		}
		rt, err := tunnelRoute(r.Site(), t.addrs, wan, r.lan6Addrs())
		if err != nil {
			r.tunnelDown(t, err.Error())
			continue
		}
		if err := r.links.routeTo(r.wanIf, rt); err != nil {
			r.tunnelDown(t, err.Error())
			continue
		}
		if ts.seqs == nil {
			r.tunnelDown(t, "no store on the card to keep its sequence numbers in across restarts")
			continue
		}
		if err := ts.seqs.Install(ts.h, *t.x); err != nil {
			r.tunnelDown(t, err.Error())
			continue
		}
		up++
		if t.state == "up" && t.route == rt.String() {
			continue
		}
		t.state, t.since, t.route = "up", time.Now(), rt.String()
		t.silentSaid, t.problem = false, ""
		r.logf("ipsec: tunnel %s up: %s <-> %s, %s <-> %s, %s %s, out spi 0x%08x, in spi 0x%08x; route %s",
			t.site.Name, t.x.Local, t.x.Remote, t.x.LocalNet, t.x.RemoteNet, t.site.Cipher, t.site.Auth,
			t.x.Out.SPI, t.x.In.SPI, t.route)
	}
	// Each ready tunnel's local end is on the WAN (tunnelRoute held an
	// IPv4 one to the WAN's address); with none ready this stops IKE.
	r.ikeUp(ts, ikeReady)
	r.setIPsecService(ts, up)
}

// setIPsecService says how many tunnels are up: manual ones installed
// (manual) and IKEv2 ones with an IKE SA carrying a CHILD SA.
func (r *Router) setIPsecService(ts *tunnelSet, manual int) {
	up := manual
	if manual < 0 {
		up = 0
		for _, t := range ts.list {
			if t.state == "up" {
				up++
			}
		}
	} else {
		for _, t := range ts.list {
			if t.ike != nil && t.state == "up" {
				up++
			}
		}
	}
	r.svc.set("ipsec", fmt.Sprintf("%d of %d tunnel(s) up", up, len(ts.list)))
}

// tunnelDown records why t is down and logs it when that changed.
func (r *Router) tunnelDown(t *tunnelRun, why string) {
	state := "down: " + why
	if t.state == state {
		return
	}
	t.state, t.since, t.route = state, time.Now(), ""
	r.logf("ipsec: tunnel %s left down: %s", t.site.Name, why)
}

// readTunnelKeys reads a tunnel's key file from the card and checks it
// against the site: the ipsec tunnel, or why there is none.
func (r *Router) readTunnelKeys(t site.Tunnel) (*ipsec.Tunnel, string) {
	const where = "the card's ocfw folder"
	if t.Mode() == site.KeyingIKEv2 {
		return nil, "keying ikev2: no key file (the IKE endpoint negotiates the keys)"
	}
	files := r.files()
	if files == nil {
		return nil, fmt.Sprintf("no data partition: the key file %s is read from %s", t.Keys, where)
	}
	data, err := files.ReadFile(t.Keys, site.MaxTunnelKeysSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Sprintf("no key file %s in %s (make it with ocfw tunnel keys and copy it beside site.json)", t.Keys, where)
	case err != nil:
		return nil, fmt.Sprintf("key file %s: %v", t.Keys, err)
	}
	x, errs := tunnelFromKeys(r.Site(), t, data)
	if len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return nil, strings.Join(msgs, "; ")
	}
	return x, ""
}

// tunnelFromKeys checks a key file against the site's tunnel and turns
// both into what the kernel gets.
func tunnelFromKeys(cfg *site.Site, t site.Tunnel, data []byte) (*ipsec.Tunnel, []error) {
	keys, errs := site.ReadTunnelKeys(t.Keys, data)
	if len(errs) > 0 {
		return nil, errs
	}
	s, errs := t.Setup(cfg, keys)
	if len(errs) > 0 {
		return nil, errs
	}
	sa := func(k site.SAKeys) ipsec.SA {
		return ipsec.SA{SPI: k.SPI, Cipher: s.Cipher, Auth: s.Auth, EncKey: k.EncKey, AuthKey: k.AuthKey,
			ReplayWindow: uint32(s.ReplayWindow), ESN: s.ESN}
	}
	x := &ipsec.Tunnel{Name: s.Name, Local: s.Local, Remote: s.Peer, LocalNet: s.LocalSubnet, RemoteNet: s.RemoteSubnet,
		Out: sa(s.Out), In: sa(s.In)}
	if err := x.Validate(); err != nil {
		return nil, []error{err}
	}
	return x, nil
}

// route is the route a tunnel's remote subnet takes: out of the WAN,
// through its gateway or straight to the peer when the peer is on the
// WAN's network, with the LAN address as the source of the box's own
// packets so that they match the tunnel's policy too. An IPv6 remote
// subnet's route names no gateway (Via invalid): an IPv6 route cannot
// have an IPv4 one, and none is needed, since the kernel looks the
// outer address up itself for an SA in tunnel mode; the route only has
// to exist for the XFRM policy to be consulted.
type route struct {
	Dst netip.Prefix
	Via netip.Addr // invalid: out of the WAN's link, no gateway
	Src netip.Addr // invalid: none
}

func (rt route) String() string {
	s := fmt.Sprintf("%s out of the WAN", rt.Dst)
	if rt.Via.IsValid() {
		s = fmt.Sprintf("%s via %s", rt.Dst, rt.Via)
	}
	if rt.Src.IsValid() {
		s += " src " + rt.Src.String()
	}
	return s
}

var errNoWAN = errors.New("the WAN has no address yet")

// tunnelRoute works out a tunnel's route from the WAN as it is now. The
// XFRM policy applies only to packets the kernel has a route for, so the
// remote subnet needs one even where a default route would do. lan6 are
// the router's LAN IPv6 addresses, a source for an IPv6 remote subnet's
// route. A tunnel between IPv6 WAN addresses does not depend on the
// WAN's IPv4 state: its local end is the site's static IPv6 address (or
// one the site names), which IKE binds even before it is configured.
func tunnelRoute(cfg *site.Site, a site.TunnelAddrs, wan wanState, lan6 []netip.Prefix) (route, error) {
	if a.RemoteSubnet.Addr().Is6() {
		if a.Peer.Is4() {
			switch {
			case !wan.Addr.IsValid():
				return route{}, errNoWAN
			case wan.Addr.Addr() != a.Local:
				return route{}, fmt.Errorf("the WAN's address is %s, the tunnel's local end %s: the peer expects ESP from %s", wan.Addr.Addr(), a.Local, a.Local)
			}
		}
		rt := route{Dst: a.RemoteSubnet}
		for _, l := range lan6 {
			if a.LocalSubnet.Contains(l.Addr()) {
				rt.Src = l.Addr()
				break
			}
		}
		return rt, nil
	}
	switch {
	case !wan.Addr.IsValid():
		return route{}, errNoWAN
	case wan.Addr.Addr() != a.Local:
		return route{}, fmt.Errorf("the WAN's address is %s, the tunnel's local end %s: the peer expects ESP from %s", wan.Addr.Addr(), a.Local, a.Local)
	}
	rt := route{Dst: a.RemoteSubnet}
	switch {
	case wan.Addr.Masked().Contains(a.Peer):
		rt.Via = a.Peer
	case wan.Gateway.IsValid():
		rt.Via = wan.Gateway
	default:
		return route{}, fmt.Errorf("the peer %s is not on the WAN's network %s and the WAN has no gateway", a.Peer, wan.Addr.Masked())
	}
	if lan, err := cfg.LAN.Address.Prefix(); err == nil && a.LocalSubnet.Contains(lan.Addr()) {
		rt.Src = lan.Addr()
	}
	return rt, nil
}

// watchTunnels says, once each, when a tunnel's peer sends nothing back
// and when packets from it fail their integrity check: with manual keys
// nothing else would tell that the peer is down or has other keys.
func (r *Router) watchTunnels(ts *tunnelSet) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.h == nil {
		return
	}
	r.watchIKE(ts)
	r.setIPsecService(ts, -1)
	for _, t := range ts.list {
		if t.state != "up" || t.x == nil {
			continue
		}
		c, err := ts.h.Counters(*t.x)
		if err != nil {
			r.tunnelDown(t, fmt.Sprintf("its SAs are gone from the kernel: %v", err))
			continue
		}
		r.keepSeqs(ts, t)
		switch {
		case c.Out.Packets > 0 && c.In.Packets == 0 && !t.silentSaid:
			t.silentSaid = true
			r.logf("ipsec: tunnel %s: %d packet(s) sent to the peer %s since %s and none back: is the peer up, with the same key file?",
				t.site.Name, c.Out.Packets, t.x.Remote, t.since.UTC().Format(time.RFC3339))
		case c.In.Packets > 0 && t.silentSaid:
			t.silentSaid = false
			r.logf("ipsec: tunnel %s: the peer %s answers", t.site.Name, t.x.Remote)
		}
		if p := r.peerProblem(ts, t, c); p != "" {
			t.problem = p
			r.logf("ipsec: tunnel %s: %s", t.site.Name, p)
		}
	}
}

// keepSeqs stores t's sequence numbers as they need (ipsec.Seqs.Check)
// and says when the store cannot keep up.
func (r *Router) keepSeqs(ts *tunnelSet, t *tunnelRun) {
	if ts.seqs == nil {
		return
	}
	_, overrun, err := ts.seqs.Check(ts.h, *t.x)
	switch {
	case overrun:
		r.logf("ipsec: tunnel %s: the outbound sequence numbers passed their reservation in the store before it was renewed (renewed now): a power cut in that moment would have made the peer drop this end's packets", t.site.Name)
	case err != nil && !t.storeSaid:
		t.storeSaid = true
		r.logf("ipsec: tunnel %s: %v (a restart may then make the peer drop this end's packets)", t.site.Name, err)
	case err == nil:
		t.storeSaid = false
	}
}

// peerProblem tells apart, from the inbound SA's refusals, a peer that
// restarted without its sequence numbers from one with other keys: both
// fail the integrity check with ESN (a number behind the window is taken
// for the next 2^32 round), but only a peer with the same keys ever got
// packets through. "" when nothing new was refused.
func (r *Router) peerProblem(ts *tunnelSet, t *tunnelRun, c ipsec.TunnelCounters) string {
	var p string
	goodBefore := c.In.Packets > 0
	if !goodBefore && ts.seqs != nil {
		if _, in, ok, err := ts.seqs.Saved(*t.x); err == nil && ok && in > 0 {
			goodBefore = true // received under these keys before this boot
		}
	}
	behind := "sequence numbers behind this end's window: did the peer restart without its counters (a peer that is not ocfw, or a card replaced)? roll the keys: a new key file from ocfw tunnel keys on both ends"
	switch {
	case c.In.WindowDrops > t.windowSaw:
		p = fmt.Sprintf("%d packet(s) from %s with %s", c.In.WindowDrops-t.windowSaw, t.x.Remote, behind)
	case c.In.IntegrityFailed > t.integritySaw && goodBefore && t.x.In.ESN:
		p = fmt.Sprintf("%d packet(s) from %s failed the integrity check after others with the same keys got through: likely %s", c.In.IntegrityFailed-t.integritySaw, t.x.Remote, behind)
	case c.In.IntegrityFailed > t.integritySaw:
		p = fmt.Sprintf("%d packet(s) from %s failed the integrity check: do both ends have the same key file?", c.In.IntegrityFailed-t.integritySaw, t.x.Remote)
	}
	t.windowSaw, t.integritySaw = c.In.WindowDrops, c.In.IntegrityFailed
	return p
}

// tunnelStatus is every tunnel's state and counters now; driverOf names
// a cipher's kernel driver.
func (ts *tunnelSet) status(driverOf func(string) string) []TunnelState {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []TunnelState
	for _, t := range ts.list {
		st := TunnelState{Name: t.site.Name, Peer: t.site.Peer, RemoteSubnet: t.site.RemoteSubnet, Keying: t.site.Mode(),
			State: t.state, Route: t.route, Problem: t.problem, Since: t.since.UTC().Format(time.RFC3339)}
		if st.Keying == site.KeyingIKEv2 {
			st.PSK = t.site.PSK
			if t.ike != nil {
				st.LocalSubnet = t.ike.LocalSubnet.String()
				st.IKE = ts.ikeStatus(t, driverOf)
			}
			if t.addrs.Local.IsValid() {
				st.Local = t.addrs.Local.String()
			}
			out = append(out, st)
			continue
		}
		st.Cipher, st.Auth, st.Keys, st.Driver = t.site.Cipher, t.site.Auth, t.site.Keys, driverOf(t.site.Cipher)
		if t.addrs.Local.IsValid() {
			st.Local = t.addrs.Local.String()
		}
		if t.addrs.LocalSubnet.IsValid() {
			st.LocalSubnet = t.addrs.LocalSubnet.String()
		}
		if t.state == "up" && ts.h != nil {
			if c, err := ts.h.Counters(*t.x); err == nil {
				st.Out, st.In = saState(c.Out), saState(c.In)
			} else {
				st.State = "up, but its SAs cannot be read: " + err.Error()
			}
		}
		out = append(out, st)
	}
	return out
}
