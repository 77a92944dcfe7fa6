package router

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	mrand "math/rand"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/site"
)

var testPorts = []plan.Port{{Name: "wan", Interface: "eth0"}, {Name: "lan1", Interface: "eth1"}, {Name: "lan2", Interface: "eth2"}}

// The router never refuses a part of a config site.Validate passed: over
// thousands of sites drawn from values near every edge (network and
// broadcast addresses, duplicates, prefixes, MACs, keys), whatever
// Validate passes, CheckSite (the firewall's ruleset, the DHCP pool, the
// SSH keys) passes too. A check the router makes and Validate does not
// shows up here as a site both draw differently.
func TestCheckSiteNeverRefusesValid(t *testing.T) {
	ed := func() string {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		k, _ := ssh.NewPublicKey(pub)
		return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
	}
	rk, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rpub, _ := ssh.NewPublicKey(&rk.PublicKey)
	keys := []string{ed(), ed(), "ssh-ed25519 hunter2", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(rpub))), "# a comment", ""}
	// Each list starts with values that are good in most sites drawn
	// (good of them); pick takes one of those most of the time.
	lans, goodLANs := []string{"192.168.1.1/24", "192.168.1.1/16", "192.168.1.2/23", "192.168.1.0/24", "192.168.1.255/24", "192.168.1.3/30", "192.168.1.1/0", "192.168.1.1/31", "192.168.1.1/7", ""}, 3
	addrs, goodAddrs := []string{"192.168.1.2", "192.168.1.100", "192.168.1.254", "192.168.1.0", "192.168.1.1", "192.168.1.255",
		"192.168.0.255", "192.168.2.0", "192.168.0.0", "192.168.1.3", "fe80::1", "x"}, 3
	macs, goodMACs := []string{"52:54:00:12:34:56", "52:54:00:12:34:57", "52-54-00-12-34-58", "52:54:00:12:34:5A", "52:54:00:12:34:5a", "ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01", "00:00:00:00:00:00", "zz"}, 5
	wans, goodWANs := []string{"dhcp", "198.51.100.2/24", "198.51.100.2/31", "198.51.100.0/24", "198.51.100.255/24", "192.168.1.2/24"}, 3
	gws, goodGWs := []string{"198.51.100.1", "198.51.100.3", "198.51.100.2", "198.51.100.0", "198.51.100.255", ""}, 2
	var r *mrand.Rand
	pick := func(s []string, good int) string {
		if r.Intn(6) > 0 {
			return s[r.Intn(good)]
		}
		return s[r.Intn(len(s))]
	}
	r = mrand.New(mrand.NewSource(20))
	valid := 0
	const n = 4000
	for i := 0; i < n; i++ {
		s := &site.Site{Kind: "site", Board: "test", Hostname: "gw",
			WAN: site.WAN{Port: "wan", Address: site.WANAddress(pick(wans, goodWANs))}}
		if !s.WAN.Address.IsDHCP() || r.Intn(6) == 0 {
			s.WAN.Gateway = pick(gws, goodGWs)
			if s.WAN.Address == "198.51.100.2/31" && r.Intn(2) == 0 {
				s.WAN.Gateway = "198.51.100.3"
			}
		}
		if r.Intn(8) > 0 {
			s.LAN.Ports = [][]string{{"lan1"}, {"lan1", "lan2"}, {"lan2"}}[r.Intn(3)]
			s.LAN.Address = site.LANAddress(pick(lans, goodLANs))
		}
		if r.Intn(4) > 0 && len(s.LAN.Ports) > 0 {
			s.LAN.DHCP.Range = []string{pick(addrs, goodAddrs), pick(addrs, goodAddrs)}
			if r.Intn(2) == 0 { // first first, mostly
				s.LAN.DHCP.Range[0], s.LAN.DHCP.Range[1] = "192.168.1.2", pick(addrs, goodAddrs)
			}
		}
		for j := r.Intn(3); j > 0 && len(s.LAN.Ports) > 0; j-- {
			s.LAN.DHCP.Static = append(s.LAN.DHCP.Static, site.StaticLease{MAC: pick(macs, goodMACs), IP: pick(addrs, goodAddrs)})
		}
		if r.Intn(3) == 0 {
			s.LAN.DHCP.Router = pick(addrs, goodAddrs)
			s.LAN.DHCP.DNS = []string{pick(addrs, goodAddrs)}
		}
		for j := r.Intn(3); j > 0; j-- {
			s.Firewall.PortForwards = append(s.Firewall.PortForwards, site.PortForward{
				Proto: []string{"tcp", "udp"}[r.Intn(2)], Port: []int{22, 80, 8080}[r.Intn(3)], To: pick(addrs, goodAddrs), ToPort: []int{0, 80, 443, 70000}[r.Intn(4)]})
		}
		if r.Intn(3) == 0 {
			s.Firewall.WANServices = []string{"ssh"}
		}
		s.SSH.Port = []int{0, 22, 8080}[r.Intn(3)]
		for j := 1 + r.Intn(2); j > 0; j-- {
			s.SSH.AuthorizedKeys = append(s.SSH.AuthorizedKeys, pick(keys, 2))
		}
		if len(s.Validate(testPorts)) > 0 {
			continue
		}
		valid++
		if errs := CheckSite(s, testPorts); len(errs) > 0 {
			t.Errorf("Validate passed %+v; the router refuses it: %v", s, errs)
		}
	}
	// Enough of the draws must pass Validate for the walk to mean
	// something.
	if valid < n/50 {
		t.Errorf("only %d of %d drawn sites are valid: the walk checks too little", valid, n)
	}
	t.Logf("%d of %d drawn sites valid, each accepted by CheckSite", valid, n)
}

// ReadSite refuses what CheckSite refuses, whole, naming the file.
func TestReadSiteNamesTheFile(t *testing.T) {
	s := &site.Site{Kind: "site", Board: "test", Hostname: "gw", WAN: site.WAN{Port: "wan", Address: "dhcp"},
		LAN: site.LAN{Ports: []string{"lan1"}, Address: "192.168.1.1/24", DHCP: site.DHCP{Range: []string{"192.168.1.10", "192.168.1.20"},
			Static: []site.StaticLease{{MAC: "52:54:00:12:34:56", IP: "192.168.1.5"}, {MAC: "52:54:00:12:34:57", IP: "192.168.1.5"}}}}}
	data, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, errs := ReadSite("card site.json", data, testPorts)
	if got != nil || len(errs) == 0 || !strings.HasPrefix(errs[0].Error(), "card site.json: lan.dhcp.static[1].ip: 192.168.1.5 is lan.dhcp.static[0]'s address already") {
		t.Errorf("ReadSite: %v, %v", got, errs)
	}
	// The router's own pool refuses it too: the second lock.
	if errs := CheckSite(s, testPorts); len(errs) == 0 || !strings.Contains(errs[0].Error(), "is given to both") {
		t.Errorf("CheckSite: %v", errs)
	}
}
