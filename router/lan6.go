package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/router/dhcp6"
	"github.com/ocfw/ocfw/router/ra"
	"github.com/ocfw/ocfw/site"
)

// routerID is the router's interface identifier in each LAN /64 (::1):
// fixed, so the address hosts are told for DNS stays the same when the
// delegated prefix changes only in its upper bits.
var routerID = netip.MustParseAddr("::1")

// raRouterLifetime is how long LAN hosts keep the router as their v6
// default route while it has a global prefix: RFC 4861's default, three
// times the most time between advertisements.
const raRouterLifetime = 3 * ra.DefaultMaxInterval

// lan6Plan is what the LAN's IPv6 looks like for the site's v6, its ULA
// (invalid when off), the WAN's current delegated (or static) prefix
// lease (nil when there is none) and the time now: the router's own LAN
// addresses (each /64's ::1) and the advertisement that gives the /64s
// to hosts, announcing the router's addresses as resolvers when forwarder
// (the DNS forwarder runs) and the site names none. Pure, so the
// numbering is tested without a kernel.
func lan6Plan(v site.IPv6, domain string, mtu int, forwarder bool, ula netip.Prefix, l *dhcp6.Lease, now time.Time) ([]netip.Prefix, ra.Advert, error) {
	var addrs []netip.Prefix
	adv := ra.Advert{MTU: mtu, DNSLifetime: 3 * ra.DefaultMaxInterval}
	id := v.LAN.SubnetID
	// RFC 7084 L-6, L-7: A and L set unless the site says otherwise.
	noSLAAC, notOnLink := !v.LAN.SLAACOn(), !v.LAN.OnLinkOn()
	if ula.IsValid() {
		p, ok := site.Subnet64(ula, id)
		if !ok {
			return nil, ra.Advert{}, fmt.Errorf("ipv6: subnet id %d does not fit in the ULA %s", id, ula)
		}
		addrs = append(addrs, netip.PrefixFrom(site.WithID(p, routerID), 64))
		adv.Prefixes = append(adv.Prefixes, ra.Prefix{Prefix: p, Valid: ra.ValidLimit, Preferred: ra.PreferredLimit, NoSLAAC: noSLAAC, NotOnLink: notOnLink})
		// RFC 7084 L-3: the router routes to the whole ULA and
		// delegated prefix (RFC 4191's route information), whether or
		// not it is a default router.
		adv.Routes = append(adv.Routes, ra.Route{Prefix: ula.Masked(), Lifetime: ra.ValidLimit})
	}
	if l != nil && l.Prefix.IsValid() {
		valid := l.Obtained.Add(l.PrefixValid).Sub(now)
		preferred := l.Obtained.Add(l.PrefixPreferred).Sub(now)
		if valid > 0 {
			p, ok := site.Subnet64(l.Prefix, id)
			if !ok {
				return nil, ra.Advert{}, fmt.Errorf("ipv6: subnet id %d does not fit in the delegated prefix %s", id, l.Prefix)
			}
			if l.Exclude.IsValid() && l.Exclude.Overlaps(p) {
				// RFC 7084 WPD-8, RFC 6603: the ISP keeps that part.
				return nil, ra.Advert{}, fmt.Errorf("ipv6: subnet id %d of the delegated prefix %s is %s, which the ISP excludes (its own, RFC 6603): set ipv6.lan.subnet_id to another", id, l.Prefix, p)
			}
			// RFC 9096 3.2: never announce more than the limits, and
			// never more than what is left of the delegation.
			// The ends: the advertisements count down to them
			// between renumberings (ra.Advert.At).
			validEnds, preferredEnds := l.Obtained.Add(l.PrefixValid), l.Obtained.Add(l.PrefixPreferred)
			adv.Prefixes = append(adv.Prefixes, ra.Prefix{Prefix: p,
				Valid: min(valid, ra.ValidLimit), Preferred: max(0, min(preferred, ra.PreferredLimit)), NoSLAAC: noSLAAC, NotOnLink: notOnLink,
				ValidEnds: validEnds, PreferredEnds: preferredEnds})
			adv.Routes = append(adv.Routes, ra.Route{Prefix: l.Prefix.Masked(), Lifetime: min(valid, ra.ValidLimit), Ends: validEnds})
			addrs = append(addrs, netip.PrefixFrom(site.WithID(p, routerID), 64))
			adv.RouterLifetime = raRouterLifetime
		}
	}
	for _, d := range v.LAN.DNS {
		if a, err := netip.ParseAddr(d); err == nil {
			adv.RDNSS = append(adv.RDNSS, a)
		}
	}
	if len(v.LAN.DNS) == 0 && forwarder {
		// The router's own forwarder, on its ULA first: that one
		// answers whether or not the ISP is there.
		for _, a := range addrs {
			adv.RDNSS = append(adv.RDNSS, a.Addr())
		}
	}
	adv.DNSSL = v.LAN.Domains
	if len(adv.DNSSL) == 0 && domain != "" {
		adv.DNSSL = []string{domain}
	}
	return addrs, adv, nil
}

