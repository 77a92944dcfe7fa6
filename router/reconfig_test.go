package router

import (
	"reflect"
	"sort"
	"testing"

	"github.com/ocfw/ocfw/site"
)

// Each part restarts only the services it concerns.
func TestRestartsOnlyWhatAPartConcerns(t *testing.T) {
	base := func() *site.Site {
		return &site.Site{Firewall: site.Firewall{}}
	}
	withSSH := base()
	withSSH.Firewall.WANServices = []string{"ssh"}
	for _, c := range []struct {
		name     string
		parts    []string
		to       *site.Site
		want     []string
		firewall bool
	}{
		{"hostname", []string{PartHostname}, base(), nil, false},
		{"a port forward", []string{PartFirewall}, base(), nil, true},
		{"ssh opened on the WAN", []string{PartFirewall}, withSSH, []string{"ssh"}, true},
		{"a DNS name (static lease)", []string{PartDHCP}, base(), []string{"dhcp"}, false},
		{"the domain", []string{PartDNS}, base(), []string{"dns"}, false},
		{"the LAN address", []string{PartLAN}, base(), []string{"dhcp", "dns", "ntp-server", "ssh"}, true},
		{"the WAN", []string{PartWAN}, base(), []string{"dhcp-client", "ipsec"}, true},
		{"keys", []string{PartSSH}, base(), []string{"ssh"}, true},
		{"tunnels", []string{PartTunnels}, base(), []string{"ipsec"}, true},
		{"ntp", []string{PartNTP}, base(), []string{"ntp"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			has := map[string]bool{}
			for _, p := range c.parts {
				has[p] = true
			}
			r, fw := restarts(base(), c.to, has)
			var got []string
			for n, ok := range r {
				if ok {
					got = append(got, n)
				}
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, c.want) || fw != c.firewall {
				t.Errorf("restarts %v, firewall %v; want %v, %v", got, fw, c.want, c.firewall)
			}
		})
	}
}
