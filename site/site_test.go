package site

import (
	"strings"
	"testing"

	"github.com/ocfw/ocfw/plan"
)

var alixPorts = []plan.Port{
	{Name: "wan", Driver: "via_rhine", Interface: "eth0", Role: plan.RoleWAN},
	{Name: "lan1", Driver: "via_rhine", Interface: "eth1", Role: plan.RoleLAN},
	{Name: "lan2", Driver: "via_rhine", Interface: "eth2", Role: plan.RoleLAN},
}

const goodSite = `{"kind": "site", "board": "alix2d13", "hostname": "gw",
 "wan": {"port": "wan", "address": "dhcp"},
 "lan": {"ports": ["lan1"], "address": "192.168.1.1/24",
         "dhcp": {"range": ["192.168.1.100", "192.168.1.199"]}},
 "ssh": {"authorized_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKBwJBsFLsyeu0X2x0QRAdxj8oBbJzXpNHzV8QkGZtxv me"]}}`

func TestReadSite(t *testing.T) {
	s, errs := Read("site.json", []byte(goodSite), alixPorts)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if !s.LAN.ForwarderOn() || s.LAN.DHCP.LeaseTime() != DefaultLease || s.SSH.SSHPort() != 22 || s.SSH.LoginName() != "root" || !s.SSH.RSAHostKeyOn() {
		t.Errorf("defaults: forwarder %v lease %v ssh %d rsa host key %v", s.LAN.ForwarderOn(), s.LAN.DHCP.LeaseTime(), s.SSH.SSHPort(), s.SSH.RSAHostKeyOn())
	}
	// The RSA host key turned off stays off through the JSON the host
	// writes (the board reads that).
	off, errs := Read("off.json", []byte(strings.Replace(goodSite, `"ssh": {`, `"ssh": {"rsa_host_key": false,`, 1)), alixPorts)
	if len(errs) != 0 || off.SSH.RSAHostKeyOn() {
		t.Fatalf("rsa_host_key false: %v, on %v", errs, off != nil && off.SSH.RSAHostKeyOn())
	}
	if j, err := off.JSON(); err != nil || !strings.Contains(string(j), `"rsa_host_key": false`) {
		t.Errorf("rsa_host_key false in JSON: %s (%v)", j, err)
	}
	// Round trip through the JSON the host writes.
	j, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := Read("again.json", j, alixPorts); len(errs) != 0 {
		t.Errorf("round trip: %v", errs)
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"syntax", "{\n \"kind\": \"site\",\n \"hostname\" \"gw\"}", "bad.json:3:13: JSON syntax"},
		{"unknown field", strings.Replace(goodSite, `"hostname"`, `"hostnme"`, 1), `unknown field "hostnme"`},
		{"wrong type", strings.Replace(goodSite, `"ports": ["lan1"]`, `"ports": "lan1"`, 1), "lan.ports: want []string"},
		{"port of another board", strings.Replace(goodSite, `["lan1"]`, `["lan3"]`, 1), `lan.ports[0]: "lan3" is not a port of this board`},
		{"WAN port twice", strings.Replace(goodSite, `["lan1"]`, `["wan"]`, 1), "lan.ports[0]: port wan is already the WAN port"},
		{"static WAN without gateway", strings.Replace(goodSite, `"address": "dhcp"`, `"address": "198.51.100.2/24"`, 1), "wan.gateway: a static WAN address needs the gateway"},
		{"LAN overlapping WAN", strings.Replace(strings.Replace(goodSite, `"address": "dhcp"`, `"address": "192.168.1.2/16", "gateway": "192.168.0.1"`, 1), "x", "x", 1), "overlaps the WAN network"},
		{"bad local domain", strings.Replace(goodSite, `"ports": ["lan1"]`, `"ports": ["lan1"], "domain": "Home..lan"`, 1), `lan.domain: "Home..lan": want a domain`},
		{"bad ssh user", strings.Replace(goodSite, `"ssh": {`, "\n \"ssh\": {\"user\": \"Admin\",", 1), `bad.json: ssh.user: "Admin": want a user name`},
		{"ssh user with a space", strings.Replace(goodSite, `"ssh": {`, `"ssh": {"user": "a b",`, 1), `ssh.user: "a b": want a user name`},
		{"rsa_host_key not a bool", strings.Replace(goodSite, `"ssh": {`, `"ssh": {"rsa_host_key": "no",`, 1), "ssh.rsa_host_key"},
		{"huge", strings.Repeat(" ", plan.MaxFileSize+1), "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, errs := Read("bad.json", []byte(tc.data), alixPorts)
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if s != nil || !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Errorf("got %v; want an error with %q", all, tc.want)
			}
		})
	}
}