// dhcp6Hosts are the site's ipv6.hosts that get a stateful DHCPv6
// address: those with a MAC (checked by the site package).
func dhcp6Hosts(v site.IPv6) []dhcp6.Host {
	var out []dhcp6.Host
	for _, h := range v.Hosts {
		mac, err := net.ParseMAC(h.MAC)
		id, err2 := netip.ParseAddr(h.ID)
		if h.MAC == "" || err != nil || len(mac) != 6 || err2 != nil {
			continue
		}
		out = append(out, dhcp6.Host{MAC: mac, ID: id})
	}
	return out
}

// dhcp6Prefixes are the /64s (and their lifetimes) an advertisement
// gives hosts, for the DHCPv6 server's addresses.
func dhcp6Prefixes(adv ra.Advert) []dhcp6.AddrPrefix {
	var out []dhcp6.AddrPrefix
	for _, p := range adv.Prefixes {
		if p.Prefix.Bits() == 64 && p.Valid > 0 {
			out = append(out, dhcp6.AddrPrefix{Prefix: p.Prefix, Valid: p.Valid, Preferred: p.Preferred,
				ValidEnds: p.ValidEnds, PreferredEnds: p.PreferredEnds})
		}
	}
	return out
}

// lan6 keeps the LAN's IPv6 in step with the WAN's delegation: each
// lease (or its loss) renumbers the router's LAN addresses, tells the
// advertisement server (which deprecates a prefix that went away), and
// rebuilds the firewall's notion of the LAN's prefixes (so a source in
// a withdrawn prefix is not forwarded any more).
type lan6 struct {
	v         site.IPv6
	domain    string
	mtu       int
	forwarder bool
	ula       netip.Prefix
	lanIf     string
	links     *links
	ra        *ra.Server
	// info is the LAN's stateless DHCPv6 server (the O flag's); nil
	// for none.
	info *dhcp6.InfoServer
	// firewall installs the v6 rules for the LAN's /64s and the ones
	// being withdrawn (deprecated: answered with ICMPv6 code 5); nil
	// for none.
	firewall func(lanPrefixes, invalidated []netip.Prefix) error
	// changed is told the router's LAN addresses after each apply that
	// changed them (the DNS forwarder listens there); nil for nobody.
	changed func(addrs []netip.Prefix)
	logf    func(format string, args ...any)

	// applyMu orders renumberings: a lease's and setWANDefault's.
	applyMu sync.Mutex
	mu      sync.Mutex
	lease   *dhcp6.Lease
	addrs   []netip.Prefix
	adv     ra.Advert // as last announced: a push's new server starts from it
	// invalid are the withdrawn /64s routed into the LAN (setInvalid6).
	invalid []netip.Prefix
	// renumbered wakes watchWithdrawn after a renumbering: the next
	// withdrawn /64 to run out may have changed.
	renumbered chan struct{}
	// noWANDefault: the ISP's router said it is no default router
	// (router lifetime 0); noWANRoute: the WAN has no usable v6
	// default route (none, or its link is down). Either way the LAN is
	// told the same of this one.
	noWANDefault bool
	noWANRoute   bool
}

// advert is what the LAN was last told.
func (n *lan6) advert() ra.Advert {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.adv
}

// status is the LAN's v6 addresses and the delegation, for ocf net.
func (n *lan6) status() (addrs []netip.Prefix, lease *dhcp6.Lease) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.addrs), n.lease
}

