package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/router/dhcp6"
	"github.com/ocfw/ocfw/router/ra"
	"github.com/ocfw/ocfw/site"
)

// staticLifetime stands for a static prefix's "forever": lan6Plan caps
// what hosts are told at RFC 9096's limits, and the advertisements
// refresh it long before.
const staticLifetime = 100 * 365 * 24 * time.Hour

// IPv6Status is the router's IPv6 for ocf net.
type IPv6Status struct {
	// Mode is the WAN's (site.IPv6Mode*).
	Mode string `json:"mode"`
	// WAN is the address DHCPv6 gave the WAN (IA_NA), if any; a SLAAC
	// address shows in the WAN interface's addresses.
	WAN string `json:"wan_address,omitempty"`
	// Delegated is the WAN's delegated (or static) prefix and when it
	// runs out; LAN the router's addresses in the LAN's /64s.
	Delegated string   `json:"delegated,omitempty"`
	Expires   string   `json:"expires,omitempty"`
	LAN       []string `json:"lan,omitempty"`
	// ISP is the ISP's router advertisement as last heard (its
	// sender and flags), DNS the WAN's v6 resolvers the forwarder
	// asks.
	ISP string   `json:"isp_ra,omitempty"`
	DNS []string `json:"dns,omitempty"`
}

