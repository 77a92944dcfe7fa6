package router

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/firewall"
	"github.com/ocfw/ocfw/router/netns"
	"github.com/ocfw/ocfw/site"
)

// tcpdump runs tcpdump in ns on ifname with filter (numeric,
// line-buffered) and returns once it listens; its Output is the
// packets seen so far.
func tcpdump(t *testing.T, ns *netns.NS, ifname, filter string) *realclient.Proc {
	t.Helper()
	bin := realclient.Need(t, "tcpdump")
	p := realclient.Start(t, ns, realclient.Options{}, append([]string{bin, "-n", "-l", "-i", ifname}, strings.Fields(filter)...)...)
	if !p.WaitFor(regexp.MustCompile(`listening on `+ifname), 1, 30*time.Second) {
		t.Fatalf("tcpdump did not start on %s in %s:\n%s", ifname, ns.Name, p.Output())
	}
	return p
}

// lines are the lines of out that contain every one of words.
func lines(out string, words ...string) []string {
	var found []string
	for _, ln := range strings.Split(out, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(ln, w)
		}
		if all {
			found = append(found, ln)
		}
	}
	return found
}

// counters are the router's firewall counters (its namespace's table).
func (l *v6Lab) counters() map[string]uint64 {
	l.t.Helper()
	cs, err := firewall.Counters(firewall.InNetNS(l.link.Client.FD()))
	if err != nil {
		l.t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, c := range cs {
		m[c.Name] = c.Packets
	}
	return m
}

// TestIPv6HostileLAN: with the router's rules applied in its namespace
// (its own netfilter), what a LAN host does against the router is seen
// on the wire and goes nowhere:
//   - spoofed sources: pings to the ISP's host from an address outside
//     the LAN's prefixes (2001:db8:bad::5) and from the ULA leave the
//     LAN host (tcpdump on its side) but never reach the ISP's link
//     (tcpdump there), counted in forward_drop, while the host's own
//     SLAAC address gets through and is answered; pings to the
//     router's own ULA address from the spoofed source are not
//     answered (no answer leaves the WAN, where the route to that
//     source points) and count in spoof_drop, from the host's ULA
//     address they are;
//   - a rogue router and DHCPv6 server on the LAN host (Debian's radvd
//     with a prefix and a default route, dnsmasq serving DHCPv6): their
//     advertisements are on the LAN's wire, the router takes no
//     address, no route and no default route from them, sends no
//     DHCPv6 client message into the LAN, and counts the advertisements
//     as foreign.
func TestIPv6HostileLAN(t *testing.T) {
	if testing.Short() {
		t.Skip("dhcpd -6, radvd, dnsmasq and tcpdump in network namespaces (about 20 s)")
	}
	realclient.Need(t, "ping")
	l, _, good := delegatedLab(t, v6LabOptions{firewall: true})
	isp := netip.MustParseAddr(isp6)
	spoofed := netip.MustParseAddr("2001:db8:bad::5")
	if err := addAddrNoDAD(l.host, "eth0", spoofed.String()+"/64"); err != nil {
		t.Fatal(err)
	}
	// The delegated prefix's address is there (delegatedLab waited for
	// it); the ULA's may come from a later advertisement.
	ula := netip.MustParsePrefix("fd12:3456:789a::/64")
	ulaHost := netip.Addr{}
	if waitUntil(30*time.Second, func() bool { return len(l.hostAddrs(ula)) > 0 }) {
		ulaHost, _ = netip.AddrFromSlice(l.hostAddrs(ula)[0].IP)
	}
	wire := tcpdump(t, l.link.Server, l.link.ServerIf, "icmp6 and ip6[40] == 128")
	lanWire := tcpdump(t, l.host, "eth0", "icmp6 and ip6[40] == 128")
	before := l.counters()[firewall.CounterForwardDrop]
	if !ulaHost.IsValid() {
		t.Fatal("the LAN host has no ULA address")
	}
	// The spoofed pings side by side (each waits out its timeout).
	var bad []*realclient.Proc
	for _, src := range []netip.Addr{spoofed, ulaHost} {
		bad = append(bad, realclient.Start(t, l.host, realclient.Options{}, realclient.Need(t, "ping"),
			"-6", "-c", "3", "-i", "0.3", "-W", "3", "-I", src.String(), isp6))
	}
	if ok, out := l.ping6(good, isp); !ok {
		t.Fatalf("ping6 from the LAN host's own address %s failed:\n%s", good, out)
	}
	for i, p := range bad {
		if err := p.Wait(60 * time.Second); err == nil {
			t.Errorf("a ping from %s (not the LAN's global prefix) was answered:\n%s", []netip.Addr{spoofed, ulaHost}[i], p.Output())
		}
	}
	// The good pings on the ISP's wire show the capture works; the
	// spoofed ones were sent (on the LAN's wire) and never got there.
	if !waitUntil(10*time.Second, func() bool { return len(lines(wire.Output(), good.String()+" > "+isp6)) >= 3 }) {
		t.Fatalf("the ISP's capture does not show the good pings:\n%s", wire.Output())
	}
	for _, src := range []netip.Addr{spoofed, ulaHost} {
		if !waitUntil(10*time.Second, func() bool { return len(lines(lanWire.Output(), src.String()+" > "+isp6)) >= 3 }) {
			t.Errorf("the LAN's capture does not show the 3 pings from %s: the test sent nothing\n%s", src, lanWire.Output())
		}
		if got := lines(wire.Output(), src.String()+" >"); len(got) > 0 {
			t.Errorf("forwarded to the ISP from %s:\n%s", src, strings.Join(got, "\n"))
		}
	}
	if after := l.counters()[firewall.CounterForwardDrop]; after-before < 6 {
		t.Errorf("forward_drop went from %d to %d: want the 6 spoofed pings counted", before, after)
	}

	// The router itself answers the LAN's own sources only: a ping to
	// its ULA address from the spoofed source gets no answer (it would
	// go out of the WAN) and is counted, one from the host's ULA
	// address is answered.
	routerULA := site.WithID(ula, routerID)
	replies := tcpdump(t, l.link.Server, l.link.ServerIf, "icmp6 and ip6[40] == 129")
	spoofBefore := l.counters()[firewall.CounterSpoofDrop]
	if ok, out := l.ping6(ulaHost, routerULA); !ok {
		t.Errorf("ping6 from the host's ULA address to the router's %s failed:\n%s", routerULA, out)
	}
	if ok, out := l.ping6(spoofed, routerULA); ok {
		t.Errorf("the router answered a ping from %s, outside the LAN's prefixes:\n%s", spoofed, out)
	}
	if after := l.counters()[firewall.CounterSpoofDrop]; after-spoofBefore < 3 {
		t.Errorf("spoof_drop went from %d to %d: want the 3 spoofed pings to the router counted", spoofBefore, after)
	}
	// And from the WAN: the ISP's host routing the site's ULA to the
	// router (a neighbour on the WAN's link can) gets no answer from
	// the router's ULA address, counted in input_drop.
	if err := l.link.Server.Route(ula6Lab, netip.MustParseAddr(wan6), netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	inBefore := l.counters()[firewall.CounterInputDrop]
	p := realclient.Start(t, l.link.Server, realclient.Options{}, realclient.Need(t, "ping"), "-6", "-c", "3", "-i", "0.3", "-W", "2", routerULA.String())
	if p.Wait(30*time.Second) == nil {
		t.Errorf("the router answered the WAN at its ULA address:\n%s", p.Output())
	}
	if after := l.counters()[firewall.CounterInputDrop]; after-inBefore < 3 {
		t.Errorf("input_drop went from %d to %d: want the WAN's 3 pings to the ULA counted", inBefore, after)
	}
	time.Sleep(time.Second) // what the capture still has to print
	if got := lines(replies.Output(), "> "+spoofed.String()); len(got) > 0 {
		t.Errorf("the router's answers to the spoofed source left the WAN:\n%s", strings.Join(got, "\n"))
	}
	if got := lines(replies.Output(), routerULA.String()+" >"); len(got) > 0 {
		t.Errorf("echo replies from the router's ULA address on the WAN's wire:\n%s", strings.Join(got, "\n"))
	}

	// A rogue router and DHCPv6 server on the LAN host.
	rogue := netip.MustParsePrefix("2001:db8:bad::/64")
	if err := l.host.Sysctl("net/ipv6/conf/eth0/accept_ra", "2"); err != nil {
		t.Fatal(err)
	}
	ndWire := tcpdump(t, l.host, "eth0", "icmp6 and ip6[40] == 134 or udp port 546 or udp port 547")
	startRadvd(t, l.host, "eth0", "  AdvDefaultLifetime 1800;\n  AdvManagedFlag on;\n  prefix 2001:db8:bad::/64 { AdvAutonomous on; };")
	dnsmasq := realclient.Need(t, "dnsmasq")
	realclient.Start(t, l.host, realclient.Options{}, dnsmasq, "--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root",
		"--interface=eth0", "--bind-interfaces", "--log-dhcp", "--log-facility=-", "--dhcp-range=2001:db8:bad::100,2001:db8:bad::1ff,64,2m",
		"--dhcp-leasefile="+filepath.Join(t.TempDir(), "leases"), "--pid-file="+filepath.Join(t.TempDir(), "pid"))
	hostLL := ""
	for _, a := range l.hostAddrsAll() {
		if a.IsLinkLocalUnicast() {
			hostLL = a.String()
		}
	}
	// Two of the rogue's advertisements on the wire (radvd's first
	// come within seconds), then look at the router.
	if !waitUntil(30*time.Second, func() bool { return len(lines(ndWire.Output(), hostLL+" > ff02::1", "router advertisement")) >= 2 }) {
		t.Fatalf("no rogue advertisements from %s on the LAN's wire:\n%s", hostLL, ndWire.Output())
	}
	if !waitUntil(20*time.Second, func() bool { return l.r.svc.lan6.ra.Stats().ForeignRAs >= 2 }) {
		t.Errorf("the router counted %d foreign advertisements, want 2 or more", l.r.svc.lan6.ra.Stats().ForeignRAs)
	}
	for _, a := range l.routerAddrs("lan0") {
		if rogue.Contains(a) {
			t.Errorf("the router took %v from a LAN host's advertisement", a)
		}
	}
	ln, err := l.link.Client.Netlink().LinkByName("lan0")
	if err != nil {
		t.Fatal(err)
	}
	routes, _ := l.link.Client.Netlink().RouteList(ln, netlink.FAMILY_V6)
	for _, rt := range routes {
		if rt.Dst == nil || rt.Dst.String() == "::/0" || rt.Dst.String() == rogue.String() {
			t.Errorf("the router took a route from the LAN host: %v", rt)
		}
	}
	routerLL := ""
	for _, a := range l.routerAddrs("lan0") {
		if a.IsLinkLocalUnicast() {
			routerLL = a.String()
		}
	}
	if got := lines(ndWire.Output(), routerLL+".546 >"); len(got) > 0 {
		t.Errorf("the router sent DHCPv6 client messages into the LAN:\n%s", strings.Join(got, "\n"))
	}
}

// hostAddrsAll are the LAN host's IPv6 addresses on eth0.
func (l *v6Lab) hostAddrsAll() []netip.Addr {
	ln, err := l.host.Netlink().LinkByName("eth0")
	if err != nil {
		l.t.Fatal(err)
	}
	as, _ := l.host.Netlink().AddrList(ln, netlink.FAMILY_V6)
	var out []netip.Addr
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip)
		}
	}
	return out
}

