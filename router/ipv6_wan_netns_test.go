package router

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/netns"
)

// The ISP's resolver in the v6 lab (dnsmasq, the only upstream the
// router has: its v4 WAN has none) and a name it knows.
const (
	ispDNS6   = "2001:db8:ffff::53"
	ispName   = "www.example.test"
	ispNameV4 = "192.0.2.80"
	ispNameV6 = "2001:db8:ffff::80"
)

// startRadvd runs Debian's radvd in ns on ifname with the interface
// block body (flags, prefixes, RDNSS), advertising every few seconds.
func startRadvd(t *testing.T, ns *netns.NS, ifname, body string) *realclient.Proc {
	t.Helper()
	bin := realclient.Need(t, "radvd")
	dir := t.TempDir()
	conf := filepath.Join(dir, "radvd.conf")
	text := fmt.Sprintf("interface %s {\n  AdvSendAdvert on;\n  MinRtrAdvInterval 3;\n  MaxRtrAdvInterval 6;\n%s\n};\n", ifname, body)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// A router: radvd wants forwarding on.
	if err := ns.Sysctl("net/ipv6/conf/all/forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	return realclient.Start(t, ns, realclient.Options{}, bin, "--nodaemon", "--logmethod", "stderr", "--debug", "1",
		"--config", conf, "--pidfile", filepath.Join(dir, "radvd.pid"))
}

// startISPResolver runs dnsmasq in ns as the ISP's resolver on
// ispDNS6 (added to ifname), knowing ispName (A and AAAA) and nothing
// else, logging each query.
func startISPResolver(t *testing.T, ns *netns.NS, ifname string) *realclient.Proc {
	t.Helper()
	bin := realclient.Need(t, "dnsmasq")
	if err := addAddrNoDAD(ns, ifname, ispDNS6+"/128"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := realclient.Start(t, ns, realclient.Options{}, bin, "--no-daemon", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--user=root", "--bind-interfaces", "--listen-address="+ispDNS6, "--log-queries", "--log-facility=-",
		"--host-record="+ispName+","+ispNameV4+","+ispNameV6, "--pid-file="+filepath.Join(dir, "pid"))
	// Ready when it says it started (it then answers).
	if !p.WaitFor(regexp.MustCompile(`started, version`), 1, 30*time.Second) {
		t.Fatalf("dnsmasq did not start:\n%s", p.Output())
	}
	return p
}

// addAddrNoDAD puts addr on ifname in ns, usable at once.
func addAddrNoDAD(ns *netns.NS, ifname, addr string) error {
	ln, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		return err
	}
	p := netip.MustParsePrefix(addr)
	return ns.Netlink().AddrAdd(ln, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}, Flags: unix.IFA_F_NODAD})
}

// routeToRouter makes the ISP route pool to the router's WAN by its
// link-local address (its global one is the router's SLAAC, not known
// in advance).
func (l *v6Lab) routeToRouter(pool netip.Prefix) {
	l.t.Helper()
	var ll net.IP
	if !waitUntil(30*time.Second, func() bool {
		for _, a := range l.routerAddrs(l.link.ClientIf) {
			if a.IsLinkLocalUnicast() {
				ll = a.AsSlice()
				return true
			}
		}
		return false
	}) {
		l.t.Fatal("the router's WAN has no link-local address")
	}
	svc, err := l.link.Server.Netlink().LinkByName(l.link.ServerIf)
	if err != nil {
		l.t.Fatal(err)
	}
	rt := &netlink.Route{LinkIndex: svc.Attrs().Index, Gw: ll, Dst: &net.IPNet{IP: pool.Addr().AsSlice(), Mask: net.CIDRMask(pool.Bits(), 128)}}
	if err := l.link.Server.Netlink().RouteAdd(rt); err != nil {
		l.t.Fatal(err)
	}
}

// digFrom asks the router's forwarder at server for name's records of
// typ from the LAN host over IPv6 and returns the answers.
func (l *v6Lab) digFrom(server netip.Addr, name, typ string) []string {
	dig := realclient.Need(l.t, "dig")
	p := realclient.Start(l.t, l.host, realclient.Options{}, dig, "+short", "+tries=3", "+time=5", "@"+server.String(), name, typ)
	if err := p.Wait(60 * time.Second); err != nil {
		l.t.Fatalf("dig @%s %s %s: %v\n%s", server, name, typ, err, p.Output())
	}
	return strings.Fields(p.Output())
}