// startIPv6 runs the site's IPv6 (Start, after the firewall): v6
// forwarding (only with the firewall in place, as for v4), the WAN's
// DHCPv6 client (or its static address and prefix), and the LAN's
// numbering and router advertisements, which follow the delegation.
func (r *Router) startIPv6(ctx context.Context) error {
	s := r.Site()
	if !s.IPv6.On() {
		r.svc.set("ipv6", "off")
		return nil
	}
	mode := s.IPv6.WAN.WANMode()
	var errs []error
	// With forwarding on, the kernel takes router advertisements on an
	// interface only with accept_ra 2: the WAN's own SLAAC address and
	// default route come from the ISP's. The LAN's from nobody: the
	// router is the LAN's router (a host's RA is ignored).
	sysctls := [][2]string{{"net/ipv6/conf/" + r.wanIf + "/accept_ra", "2"}}
	if mode == site.IPv6ModeStatic || mode == site.IPv6ModeOff {
		sysctls[0][1] = "0"
	}
	if r.lanIf != "" {
		sysctls = append(sysctls, [2]string{"net/ipv6/conf/" + r.lanIf + "/accept_ra", "0"})
	}
	r.svc.mu.Lock()
	filtered := r.svc.fw != nil
	r.svc.mu.Unlock()
	if filtered {
		sysctls = append(sysctls, [2]string{"net/ipv6/conf/all/forwarding", "1"})
	} else {
		errs = append(errs, errors.New("ipv6: forwarding stays off: there is no firewall"))
	}
	for _, sc := range sysctls {
		if err := os.WriteFile(r.cfg.Root+"/proc/sys/"+sc[0], []byte(sc[1]+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("ipv6: %w", err))
		}
	}

	var values ra.ValueStore
	if r.cfg.Values != nil {
		values = r.cfg.Values
	}
	ula, err := ra.ULA(s.IPv6.ULA, values, nil)
	if err != nil {
		errs = append(errs, fmt.Errorf("ipv6: ULA: %w", err))
	}
	// A push restarting v6 (stopIPv6 kept them): the new RA server
	// starts from what hosts were told, so a prefix the new config
	// drops is deprecated, not forgotten; and the LAN keeps the
	// delegation while the client asks again with the same WAN.
	r.svc.mu.Lock()
	prev, prevLease := r.svc.lan6, r.svc.lease6
	r.svc.mu.Unlock()
	if prev != nil && !reflect.DeepEqual(prev.v.WAN, s.IPv6.WAN) {
		prevLease = nil
	}
	var n *lan6
	if r.lanIf != "" {
		n = &lan6{renumbered: make(chan struct{}, 1), v: s.IPv6, domain: s.LAN.LocalDomain(), mtu: s.LAN.MTU, forwarder: s.LAN.ForwarderOn(), ula: ula, lanIf: r.lanIf, links: r.links, logf: r.logf,
			firewall: func(lans, invalid []netip.Prefix) error {
				r.svc.mu.Lock()
				r.svc.lan6Prefixes, r.svc.lan6Invalid = lans, invalid
				r.svc.mu.Unlock()
				return r.applyFirewall()
			},
			changed: func(addrs []netip.Prefix) { r.lan6Moved(ctx, addrs) },
		}
		_, adv, err := lan6Plan(n.v, n.domain, n.mtu, n.forwarder, ula, nil, time.Now())
		if prev != nil {
			adv = prev.advert()
			prev.mu.Lock()
			n.invalid = prev.invalid // its routes: the new one removes what it no longer wants
			prev.mu.Unlock()
		}
		if err == nil {
			n.ra, err = ra.New(ra.Config{Interface: r.lanIf, Log: r.serviceLog(), Store: values}, adv)
		}
		if err == nil {
			n.info, err = dhcp6.NewInfoServer(dhcp6.InfoConfig{Interface: r.lanIf, Hosts: dhcp6Hosts(s.IPv6), Log: r.serviceLog()})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("ipv6: %w", err))
			n = nil
		}
	}
	if n != nil {
		r.svc.mu.Lock()
		if h := r.svc.wanRA; h != nil && h.adv.RouterLifetime == 0 {
			n.noWANDefault = true // as the ISP said before a push
		}
		r.svc.mu.Unlock()
		// Before the first advertisement: none offers a default route
		// the WAN does not have.
		n.noWANRoute = mode == site.IPv6ModeOff || !r.links.hasDefault6(r.wanIf)
		if err := n.apply(prevLease); err != nil {
			errs = append(errs, err)
		}
		if err := r.setUnreachable6(unreachable6(ula, prevLease, time.Now())); err != nil {
			errs = append(errs, err)
		}
		r.goService("ra", ctx, r.inNS6(n.ra.Serve))
		r.goService("dhcp6-info", ctx, r.inNS6(n.info.Serve))
		r.goService("ipv6-withdrawn", ctx, r.inNS6(n.watchWithdrawn))
		if mode != site.IPv6ModeOff {
			r.goService("wan6-route", ctx, r.inNS6(func(ctx context.Context) error { return r.watchWANDefault(ctx, n) }))
		}
	}
	r.svc.mu.Lock()
	r.svc.lan6, r.svc.v6mode, r.svc.lease6 = n, mode, prevLease
	r.svc.mu.Unlock()

	// wanAddr is the IA_NA address the WAN carries: a lease without it
	// (run out, or the ISP's M flag gone) takes it off again.
	var wanAddrMu sync.Mutex
	var wanAddr netip.Addr
	update := func(l *dhcp6.Lease) {
		r.svc.mu.Lock()
		r.svc.lease6 = l
		r.svc.mu.Unlock()
		r.upstreamsChanged()
		var next netip.Addr
		if l != nil {
			next = l.Address
		}
		wanAddrMu.Lock()
		if wanAddr.IsValid() && wanAddr != next {
			if err := r.links.delAddr6(r.wanIf, netip.PrefixFrom(wanAddr, 128)); err != nil {
				r.logf("ipv6: WAN %v", err)
			}
		}
		if next.IsValid() {
			if err := r.links.addAddr6(r.wanIf, netip.PrefixFrom(next, 128)); err != nil {
				r.logf("ipv6: WAN %v", err)
			}
		}
		wanAddr = next
		wanAddrMu.Unlock()
		if n != nil {
			if err := n.apply(l); err != nil {
				r.logf("%v", err)
			}
		}
		lanULA := netip.Prefix{}
		if n != nil {
			lanULA = ula
		}
		if err := r.setUnreachable6(unreachable6(lanULA, l, time.Now())); err != nil {
			r.logf("%v", err)
		}
	}
	switch mode {
	case site.IPv6ModeOff:
		r.svc.set("ipv6", "LAN only (ULA): the WAN's IPv6 is off")
	case site.IPv6ModeStatic:
		errs = append(errs, r.staticWAN6(s.IPv6.WAN, update))
		r.svc.set("ipv6", "static")
	default:
		pd := 0
		if s.IPv6.WAN.WantsPD() && n != nil {
			pd = s.IPv6.WAN.PDHint()
		}
		// The client starts at once with what is known (the ISP's
		// advertisement a push kept, else none: a prefix only), and
		// starts again when the ISP's advertisements ask for more.
		r.svc.mu.Lock()
		heard := r.svc.wanRA
		r.svc.mu.Unlock()
		var adv *ra.Advert
		if heard != nil {
			adv = &heard.adv
		}
		if err := r.runDHCP6(ctx, wan6Plan(mode, pd, adv), update); err != nil {
			errs = append(errs, err)
		}
		r.goService("ra-wan", ctx, r.inNS6(func(ctx context.Context) error {
			return ra.Listen(ctx, ra.WANConfig{Interface: r.wanIf, Log: r.serviceLog(), Heard: func(from netip.Addr, a ra.Advert) {
				r.wanHeard(ctx, from, a, mode, pd, update)
			}})
		}))
	}
	return errors.Join(errs...)
}

