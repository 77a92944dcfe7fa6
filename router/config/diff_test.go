package config_test

import (
	"reflect"
	"testing"

	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/site"
)

func TestDiffNamesOnlyWhatChanged(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(s *site.Site)
		files map[string]string
		want  []string
	}{
		{"nothing", nil, nil, nil},
		{"a DNS host (static lease name)", func(s *site.Site) {
			s.LAN.DHCP.Static = []site.StaticLease{{MAC: "52:54:00:12:34:56", IP: "192.168.1.10", Name: "nas"}}
		}, nil, []string{"dhcp"}},
		{"a port forward", func(s *site.Site) {
			s.Firewall.PortForwards = []site.PortForward{{Proto: "tcp", Port: 8080, To: "192.168.1.10"}}
		}, nil, []string{"firewall"}},
		{"the LAN address", func(s *site.Site) { s.LAN.Address = "192.168.2.1/24" }, nil, []string{"lan"}},
		{"the WAN", func(s *site.Site) { s.WAN.Address, s.WAN.Gateway = "198.51.100.2/24", "198.51.100.1" }, nil, []string{"wan"}},
		{"ssh keys", func(s *site.Site) { s.SSH.AuthorizedKeys = append(s.SSH.AuthorizedKeys, sshKey) }, nil, []string{"ssh"}},
		{"ssh port", func(s *site.Site) { s.SSH.Port = 2222 }, nil, []string{"firewall", "ssh"}},
		{"hostname", func(s *site.Site) { s.Hostname = "gw2" }, nil, []string{"hostname"}},
		{"domain", func(s *site.Site) { s.LAN.Domain = "home.arpa" }, nil, []string{"dns"}},
		{"ntp", func(s *site.Site) { s.NTP.Servers = []string{"192.0.2.1"} }, nil, []string{"ntp"}},
		{"the IPv6 subnet id", func(s *site.Site) { s.IPv6.LAN.SubnetID = 2 }, nil, []string{"ipv6"}},
		{"IPv6 off", func(s *site.Site) { off := false; s.IPv6.Enable = &off }, nil, []string{"ipv6"}},
		{"a key file", nil, map[string]string{"t.json": "{}"}, []string{"tunnels"}},
		{"no key files, as an empty map", nil, map[string]string{}, nil},
		{"empty list is no list", func(s *site.Site) { s.NTP.Servers = []string{} }, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := baseSite(nil), baseSite(c.edit)
			if got := config.Diff(a, b, nil, c.files); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Diff = %v, want %v", got, c.want)
			}
		})
	}
	if config.PortsChanged(baseSite(nil), baseSite(func(s *site.Site) { s.LAN.Address = "10.0.0.1/8" })) {
		t.Error("PortsChanged says yes for an address")
	}
	if !config.PortsChanged(baseSite(nil), baseSite(func(s *site.Site) { s.WAN.Port = "lan1"; s.LAN.Ports = []string{"wan"} })) {
		t.Error("PortsChanged misses swapped ports")
	}
}
