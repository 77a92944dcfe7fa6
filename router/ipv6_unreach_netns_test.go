package router

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/netns"
	"github.com/ocfw/ocfw/site"
)

// unreachableRoutes are the router namespace's unreachable routes that
// setUnreachable6 put there (by their metric).
func (l *v6Lab) unreachableRoutes() []netip.Prefix {
	l.t.Helper()
	rts, err := l.link.Client.Netlink().RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Type: unix.RTN_UNREACHABLE}, netlink.RT_FILTER_TYPE)
	if err != nil {
		l.t.Fatal(err)
	}
	var out []netip.Prefix
	for _, rt := range rts {
		if rt.Priority != unreachableMetric || rt.Dst == nil {
			continue
		}
		a, _ := netip.AddrFromSlice(rt.Dst.IP)
		ones, _ := rt.Dst.Mask.Size()
		out = append(out, netip.PrefixFrom(a.Unmap(), ones))
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// tcpdumpDir is tcpdump (as tcpdump) on the packets ifname sends
// ("out") or receives ("in") only.
func tcpdumpDir(t *testing.T, ns *netns.NS, ifname, dir, filter string) *realclient.Proc {
	t.Helper()
	bin := realclient.Need(t, "tcpdump")
	p := realclient.Start(t, ns, realclient.Options{}, append([]string{bin, "-n", "-l", "-Q", dir, "-i", ifname}, strings.Fields(filter)...)...)
	if !p.WaitFor(regexp.MustCompile(`listening on `+ifname), 1, 30*time.Second) {
		t.Fatalf("tcpdump did not start on %s in %s:\n%s", ifname, ns.Name, p.Output())
	}
	return p
}

// TestIPv6PrefixDelegationUnreachable: RFC 7084 WPD-5 on the wire, with
// no firewall applied (the route alone must do it). dhcpd -6 delegates
// a /60, the LAN numbers /64 0 of it; the router holds an unreachable
// route for the /60 and for the ULA /48. Pings from the ISP's host to
// /64 5 of the /60 (no LAN there) get ICMPv6 destination unreachable
// from the router's WAN address (ping says so, the capture of what the
// router's WAN sends shows it), and no echo request to that address
// leaves the router's WAN: without the route the default route would
// send it back to the ISP, which routes the /60 here (a loop; the
// control at the end removes the route and sees exactly that on the
// same capture). The LAN host's address in /64 0, more specific,
// still answers the ISP's pings. A LAN host's ping to an unnumbered
// /64 of the ULA gets the same unreachable and nothing of it goes out
// of the WAN. Turning v6 off by a push removes both routes.
func TestIPv6PrefixDelegationUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("dhcpd -6, ping and tcpdump in network namespaces (about 20 s)")
	}
	ping := realclient.Need(t, "ping")
	l, lan, host := delegatedLab(t, v6LabOptions{})
	pd := netip.PrefixFrom(lan.Addr(), 60).Masked()
	ula := netip.MustParsePrefix(ula6Lab)
	if got, want := l.unreachableRoutes(), []netip.Prefix{pd, ula}; !slices.Equal(got, want) {
		t.Fatalf("unreachable routes %v, want %v", got, want)
	}
	unassigned, _ := site.Subnet64(pd, 5)
	target := site.WithID(unassigned, netip.MustParseAddr("::1"))
	wanOut := tcpdumpDir(t, l.link.Client, l.link.ClientIf, "out", "icmp6")

	p := realclient.Start(t, l.link.Server, realclient.Options{}, ping, "-6", "-n", "-c", "3", "-i", "0.5", "-W", "2", target.String())
	if err := p.Wait(60 * time.Second); err == nil {
		t.Errorf("ping to %v (no LAN there) was answered:\n%s", target, p.Output())
	}
	if !strings.Contains(p.Output(), "From "+wan6) || !strings.Contains(p.Output(), "Destination unreachable") {
		t.Errorf("ping to %v: no destination unreachable from the router's WAN %s:\n%s", target, wan6, p.Output())
	}
	// The LAN's /64 is more specific than the unreachable /60.
	if p := realclient.Start(t, l.link.Server, realclient.Options{}, ping, "-6", "-n", "-c", "2", "-i", "0.5", "-W", "5", host.String()); p.Wait(60*time.Second) != nil {
		t.Errorf("ping from the ISP to the LAN host %v failed:\n%s", host, p.Output())
	}
	// The LAN host's ULA source (from a later advertisement, maybe).
	ula64, _ := site.Subnet64(ula, 0)
	if !waitUntil(30*time.Second, func() bool { return len(l.hostAddrs(ula64)) > 0 }) {
		t.Fatal("the LAN host has no ULA address")
	}
	ulaTarget := site.WithID(mustSubnet64(t, ula, 9), netip.MustParseAddr("::1"))
	if p := realclient.Start(t, l.host, realclient.Options{}, ping, "-6", "-n", "-c", "2", "-i", "0.5", "-W", "2", ulaTarget.String()); p.Wait(60*time.Second) == nil ||
		!strings.Contains(p.Output(), "Destination unreachable") {
		t.Errorf("ping from the LAN host to %v (an unnumbered /64 of the ULA): want destination unreachable:\n%s", ulaTarget, p.Output())
	}
	if !waitUntil(10*time.Second, func() bool { return len(lines(wanOut.Output(), "destination unreachable", target.String())) > 0 }) {
		t.Errorf("the router's WAN sent no destination unreachable for %v:\n%s", target, wanOut.Output())
	}
	for _, dst := range []netip.Addr{target, ulaTarget} {
		if got := lines(wanOut.Output(), "> "+dst.String()+":", "echo request"); len(got) > 0 {
			t.Errorf("%d echo requests to %v went out of the router's WAN, e.g. %s", len(got), dst, got[0])
		}
	}

	// The control: without the route the same ping's requests follow
	// the default route back out of the WAN (and loop), and the
	// capture sees them. Then the router puts the route back.
	if err := l.link.Client.Do(func() error { return l.r.links.unreachable6(pd, false) }); err != nil {
		t.Fatal(err)
	}
	p = realclient.Start(t, l.link.Server, realclient.Options{}, ping, "-6", "-n", "-c", "1", "-W", "2", target.String())
	_ = p.Wait(60 * time.Second)
	if !waitUntil(10*time.Second, func() bool { return len(lines(wanOut.Output(), "> "+target.String()+":", "echo request")) > 0 }) {
		t.Errorf("control: with no unreachable route the capture shows no request to %v leaving the WAN:\n%s", target, wanOut.Output())
	}
	if err := l.link.Client.Do(func() error { return l.r.setUnreachable6([]netip.Prefix{ula, pd}) }); err != nil {
		t.Fatal(err)
	}
	if got, want := l.unreachableRoutes(), []netip.Prefix{pd, ula}; !slices.Equal(got, want) {
		t.Fatalf("unreachable routes put back: %v, want %v", got, want)
	}

	// Turning v6 off by a push takes both routes away.
	off := *l.r.Site()
	no := false
	off.IPv6.Enable = &no
	if err := l.link.Client.Do(func() error { return l.r.Reconfigure(&off, nil, []string{PartIPv6}) }); err != nil {
		t.Fatal(err)
	}
	if got := l.unreachableRoutes(); len(got) > 0 {
		t.Errorf("unreachable routes left after v6 went off: %v", got)
	}
}

func mustSubnet64(t *testing.T, p netip.Prefix, id int) netip.Prefix {
	t.Helper()
	s, ok := site.Subnet64(p, id)
	if !ok {
		t.Fatalf("no /64 %d in %v", id, p)
	}
	return s
}