// wan6Want is what the WAN's DHCPv6 client asks for.
type wan6Want struct {
	// Address is an IA_NA for the WAN, PDLength a delegated prefix of
	// that length (0: none), Info other configuration only.
	Address  bool
	PDLength int
	Info     bool
}

// wan6Plan is what the WAN's DHCPv6 client asks for in mode (auto,
// dhcpv6, slaac) with pd the prefix length the LAN wants (0: no LAN),
// given the ISP's last advertisement (nil: none heard yet). RFC 4861
// 4.2 and RFC 7084 WAA-7: the M flag says addresses are by DHCPv6
// (an IA_NA in auto), the O flag other configuration (resolvers): that
// comes with any stateful exchange, and alone by an Information-request
// when there is nothing to ask for. The prefix is asked for whatever
// the flags say (RFC 7084 WPD-1, WPD-4: IA_PD does not depend on M), and the
// WAN's SLAAC (the A flag) is the kernel's.
func wan6Plan(mode string, pd int, heard *ra.Advert) wan6Want {
	w := wan6Want{PDLength: pd}
	switch mode {
	case site.IPv6ModeDHCPv6:
		w.Address = true
	case site.IPv6ModeAuto:
		w.Address = heard != nil && heard.Managed
	}
	w.Info = !w.Address && w.PDLength == 0 && heard != nil && heard.Other
	return w
}

func (w wan6Want) String() string {
	var what []string
	if w.PDLength != 0 {
		what = append(what, fmt.Sprintf("a /%d prefix", w.PDLength))
	}
	if w.Address {
		what = append(what, "an address")
	}
	if w.Info {
		what = append(what, "other configuration only")
	}
	return strings.Join(what, " and ")
}

// runDHCP6 (re)starts the WAN's DHCPv6 client for w, unless it runs
// for w already; with nothing to ask for, none runs.
func (r *Router) runDHCP6(ctx context.Context, w wan6Want, update func(*dhcp6.Lease)) error {
	r.svc.dhcp6Mu.Lock()
	defer r.svc.dhcp6Mu.Unlock()
	r.svc.mu.Lock()
	same := r.svc.dhcp6Want == w && r.svc.running["dhcp6"] != nil
	r.svc.mu.Unlock()
	if same {
		return nil
	}
	r.svc.stop("dhcp6")
	r.svc.mu.Lock()
	r.svc.dhcp6Want = w
	r.svc.mu.Unlock()
	if w == (wan6Want{}) {
		r.svc.set("ipv6", "WAN by SLAAC, no LAN to delegate to")
		return nil
	}
	cfg := dhcp6.Config{Interface: r.wanIf, Address: w.Address, PDLength: w.PDLength, Info: w.Info, Update: update, Log: r.serviceLog()}
	if r.cfg.Values != nil && !w.Info {
		cfg.Store = dhcp6.InStore(r.cfg.Values)
	}
	c, err := dhcp6.New(cfg)
	if err != nil {
		return fmt.Errorf("ipv6: %w", err)
	}
	r.logf("ipv6: DHCPv6 on %s asks for %v", r.wanIf, w)
	r.svc.set("ipv6", fmt.Sprintf("DHCPv6 on %s: %v", r.wanIf, w))
	r.goService("dhcp6", ctx, r.inNS6(c.Run))
	return nil
}