// wanAddr is the router's global WAN address in p, if any, out of DAD.
func (l *v6Lab) wanAddr(p netip.Prefix) (netip.Addr, bool) {
	nl := l.link.Client.Netlink()
	ln, err := nl.LinkByName(l.link.ClientIf)
	if err != nil {
		l.t.Fatal(err)
	}
	as, _ := nl.AddrList(ln, netlink.FAMILY_V6)
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && p.Contains(ip) && a.Flags&unix.IFA_F_TENTATIVE == 0 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// ispConf is dhcpd -6's configuration for the flags tests: /60s from
// 2001:db8:100::/56, addresses from range (none when ""), the ISP's
// resolver, lifetimes long enough for the test.
func ispConf(addrRange string) string {
	r := ""
	if addrRange != "" {
		r = "  range6 " + addrRange + ";\n"
	}
	return `ddns-update-style none;
authoritative;
default-lease-time 600;
max-lease-time 600;
option dhcp6.name-servers ` + ispDNS6 + `;
subnet6 2001:db8:ffff::/64 {
` + r + `  prefix6 2001:db8:100:: 2001:db8:100:f0:: /60;
}
`
}

// TestIPv6WANRouterAdvertFlags: in mode auto the router solicits on
// the WAN and follows the ISP's advertisement (Debian's radvd) as RFC
// 4861 and RFC 7084 say, against ISC dhcpd -6:
//   - M=0 O=1 with an autonomous prefix: the WAN's address by SLAAC,
//     DHCPv6 for the delegated prefix only (no IA_NA: the lease has no
//     address), the LAN numbered from it, and the resolvers DHCPv6 and
//     the advertisement's RDNSS name both in the forwarder's upstreams;
//     then the ISP's router lifetime 0: the LAN host loses its default
//     route through the router (RFC 7084 G-4/G-5);
//   - M=0 O=1 and no LAN: an Information-request only, whose resolver
//     becomes the upstream;
//   - M=1 with a prefix not for SLAAC: an IA_NA address on the WAN
//     besides the prefix; then the ISP (a new radvd) drops M and
//     allows SLAAC: the client asks for the prefix only, the DHCPv6
//     address leaves the WAN, a SLAAC one comes, the prefix stays.
func TestIPv6WANRouterAdvertFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("runs radvd and dhcpd -6 in network namespaces (about 20 s)")
	}
	wanNet := netip.MustParsePrefix("2001:db8:ffff::/64")
	pool := netip.MustParsePrefix("2001:db8:100::/56")
	for _, c := range []struct {
		name  string
		radvd string
		dhcpd string
		noLAN bool
		check func(t *testing.T, l *v6Lab)
	}{
		{"M0O1", "  AdvManagedFlag off;\n  AdvOtherConfigFlag on;\n  prefix 2001:db8:ffff::/64 { AdvAutonomous on; };\n  RDNSS 2001:db8:ffff::54 { AdvRDNSSLifetime 60; };",
			ispConf(""), false, func(t *testing.T, l *v6Lab) {
				var wan netip.Addr
				if !waitUntil(60*time.Second, func() bool { var ok bool; wan, ok = l.wanAddr(wanNet); return ok }) {
					t.Fatalf("no SLAAC address on the WAN in %v", wanNet)
				}
				if !waitUntil(60*time.Second, func() bool { _, ok := l.delegated(pool); return ok }) {
					t.Fatalf("no delegated prefix: %+v", l.r.ipv6Status())
				}
				st := l.r.ipv6Status()
				if st.WAN != "" {
					t.Errorf("an IA_NA address %s with M=0", st.WAN)
				}
				if !strings.Contains(st.ISP, "M=0 O=1") {
					t.Errorf("status ISP %q, want M=0 O=1", st.ISP)
				}
				if want := []string{ispDNS6, "2001:db8:ffff::54"}; !waitUntil(20*time.Second, func() bool { return slices.Equal(l.r.ipv6Status().DNS, want) }) {
					t.Errorf("the WAN's v6 resolvers %v, want %v (DHCPv6's, then the RDNSS)", l.r.ipv6Status().DNS, want)
				}
				t.Logf("WAN %s by SLAAC, delegated %s", wan, st.Delegated)
				var text strings.Builder
				full := l.r.Status()
				if err := full.WriteText(&text); err != nil {
					t.Fatal(err)
				}
				if !regexp.MustCompile(`ISP's RA fe80::\S+ M=0 O=1, DNS ` + regexp.QuoteMeta(ispDNS6) + ` 2001:db8:ffff::54`).MatchString(text.String()) {
					t.Errorf("ocf net does not show the ISP's RA and the v6 resolvers:\n%s", text.String())
				}
				// The ISP's router stops being a default router
				// (router lifetime 0): the router tells the LAN the
				// same at once, and the LAN host drops its default
				// route through it.
				if !waitUntil(60*time.Second, l.hostHasDefault) {
					t.Fatal("the LAN host has no default route through the router")
				}
				l.radvd.Kill(t)
				l.radvd = startRadvd(t, l.link.Server, l.link.ServerIf, "  AdvDefaultLifetime 0;\n  AdvManagedFlag off;\n  AdvOtherConfigFlag on;\n  prefix 2001:db8:ffff::/64 { AdvAutonomous on; };")
				if !waitUntil(60*time.Second, func() bool { return !l.hostHasDefault() }) {
					t.Errorf("the LAN host keeps its default route after the ISP's router lifetime 0 (router's: %v)", l.r.svc.lan6.advert().RouterLifetime)
				}
			}},
		{"M0O1NoLAN", "  AdvManagedFlag off;\n  AdvOtherConfigFlag on;\n  prefix 2001:db8:ffff::/64 { AdvAutonomous on; };",
			ispConf(""), true, func(t *testing.T, l *v6Lab) {
				want := []netip.AddrPort{netip.MustParseAddrPort("[" + ispDNS6 + "]:53")}
				if !waitUntil(60*time.Second, func() bool { return slices.Equal(l.r.upstreams(), want) }) {
					t.Fatalf("upstreams %v, want %v from an Information-request", l.r.upstreams(), want)
				}
				l.r.svc.mu.Lock()
				w, lease := l.r.svc.dhcp6Want, l.r.svc.lease6
				l.r.svc.mu.Unlock()
				if w != (wan6Want{Info: true}) || lease == nil || lease.Prefix.IsValid() || lease.Address.IsValid() {
					t.Errorf("asked for %+v, lease %+v: want other configuration only", w, lease)
				}
			}},
		{"M1", "  AdvManagedFlag on;\n  AdvOtherConfigFlag on;\n  prefix 2001:db8:ffff::/64 { AdvAutonomous off; };",
			ispConf("2001:db8:ffff::100 2001:db8:ffff::1ff"), false, func(t *testing.T, l *v6Lab) {
				rng := netip.MustParsePrefix("2001:db8:ffff::100/120")
				var wan netip.Addr
				if !waitUntil(60*time.Second, func() bool { var ok bool; wan, ok = l.wanAddr(rng); return ok }) {
					t.Fatalf("no IA_NA address on the WAN in %v: %+v", rng, l.r.ipv6Status())
				}
				if st := l.r.ipv6Status(); st.WAN != wan.String() || st.Delegated == "" || !strings.Contains(st.ISP, "M=1 O=1") {
					t.Errorf("status %+v: want the address %s, a delegated prefix and M=1 O=1", st, wan)
				}
				for _, a := range l.routerAddrs(l.link.ClientIf) {
					if wanNet.Contains(a) && !rng.Contains(a) {
						t.Errorf("a SLAAC address %v on the WAN from a prefix without the A flag", a)
					}
				}
				// The ISP drops the M flag (and lets hosts do SLAAC):
				// the client asks for the prefix only, and the DHCPv6
				// address leaves the WAN.
				l.radvd.Kill(t)
				startRadvd(t, l.link.Server, l.link.ServerIf, "  AdvManagedFlag off;\n  AdvOtherConfigFlag on;\n  prefix 2001:db8:ffff::/64 { AdvAutonomous on; };")
				if !waitUntil(60*time.Second, func() bool {
					_, dhcp := l.wanAddr(rng)
					_, low := l.wanAddr(netip.MustParsePrefix("2001:db8:ffff::/112"))
					_, all := l.wanAddr(wanNet)
					return !dhcp && all && !low
				}) {
					t.Errorf("after M went: WAN addresses %v, want a SLAAC one and not %s", l.routerAddrs(l.link.ClientIf), wan)
				}
				if st := l.r.ipv6Status(); st.WAN != "" || st.Delegated == "" {
					t.Errorf("after M went: status %+v, want no DHCPv6 address and the prefix kept", st)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newV6LabWith(t, v6LabOptions{noLAN: c.noLAN})
			if !c.noLAN {
				l.routeToRouter(pool)
			}
			l.radvd = startRadvd(t, l.link.Server, l.link.ServerIf, c.radvd)
			srv := startDhcpd6(t, l.link, c.dhcpd)
			c.check(t, l)
			if t.Failed() {
				t.Logf("dhcpd:\n%s", srv.Output())
			}
		})
	}
}

