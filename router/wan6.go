package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"time"

	"github.com/vishvananda/netlink"

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
		n = &lan6{v: s.IPv6, domain: s.LAN.LocalDomain(), mtu: s.LAN.MTU, forwarder: s.LAN.ForwarderOn(), ula: ula, lanIf: r.lanIf, links: r.links, logf: r.logf,
			firewall: func(lans []netip.Prefix) error {
				r.svc.mu.Lock()
				r.svc.lan6Prefixes = lans
				r.svc.mu.Unlock()
				return r.applyFirewall()
			},
			changed: func(addrs []netip.Prefix) { r.lan6Moved(ctx, addrs) },
		}
		_, adv, err := lan6Plan(n.v, n.domain, n.mtu, n.forwarder, ula, nil, time.Now())
		if prev != nil {
			adv = prev.advert()
		}
		if err == nil {
			n.ra, err = ra.New(ra.Config{Interface: r.lanIf, Log: r.serviceLog()}, adv)
		}
		if err == nil {
			n.info, err = dhcp6.NewInfoServer(dhcp6.InfoConfig{Interface: r.lanIf, Log: r.serviceLog()})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("ipv6: %w", err))
			n = nil
		}
	}
	if n != nil {
		if err := n.apply(prevLease); err != nil {
			errs = append(errs, err)
		}
		r.goService("ra", ctx, r.inNS6(n.ra.Serve))
		r.goService("dhcp6-info", ctx, r.inNS6(n.info.Serve))
	}
	r.svc.mu.Lock()
	r.svc.lan6, r.svc.v6mode, r.svc.lease6 = n, mode, prevLease
	r.svc.mu.Unlock()

	update := func(l *dhcp6.Lease) {
		r.svc.mu.Lock()
		r.svc.lease6 = l
		r.svc.mu.Unlock()
		if l != nil && l.Address.IsValid() {
			if err := r.links.addAddr6(r.wanIf, netip.PrefixFrom(l.Address, 128)); err != nil {
				r.logf("ipv6: WAN %v", err)
			}
		}
		if n != nil {
			if err := n.apply(l); err != nil {
				r.logf("%v", err)
			}
		}
	}
	switch mode {
	case site.IPv6ModeOff:
		r.svc.set("ipv6", "LAN only (ULA): the WAN's IPv6 is off")
	case site.IPv6ModeStatic:
		errs = append(errs, r.staticWAN6(s.IPv6.WAN, update))
		r.svc.set("ipv6", "static")
	default:
		cfg := dhcp6.Config{Interface: r.wanIf, Address: mode == site.IPv6ModeDHCPv6, Update: update, Log: r.serviceLog()}
		if s.IPv6.WAN.WantsPD() && n != nil {
			cfg.PDLength = s.IPv6.WAN.PDHint()
		}
		if r.cfg.Values != nil {
			cfg.Store = dhcp6.InStore(r.cfg.Values)
		}
		if cfg.PDLength == 0 && !cfg.Address {
			r.svc.set("ipv6", "WAN by SLAAC, no LAN to delegate to")
			break
		}
		c, err := dhcp6.New(cfg)
		if err != nil {
			errs = append(errs, fmt.Errorf("ipv6: %w", err))
			break
		}
		r.svc.set("ipv6", "DHCPv6 on "+r.wanIf)
		r.goService("dhcp6", ctx, r.inNS6(c.Run))
	}
	return errors.Join(errs...)
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
	n, l, mode := r.svc.lan6, r.svc.lease6, r.svc.v6mode
	r.svc.mu.Unlock()
	if mode == "" {
		return nil
	}
	st := &IPv6Status{Mode: mode}
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

// inNS6 is fn run through r.inNS.
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

// v6Services are what startIPv6 runs, in the order a push stops them.
var v6Services = []string{"dhcp6", "dhcp6-info", "ra", "dns6"}

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
	}
	if err := os.WriteFile(r.cfg.Root+"/proc/sys/net/ipv6/conf/all/forwarding", []byte("0\n"), 0o644); err != nil {
		r.logf("ipv6: forwarding off: %v", err)
	}
	r.svc.mu.Lock()
	r.svc.lan6, r.svc.lease6, r.svc.v6mode = nil, nil, ""
	r.svc.mu.Unlock()
	r.svc.set("ipv6", "off")
}