// heardRA is the ISP's last router advertisement on the WAN.
type heardRA struct {
	from netip.Addr
	adv  ra.Advert
	at   time.Time
}

// wanHeard takes the ISP's advertisement: its flags may ask the DHCPv6
// client for more (or less), its resolvers join the forwarder's.
func (r *Router) wanHeard(ctx context.Context, from netip.Addr, a ra.Advert, mode string, pd int, update func(*dhcp6.Lease)) {
	r.svc.mu.Lock()
	prev := r.svc.wanRA
	r.svc.wanRA = &heardRA{from: from, adv: a, at: time.Now()}
	r.svc.mu.Unlock()
	if prev == nil || prev.adv.Managed != a.Managed || prev.adv.Other != a.Other || !slices.Equal(prev.adv.RDNSS, a.RDNSS) {
		r.logf("ipv6: the ISP's router %s on %s: M %v, O %v, resolvers %v", from, r.wanIf, a.Managed, a.Other, a.RDNSS)
	}
	r.upstreamsChanged()
	r.svc.mu.Lock()
	n := r.svc.lan6
	r.svc.mu.Unlock()
	if n != nil {
		if err := n.setWANDefault(a.RouterLifetime > 0); err != nil {
			r.logf("%v", err)
		}
	}
	if err := r.runDHCP6(ctx, wan6Plan(mode, pd, &a), update); err != nil {
		r.logf("%v", err)
	}
}