// TestIPv6UpstreamDNS: the WAN's only resolver is a v6 one (dnsmasq in
// the ISP's namespace, named by dhcpd -6's reply; the v4 WAN has none):
// the router's forwarder asks it over v6 for the LAN host, which digs
// A and AAAA at the router's v6 LAN address, and dnsmasq's log shows
// the queries coming from the router's WAN address.
func TestIPv6UpstreamDNS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs dhcpd -6 and dnsmasq in network namespaces (about 10 s)")
	}
	pool := netip.MustParsePrefix("2001:db8:100::/56")
	l := newV6Lab(t, 0)
	if err := l.link.Server.Route(pool.String(), netip.MustParseAddr(wan6), netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	resolver := startISPResolver(t, l.link.Server, l.link.ServerIf)
	startDhcpd6(t, l.link, ispConf(""))
	want := []netip.AddrPort{netip.MustParseAddrPort("[" + ispDNS6 + "]:53")}
	if !waitUntil(60*time.Second, func() bool { return slices.Equal(l.r.upstreams(), want) }) {
		t.Fatalf("upstreams %v, want %v from the DHCPv6 lease", l.r.upstreams(), want)
	}
	ula := netip.MustParsePrefix("fd12:3456:789a::/64")
	if !waitUntil(60*time.Second, func() bool { return len(l.hostAddrs(ula)) > 0 }) {
		t.Fatal("the LAN host has no ULA address")
	}
	router := netip.MustParseAddr("fd12:3456:789a::1")
	for _, c := range []struct{ typ, want string }{{"AAAA", ispNameV6}, {"A", ispNameV4}} {
		if got := l.digFrom(router, ispName, c.typ); !slices.Equal(got, []string{c.want}) {
			t.Errorf("dig @%s %s %s from the LAN host: %v, want %s", router, ispName, c.typ, got, c.want)
		}
	}
	// dnsmasq logs "query[AAAA] www.example.test from 2001:db8:ffff::2".
	for _, typ := range []string{"AAAA", "A"} {
		re := regexp.MustCompile(`query\[` + typ + `\] ` + regexp.QuoteMeta(ispName) + ` from ` + regexp.QuoteMeta(wan6))
		if !re.MatchString(resolver.Output()) {
			t.Errorf("dnsmasq saw no %s query from the router's WAN address %s:\n%s", typ, wan6, resolver.Output())
		}
	}
}

