package boards

import (
	"strings"
	"testing"
)

func TestBoardPorts(t *testing.T) {
	cat, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for board, want := range map[string]string{
		"alix2d13":     "wan:via_rhine:eth0:wan lan1:via_rhine:eth1:lan lan2:via_rhine:eth2:lan",
		"net5501":      "wan:via_rhine:eth0:wan lan1:via_rhine:eth1:lan lan2:via_rhine:eth2:lan lan3:via_rhine:eth3:lan",
		"nslu2":        "wan:ixp4xx_eth:eth0:wan",
		"avila-gw2348": "wan:ixp4xx_eth:eth0:wan lan:ixp4xx_eth:eth1:lan",
	} {
		p, err := cat.Resolve(Request{Board: board})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, pt := range p.Ports {
			got = append(got, pt.Name+":"+pt.Driver+":"+pt.Interface+":"+pt.Role)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s ports %q, want %q", board, strings.Join(got, " "), want)
		}
	}
}

func TestBadPorts(t *testing.T) {
	for _, tc := range []struct {
		name, ports, want string
	}{
		{"unknown driver", `ports:
  - {name: wan, driver: rtl8139, pci: "10ec:8139", interface: eth0, role: wan}`, `driver "rtl8139": not a NIC driver ocfw knows; known: via_rhine, ixp4xx_eth, e1000`},
		{"chip the driver does not drive", `ports:
  - {name: wan, driver: via_rhine, pci: "8086:100e", interface: eth0, role: wan}`, "pci 8086:100e: via_rhine does not drive that chip"},
		{"same name twice", `ports:
  - {name: wan, driver: e1000, pci: "8086:100e", interface: eth0, role: wan}
  - {name: wan, driver: e1000, pci: "8086:100e", interface: eth1, role: lan}`, `port name "wan" given twice`},
		{"same interface twice", `ports:
  - {name: wan, driver: e1000, pci: "8086:100e", interface: eth0, role: wan}
  - {name: lan, driver: e1000, pci: "8086:100e", interface: eth0, role: lan}`, `interface "eth0" belongs to another port`},
		{"no WAN", `ports:
  - {name: a, driver: e1000, pci: "8086:100e", interface: eth0, role: lan}
  - {name: b, driver: e1000, pci: "8086:100e", interface: eth1, role: lan}`, "want exactly one port with role wan"},
		{"bad role", `ports:
  - {name: wan, driver: e1000, pci: "8086:100e", interface: eth0, role: wan}
  - {name: dmz, driver: e1000, pci: "8086:100e", interface: eth1, role: dmz}`, `role "dmz": want one of "wan", "lan", "unused"`},
		{"platform NIC without its device", `ports:
  - {name: wan, driver: ixp4xx_eth, interface: eth0, role: wan}`, "needs the platform device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("my.yaml", []byte(goodBoard+tc.ports+"\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "my.yaml:") {
				t.Fatalf("error %v, want one at my.yaml:LINE:COL with %q", err, tc.want)
			}
		})
	}
}