// wan6Resolvers are the WAN's v6 resolvers: DHCPv6's (of a lease or of
// an information-only reply), then those the ISP's advertisement names
// (RDNSS) while its lifetime lasts; a link-local one with the WAN's
// zone.
func wan6Resolvers(l *dhcp6.Lease, h *heardRA, wanIf string, now time.Time) []netip.Addr {
	var out []netip.Addr
	add := func(a netip.Addr) {
		if a.IsLinkLocalUnicast() {
			a = a.WithZone(wanIf)
		}
		if a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if l != nil {
		for _, a := range l.DNS {
			add(a)
		}
	}
	if h != nil && h.at.Add(h.adv.DNSLifetime).After(now) {
		for _, a := range h.adv.RDNSS {
			add(a)
		}
	}
	return out
}

// staticWAN6 puts a static v6 WAN in place: its address, its default
// route, and its routed prefix handed to the LAN as a lease that does
// not run out.
func (r *Router) staticWAN6(w site.IPv6WAN, update func(*dhcp6.Lease)) error {
	var errs []error
	if p, err := netip.ParsePrefix(w.Address); err == nil {
		errs = append(errs, r.links.addAddr6(r.wanIf, p))
	}
	if gw, err := netip.ParseAddr(w.Gateway); err == nil {
		errs = append(errs, r.links.defaultRoute6(r.wanIf, gw))
	}
	l := &dhcp6.Lease{Obtained: time.Now()}
	if p, err := netip.ParsePrefix(w.Prefix); err == nil {
		l.Prefix, l.PrefixPreferred, l.PrefixValid = p.Masked(), staticLifetime, staticLifetime
	}
	for _, d := range w.DNS {
		if a, err := netip.ParseAddr(d); err == nil {
			l.DNS = append(l.DNS, a)
		}
	}
	update(l)
	return errors.Join(errs...)
}

// unreachableMetric is the unreachable routes' metric: above any
// other route's, so that one for the same prefix (a delegated /64 that
// is also the LAN's) still wins.
const unreachableMetric = 1 << 24

// unreachable6 are the prefixes the router numbers its LAN from that
// want an unreachable route: the delegated (or static) prefix while
// the lease has valid time left, and the ULA /48 (invalid: none).
// RFC 7084 WPD-5: a packet to a part of the delegated prefix that no
// LAN has must not follow the default route back out of the WAN (the
// ISP routes the prefix here: a loop until the hop limit runs out) but
// be dropped with an ICMPv6 destination unreachable, which the
// kernel's unreachable route type sends; section 4.1 asks the same of
// the ULA (its traffic never goes out of the WAN). The LAN's /64s are
// more specific and still route. A part the ISP excludes (RFC 6603) is
// the ISP's: the routes cover the rest of the prefix only, so packets to
// it follow the default route to the ISP.
func unreachable6(ula netip.Prefix, l *dhcp6.Lease, now time.Time) []netip.Prefix {
	var out []netip.Prefix
	if ula.IsValid() {
		out = append(out, ula.Masked())
	}
	if l != nil && l.Prefix.IsValid() && l.Obtained.Add(l.PrefixValid).After(now) {
		out = append(out, without(l.Prefix.Masked(), l.Exclude)...)
	}
	return out
}

// without is p less x: p itself when x is not inside it, else the
// prefixes, one of each length from p's plus one to x's, that cover the
// rest (the siblings along the way down to x).
func without(p, x netip.Prefix) []netip.Prefix {
	if !x.IsValid() || x.Bits() <= p.Bits() || !p.Contains(x.Addr()) {
		return []netip.Prefix{p}
	}
	x = x.Masked()
	var out []netip.Prefix
	a := x.Addr().As16()
	for n := p.Bits() + 1; n <= x.Bits(); n++ {
		// The half at length n that does not hold x: x's bit n-1
		// flipped.
		s := a
		s[(n-1)/8] ^= 0x80 >> ((n - 1) % 8)
		out = append(out, netip.PrefixFrom(netip.AddrFrom16(s), n).Masked())
	}
	return out
}

// setUnreachable6 leaves exactly want's unreachable routes in place:
// a prefix given up (a delegation that ended or changed, v6 turned
// off) loses its route with it.
func (r *Router) setUnreachable6(want []netip.Prefix) error {
	r.svc.unreach6Mu.Lock()
	defer r.svc.unreach6Mu.Unlock()
	r.svc.mu.Lock()
	had := r.svc.unreach6
	r.svc.mu.Unlock()
	var errs []error
	kept := slices.Clone(want)
	for _, p := range had {
		if !slices.Contains(want, p) {
			if err := r.links.unreachable6(p, false); err != nil {
				errs = append(errs, err)
				kept = append(kept, p) // still there: tried again next time
			}
		}
	}
	for _, p := range want {
		if err := r.links.unreachable6(p, true); err != nil {
			errs = append(errs, err)
		}
	}
	r.svc.mu.Lock()
	r.svc.unreach6 = kept
	r.svc.mu.Unlock()
	if !slices.Equal(had, want) {
		r.logf("ipv6: unreachable routes %v", want)
	}
	return errors.Join(errs...)
}

// unreachable6 adds (or refreshes) the unreachable route for p, or
// removes it (one already gone is no error).
func (l *links) unreachable6(p netip.Prefix, add bool) error {
	rt := &netlink.Route{Family: netlink.FAMILY_V6, Type: unix.RTN_UNREACHABLE, Protocol: unix.RTPROT_STATIC,
		Priority: unreachableMetric, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}}
	if add {
		if err := l.h.RouteReplace(rt); err != nil {
			return fmt.Errorf("ipv6: unreachable route for %s: %w", p, err)
		}
		return nil
	}
	if err := l.h.RouteDel(rt); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("ipv6: removing the unreachable route for %s: %w", p, err)
	}
	return nil
}

