package boardvm

import (
	"strings"
	"testing"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/plan"
)

func TestNICs(t *testing.T) {
	pl := &plan.Plan{Board: "alix2d13", Ports: []plan.Port{
		{Name: "wan", Interface: "eth0"}, {Name: "lan1", Interface: "eth1"}, {Name: "lan2", Interface: "eth2"}}}
	site := &site.Site{WAN: site.WAN{Port: "wan", Address: "dhcp"},
		LAN: site.LAN{Ports: []string{"lan1", "lan2"}, Address: "192.168.1.1/24",
			DHCP: site.DHCP{Range: []string{"192.168.1.100", "192.168.1.254"}}}}
	nics, notes, err := NICs(pl, site, Network{SSHPort: 2222})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for i, n := range nics {
		a, err := n.Args("p" + string(rune('0'+i)))
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, strings.Join(a, " "))
	}
	all := strings.Join(args, "\n")
	for _, want := range []string{
		"-netdev user,id=p0,restrict=on -device e1000,netdev=p0,romfile=,mac=52:54:00:0f:00:01",
		// QEMU's end below the DHCP range's start? No: the range runs to
		// .254, so the top free address is .99.
		"-netdev user,id=p1,restrict=on,net=192.168.1.0/24,host=192.168.1.99,hostfwd=tcp:127.0.0.1:2222-192.168.1.1:22",
		"-netdev hubport,id=p2",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("cards lack %q:\n%s", want, all)
		}
	}
	if len(notes) != 3 || !strings.Contains(notes[1], "127.0.0.1:2222") {
		t.Errorf("notes %q", notes)
	}
	for _, a := range args {
		if strings.Contains(a, "tap") || strings.Contains(a, "bridge") || (strings.Contains(a, "user") && !strings.Contains(a, "restrict=on")) {
			t.Errorf("a card that could reach the host's network: %s", a)
		}
	}

	// An explicit port wins; an unknown port is an error; no site, no plugs.
	nics, _, err = NICs(pl, site, Network{Ports: map[string]qemu.NIC{"wan": {Socket: "/tmp/w.sock"}}})
	if err != nil || nics[0].Socket != "/tmp/w.sock" || nics[0].MAC != PortMAC(0) {
		t.Errorf("explicit wan: %+v %v", nics, err)
	}
	if _, _, err := NICs(pl, site, Network{Ports: map[string]qemu.NIC{"dmz": {}}}); err == nil || !strings.Contains(err.Error(), "no port dmz") {
		t.Errorf("unknown port: %v", err)
	}
	nics, _, _ = NICs(pl, nil, Network{SSHPort: 2222})
	for _, n := range nics {
		if !n.Unplugged {
			t.Errorf("without a site every port is unplugged: %+v", n)
		}
	}
	if nics, _, _ := NICs(pl, site, Network{None: true}); len(nics) != 0 {
		t.Errorf("--net none: %d cards", len(nics))
	}
}
