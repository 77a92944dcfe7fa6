package router

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/dns"
	"github.com/ocfw/ocfw/router/firewall"
	"github.com/ocfw/ocfw/router/netns"
	"github.com/ocfw/ocfw/router/ra"
	"github.com/ocfw/ocfw/site"
)

// The IPv6 lab: an ISP namespace running ISC dhcpd -6 (package
// realclient's server end), the router's namespace (the client end),
// where the router's own v6 code runs in-process, and a LAN host's
// namespace joined to the router's by a veth pair, whose kernel does
// SLAAC from the router's advertisements. No packet leaves the three.
const (
	isp6    = "2001:db8:ffff::1"
	wan6    = "2001:db8:ffff::2"
	ula6Lab = "fd12:3456:789a::/48"
)

// dhcpd6Conf delegates /60s from first..last with short lifetimes, so
// renewals (and a rebind to another server) come within seconds.
func dhcpd6Conf(first, last string) string {
	return `ddns-update-style none;
authoritative;
default-lease-time 40;
max-lease-time 40;
preferred-lifetime 20;
option dhcp6.name-servers 2001:db8:ffff::53;
subnet6 2001:db8:ffff::/64 {
  prefix6 ` + first + ` ` + last + ` /60;
}
`
}

func startDhcpd6(t *testing.T, link *realclient.Link, conf string) *realclient.Proc {
	t.Helper()
	bin := realclient.Need(t, "dhcpd")
	dir := t.TempDir()
	cf, lf, pf := filepath.Join(dir, "dhcpd6.conf"), filepath.Join(dir, "leases6"), filepath.Join(dir, "pid")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return realclient.Start(t, link.Server, realclient.Options{}, bin, "-6", "-f", "-d", "-cf", cf, "-lf", lf, "-pf", pf, link.ServerIf)
}

type v6Lab struct {
	t    *testing.T
	link *realclient.Link
	host *netns.NS
	r    *Router
	// radvd is the ISP's advertisement sender, when the test runs one.
	radvd *realclient.Proc

	mu   sync.Mutex
	fw   [][]netip.Prefix // the LAN prefixes of each ruleset applied
	logs []string
}

func newV6Lab(t *testing.T, subnetID int) *v6Lab {
	t.Helper()
	return newV6LabWith(t, v6LabOptions{subnetID: subnetID, staticWAN: true})
}

// v6LabOptions are how newV6LabWith builds the lab.
type v6LabOptions struct {
	subnetID int
	// staticWAN gives the router's WAN wan6 and a default route to the
	// ISP, as the ISP's advertisements would (for labs without radvd);
	// else they come from the ISP's advertisements.
	staticWAN bool
	// noLAN runs the router without a LAN (and no LAN host).
	noLAN bool
	// firewall applies the router's rulesets in the router's namespace
	// (its own netfilter; the host's is never touched), besides
	// recording them.
	firewall bool
	// hostMAC lists the LAN host's MAC for ipv6.hosts' nas (::10): a
	// stateful DHCPv6 address and the advertisements' M flag.
	hostMAC bool
	// beforeStart runs on the router before startIPv6 (the other
	// services a test wants in place first).
	beforeStart func(*Router)
}

