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

// TestIPv6LANPlan: the LAN's /64s come from the ULA and the delegated
// prefix at the subnet id, with lifetimes never beyond what is left of
// the delegation (nor RFC 9096's limits), and the default route only
// while there is a global prefix.
func TestIPv6LANPlan(t *testing.T) {
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	ula := netip.MustParsePrefix("fd12:3456:789a::/48")
	pd := func(p string, age, preferred, valid time.Duration) *dhcp6.Lease {
		return &dhcp6.Lease{Prefix: netip.MustParsePrefix(p), Obtained: now.Add(-age), PrefixPreferred: preferred, PrefixValid: valid}
	}
	tests := []struct {
		name      string
		subnet    int
		noA, noL  bool // ipv6.lan.slaac, on_link false
		ula       netip.Prefix
		lease     *dhcp6.Lease
		addrs     []string
		prefixes  []ra.Prefix
		routes    []ra.Route
		routerLft time.Duration
		err       bool
	}{
		{name: "ULA only", ula: ula, addrs: []string{"fd12:3456:789a::1/64"},
			prefixes: []ra.Prefix{{Prefix: netip.MustParsePrefix("fd12:3456:789a::/64"), Valid: ra.ValidLimit, Preferred: ra.PreferredLimit}},
			routes:   []ra.Route{{Prefix: ula, Lifetime: ra.ValidLimit}}},
		{name: "delegated, subnet 3", subnet: 3, ula: ula, lease: pd("2001:db8:100:10::/60", 10*time.Second, 20*time.Second, 40*time.Second),
			addrs: []string{"fd12:3456:789a:3::1/64", "2001:db8:100:13::1/64"},
			prefixes: []ra.Prefix{{Prefix: netip.MustParsePrefix("fd12:3456:789a:3::/64"), Valid: ra.ValidLimit, Preferred: ra.PreferredLimit},
				{Prefix: netip.MustParsePrefix("2001:db8:100:13::/64"), Valid: 30 * time.Second, Preferred: 10 * time.Second}},
			routes:    []ra.Route{{Prefix: ula, Lifetime: ra.ValidLimit}, {Prefix: netip.MustParsePrefix("2001:db8:100:10::/60"), Lifetime: 30 * time.Second}},
			routerLft: raRouterLifetime},
		{name: "long lease capped", ula: netip.Prefix{}, lease: pd("2001:db8::/56", 0, 7*24*time.Hour, 30*24*time.Hour),
			addrs:     []string{"2001:db8::1/64"},
			prefixes:  []ra.Prefix{{Prefix: netip.MustParsePrefix("2001:db8::/64"), Valid: ra.ValidLimit, Preferred: ra.PreferredLimit}},
			routes:    []ra.Route{{Prefix: netip.MustParsePrefix("2001:db8::/56"), Lifetime: ra.ValidLimit}},
			routerLft: raRouterLifetime},
		{name: "preferred over, still valid", lease: pd("2001:db8::/60", 30*time.Second, 20*time.Second, 40*time.Second),
			addrs:     []string{"2001:db8::1/64"},
			prefixes:  []ra.Prefix{{Prefix: netip.MustParsePrefix("2001:db8::/64"), Valid: 10 * time.Second, Preferred: 0}},
			routes:    []ra.Route{{Prefix: netip.MustParsePrefix("2001:db8::/60"), Lifetime: 10 * time.Second}},
			routerLft: raRouterLifetime},
		{name: "expired: withdrawn", ula: ula, lease: pd("2001:db8::/60", 50*time.Second, 20*time.Second, 40*time.Second),
			addrs:    []string{"fd12:3456:789a::1/64"},
			prefixes: []ra.Prefix{{Prefix: netip.MustParsePrefix("fd12:3456:789a::/64"), Valid: ra.ValidLimit, Preferred: ra.PreferredLimit}},
			routes:   []ra.Route{{Prefix: ula, Lifetime: ra.ValidLimit}}},
		{name: "slaac and on_link off (L-7)", noA: true, noL: true, ula: ula, lease: pd("2001:db8::/60", 0, 20*time.Second, 40*time.Second),
			addrs: []string{"fd12:3456:789a::1/64", "2001:db8::1/64"},
			prefixes: []ra.Prefix{{Prefix: netip.MustParsePrefix("fd12:3456:789a::/64"), Valid: ra.ValidLimit, Preferred: ra.PreferredLimit, NoSLAAC: true, NotOnLink: true},
				{Prefix: netip.MustParsePrefix("2001:db8::/64"), Valid: 40 * time.Second, Preferred: 20 * time.Second, NoSLAAC: true, NotOnLink: true}},
			routes:    []ra.Route{{Prefix: ula, Lifetime: ra.ValidLimit}, {Prefix: netip.MustParsePrefix("2001:db8::/60"), Lifetime: 40 * time.Second}},
			routerLft: raRouterLifetime},
		{name: "subnet id on the ISP's excluded /64 (WPD-8)", subnet: 5, ula: ula, lease: func() *dhcp6.Lease {
			l := pd("2001:db8:1:100::/56", 0, 20*time.Second, 40*time.Second)
			l.Exclude = netip.MustParsePrefix("2001:db8:1:105::/64")
			return l
		}(), err: true},
		{name: "another subnet id beside the excluded /64", subnet: 4, lease: func() *dhcp6.Lease {
			l := pd("2001:db8:1:100::/56", 0, 20*time.Second, 40*time.Second)
			l.Exclude = netip.MustParsePrefix("2001:db8:1:105::/64")
			return l
		}(), addrs: []string{"2001:db8:1:104::1/64"},
			prefixes:  []ra.Prefix{{Prefix: netip.MustParsePrefix("2001:db8:1:104::/64"), Valid: 40 * time.Second, Preferred: 20 * time.Second}},
			routes:    []ra.Route{{Prefix: netip.MustParsePrefix("2001:db8:1:100::/56"), Lifetime: 40 * time.Second}},
			routerLft: raRouterLifetime},
		{name: "subnet id beyond a /64", subnet: 1, lease: pd("2001:db8::/64", 0, 20*time.Second, 40*time.Second), err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := site.IPv6{LAN: site.IPv6LAN{SubnetID: tt.subnet}}
			if tt.noA {
				v.LAN.SLAAC = new(false)
			}
			if tt.noL {
				v.LAN.OnLink = new(false)
			}
			addrs, adv, err := lan6Plan(v, "lan.example", 1500, true, tt.ula, tt.lease, now)
			if tt.err {
				if err == nil {
					t.Fatalf("no error; addrs %v", addrs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range addrs {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tt.addrs) {
				t.Errorf("addresses %v, want %v", got, tt.addrs)
			}
			// What is delegated counts down to the delegation's ends
			// (RFC 9096 L-15 between renumberings); the ULA's does not.
			if tt.lease != nil {
				validEnds, preferredEnds := tt.lease.Obtained.Add(tt.lease.PrefixValid), tt.lease.Obtained.Add(tt.lease.PrefixPreferred)
				for i, p := range tt.prefixes {
					if tt.lease.Prefix.Contains(p.Prefix.Addr()) {
						tt.prefixes[i].ValidEnds, tt.prefixes[i].PreferredEnds = validEnds, preferredEnds
					}
				}
				for i, r := range tt.routes {
					if r.Prefix == tt.lease.Prefix.Masked() {
						tt.routes[i].Ends = validEnds
					}
				}
			}
			if !slices.Equal(adv.Prefixes, tt.prefixes) {
				t.Errorf("prefixes %+v, want %+v", adv.Prefixes, tt.prefixes)
			}
			// RFC 7084 L-3: the ULA /48 and the delegated prefix as
			// routes (RFC 4191), for as long as the /64s in them.
			if !slices.Equal(adv.Routes, tt.routes) {
				t.Errorf("routes %+v, want %+v", adv.Routes, tt.routes)
			}
			if adv.RouterLifetime != tt.routerLft {
				t.Errorf("router lifetime %v, want %v", adv.RouterLifetime, tt.routerLft)
			}
			// The router's own addresses are the resolvers announced.
			if len(adv.RDNSS) != len(addrs) || (len(addrs) > 0 && adv.RDNSS[0] != addrs[0].Addr()) {
				t.Errorf("RDNSS %v, want the router's addresses %v", adv.RDNSS, addrs)
			}
			if !slices.Equal(adv.DNSSL, []string{"lan.example"}) {
				t.Errorf("DNSSL %v, want the LAN's domain", adv.DNSSL)
			}
			if _, err := adv.Marshal(); err != nil {
				t.Errorf("advert does not marshal: %v", err)
			}
		})
	}
}

// TestIPv6DHCPv6Hosts: only ipv6.hosts with a MAC get a stateful DHCPv6
// address (and so make the advertisements' M flag), and the DHCPv6
// server's /64s are the advertisement's with their lifetimes.
func TestIPv6DHCPv6Hosts(t *testing.T) {
	v := site.IPv6{Hosts: []site.IPv6Host{{Name: "tv", ID: "::a"}, {Name: "nas", MAC: "52-54-00-12-34-56", ID: "::10"}}}
	hs := dhcp6Hosts(v)
	if len(hs) != 1 || hs[0].MAC.String() != "52:54:00:12:34:56" || hs[0].ID != netip.MustParseAddr("::10") {
		t.Errorf("dhcp6Hosts = %+v, want nas only", hs)
	}
	if hs := dhcp6Hosts(site.IPv6{Hosts: v.Hosts[:1]}); len(hs) != 0 {
		t.Errorf("dhcp6Hosts without a MAC = %+v, want none", hs)
	}
	srv, err := dhcp6.NewInfoServer(dhcp6.InfoConfig{Interface: "lan0", Hosts: hs})
	if err != nil || !srv.Stateful() {
		t.Errorf("server for %+v: stateful %v, %v", hs, srv != nil && srv.Stateful(), err)
	}
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	l := &dhcp6.Lease{Prefix: netip.MustParsePrefix("2001:db8:100:10::/60"), Obtained: now.Add(-10 * time.Second), PrefixPreferred: 20 * time.Second, PrefixValid: 40 * time.Second}
	_, adv, err := lan6Plan(v, "lan.example", 1500, true, netip.MustParsePrefix("fd12:3456:789a::/48"), l, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []dhcp6.AddrPrefix{
		{Prefix: netip.MustParsePrefix("fd12:3456:789a::/64"), Valid: ra.ValidLimit, Preferred: ra.PreferredLimit},
		{Prefix: netip.MustParsePrefix("2001:db8:100:10::/64"), Valid: 30 * time.Second, Preferred: 10 * time.Second,
			ValidEnds: now.Add(30 * time.Second), PreferredEnds: now.Add(10 * time.Second)},
	}
	if got := dhcp6Prefixes(adv); !slices.Equal(got, want) {
		t.Errorf("dhcp6Prefixes = %+v, want %+v", got, want)
	}
}