// apply renumbers the LAN for lease (nil: the delegation is gone).
func (n *lan6) apply(l *dhcp6.Lease) error {
	n.applyMu.Lock()
	addrs, moved, err := n.renumber(l)
	n.applyMu.Unlock()
	if err != nil {
		return err
	}
	// Told without n.mu held: the DNS forwarder it restarts answers
	// local names from status, which takes n.mu.
	if moved && n.changed != nil {
		n.changed(addrs)
	}
	return nil
}

// renumber is apply's part under n.mu: it says whether the router's
// LAN addresses moved.
func (n *lan6) renumber(l *dhcp6.Lease) ([]netip.Prefix, bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	addrs, adv, err := lan6Plan(n.v, n.domain, n.mtu, n.forwarder, n.ula, l, time.Now())
	if err != nil {
		return nil, false, err
	}
	if n.noWANDefault || n.noWANRoute {
		// RFC 7084 G-4/G-5: no default route offered to the LAN
		// while the WAN has none.
		adv.RouterLifetime = 0
	}
	if err := n.links.setAddrs6(n.lanIf, addrs); err != nil {
		return nil, false, err
	}
	// RFC 7084 L-14: the /64s hosts are told are deprecated stay routed
	// into the LAN (the router's own address in them is gone, and with
	// it their connected route), so that the firewall's ICMPv6 error to
	// a host still sending from one reaches it, not the WAN.
	var invalid []netip.Prefix
	if n.ra != nil {
		invalid = n.ra.Withdrawn(adv, time.Now())
	}
	if err := n.links.setInvalid6(n.lanIf, n.invalid, invalid); err != nil {
		n.logf("ipv6: %v", err)
	}
	n.invalid = invalid
	if n.firewall != nil {
		var lans []netip.Prefix
		for _, a := range addrs {
			lans = append(lans, a.Masked())
		}
		if err := n.firewall(lans, invalid); err != nil {
			return nil, false, err
		}
	}
	if n.info != nil {
		// The same resolvers and domains by DHCPv6, for hosts that do
		// not read them off the advertisement (RFC 8106's RDNSS).
		adv.Other = true
		n.info.Set(adv.RDNSS, adv.DNSSL)
		// Stateful addresses for the listed hosts, in the /64s the
		// advertisement gives, with the same lifetimes. M tells hosts
		// to ask; the prefixes keep their A flag, so every other host
		// (told NoAddrsAvail) still has SLAAC, and a listed one has
		// both (RFC 4861 4.2, RFC 8415 18.2.1).
		adv.Managed = n.info.Stateful()
		n.info.SetPrefixes(dhcp6Prefixes(adv))
	}
	if n.ra != nil {
		if err := n.ra.Update(adv); err != nil {
			return nil, false, err
		}
	}
	moved := !slices.Equal(addrs, n.addrs)
	n.lease, n.addrs, n.adv = l, addrs, adv
	select {
	case n.renumbered <- struct{}{}:
	default:
	}
	if moved {
		n.logf("ipv6: LAN %s on %s", addrs, n.lanIf)
	}
	return addrs, moved, nil
}