func newV6LabWith(t *testing.T, o v6LabOptions) *v6Lab {
	t.Helper()
	l := &v6Lab{t: t, link: realclient.NewLink(t, isp6+"/64")}
	if !o.noLAN {
		host, err := netns.New("lanhost")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { host.Close() })
		l.host = host
		if err := netns.Veth(l.link.Client, "lan0", "", host, "eth0", ""); err != nil {
			t.Fatal(err)
		}
	}
	if o.staticWAN {
		// The router's WAN address and default route, as the ISP's
		// advertisements would give them (no radvd in this lab: the
		// WAN runs in auto mode, DHCPv6 only for the prefix).
		if err := l.link.Client.AddAddr(l.link.ClientIf, wan6+"/64"); err != nil {
			t.Fatal(err)
		}
		if err := l.link.Client.Route("::/0", netip.MustParseAddr(isp6), netip.Addr{}); err != nil {
			t.Fatal(err)
		}
	}
	s := &site.Site{Hostname: "gw", LAN: site.LAN{Address: "192.168.1.1/24", Domain: "home.arpa"},
		IPv6: site.IPv6{ULA: ula6Lab, LAN: site.IPv6LAN{SubnetID: o.subnetID}, Hosts: []site.IPv6Host{{Name: "nas", ID: "::10"}}}}
	if o.noLAN {
		s.LAN = site.LAN{}
	}
	if o.hostMAC {
		ln, err := l.host.Netlink().LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		s.IPv6.Hosts[0].MAC = ln.Attrs().HardwareAddr.String()
	}
	r := newRouter(Config{Site: s, Log: l.logf})
	if !o.noLAN {
		// The forwarder as startDNS makes it (its v4 listener is not
		// needed here: the LAN host asks over v6).
		lan4, _ := s.LAN.Address.Prefix()
		r.svc.dns = dns.New(dns.Config{Allowed: []netip.Prefix{lan4.Masked()}, Domain: s.LAN.LocalDomain(), Hosts: r.lanHosts,
			Upstreams: r.upstreams(), Dial: r.dialUpstream, Logf: l.logf})
	}
	r.links = &links{h: l.link.Client.Netlink()}
	r.wanIf, r.started = l.link.ClientIf, time.Now()
	if !o.noLAN {
		r.lanIf = "lan0"
	}
	r.inNS = l.link.Client.Do
	r.applyRules = func(rs *firewall.Ruleset) error {
		r.svc.mu.Lock()
		lans := slices.Clone(r.svc.lan6Prefixes)
		r.svc.mu.Unlock()
		l.mu.Lock()
		l.fw = append(l.fw, lans)
		l.mu.Unlock()
		if o.firewall {
			return firewall.Apply(rs, firewall.InNetNS(l.link.Client.FD()))
		}
		return nil
	}
	l.r = r
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		r.wg.Wait()
		if t.Failed() {
			l.mu.Lock()
			t.Logf("router log:\n%s", strings.Join(l.logs, "\n"))
			l.mu.Unlock()
		}
	})
	r.svcCtx = ctx // as startServices leaves it, for Reconfigure
	if o.beforeStart != nil {
		o.beforeStart(r)
	}
	if err := l.link.Client.Do(func() error {
		if err := r.applyFirewall(); err != nil {
			return err
		}
		return r.startIPv6(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *v6Lab) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logs = append(l.logs, time.Now().Format("15:04:05.000 ")+strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// hostAddrs are the LAN host's addresses in p, out of duplicate
// address detection (a tentative one cannot be bound yet).
func (l *v6Lab) hostAddrs(p netip.Prefix) []netlink.Addr {
	nl := l.host.Netlink()
	ln, err := nl.LinkByName("eth0")
	if err != nil {
		l.t.Fatal(err)
	}
	as, err := nl.AddrList(ln, netlink.FAMILY_V6)
	if err != nil {
		l.t.Fatal(err)
	}
	var out []netlink.Addr
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && p.Contains(ip) && a.Flags&unix.IFA_F_TENTATIVE == 0 {
			out = append(out, a)
		}
	}
	return out
}

// delegated is the LAN /64 the router numbers now, from the status.
func (l *v6Lab) delegated(pool netip.Prefix) (netip.Prefix, bool) {
	st := l.r.ipv6Status()
	if st == nil {
		return netip.Prefix{}, false
	}
	for _, a := range st.LAN {
		p, err := netip.ParsePrefix(a)
		if err == nil && pool.Contains(p.Addr()) {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

func waitUntil(timeout time.Duration, cond func() bool) bool {
	end := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ping6 pings dst from src in the LAN host's namespace and says whether
// an answer came.
func (l *v6Lab) ping6(src, dst netip.Addr) (bool, string) {
	ping := realclient.Need(l.t, "ping")
	p := realclient.Start(l.t, l.host, realclient.Options{}, ping, "-6", "-c", "3", "-i", "0.5", "-W", "5", "-I", src.String(), dst.String())
	err := p.Wait(60 * time.Second)
	return err == nil, p.Output()
}

// digAAAA asks the router at server for name's AAAA records from the
// LAN host, over IPv6, and returns the addresses answered.
func (l *v6Lab) digAAAA(server netip.Addr, name string) []string {
	dig := realclient.Need(l.t, "dig")
	p := realclient.Start(l.t, l.host, realclient.Options{}, dig, "+short", "+tries=3", "+time=5", "@"+server.String(), name, "AAAA")
	if err := p.Wait(60 * time.Second); err != nil {
		l.t.Fatalf("dig @%s %s AAAA: %v\n%s", server, name, err, p.Output())
	}
	var out []string
	for _, f := range strings.Fields(p.Output()) {
		if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, a.String())
		}
	}
	slices.Sort(out)
	return out
}

// TestIPv6PrefixDelegationLAN runs the router's v6 (startIPv6) against
// ISC dhcpd -6 delegating a /60: the LAN gets the /64 at the site's
// subnet id and the ULA's, the LAN host's kernel makes its SLAAC
// addresses in both, and its pings from the delegated address reach
// the ISP's host through the router. Then the ISP's server hands out
// another prefix (a new dhcpd with another pool: the rebind at T2 finds
// it): the router's next advertisement deprecates the old /64 (the
// host's address there goes to preferred 0 while the new one appears),
// the router drops its own old address, and the firewall's v6 rules
// are rebuilt with only the new /64 and the ULA's as LAN sources (what
// keeps the old prefix from being forwarded: TestGuestIPv6Firewall
// proves those rules drop such sources in the kernel), and the
// unreachable route moves from the old delegated prefix to the new
// one. Last, a push of
// another subnet id (ocfw push: Reconfigure with the ipv6 part) moves
// the LAN live the same way.
func TestIPv6PrefixDelegationLAN(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about a minute (DHCPv6 exchanges, SLAAC, a rebind at T2 16 s)")
	}
	realclient.Need(t, "ping")
	pool1, pool2 := netip.MustParsePrefix("2001:db8:100::/56"), netip.MustParsePrefix("2001:db8:200::/56")
	ula64 := netip.MustParsePrefix("fd12:3456:789a:3::/64")
	l := newV6Lab(t, 3)
	// The ISP routes its pools to the router, as it would route what
	// it delegates.
	for _, p := range []netip.Prefix{pool1, pool2} {
		if err := l.link.Server.Route(p.String(), netip.MustParseAddr(wan6), netip.Addr{}); err != nil {
			t.Fatal(err)
		}
	}
	srv := startDhcpd6(t, l.link, dhcpd6Conf("2001:db8:100::", "2001:db8:100:f0::"))

	var lan1 netip.Prefix
	if !waitUntil(90*time.Second, func() bool { var ok bool; lan1, ok = l.delegated(pool1); return ok }) {
		t.Fatalf("no LAN prefix from the delegation: status %+v\ndhcpd:\n%s", l.r.ipv6Status(), srv.Output())
	}
	// Subnet id 3 inside the delegated /60.
	if lan1.Bits() != 64 || lan1.Addr().As16()[7]&0x0f != 3 {
		t.Errorf("LAN prefix %v: want the /64 with subnet id 3 of the delegated /60", lan1)
	}
	if !waitUntil(60*time.Second, func() bool { return len(l.hostAddrs(lan1)) > 0 && len(l.hostAddrs(ula64)) > 0 }) {
		t.Fatalf("the LAN host made no SLAAC address in %v and %v: %v %v", lan1, ula64, l.hostAddrs(lan1), l.hostAddrs(ula64))
	}
	old := l.hostAddrs(lan1)[0]
	oldIP, _ := netip.AddrFromSlice(old.IP)
	if ok, out := l.ping6(oldIP, netip.MustParseAddr(isp6)); !ok {
		t.Fatalf("ping6 from %v to the ISP's host through the router failed:\n%s", oldIP, out)
	}
	// The LAN's services run (a failed one says "stopped: why").
	l.r.svc.mu.Lock()
	for _, name := range []string{"ra", "dhcp6-info", "dhcp6", "dns6", "wan6-route"} {
		if st := l.r.svc.state[name]; strings.HasPrefix(st, "stopped") {
			t.Errorf("service %s: %s", name, st)
		}
	}
	if l.r.svc.running["wan6-route"] == nil {
		t.Error("the WAN's default-route watch (service wan6-route) does not run")
	}
	l.r.svc.mu.Unlock()
	// No host has a MAC: no stateful DHCPv6, no M flag (O for the
	// stateless server).
	if adv := l.r.svc.lan6.advert(); adv.Managed || !adv.Other {
		t.Errorf("advertisement M=%v O=%v, want M=0 O=1 with no host's MAC listed", adv.Managed, adv.Other)
	}
	// Hostile LAN: a host's own router advertisement (a prefix and a
	// default route) changes nothing on the router: accept_ra 0 on the
	// LAN, the router is the LAN's router.
	rogue := netip.MustParsePrefix("2001:db8:bad::/64")
	l.sendRogueRA(rogue)
	time.Sleep(2 * time.Second) // a negative: give the kernel time to act on it
	for _, a := range l.routerAddrs("lan0") {
		if rogue.Contains(a) {
			t.Errorf("the router took an address %v from a LAN host's advertisement", a)
		}
	}
	if ln, err := l.link.Client.Netlink().LinkByName("lan0"); err == nil {
		routes, _ := l.link.Client.Netlink().RouteList(ln, netlink.FAMILY_V6)
		for _, rt := range routes {
			if rt.Dst == nil || rt.Dst.String() == "::/0" {
				t.Errorf("the router took a default route from a LAN host's advertisement: %v", rt)
			}
		}
	}
	// DNS over v6: the forwarder on the router's ULA and delegated
	// addresses answers AAAA for its own name and the site's v6 host
	// (::10 in each /64).
	ulaRouter := site.WithID(ula64, routerID)
	for _, c := range []struct {
		server netip.Addr
		name   string
		want   []string
	}{
		{ulaRouter, "gw.home.arpa", sorted(ulaRouter.String(), site.WithID(lan1, routerID).String())},
		{site.WithID(lan1, routerID), "nas.home.arpa", sorted(site.WithID(ula64, netip.MustParseAddr("::10")).String(), site.WithID(lan1, netip.MustParseAddr("::10")).String())},
	} {
		if got := l.digAAAA(c.server, c.name); !slices.Equal(got, c.want) {
			t.Errorf("dig @%s %s AAAA: %v, want %v", c.server, c.name, got, c.want)
		}
	}
	l.mu.Lock()
	lastFW := l.fw[len(l.fw)-1]
	l.mu.Unlock()
	if !slices.Equal(lastFW, []netip.Prefix{ula64, lan1}) {
		t.Errorf("the firewall's LAN prefixes %v, want %v", lastFW, []netip.Prefix{ula64, lan1})
	}

	// The ISP hands out another prefix.
	srv.Kill(t)
	sentBefore := l.r.svc.lan6.ra.Stats().Sent
	srv = startDhcpd6(t, l.link, dhcpd6Conf("2001:db8:200::", "2001:db8:200:f0::"))
	var lan2 netip.Prefix
	if !waitUntil(120*time.Second, func() bool { var ok bool; lan2, ok = l.delegated(pool2); return ok }) {
		t.Fatalf("no LAN prefix from the new pool: status %+v\ndhcpd:\n%s", l.r.ipv6Status(), srv.Output())
	}
	deprecated := func() bool {
		for _, a := range l.hostAddrs(lan1) {
			if a.IP.Equal(old.IP) && a.PreferedLft == 0 {
				return true
			}
		}
		return false
	}
	if !waitUntil(30*time.Second, func() bool { return deprecated() && len(l.hostAddrs(lan2)) > 0 }) {
		t.Fatalf("after the change: old %v, new %v", l.hostAddrs(lan1), l.hostAddrs(lan2))
	}
	// Advertisements are minutes apart after the first few: the one
	// the change sent did it (plus at most the initial ones still due).
	if sent := l.r.svc.lan6.ra.Stats().Sent - sentBefore; sent > 3 {
		t.Errorf("%d advertisements between the change and the deprecation", sent)
	}
	if st := l.r.ipv6Status(); slices.Contains(st.LAN, netip.PrefixFrom(site.WithID(lan1, routerID), 64).String()) {
		t.Errorf("the router keeps its address in the old prefix: %v", st.LAN)
	}
	// RFC 7084 WPD-5's unreachable route follows the delegation: the
	// old /60's is gone with it (TestIPv6PrefixDelegationUnreachable
	// shows the route at work on the wire).
	pd1, pd2 := netip.PrefixFrom(lan1.Addr(), 60).Masked(), netip.PrefixFrom(lan2.Addr(), 60).Masked()
	if got, want := l.unreachableRoutes(), []netip.Prefix{pd2, netip.MustParsePrefix(ula6Lab)}; !slices.Equal(got, want) {
		t.Errorf("unreachable routes after the change from %v: %v, want %v", pd1, got, want)
	}
	l.mu.Lock()
	lastFW = l.fw[len(l.fw)-1]
	l.mu.Unlock()
	if !slices.Equal(lastFW, []netip.Prefix{ula64, lan2}) {
		t.Errorf("the firewall's LAN prefixes after the change %v, want %v", lastFW, []netip.Prefix{ula64, lan2})
	}
	// The forwarder moved to the new address, with the new names.
	if got, want := l.digAAAA(site.WithID(lan2, routerID), "gw"), sorted(ulaRouter.String(), site.WithID(lan2, routerID).String()); !slices.Equal(got, want) {
		t.Errorf("dig @new router address gw AAAA: %v, want %v", got, want)
	}
	newIP, _ := netip.AddrFromSlice(l.hostAddrs(lan2)[0].IP)
	if ok, out := l.ping6(newIP, netip.MustParseAddr(isp6)); !ok {
		t.Fatalf("ping6 from the new prefix %v failed:\n%s", newIP, out)
	}
	// A push moves the LAN to subnet id 5, live: the /64s at id 3 are
	// deprecated, the host numbers itself in the new ones, and the
	// firewall follows.
	s5 := *l.r.Site()
	s5.IPv6.LAN.SubnetID = 5
	if err := l.link.Client.Do(func() error { return l.r.Reconfigure(&s5, nil, []string{PartIPv6}) }); err != nil {
		t.Fatal(err)
	}
	lan5, _ := site.Subnet64(netip.PrefixFrom(lan2.Addr(), 60).Masked(), 5)
	ula5, _ := site.Subnet64(netip.MustParsePrefix(ula6Lab), 5)
	newAddr := l.hostAddrs(lan2)[0]
	movedOn := func() bool {
		old := false
		for _, a := range l.hostAddrs(lan2) {
			old = old || (a.IP.Equal(newAddr.IP) && a.PreferedLft == 0)
		}
		return old && len(l.hostAddrs(lan5)) > 0 && len(l.hostAddrs(ula5)) > 0
	}
	if !waitUntil(60*time.Second, movedOn) {
		t.Fatalf("after the push: id 3 %v, id 5 %v %v", l.hostAddrs(lan2), l.hostAddrs(lan5), l.hostAddrs(ula5))
	}
	if !waitUntil(30*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return slices.Equal(l.fw[len(l.fw)-1], []netip.Prefix{ula5, lan5})
	}) {
		l.mu.Lock()
		t.Errorf("the firewall's LAN prefixes after the push %v, want %v", l.fw[len(l.fw)-1], []netip.Prefix{ula5, lan5})
		l.mu.Unlock()
	}
	lan2 = lan5

	var text strings.Builder
	st := l.r.Status()
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "delegated 2001:db8:200:") || !strings.Contains(text.String(), lan2.Addr().String()) {
		t.Errorf("ocf net does not show the delegation and the LAN's prefix:\n%s", text.String())
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// sendRogueRA sends a router advertisement for p with a default route
// from the LAN host, as a hostile host would.
func (l *v6Lab) sendRogueRA(p netip.Prefix) {
	l.t.Helper()
	m, err := ra.Advert{RouterLifetime: 30 * time.Minute, Prefixes: []ra.Prefix{{Prefix: p, Valid: time.Hour, Preferred: time.Hour}}}.Marshal()
	if err != nil {
		l.t.Fatal(err)
	}
	err = l.host.Do(func() error {
		c, err := net.ListenPacket("ip6:ipv6-icmp", "::")
		if err != nil {
			return err
		}
		defer c.Close()
		pc := ipv6.NewPacketConn(c)
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		// From the host's link-local address, as RFC 4861 wants an
		// advertisement's source.
		var src net.IP
		as, _ := l.host.Netlink().AddrList(nil, netlink.FAMILY_V6)
		for _, a := range as {
			if a.IP.IsLinkLocalUnicast() {
				src = a.IP
			}
		}
		sent := 0
		for end := time.Now().Add(10 * time.Second); sent < 3 && time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if _, err := pc.WriteTo(m, &ipv6.ControlMessage{IfIndex: ifi.Index, HopLimit: 255, Src: src}, &net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: "eth0"}); err == nil {
				sent++
			}
		}
		if sent == 0 {
			return fmt.Errorf("no advertisement could be sent from %v", src)
		}
		return nil
	})
	if err != nil {
		l.t.Fatal(err)
	}
}

// routerAddrs are the router namespace's IPv6 addresses on ifname.
func (l *v6Lab) routerAddrs(ifname string) []netip.Addr {
	nl := l.link.Client.Netlink()
	ln, err := nl.LinkByName(ifname)
	if err != nil {
		l.t.Fatal(err)
	}
	as, err := nl.AddrList(ln, netlink.FAMILY_V6)
	if err != nil {
		l.t.Fatal(err)
	}
	var out []netip.Addr
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip)
		}
	}
	return out
}
