package router

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/dhcp6"
	"github.com/ocfw/ocfw/router/ra"
	"github.com/ocfw/ocfw/site"
)

// TestIPv6WANPlan: what the WAN's DHCPv6 client asks for by mode and
// by the ISP's advertisement's M and O flags (RFC 4861 4.2, RFC 7084
// WAA and WPD): an address only by M in auto (always in dhcpv6, never
// in slaac), the prefix whatever the flags say, other configuration
// alone when nothing else is asked and O is set.
func TestIPv6WANPlan(t *testing.T) {
	m, o, none := &ra.Advert{Managed: true, Other: true}, &ra.Advert{Other: true}, &ra.Advert{}
	for _, c := range []struct {
		mode  string
		pd    int
		heard *ra.Advert
		want  wan6Want
	}{
		{site.IPv6ModeAuto, 60, nil, wan6Want{PDLength: 60}},
		{site.IPv6ModeAuto, 60, m, wan6Want{PDLength: 60, Address: true}},
		{site.IPv6ModeAuto, 60, o, wan6Want{PDLength: 60}},
		{site.IPv6ModeAuto, 60, none, wan6Want{PDLength: 60}},
		{site.IPv6ModeAuto, 0, nil, wan6Want{}},
		{site.IPv6ModeAuto, 0, m, wan6Want{Address: true}},
		{site.IPv6ModeAuto, 0, o, wan6Want{Info: true}},
		{site.IPv6ModeAuto, 0, none, wan6Want{}},
		{site.IPv6ModeDHCPv6, 56, nil, wan6Want{PDLength: 56, Address: true}},
		{site.IPv6ModeDHCPv6, 0, o, wan6Want{Address: true}},
		{site.IPv6ModeSLAAC, 60, m, wan6Want{PDLength: 60}},
		{site.IPv6ModeSLAAC, 0, m, wan6Want{Info: true}},
		{site.IPv6ModeSLAAC, 0, none, wan6Want{}},
	} {
		if got := wan6Plan(c.mode, c.pd, c.heard); got != c.want {
			t.Errorf("%s, /%d, %+v: %+v, want %+v", c.mode, c.pd, c.heard, got, c.want)
		}
	}
}

// TestIPv6WANResolvers: the forwarder's v6 upstreams are DHCPv6's, then
// the ISP's RDNSS while its lifetime lasts, each once, a link-local one
// with the WAN's zone.
func TestIPv6WANResolvers(t *testing.T) {
	now := time.Now()
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	lease := &dhcp6.Lease{DNS: []netip.Addr{a("2001:db8::53"), a("2001:db8::54")}}
	heard := &heardRA{at: now.Add(-time.Minute), adv: ra.Advert{DNSLifetime: 10 * time.Minute,
		RDNSS: []netip.Addr{a("2001:db8::54"), a("fe80::53"), a("2001:db8::55")}}}
	stale := &heardRA{at: now.Add(-time.Hour), adv: heard.adv}
	for _, c := range []struct {
		name string
		l    *dhcp6.Lease
		h    *heardRA
		want []netip.Addr
	}{
		{"none", nil, nil, nil},
		{"DHCPv6 only", lease, nil, lease.DNS},
		{"both", lease, heard, []netip.Addr{a("2001:db8::53"), a("2001:db8::54"), a("fe80::53%wan0"), a("2001:db8::55")}},
		{"RDNSS run out", lease, stale, lease.DNS},
		{"RDNSS only", nil, heard, []netip.Addr{a("2001:db8::54"), a("fe80::53%wan0"), a("2001:db8::55")}},
	} {
		if got := wan6Resolvers(c.l, c.h, "wan0", now); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestIPv6UnreachablePrefixes: which prefixes get an unreachable route
// (RFC 7084 WPD-5): the ULA /48 when the LAN numbers from it, and the
// delegated prefix only while the lease has valid time left.
func TestIPv6UnreachablePrefixes(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ula := netip.MustParsePrefix("fd12:3456:789a::/48")
	pd := netip.MustParsePrefix("2001:db8:100::/60")
	lease := func(obtained time.Time) *dhcp6.Lease {
		return &dhcp6.Lease{Prefix: pd, Obtained: obtained, PrefixValid: time.Hour, PrefixPreferred: time.Hour / 2}
	}
	for _, c := range []struct {
		name string
		ula  netip.Prefix
		l    *dhcp6.Lease
		want []netip.Prefix
	}{
		{"nothing", netip.Prefix{}, nil, nil},
		{"ULA only", ula, nil, []netip.Prefix{ula}},
		{"a lease without a prefix", ula, &dhcp6.Lease{Obtained: now, Address: netip.MustParseAddr("2001:db8:ffff::9")}, []netip.Prefix{ula}},
		{"delegated", ula, lease(now.Add(-time.Minute)), []netip.Prefix{ula, pd}},
		{"delegated, no LAN", netip.Prefix{}, lease(now), []netip.Prefix{pd}},
		{"run out", ula, lease(now.Add(-time.Hour)), []netip.Prefix{ula}},
		{"the ISP's excluded /62 left out (RFC 6603)", netip.Prefix{}, &dhcp6.Lease{Prefix: pd, Exclude: netip.MustParsePrefix("2001:db8:100:c::/62"), Obtained: now, PrefixValid: time.Hour},
			[]netip.Prefix{netip.MustParsePrefix("2001:db8:100::/61"), netip.MustParsePrefix("2001:db8:100:8::/62")}},
		{"unmasked static prefix", netip.Prefix{}, &dhcp6.Lease{Prefix: netip.MustParsePrefix("2001:db8:5::1/56"), Obtained: now, PrefixValid: staticLifetime},
			[]netip.Prefix{netip.MustParsePrefix("2001:db8:5::/56")}},
	} {
		if got := unreachable6(c.ula, c.l, now); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// without: the pieces cover p less x exactly, none overlapping x or
	// another.
	p, x := netip.MustParsePrefix("2001:db8:1:100::/56"), netip.MustParsePrefix("2001:db8:1:1a5::/64")
	parts := without(p, x)
	if len(parts) != 8 {
		t.Fatalf("%v less %v: %v", p, x, parts)
	}
	for i := 0; i < 256; i++ {
		a := p.Addr().As16()
		a[7] = byte(i)
		addr := netip.AddrFrom16(a)
		n := 0
		for _, q := range parts {
			if q.Contains(addr) {
				n++
			}
		}
		if want := map[bool]int{true: 0, false: 1}[x.Contains(addr)]; n != want {
			t.Errorf("%v is in %d of %v, want %d", addr, n, parts, want)
		}
	}
	if got := without(p, netip.MustParsePrefix("2001:db8:2::/64")); !slices.Equal(got, []netip.Prefix{p}) {
		t.Errorf("an exclusion outside: %v", got)
	}
}

// TestIPv6ISPTimeServers: the DHCPv6 lease's time servers are what the
// NTP client asks first when the site names none (RFC 7084 WAA-5,
// WAA-10); a link-local one gets the WAN's zone.
func TestIPv6ISPTimeServers(t *testing.T) {
	r := &Router{wanIf: "wan0"}
	if got := r.ispNTP(); got != nil {
		t.Errorf("no lease: %v", got)
	}
	r.svc.lease6 = &dhcp6.Lease{NTP: []netip.Addr{netip.MustParseAddr("2001:db8::123"), netip.MustParseAddr("fe80::123"), netip.MustParseAddr("ff02::101")}}
	if got := r.ispNTP(); !slices.Equal(got, []string{"2001:db8::123", "fe80::123%wan0"}) {
		t.Errorf("from the lease: %v", got)
	}
}