// neighbours counts the router's IPv6 neighbour entries on lan0.
func (l *v6Lab) neighbours() int {
	ln, err := l.link.Client.Netlink().LinkByName("lan0")
	if err != nil {
		l.t.Fatal(err)
	}
	ns, err := l.link.Client.Netlink().NeighList(ln.Attrs().Index, netlink.FAMILY_V6)
	if err != nil {
		l.t.Fatal(err)
	}
	return len(ns)
}

// TestIPv6NDPScanFromWAN: the ISP's side sends UDP to 4000 addresses of
// the LAN's /64 as fast as it can (an NDP cache-exhaustion scan, RFC
// 6583): the router's rules drop it in forward before any neighbour
// solicitation, so its neighbour table on the LAN stays at the LAN
// host's few entries (checked every 500 datagrams, the scan stopped at
// once if it grows), the LAN's wire (tcpdump on the host's side)
// carries no solicitation for a scanned address, forward_drop counts
// the scan, and the LAN host's pings to the ISP's host are answered
// during the scan and after it.
func TestIPv6NDPScanFromWAN(t *testing.T) {
	if testing.Short() {
		t.Skip("dhcpd -6 and a scan in network namespaces (about 10 s)")
	}
	ping := realclient.Need(t, "ping")
	l, lan, good := delegatedLab(t, v6LabOptions{firewall: true})
	isp := netip.MustParseAddr(isp6)
	// ND for a scanned address would be a solicitation "who has
	// ...::beef:xxxx" (the scan's interface ids) on the LAN's wire.
	nsWire := tcpdump(t, l.host, "eth0", "icmp6 and ip6[40] == 135")
	base := l.neighbours()
	before := l.counters()[firewall.CounterForwardDrop]
	during := realclient.Start(t, l.host, realclient.Options{}, ping, "-6", "-c", "20", "-i", "0.2", "-W", "5", "-I", good.String(), isp.String())
	const n = 4000
	sent := 0
	err := l.link.Server.Do(func() error {
		c, err := net.ListenPacket("udp6", "["+isp6+"]:0")
		if err != nil {
			return err
		}
		defer c.Close()
		a16 := lan.Addr().As16()
		for i := 0; i < n; i++ {
			a16[12], a16[13], a16[14], a16[15] = 0xbe, 0xef, byte(i>>8), byte(i)
			if _, err := c.WriteTo([]byte("scan"), &net.UDPAddr{IP: a16[:], Port: 9}); err != nil {
				return err
			}
			sent++
			if i%500 == 499 {
				if got := l.neighbours(); got > base+32 {
					return fmt.Errorf("the router's neighbour table grew from %d to %d after %d datagrams: scan stopped", base, got, sent)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.neighbours(); got > base+32 {
		t.Errorf("neighbour entries on the LAN: %d after the scan, %d before", got, base)
	}
	if err := during.Wait(60 * time.Second); err != nil {
		t.Errorf("the LAN host's pings during the scan: %v\n%s", err, during.Output())
	} else if m := regexp.MustCompile(`(\d+) received`).FindStringSubmatch(during.Output()); m == nil || atoi(m[1]) < 10 {
		// 10 or more of the 20 answered: the router kept routing.
		t.Errorf("the LAN host's pings during the scan: fewer than 10 of 20 answered:\n%s", during.Output())
	}
	if ok, out := l.ping6(good, isp); !ok {
		t.Errorf("ping6 after the scan failed:\n%s", out)
	}
	if got := lines(nsWire.Output(), "who has", "beef:"); len(got) > 0 {
		t.Errorf("%d neighbour solicitations for scanned addresses on the LAN, e.g. %s", len(got), got[0])
	}
	if after := l.counters()[firewall.CounterForwardDrop]; after-before < uint64(sent)*9/10 {
		t.Errorf("forward_drop went from %d to %d for %d datagrams", before, after, sent)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestIPv6InvalidatedPrefix: RFC 7084 L-14. A push moves the LAN to
// another subnet id, so the host's addresses in the old /64s are
// deprecated; a ping from its old global address through the router is
// answered by the router with ICMPv6 destination unreachable code 5
// (source address failed ingress/egress policy; on the LAN's wire),
// never forwarded (the ISP's wire), counted in forward_drop, while the
// host's new address gets through. The error reaches the host because
// the old /64 stays routed into the LAN while it is deprecated.
func TestIPv6InvalidatedPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("dhcpd -6, tcpdump and ping in network namespaces (about 15 s)")
	}
	l, lan, old := delegatedLab(t, v6LabOptions{firewall: true})
	s2 := *l.r.Site()
	s2.IPv6.LAN.SubnetID = 2
	if err := l.link.Client.Do(func() error { return l.r.Reconfigure(&s2, nil, []string{PartIPv6}) }); err != nil {
		t.Fatal(err)
	}
	lan2, _ := site.Subnet64(netip.PrefixFrom(lan.Addr(), 60).Masked(), 2) // the delegated /60
	deprecated := func() bool {
		for _, a := range l.hostAddrs(lan) {
			if ip, _ := netip.AddrFromSlice(a.IP); ip == old && a.PreferedLft == 0 {
				return true
			}
		}
		return false
	}
	if !waitUntil(60*time.Second, func() bool { return deprecated() && len(l.hostAddrs(lan2)) > 0 }) {
		t.Fatalf("after the push: old %v, new %v", l.hostAddrs(lan), l.hostAddrs(lan2))
	}
	// The withdrawn /64 is routed into the LAN, without the router's
	// own address in it.
	ln, err := l.link.Client.Netlink().LinkByName("lan0")
	if err != nil {
		t.Fatal(err)
	}
	routed := false
	routes, _ := l.link.Client.Netlink().RouteList(ln, netlink.FAMILY_V6)
	for _, rt := range routes {
		routed = routed || (rt.Dst != nil && rt.Dst.String() == lan.String())
	}
	if !routed {
		t.Errorf("no route for the withdrawn %v on the LAN: %v", lan, routes)
	}
	lanWire := tcpdump(t, l.host, "eth0", "icmp6 and ip6[40] == 1 and ip6[41] == 5")
	ispWire := tcpdump(t, l.link.Server, l.link.ServerIf, "icmp6 and ip6[40] == 128")
	before := l.counters()[firewall.CounterForwardDrop]
	if ok, out := l.ping6(old, netip.MustParseAddr(isp6)); ok {
		t.Errorf("a ping from the deprecated %v was answered:\n%s", old, out)
	}
	newIP, _ := netip.AddrFromSlice(l.hostAddrs(lan2)[0].IP)
	if ok, out := l.ping6(newIP, netip.MustParseAddr(isp6)); !ok {
		t.Errorf("ping6 from the new prefix %v failed:\n%s", newIP, out)
	}
	time.Sleep(time.Second) // what the captures still have to print
	if got := lines(lanWire.Output(), "> "+old.String()); len(got) == 0 {
		t.Errorf("no ICMPv6 code 5 to %v on the LAN's wire:\n%s", old, lanWire.Output())
	}
	if got := lines(ispWire.Output(), old.String()+" >"); len(got) > 0 {
		t.Errorf("forwarded to the ISP from the deprecated %v:\n%s", old, strings.Join(got, "\n"))
	}
	if got := lines(ispWire.Output(), newIP.String()+" >"); len(got) == 0 {
		t.Errorf("the ISP's capture does not show the new address's pings:\n%s", ispWire.Output())
	}
	if after := l.counters()[firewall.CounterForwardDrop]; after-before < 3 {
		t.Errorf("forward_drop went from %d to %d: want the 3 pings from the deprecated address counted", before, after)
	}
}