// hostHasDefault says whether the LAN host has an IPv6 default route.
func (l *v6Lab) hostHasDefault() bool {
	routes, err := l.host.Netlink().RouteList(nil, netlink.FAMILY_V6)
	if err != nil {
		l.t.Fatal(err)
	}
	for _, rt := range routes {
		if rt.Dst == nil || rt.Dst.String() == "::/0" {
			return true
		}
	}
	return false
}

// TestIPv6WANDefaultRouteLost: RFC 7084 G-4/G-5 when nothing from the
// ISP says so: with the delegation in place the LAN host has its
// default route through the router; the router's WAN default route
// removed (as when the ISP's advertised lifetime runs out) makes the
// router tell the LAN router lifetime 0 at once, and the host drops
// its default route; the route back brings it back. The same when the
// WAN's link loses its carrier (the ISP's end of the veth down) and
// gets it again.
func TestIPv6WANDefaultRouteLost(t *testing.T) {
	if testing.Short() {
		t.Skip("dhcpd -6 and SLAAC in network namespaces (about 20 s)")
	}
	l, _, _ := delegatedLab(t, v6LabOptions{})
	if !waitUntil(30*time.Second, l.hostHasDefault) {
		t.Fatal("the LAN host has no default route through the router")
	}
	nl := l.link.Client.Netlink()
	wan, err := nl.LinkByName(l.link.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	def := &netlink.Route{LinkIndex: wan.Attrs().Index, Gw: net.ParseIP(isp6), Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}}
	if err := nl.RouteDel(def); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(15*time.Second, func() bool { return !l.hostHasDefault() }) {
		t.Errorf("the router's WAN default route is gone, the LAN host keeps its default route (router lifetime %v)", l.r.svc.lan6.advert().RouterLifetime)
	}
	if err := nl.RouteAdd(def); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(15*time.Second, l.hostHasDefault) {
		t.Errorf("the WAN default route is back, the LAN host has none (router lifetime %v)", l.r.svc.lan6.advert().RouterLifetime)
	}
	isp, err := l.link.Server.Netlink().LinkByName(l.link.ServerIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.link.Server.Netlink().LinkSetDown(isp); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(15*time.Second, func() bool { return !l.hostHasDefault() }) {
		t.Errorf("the WAN lost its carrier, the LAN host keeps its default route (router lifetime %v)", l.r.svc.lan6.advert().RouterLifetime)
	}
	if err := l.link.Server.Netlink().LinkSetUp(isp); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(15*time.Second, l.hostHasDefault) {
		t.Errorf("the WAN's carrier is back, the LAN host has no default route (router lifetime %v)", l.r.svc.lan6.advert().RouterLifetime)
	}
}