// watchWANDefault follows the WAN's v6 default route (the ISP's
// advertisement's or the static gateway's) and the WAN's link: the LAN
// is offered a default route only while the WAN has a usable one, and
// is told at once when it goes (RFC 7084 G-4, G-5): a route that ran
// out or was removed, or a link that lost its carrier, comes with no
// advertisement from the ISP to say so. Netlink's route and link
// notices wake it; it runs in the router's namespace.
func (r *Router) watchWANDefault(ctx context.Context, n *lan6) error {
	routes, lks, done := make(chan netlink.RouteUpdate, 64), make(chan netlink.LinkUpdate, 16), make(chan struct{})
	defer close(done)
	if err := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{}); err != nil {
		return fmt.Errorf("ipv6: route notices: %w", err)
	}
	if err := netlink.LinkSubscribeWithOptions(lks, done, netlink.LinkSubscribeOptions{}); err != nil {
		return fmt.Errorf("ipv6: link notices: %w", err)
	}
	was := true
	check := func() {
		ok := r.links.hasDefault6(r.wanIf)
		if ok != was {
			r.logf("ipv6: the WAN %s has a default route: %v", r.wanIf, ok)
			was = ok
		}
		if err := n.setWANRoute(ok); err != nil {
			r.logf("%v", err)
		}
	}
	check()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-routes:
			if !ok {
				return errors.New("ipv6: route notices ended")
			}
		case _, ok := <-lks:
			if !ok {
				return errors.New("ipv6: link notices ended")
			}
		}
		check()
	}
}

// hasDefault6 says whether name is up with its carrier and holds a v6
// default route through it that the kernel does not mark link-down.
func (l *links) hasDefault6(name string) bool {
	ln, err := l.h.LinkByName(name)
	if err != nil || ln.Attrs().RawFlags&unix.IFF_LOWER_UP == 0 {
		return false
	}
	rts, err := l.h.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{LinkIndex: ln.Attrs().Index}, netlink.RT_FILTER_OIF)
	if err != nil {
		return false
	}
	for _, rt := range rts {
		if (rt.Dst == nil || rt.Dst.IP.IsUnspecified() && isZeroMask(rt.Dst.Mask)) && rt.Flags&unix.RTNH_F_LINKDOWN == 0 {
			return true
		}
	}
	return false
}

func isZeroMask(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}

// addAddr6 adds (or refreshes) one IPv6 address on name.
func (l *links) addAddr6(name string, p netip.Prefix) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}}
	if err := l.h.AddrReplace(ln, addr); err != nil {
		return fmt.Errorf("%s: address %s: %w", name, p, err)
	}
	return nil
}

// delAddr6 removes one IPv6 address from name; one already gone is no
// error.
func (l *links) delAddr6(name string, p netip.Prefix) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}}
	if err := l.h.AddrDel(ln, addr); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("%s: removing %s: %w", name, p, err)
	}
	return nil
}

// defaultRoute6 points the v6 default route at gw through name.
func (l *links) defaultRoute6(name string, gw netip.Addr) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	rt := &netlink.Route{LinkIndex: ln.Attrs().Index, Gw: gw.AsSlice(),
		Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}}
	if err := l.h.RouteReplace(rt); err != nil {
		return fmt.Errorf("v6 default route via %s on %s: %w", gw, name, err)
	}
	return nil
}

// ipv6Status fills in st's IPv6 part.
func (r *Router) ipv6Status() *IPv6Status {
	r.svc.mu.Lock()
	n, l, mode, heard := r.svc.lan6, r.svc.lease6, r.svc.v6mode, r.svc.wanRA
	r.svc.mu.Unlock()
	if mode == "" {
		return nil
	}
	st := &IPv6Status{Mode: mode}
	if heard != nil {
		st.ISP = fmt.Sprintf("%s M=%d O=%d", heard.from, b2i(heard.adv.Managed), b2i(heard.adv.Other))
	}
	for _, a := range wan6Resolvers(l, heard, r.wanIf, time.Now()) {
		st.DNS = append(st.DNS, a.String())
	}
	if l != nil {
		if l.Address.IsValid() {
			st.WAN = l.Address.String()
		}
		if l.Prefix.IsValid() {
			st.Delegated = l.Prefix.String()
			if l.PrefixValid < staticLifetime {
				st.Expires = l.Obtained.Add(l.PrefixValid).UTC().Format(time.RFC3339)
			}
		}
	}
	if n != nil {
		addrs, _ := n.status()
		for _, a := range addrs {
			st.LAN = append(st.LAN, a.String())
		}
	}
	return st
}

