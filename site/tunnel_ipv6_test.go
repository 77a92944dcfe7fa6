package site

import (
	"crypto/rand"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// ikeAB6 is ikeAB with the tunnel carrying IPv6: ULA /64s of both LANs,
// over the IPv4 WAN (over6 false) or between the two static IPv6 WAN
// addresses (over6 true).
func ikeAB6(over6 bool) (a, b *Site) {
	a, b = ikeAB()
	a.IPv6.ULA, b.IPv6.ULA = "fd00:a::/48", "fd00:b::/48"
	a.Tunnels[0].LocalSubnet, a.Tunnels[0].RemoteSubnet = "fd00:a::/64", "fd00:b::/64"
	b.Tunnels[0].LocalSubnet, b.Tunnels[0].RemoteSubnet = "fd00:b::/64", "fd00:a::/64"
	if over6 {
		a.IPv6.WAN = IPv6WAN{Mode: IPv6ModeStatic, Address: "2001:db8:a::2/64", Gateway: "fe80::1"}
		b.IPv6.WAN = IPv6WAN{Mode: IPv6ModeStatic, Address: "2001:db8:b::2/64", Gateway: "fe80::1"}
		a.Tunnels[0].Peer, b.Tunnels[0].Peer = "2001:db8:b::2", "2001:db8:a::2"
		b.Tunnels[0].Local = ""
	}
	return a, b
}

// Tunnels whose subnets are IPv6 prefixes validate over an IPv4 WAN and
// over a static IPv6 WAN, resolve to the right addresses, and default
// their IKE ids to ID_IPV6_ADDR when the ends are IPv6.
func TestTunnelValidateIPv6(t *testing.T) {
	for _, over6 := range []bool{false, true} {
		a, b := ikeAB6(over6)
		for _, s := range []*Site{a, b} {
			if errs := s.Validate(alixPorts); len(errs) != 0 {
				t.Fatalf("over6 %v: %s: %v", over6, s.Hostname, errs)
			}
		}
		got, err := a.TunnelAddrs(a.Tunnels[0])
		if err != nil {
			t.Fatal(err)
		}
		want := TunnelAddrs{Local: netip.MustParseAddr("198.51.100.2"), Peer: netip.MustParseAddr("203.0.113.2"),
			LocalSubnet: netip.MustParsePrefix("fd00:a::/64"), RemoteSubnet: netip.MustParsePrefix("fd00:b::/64")}
		wantID := Identity{IDIPv4, "198.51.100.2"}
		if over6 {
			want.Local, want.Peer = netip.MustParseAddr("2001:db8:a::2"), netip.MustParseAddr("2001:db8:b::2")
			wantID = Identity{IDIPv6, "2001:db8:a::2"}
		}
		if got != want {
			t.Errorf("over6 %v: addrs %+v, want %+v", over6, got, want)
		}
		k, err := a.IKE(a.Tunnels[0])
		if err != nil {
			t.Fatal(err)
		}
		if k.LocalID != wantID || k.LocalSubnet != want.LocalSubnet || k.RemoteSubnet != want.RemoteSubnet {
			t.Errorf("over6 %v: IKE %+v, want local id %v", over6, k, wantID)
		}
	}
	// A manual tunnel carries IPv6 too.
	m, _ := siteAB()
	m.IPv6.WAN = IPv6WAN{Mode: IPv6ModeStatic, Address: "2001:db8:a::2/64", Gateway: "fe80::1"}
	m.Tunnels[0].Peer, m.Tunnels[0].LocalSubnet, m.Tunnels[0].RemoteSubnet = "2001:db8:b::2", "2001:db8:a:1::/64", "2001:db8:b:1::/64"
	if errs := m.Validate(alixPorts); len(errs) != 0 {
		t.Errorf("manual over IPv6: %v", errs)
	}
	k, err := NewTunnelKeys(rand.Reader, "a-b", "aes-128-cbc", "hmac-sha256",
		netip.MustParseAddr("2001:db8:a::2"), netip.MustParseAddr("2001:db8:b::2"), time.Unix(1e9, 0))
	if err != nil {
		t.Fatal(err)
	}
	j, err := k.JSON()
	if err != nil {
		t.Fatal(err)
	}
	k2, errs := ReadTunnelKeys("a-b.keys", j)
	if len(errs) != 0 {
		t.Fatalf("reading back: %v\n%s", errs, j)
	}
	su, errs := m.Tunnels[0].Setup(m, k2)
	if len(errs) != 0 || su.Local != netip.MustParseAddr("2001:db8:a::2") || su.RemoteSubnet != netip.MustParsePrefix("2001:db8:b:1::/64") {
		t.Errorf("manual v6 setup %+v %v", su, errs)
	}
	if _, err := NewTunnelKeys(rand.Reader, "a-b", "aes-128-cbc", "hmac-sha256",
		netip.MustParseAddr("2001:db8:a::2"), netip.MustParseAddr("203.0.113.2"), time.Unix(1e9, 0)); err == nil {
		t.Error("keys between an IPv6 and an IPv4 end made")
	}

	off := false
	for _, tc := range []struct {
		name  string
		over6 bool
		edit  func(*Site)
		want  []string
	}{
		{"subnets of two families", false, func(s *Site) { s.Tunnels[0].RemoteSubnet = "192.168.2.0/24" }, []string{
			"tunnels[0].remote_subnet: 192.168.2.0/24 and local_subnet fd00:a::/64 are of two families: a tunnel carries one",
		}},
		{"v6 remote, default local", false, func(s *Site) { s.Tunnels[0].LocalSubnet = "" }, []string{
			"tunnels[0].local_subnet: remote_subnet is IPv6: give the IPv6 prefix of this LAN the tunnel carries",
		}},
		{"link-local and multicast", false, func(s *Site) { s.Tunnels[0].LocalSubnet, s.Tunnels[0].RemoteSubnet = "fe80::/64", "ff02::/16" }, []string{
			`tunnels[0].local_subnet: "fe80::/64": want a site's unicast IPv6 prefix`,
			`tunnels[0].remote_subnet: "ff02::/16": want a site's unicast IPv6 prefix`,
		}},
		{"host bits, mapped", false, func(s *Site) {
			s.Tunnels[0].LocalSubnet, s.Tunnels[0].RemoteSubnet = "fd00:a::1/64", "::ffff:10.0.0.0/104"
		}, []string{
			`tunnels[0].local_subnet: "fd00:a::1/64": not a network address: did you mean fd00:a::/64?`,
			`tunnels[0].remote_subnet: "::ffff:10.0.0.0/104": want an IPv4 or IPv6 network`,
		}},
		{"overlapping", false, func(s *Site) { s.Tunnels[0].RemoteSubnet = "fd00::/16" }, []string{
			"tunnels[0].remote_subnet: fd00::/16 overlaps local_subnet fd00:a::/64",
		}},
		{"v6 off", false, func(s *Site) { s.IPv6.Enable = &off }, []string{
			"tunnels[0].local_subnet: fd00:a::/64 is IPv6 and ipv6.enable is false",
		}},
		{"v6 peer, v4 local", false, func(s *Site) { s.Tunnels[0].Peer, s.Tunnels[0].Local = "2001:db8:b::2", "198.51.100.2" }, []string{
			"tunnels[0].peer: 2001:db8:b::2 and this end's address 198.51.100.2 are of two families",
		}},
		{"v6 peer, no static v6 WAN", false, func(s *Site) { s.Tunnels[0].Peer = "2001:db8:b::2" }, []string{
			"tunnels[0].local: the peer is IPv6 and the WAN has no static IPv6 address (ipv6.wan.mode static with its address)",
		}},
		{"v6 local not the WAN's", true, func(s *Site) { s.Tunnels[0].Local = "2001:db8:a::9" }, []string{
			"tunnels[0].local: 2001:db8:a::9 is not this box's WAN IPv6 address 2001:db8:a::2 (ipv6.wan.address)",
		}},
		{"v6 peer is self, link-local", true, func(s *Site) {
			s.Tunnels = append(s.Tunnels, s.Tunnels[0])
			s.Tunnels[0].Peer = "2001:db8:a::2"
			s.Tunnels[1].Name, s.Tunnels[1].PSK, s.Tunnels[1].Peer, s.Tunnels[1].RemoteSubnet = "x", "x.psk", "fe80::2", "fd00:c::/64"
		}, []string{
			"tunnels[0].peer: 2001:db8:a::2 is this box's own address",
			"tunnels[1].peer: fe80::2: want a unicast address",
		}},
		{"remote in the WAN's v6 net, holds the peer", true, func(s *Site) { s.Tunnels[0].RemoteSubnet = "2001:db8:b::/48" }, []string{
			"tunnels[0].remote_subnet: 2001:db8:b::/48 holds the peer's address 2001:db8:b::2",
		}},
		{"zoned peer", true, func(s *Site) { s.Tunnels[0].Peer = "2001:db8:b::2%wan" }, []string{
			`tunnels[0].peer: "2001:db8:b::2%wan": want the other end's WAN address (IPv4 or IPv6)`,
		}},
		{"two IKEv2 tunnels to one peer address", false, func(s *Site) {
			s.Tunnels = append(s.Tunnels, s.Tunnels[0])
			s.Tunnels[1].Name, s.Tunnels[1].PSK, s.Tunnels[1].LocalSubnet, s.Tunnels[1].RemoteSubnet = "a-b4", "a-b4.psk", "", "192.168.2.0/24"
		}, []string{
			"tunnels[1].peer: 203.0.113.2 is already tunnels[0]'s IKEv2 peer: IKE runs one tunnel per peer address",
		}},
		{"v6 remote_id equals local", true, func(s *Site) { s.Tunnels[0].RemoteID = "2001:db8:a::2" }, []string{
			"tunnels[0].remote_id: 2001:db8:a::2 is this end's own id too",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := ikeAB6(tc.over6)
			tc.edit(s)
			var got []string
			for _, e := range s.Validate(alixPorts) {
				got = append(got, e.Error())
			}
			all := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("lacks %q in:\n%s", w, all)
				}
			}
		})
	}
}

// IPv6 addresses are IKE ids (ID_IPV6_ADDR), written as strongSwan
// writes them; a zone or an IPv4-mapped address is not.
func TestParseIdentityIPv6(t *testing.T) {
	id, err := ParseIdentity("2001:DB8::2")
	if err != nil || id != (Identity{IDIPv6, "2001:db8::2"}) {
		t.Errorf("2001:DB8::2: %+v %v", id, err)
	}
	for _, bad := range []string{"fe80::1%wan", "::ffff:192.0.2.1"} {
		if _, err := ParseIdentity(bad); err == nil {
			t.Errorf("%s: taken", bad)
		}
	}
}
