package site

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// TestIPv6Defaults: a site that says nothing about IPv6 has it on, asks
// for a delegated /60 with the WAN in auto mode, the LAN's /64 at subnet
// 0 and a ULA made on the box.
func TestIPv6Defaults(t *testing.T) {
	s, errs := Read("site.json", []byte(goodSite), alixPorts)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	v := s.IPv6
	if !v.On() || v.WAN.WANMode() != IPv6ModeAuto || !v.WAN.WantsPD() || v.WAN.PDHint() != 60 || v.LAN.SubnetID != 0 || v.ULA != "" ||
		!v.LAN.SLAACOn() || !v.LAN.OnLinkOn() {
		t.Errorf("defaults: on %v mode %s pd %v/%d subnet %d ula %q slaac %v on-link %v", v.On(), v.WAN.WANMode(), v.WAN.WantsPD(), v.WAN.PDHint(), v.LAN.SubnetID, v.ULA,
			v.LAN.SLAACOn(), v.LAN.OnLinkOn())
	}
	off := false
	v.Enable = &off
	if v.On() {
		t.Error("enable: false is still on")
	}
}

// TestIPv6Validate: every mistake in the ipv6 section at its field, with
// what would be valid; good sections pass.
func TestIPv6Validate(t *testing.T) {
	with := func(ipv6 string) string {
		return strings.Replace(goodSite, `"ssh": {`, `"ipv6": `+ipv6+`, "ssh": {`, 1)
	}
	for _, tc := range []struct {
		name, ipv6, want string // want "" for a good section
	}{
		{"empty", `{}`, ""},
		{"off", `{"enable": false}`, ""},
		{"everything", `{"wan": {"mode": "dhcpv6", "pd_length": 56}, "lan": {"subnet_id": 255, "dns": ["fd12:3456:789a::1"], "domains": ["home.arpa"], "slaac": false, "on_link": false},
			"ula": "fd12:3456:789a::/48", "hosts": [{"name": "nas", "mac": "52:54:00:12:34:56", "id": "::10"}, {"name": "tv", "id": "::a:b:c:d"}]}`, ""},
		{"static", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "fe80::1", "prefix": "2001:db8:1::/48", "dns": ["2001:db8::53"]}, "lan": {"subnet_id": 65535}}`, ""},
		{"static gateway in prefix", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "2001:db8::1"}}`, ""},
		{"WAN off", `{"wan": {"mode": "off"}, "ula": "off"}`, ""},

		{"bad mode", `{"wan": {"mode": "dhcp"}}`, `ipv6.wan.mode: "dhcp": want one of auto, dhcpv6, slaac, static, off`},
		{"static without address", `{"wan": {"mode": "static", "gateway": "fe80::1"}}`, "ipv6.wan.address: mode: static needs"},
		{"static v4 address", `{"wan": {"mode": "static", "address": "198.51.100.2/24", "gateway": "fe80::1"}}`, `ipv6.wan.address: "198.51.100.2/24": want an IPv6 address with its prefix`},
		{"static link-local address", `{"wan": {"mode": "static", "address": "fe80::2/64", "gateway": "fe80::1"}}`, "ipv6.wan.address: fe80::2 is link-local"},
		{"static anycast address", `{"wan": {"mode": "static", "address": "2001:db8::/64", "gateway": "fe80::1"}}`, "subnet-router anycast"},
		{"static without gateway", `{"wan": {"mode": "static", "address": "2001:db8::2/64"}}`, "ipv6.wan.gateway: mode: static needs the gateway"},
		{"gateway outside", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "2001:db9::1"}}`, "ipv6.wan.gateway: 2001:db9::1: want a link-local address or one inside 2001:db8::/64"},
		{"gateway is self", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "2001:db8::2"}}`, "this box's own WAN address"},
		{"gateway with zone", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "fe80::1%eth0"}}`, `ipv6.wan.gateway: "fe80::1%eth0": want an IPv6 address without a zone`},
		{"prefix too long", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "fe80::1", "prefix": "2001:db8:1::/80"}}`, "ipv6.wan.prefix: 2001:db8:1::/80: want a /48 to /64"},
		{"prefix host bits", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "fe80::1", "prefix": "2001:db8:1::1/48"}}`, "ipv6.wan.prefix: 2001:db8:1::1/48 has bits set after /48: want 2001:db8:1::/48"},
		{"prefix overlaps WAN", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "fe80::1", "prefix": "2001:db8::/48"}}`, "overlaps the WAN's own"},
		{"address without static", `{"wan": {"address": "2001:db8::2/64"}}`, "ipv6.wan.address: only with mode: static (mode is auto"},
		{"dns without static", `{"wan": {"mode": "dhcpv6", "dns": ["2001:db8::53"]}}`, "ipv6.wan.dns: only with mode: static"},
		{"bad wan dns", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "fe80::1", "dns": ["8.8.8.8"]}}`, `ipv6.wan.dns[0]: "8.8.8.8": want a resolver's IPv6 unicast address`},
		{"pd too long", `{"wan": {"pd_length": 65}}`, "ipv6.wan.pd_length: 65: want 48-64"},
		{"pd too short", `{"wan": {"pd_length": 40}}`, "ipv6.wan.pd_length: 40: want 48-64"},
		{"pd with static", `{"wan": {"mode": "static", "address": "2001:db8::2/64", "gateway": "fe80::1", "pd_length": 56}}`, "ipv6.wan.pd_length: only when the box asks for a delegated prefix"},
		{"subnet id beyond /60", `{"lan": {"subnet_id": 16}}`, "ipv6.lan.subnet_id: 16: want 0-15 (a /64 inside a /60)"},
		{"subnet id beyond /56", `{"wan": {"pd_length": 56}, "lan": {"subnet_id": 256}}`, "ipv6.lan.subnet_id: 256: want 0-255 (a /64 inside a /56)"},
		{"subnet id beyond ULA", `{"wan": {"mode": "off"}, "lan": {"subnet_id": 65536}}`, "ipv6.lan.subnet_id: 65536: want 0-65535 (a /64 inside a /48)"},
		{"negative subnet id", `{"lan": {"subnet_id": -1}}`, "ipv6.lan.subnet_id: -1: want 0-15"},
		{"ula not fd", `{"ula": "fc00:1:2::/48"}`, `ipv6.ula: "fc00:1:2::/48": want a /48 inside fd00::/8`},
		{"ula not 48", `{"ula": "fd12:3456:789a::/56"}`, "want a /48 inside fd00::/8"},
		{"ula host bits", `{"ula": "fd12:3456:789a::1/48"}`, "has bits set after /48: want fd12:3456:789a::/48"},
		{"ula garbage", `{"ula": "auto"}`, `ipv6.ula: "auto": want a ULA /48`},
		{"rdnss v4", `{"lan": {"dns": ["192.168.1.1"]}}`, `ipv6.lan.dns[0]: "192.168.1.1": want an IPv6 address`},
		{"rdnss multicast", `{"lan": {"dns": ["ff02::1"]}}`, "ipv6.lan.dns[0]: ff02::1 is a multicast address"},
		{"rdnss link-local", `{"lan": {"dns": ["fe80::1"]}}`, "ipv6.lan.dns[0]: fe80::1 is link-local"},
		{"too many rdnss", `{"lan": {"dns": ["fd00::1", "fd00::2", "fd00::3", "fd00::4"]}}`, "ipv6.lan.dns: 4 resolvers: clients take at most 3"},
		{"bad dnssl", `{"lan": {"domains": ["Home..arpa"]}}`, `ipv6.lan.domains[0]: "Home..arpa": want a domain`},
		{"host bad name", `{"hosts": [{"name": "NAS", "id": "::10"}]}`, `ipv6.hosts[0].name: "NAS": want a host name`},
		{"host twice", `{"hosts": [{"name": "nas", "id": "::10"}, {"name": "nas", "id": "::11"}]}`, "ipv6.hosts[1].name: nas is ipv6.hosts[0]'s name already"},
		{"host id twice", `{"hosts": [{"name": "a", "id": "::10"}, {"name": "b", "id": "::10"}]}`, "ipv6.hosts[1].id: ::10 is ipv6.hosts[0]'s already"},
		{"host id with prefix", `{"hosts": [{"name": "a", "id": "2001:db8::10"}]}`, "ipv6.hosts[0].id: 2001:db8::10: want only the low 64 bits"},
		{"host id router's", `{"hosts": [{"name": "a", "id": "::1"}]}`, "ipv6.hosts[0].id: ::1: ::1 is the router's own"},
		{"host id garbage", `{"hosts": [{"name": "a", "id": "10"}]}`, `ipv6.hosts[0].id: "10": want an interface identifier`},
		{"host bad mac", `{"hosts": [{"name": "a", "mac": "ff:ff:ff:ff:ff:ff", "id": "::10"}]}`, "ipv6.hosts[0].mac: ff:ff:ff:ff:ff:ff is the broadcast address"},
		{"host multicast mac", `{"hosts": [{"name": "a", "mac": "33:33:00:00:00:01", "id": "::10"}]}`, "ipv6.hosts[0].mac: 33:33:00:00:00:01 is a multicast address"},
		{"host zero mac", `{"hosts": [{"name": "a", "mac": "00:00:00:00:00:00", "id": "::10"}]}`, "ipv6.hosts[0].mac: 00:00:00:00:00:00 is the zero address"},
		{"host mac garbage", `{"hosts": [{"name": "a", "mac": "52:54:00:12:34", "id": "::10"}]}`, `ipv6.hosts[0].mac: "52:54:00:12:34": want a MAC address`},
		{"host mac twice", `{"hosts": [{"name": "a", "mac": "52:54:00:12:34:56", "id": "::10"}, {"name": "b", "mac": "52-54-00-12-34-56", "id": "::11"}]}`,
			"ipv6.hosts[1].mac: 52:54:00:12:34:56 is ipv6.hosts[0]'s already"},
		{"host mac twice, upper case", `{"hosts": [{"name": "a", "mac": "52:54:00:AB:CD:EF", "id": "::10"}, {"name": "b", "mac": "52:54:00:ab:cd:ef", "id": "::11"}]}`,
			"ipv6.hosts[1].mac: 52:54:00:ab:cd:ef is ipv6.hosts[0]'s already"},
		{"unknown field", `{"wan": {"pd": 60}}`, `unknown field "pd"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, errs := Read("site.json", []byte(with(tc.ipv6)), alixPorts)
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			got := strings.Join(all, "\n")
			if tc.want == "" {
				if s == nil {
					t.Fatalf("refused a good section: %s", got)
				}
				return
			}
			if s != nil || !strings.Contains(got, tc.want) {
				t.Errorf("got %q; want an error with %q", got, tc.want)
			}
		})
	}
}

// TestIPv6NoLAN: the LAN's IPv6 fields need a LAN.
func TestIPv6NoLAN(t *testing.T) {
	s := &Site{Kind: "site", Hostname: "gw", WAN: WAN{Port: "wan", Address: DHCPAddress},
		IPv6: IPv6{LAN: IPv6LAN{SubnetID: 1, Domains: []string{"lan"}}, Hosts: []IPv6Host{{Name: "a", ID: "::10"}}}}
	var got []string
	for _, e := range s.Validate(alixPorts) {
		got = append(got, e.Error())
	}
	for _, want := range []string{"ipv6.lan.subnet_id: the site has no lan", "ipv6.lan.domains: the site has no lan", "ipv6.hosts: the site has no lan"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("got %q; want %q", got, want)
		}
	}
}

// TestIPv6ULA: a made ULA is fd00::/8 with the 40 bits from the
// reader, a /48 that ParseULA takes back.
func TestIPv6ULA(t *testing.T) {
	p, err := NewULA(bytes.NewReader([]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xff}))
	if err != nil {
		t.Fatal(err)
	}
	if p.String() != "fd12:3456:789a::/48" {
		t.Errorf("NewULA = %s, want fd12:3456:789a::/48", p)
	}
	if q, err := ParseULA(p.String()); err != nil || q != p {
		t.Errorf("ParseULA(%s) = %s, %v", p, q, err)
	}
	if _, err := NewULA(bytes.NewReader([]byte{1, 2})); err == nil {
		t.Error("NewULA took a short read")
	}
	// Two draws from crypto/rand differ (40 bits: a collision would be
	// one in a trillion).
	a, _ := NewULA(nil)
	b, _ := NewULA(nil)
	if a == b || !a.Addr().Is6() || a.Addr().As16()[0] != 0xfd {
		t.Errorf("NewULA(nil) gave %s and %s", a, b)
	}
}

// TestIPv6Subnet64: the LAN's /64 inside a prefix by subnet id, and a
// host's address by interface identifier.
func TestIPv6Subnet64(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		id     int
		want   string // "" when it does not fit
	}{
		{"2001:db8:1:10::/60", 0, "2001:db8:1:10::/64"},
		{"2001:db8:1:10::/60", 15, "2001:db8:1:1f::/64"},
		{"2001:db8:1:10::/60", 16, ""},
		{"2001:db8:1:ff00::/56", 0xab, "2001:db8:1:ffab::/64"},
		{"fd12:3456:789a::/48", 0xbeef, "fd12:3456:789a:beef::/64"},
		{"2001:db8:1:2::/64", 0, "2001:db8:1:2::/64"},
		{"2001:db8:1:2::/64", 1, ""},
		{"2001:db8::/48", -1, ""},
	} {
		got, ok := Subnet64(netip.MustParsePrefix(tc.prefix), tc.id)
		if (tc.want == "") == ok || ok && got.String() != tc.want {
			t.Errorf("Subnet64(%s, %d) = %s, %v; want %q", tc.prefix, tc.id, got, ok, tc.want)
		}
	}
	if got := WithID(netip.MustParsePrefix("2001:db8:1:2::/64"), netip.MustParseAddr("::a:b:c:d")); got.String() != "2001:db8:1:2:a:b:c:d" {
		t.Errorf("WithID = %s", got)
	}
}

// TestIPv6JSONOmitted: a site without IPv6 settings writes no ipv6 key,
// so its site.json still reads on firmware from before the section
// (which refuses unknown fields); one with settings keeps them through
// the JSON the host writes.
func TestIPv6JSONOmitted(t *testing.T) {
	s, errs := Read("site.json", []byte(goodSite), alixPorts)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	j, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(j), "ipv6") {
		t.Errorf("an empty ipv6 section written:\n%s", j)
	}
	full := strings.Replace(goodSite, `"ssh": {`, `"ipv6": {"wan": {"pd_length": 56}, "lan": {"subnet_id": 3}, "ula": "off"}, "ssh": {`, 1)
	s, errs = Read("site.json", []byte(full), alixPorts)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	j, err = s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, errs := Read("again.json", j, alixPorts)
	if len(errs) != 0 || back.IPv6.WAN.PDHint() != 56 || back.IPv6.LAN.SubnetID != 3 || back.IPv6.ULA != ULAOff {
		t.Errorf("round trip: %+v, %v\n%s", back, errs, j)
	}
}

// TestIPv6PortForwardValidate: a port forward's ipv6_host, checked by
// Validate (ocfw validate and the board alike) at the forward's field,
// and what IPv6Forwards resolves for the firewall from a good one.
func TestIPv6PortForwardValidate(t *testing.T) {
	with := func(fwds, ipv6 string) string {
		s := strings.Replace(goodSite, `"ssh": {`, `"firewall": {"port_forwards": [`+fwds+`]}, "ssh": {`, 1)
		if ipv6 != "" {
			s = strings.Replace(s, `"ssh": {`, `"ipv6": `+ipv6+`, "ssh": {`, 1)
		}
		return s
	}
	const hosts = `{"hosts": [{"name": "nas", "id": "::10"}, {"name": "tv", "id": "::a:b:c:d"}]}`
	for _, tc := range []struct {
		name, fwds, ipv6 string
		want             string        // an error's text; "" for a good config
		fwd6             []IPv6Forward // what IPv6Forwards gives a good one
	}{
		{name: "v4 only", fwds: `{"proto": "tcp", "port": 80, "to": "192.168.1.10"}`, ipv6: hosts},
		{name: "one host", fwds: `{"proto": "tcp", "port": 443, "to": "192.168.1.10", "ipv6_host": "nas"}`, ipv6: hosts,
			fwd6: []IPv6Forward{{Index: 0, Proto: "tcp", Port: 443, Host: "nas", ID: netip.MustParseAddr("::10")}}},
		{name: "to_port the same", fwds: `{"proto": "udp", "port": 51820, "to": "192.168.1.10", "to_port": 51820, "ipv6_host": "tv"},
			{"proto": "tcp", "port": 80, "to": "192.168.1.11", "to_port": 8080}`, ipv6: hosts,
			fwd6: []IPv6Forward{{Index: 0, Proto: "udp", Port: 51820, Host: "tv", ID: netip.MustParseAddr("::a:b:c:d")}}},
		{name: "second forward", fwds: `{"proto": "tcp", "port": 80, "to": "192.168.1.11", "to_port": 8080},
			{"proto": "tcp", "port": 22, "to": "192.168.1.10", "ipv6_host": "nas"}`, ipv6: hosts,
			fwd6: []IPv6Forward{{Index: 1, Proto: "tcp", Port: 22, Host: "nas", ID: netip.MustParseAddr("::10")}}},
		{name: "over IPv6 only", fwds: `{"proto": "tcp", "port": 8443, "ipv6_host": "nas"}`, ipv6: hosts,
			fwd6: []IPv6Forward{{Index: 0, Proto: "tcp", Port: 8443, Host: "nas", ID: netip.MustParseAddr("::10")}}},

		{name: "neither to nor ipv6_host", fwds: `{"proto": "tcp", "port": 443}`, ipv6: hosts,
			want: `firewall.port_forwards[0].to: missing: want the LAN host's IPv4 address, or ipv6_host for a forward over IPv6 only`},
		{name: "over IPv6 only, ipv6 off", fwds: `{"proto": "tcp", "port": 8443, "ipv6_host": "nas"}`,
			ipv6: `{"enable": false, "hosts": [{"name": "nas", "id": "::10"}]}`,
			want: `firewall.port_forwards[0].ipv6_host: "nas": ipv6 is off (ipv6.enable: false)`},
		{name: "unknown host", fwds: `{"proto": "tcp", "port": 443, "to": "192.168.1.10", "ipv6_host": "nsa"}`, ipv6: hosts,
			want: `firewall.port_forwards[0].ipv6_host: "nsa" is not a name in ipv6.hosts (its names: nas, tv)`},
		{name: "no hosts", fwds: `{"proto": "tcp", "port": 443, "to": "192.168.1.10", "ipv6_host": "nas"}`,
			want: `firewall.port_forwards[0].ipv6_host: "nas" is not a name in ipv6.hosts (ipv6.hosts is empty)`},
		{name: "ipv6 off", fwds: `{"proto": "tcp", "port": 443, "to": "192.168.1.10", "ipv6_host": "nas"}`,
			ipv6: `{"enable": false, "hosts": [{"name": "nas", "id": "::10"}]}`,
			want: `firewall.port_forwards[0].ipv6_host: "nas": ipv6 is off (ipv6.enable: false)`},
		{name: "WAN off", fwds: `{"proto": "tcp", "port": 443, "to": "192.168.1.10", "ipv6_host": "nas"}`,
			ipv6: `{"wan": {"mode": "off"}, "hosts": [{"name": "nas", "id": "::10"}]}`,
			want: `firewall.port_forwards[0].ipv6_host: "nas": ipv6.wan.mode is off`},
		{name: "host's bad id", fwds: `{"proto": "tcp", "port": 443, "to": "192.168.1.10", "ipv6_host": "nas"}`,
			ipv6: `{"hosts": [{"name": "nas", "id": "2001:db8::10"}]}`,
			want: `firewall.port_forwards[0].ipv6_host: nas's id (ipv6.hosts[0].id) is not usable: 2001:db8::10: want only the low 64 bits`},
		{name: "port translated", fwds: `{"proto": "tcp", "port": 80, "to": "192.168.1.10"}, {"proto": "tcp", "port": 8080, "to": "192.168.1.10", "to_port": 80, "ipv6_host": "nas"}`, ipv6: hosts,
			want: `firewall.port_forwards[1].to_port: 80 differs from port 8080: over IPv6 the WAN reaches nas's own address and port, nothing is translated (no NAT66)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, errs := Read("site.json", []byte(with(tc.fwds, tc.ipv6)), alixPorts)
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			got := strings.Join(all, "\n")
			if tc.want != "" {
				if s != nil || !strings.Contains(got, tc.want) {
					t.Errorf("got %q; want an error with %q", got, tc.want)
				}
				return
			}
			if s == nil {
				t.Fatalf("refused a good config: %s", got)
			}
			fwd6, errs6 := s.IPv6Forwards()
			if len(errs6) != 0 || len(fwd6) != len(tc.fwd6) {
				t.Fatalf("IPv6Forwards: %+v %v, want %+v", fwd6, errs6, tc.fwd6)
			}
			for i := range fwd6 {
				if fwd6[i] != tc.fwd6[i] {
					t.Errorf("IPv6Forwards[%d]: %+v, want %+v", i, fwd6[i], tc.fwd6[i])
				}
			}
		})
	}
}