// inNS6 is fn run through r.inNS (the v4 DHCP services use it too).
func (r *Router) inNS6(fn func(context.Context) error) func(context.Context) error {
	if r.inNS == nil {
		return fn
	}
	return func(ctx context.Context) error { return r.inNS(func() error { return fn(ctx) }) }
}

// lan6Moved follows the router's LAN addresses with the DNS forwarder:
// it answers the LAN's v6 prefixes and listens on each v6 address (the
// ULA's, which stays, and the delegated prefix's, which moves with it).
func (r *Router) lan6Moved(ctx context.Context, addrs []netip.Prefix) {
	r.listenLAN6(ctx, addrs)
	// A v6 tunnel's route takes the LAN's v6 address as its source
	// (tunnelRoute): set the tunnels up again with the new ones.
	r.kickTunnels()
	r.svc.mu.Lock()
	fwd := r.svc.dns
	r.svc.mu.Unlock()
	if fwd == nil {
		return
	}
	var allowed []netip.Prefix
	if lan, err := r.Site().LAN.Address.Prefix(); err == nil {
		allowed = append(allowed, lan.Masked())
	}
	var listen []string
	for _, a := range addrs {
		allowed = append(allowed, a.Masked())
		listen = append(listen, netip.AddrPortFrom(a.Addr(), 53).String())
	}
	fwd.SetAllowed(allowed)
	r.svc.stop("dns6")
	if len(listen) == 0 {
		return
	}
	r.goService("dns6", ctx, r.inNS6(func(ctx context.Context) error { return fwd.ListenAndServe(ctx, listen) }))
	r.svc.set("dns6", fmt.Sprintf("forwarding on %v (UDP, TCP)", listen))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// upstreamsChanged gives the forwarder the WAN's resolvers when they
// changed (a new v4 or v6 lease, the ISP's advertisement): setting them
// drops its cache, so not on every renewal.
func (r *Router) upstreamsChanged() {
	ups := r.upstreams()
	r.svc.mu.Lock()
	fwd := r.svc.dns
	same := slices.Equal(ups, r.svc.upstreams)
	r.svc.upstreams = ups
	r.svc.mu.Unlock()
	if fwd != nil && !same {
		fwd.SetUpstreams(ups)
	}
}

// listenLAN6 has SSH and the LAN's NTP server listen on the router's
// v6 LAN addresses as well (services ssh6 and ntp6), following them as
// they move: the ULA's stays, the delegated prefix's changes with the
// ISP. SSH open on the WAN listens everywhere already. It runs when the
// addresses move and when either server starts.
func (r *Router) listenLAN6(ctx context.Context, addrs []netip.Prefix) {
	r.svc.listen6Mu.Lock()
	defer r.svc.listen6Mu.Unlock()
	r.svc.mu.Lock()
	srv, ts := r.svc.ssh, r.svc.ntpLAN
	r.svc.mu.Unlock()
	r.svc.stop("ssh6")
	r.svc.stop("ntp6")
	s := r.Site()
	var lan4 netip.Prefix
	if p, err := s.LAN.Address.Prefix(); err == nil {
		lan4 = p
	}
	if ts != nil {
		allowed := []netip.Prefix{lan4.Masked()}
		for _, a := range addrs {
			allowed = append(allowed, a.Masked())
		}
		ts.SetAllowed(allowed)
	}
	if len(addrs) == 0 {
		return
	}
	if l := sshListen(s); srv != nil && len(l) == 1 && l[0] == netip.AddrPortFrom(lan4.Addr(), uint16(s.SSH.SSHPort())).String() {
		var listen []string
		for _, a := range addrs {
			listen = append(listen, netip.AddrPortFrom(a.Addr(), uint16(s.SSH.SSHPort())).String())
		}
		r.goService("ssh6", ctx, r.inNS6(func(ctx context.Context) error { return srv.ListenAndServe(ctx, listen) }))
		r.svc.set("ssh6", fmt.Sprintf("on %v", listen))
	}
	if ts != nil {
		var listen []string
		for _, a := range addrs {
			listen = append(listen, netip.AddrPortFrom(a.Addr(), 123).String())
		}
		r.goService("ntp6", ctx, r.inNS6(func(ctx context.Context) error {
			// The sockets are opened here, in the namespace inNS6
			// entered; the goroutines serving them may run anywhere.
			var conns []net.PacketConn
			for _, a := range listen {
				c, err := net.ListenPacket("udp", a)
				if err != nil {
					for _, c := range conns {
						c.Close()
					}
					return err
				}
				conns = append(conns, c)
			}
			errs := make(chan error, len(conns))
			for _, c := range conns {
				go func() { errs <- ts.Serve(ctx, c) }()
			}
			var all []error
			for range conns {
				all = append(all, <-errs)
			}
			return errors.Join(all...)
		}))
		r.svc.set("ntp6", fmt.Sprintf("on %v", listen))
	}
}

// lan6Addrs are the router's v6 LAN addresses now (none without v6).
func (r *Router) lan6Addrs() []netip.Prefix {
	r.svc.mu.Lock()
	n := r.svc.lan6
	r.svc.mu.Unlock()
	if n == nil {
		return nil
	}
	addrs, _ := n.status()
	return addrs
}

// v6Services are what startIPv6 runs, in the order a push stops them:
// the WAN's advertisement listener first, so that it restarts no
// DHCPv6 client after the client is stopped.
var v6Services = []string{"ra-wan", "wan6-route", "dhcp6", "dhcp6-info", "ra", "dns6", "ssh6", "ntp6"}

// stopIPv6 stops the v6 services for a push; startIPv6 follows unless
// off. With off the LAN is told first: one last advertisement with
// every prefix deprecated and router lifetime 0 (RFC 7084 L-13's
// withdrawal), then the router's LAN v6 addresses and v6 forwarding go.
func (r *Router) stopIPv6(off bool) {
	r.svc.mu.Lock()
	n := r.svc.lan6
	r.svc.mu.Unlock()
	if off && n != nil && n.ra != nil {
		before := n.ra.Stats().Sent
		if err := n.ra.Update(ra.Advert{}); err != nil {
			r.logf("ipv6: withdrawing the LAN's prefixes: %v", err)
		}
		// Up to the least time between multicast advertisements
		// (3 s) and some: the withdrawal must go out before the stop.
		for end := time.Now().Add(5 * time.Second); n.ra.Stats().Sent == before && time.Now().Before(end); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, name := range v6Services {
		r.svc.stop(name)
	}
	if !off {
		return
	}
	if n != nil {
		if err := r.links.setAddrs6(r.lanIf, nil); err != nil {
			r.logf("ipv6: %v", err)
		}
		n.mu.Lock()
		had := n.invalid
		n.invalid = nil
		n.mu.Unlock()
		if err := r.links.setInvalid6(r.lanIf, had, nil); err != nil {
			r.logf("ipv6: %v", err)
		}
	}
	if err := r.setUnreachable6(nil); err != nil {
		r.logf("%v", err)
	}
	if err := os.WriteFile(r.cfg.Root+"/proc/sys/net/ipv6/conf/all/forwarding", []byte("0\n"), 0o644); err != nil {
		r.logf("ipv6: forwarding off: %v", err)
	}
	r.svc.mu.Lock()
	r.svc.lan6, r.svc.lease6, r.svc.v6mode, r.svc.wanRA, r.svc.dhcp6Want = nil, nil, "", nil, wan6Want{}
	r.svc.mu.Unlock()
	r.upstreamsChanged()
	r.svc.set("ipv6", "off")
}