// watchWithdrawn ends L-14's answer for each withdrawn /64 when the
// valid lifetime hosts were given for it runs out: its route into the
// LAN and its firewall rule go then (RFC 7084 L-14 holds "until the
// prefix is invalid"), not at the next renumbering, which may be
// months away. Runs until ctx ends.
func (n *lan6) watchWithdrawn(ctx context.Context) error {
	if n.ra == nil {
		return nil
	}
	for {
		var expired <-chan time.Time
		var t *time.Timer
		if end := n.ra.WithdrawnEnd(time.Now()); !end.IsZero() {
			// A moment past the end: Withdrawn keeps a prefix until
			// strictly after it.
			t = time.NewTimer(time.Until(end) + 100*time.Millisecond)
			expired = t.C
		}
		select {
		case <-ctx.Done():
		case <-n.renumbered:
		case <-expired:
			if err := n.dropExpired(); err != nil {
				n.logf("ipv6: %v", err)
			}
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// dropExpired takes the withdrawn /64s whose valid lifetime ran out off
// the LAN's routes and the firewall.
func (n *lan6) dropExpired() error {
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	invalid := n.ra.Withdrawn(n.adv, time.Now())
	if slices.Equal(invalid, n.invalid) {
		return nil
	}
	var gone []netip.Prefix
	for _, p := range n.invalid {
		if !slices.Contains(invalid, p) {
			gone = append(gone, p)
		}
	}
	err := n.links.setInvalid6(n.lanIf, n.invalid, invalid)
	n.invalid = invalid
	if n.firewall != nil {
		var lans []netip.Prefix
		for _, a := range n.addrs {
			lans = append(lans, a.Masked())
		}
		err = errors.Join(err, n.firewall(lans, invalid))
	}
	if len(gone) > 0 {
		n.logf("ipv6: %v ran out: no longer routed into %s nor answered as withdrawn", gone, n.lanIf)
	}
	return err
}

// invalidMetric is the withdrawn /64s' routes' metric, the kernel's
// default for IPv6 routes: above a connected route for the same /64 (a
// prefix back in use), below the unreachable ones.
const invalidMetric = 1024

// setInvalid6 routes want (withdrawn /64s) to the LAN interface name
// and removes the routes of had that are not in want.
func (l *links) setInvalid6(name string, had, want []netip.Prefix) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	route := func(p netip.Prefix) *netlink.Route {
		return &netlink.Route{Family: netlink.FAMILY_V6, LinkIndex: ln.Attrs().Index, Protocol: unix.RTPROT_STATIC,
			Priority: invalidMetric, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}}
	}
	var errs []error
	for _, p := range had {
		if !slices.Contains(want, p) {
			if err := l.h.RouteDel(route(p)); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("removing the route for the withdrawn %s: %w", p, err))
			}
		}
	}
	for _, p := range want {
		if err := l.h.RouteReplace(route(p)); err != nil {
			errs = append(errs, fmt.Errorf("routing the withdrawn %s into the LAN: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// setAddrs6 gives name exactly the global and ULA IPv6 addresses want
// (link-local ones stay): a prefix that went away leaves the interface,
// and with it the route that would send replies into the LAN. The
// router's addresses skip duplicate address detection: ::1 in a /64 the
// router numbers is its own by construction, and hosts wait on it.
func (l *links) setAddrs6(name string, want []netip.Prefix) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	old, err := l.h.AddrList(ln, netlink.FAMILY_V6)
	if err != nil {
		return err
	}
	have := map[netip.Prefix]bool{}
	for _, a := range old {
		ap, ok := netip.AddrFromSlice(a.IP)
		if !ok || ap.IsLinkLocalUnicast() {
			continue
		}
		ones, _ := a.Mask.Size()
		p := netip.PrefixFrom(ap, ones)
		if slices.Contains(want, p) {
			have[p] = true
			continue
		}
		if err := l.h.AddrDel(ln, &a); err != nil {
			return fmt.Errorf("%s: removing %v: %w", name, a.IPNet, err)
		}
	}
	for _, p := range want {
		if have[p] {
			continue
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}, Flags: unix.IFA_F_NODAD}
		if err := l.h.AddrAdd(ln, addr); err != nil {
			return fmt.Errorf("%s: address %s: %w", name, p, err)
		}
	}
	return nil
}

// setWANDefault says whether the ISP's router is a default router (its
// advertisement's router lifetime is not 0) and, when that changed,
// tells the LAN at once: an advertisement with router lifetime 0 makes
// hosts drop the router as their default route.
func (n *lan6) setWANDefault(ok bool) error {
	return n.setNo(&n.noWANDefault, !ok)
}

// setWANRoute says whether the WAN has a usable v6 default route and,
// when that changed, tells the LAN at once, as setWANDefault does: a
// default route that ran out, was removed or lost its link comes with
// no advertisement from the ISP (RFC 7084 G-5).
func (n *lan6) setWANRoute(ok bool) error {
	return n.setNo(&n.noWANRoute, !ok)
}

// setNo sets one of the no-default flags (under n.mu) and renumbers
// when it changed.
func (n *lan6) setNo(flag *bool, no bool) error {
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	n.mu.Lock()
	changed := *flag != no
	*flag = no
	l := n.lease
	n.mu.Unlock()
	if !changed {
		return nil
	}
	_, _, err := n.renumber(l)
	return err
}
