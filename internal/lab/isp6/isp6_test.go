package isp6

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var lab = ISP{NS: "wan", Interface: "eth0",
	Link: netip.MustParsePrefix("2001:db8:0:1::/64"), Addr: netip.MustParseAddr("2001:db8:0:1::1"),
	Pool: netip.MustParsePrefix("2001:db8:1::/48"), PDLength: 60, DNS: netip.MustParseAddr("2001:db8:0:1::1")}

func TestLastPrefix(t *testing.T) {
	for _, c := range []struct {
		pool string
		pd   int
		want string
	}{
		{"2001:db8:1::/48", 60, "2001:db8:1:fff0::"},
		{"2001:db8:1::/48", 56, "2001:db8:1:ff00::"},
		{"2001:db8:1:100::/56", 64, "2001:db8:1:1ff::"},
		{"2001:db8:1::/60", 60, "2001:db8:1::"},
	} {
		if got := lastPrefix(netip.MustParsePrefix(c.pool), c.pd); got.String() != c.want {
			t.Errorf("lastPrefix(%s, /%d) = %s, want %s", c.pool, c.pd, got, c.want)
		}
	}
}

// TestConfigsParse: the configurations are ones the real programs
// accept (the host's dhcpd -t and radvd -c, the same Debian versions
// the world runs for i386).
func TestConfigsParse(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		prog, file, text string
		args             []string
	}{
		{"dhcpd", "dhcpd6.conf", lab.DhcpdConf(), []string{"-6", "-t", "-q", "-cf"}},
		{"radvd", "radvd.conf", lab.RadvdConf(), []string{"-c", "-C"}},
	} {
		prog, err := exec.LookPath(c.prog)
		if err != nil {
			for _, d := range []string{"/usr/sbin", "/sbin"} {
				if _, e := os.Stat(filepath.Join(d, c.prog)); e == nil {
					prog, err = filepath.Join(d, c.prog), nil
				}
			}
		}
		if err != nil {
			if os.Getenv("OCFW_REQUIRE_KERNEL") != "" {
				t.Fatalf("%s not installed (.ci/run installs isc-dhcp-server and radvd)", c.prog)
			}
			t.Logf("skipped %s's check: not installed (apt-get install %s)", c.prog, map[string]string{"dhcpd": "isc-dhcp-server", "radvd": "radvd"}[c.prog])
			continue
		}
		p := filepath.Join(dir, c.file)
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(prog, append(c.args, p)...).CombinedOutput()
		if err != nil {
			t.Errorf("%s refuses %s: %v\n%s\n--- the file\n%s", c.prog, c.file, err, out, c.text)
		}
	}
	if !strings.Contains(lab.DhcpdConf(), "prefix6 2001:db8:1:: 2001:db8:1:fff0:: /60;") {
		t.Errorf("dhcpd6.conf delegates the wrong range:\n%s", lab.DhcpdConf())
	}
}

// The router's link-local address from its MAC, as the kernel makes it.
func TestLinkLocal(t *testing.T) {
	a, err := LinkLocal("52:54:00:0b:00:01")
	if err != nil || a.String() != "fe80::5054:ff:fe0b:1" {
		t.Errorf("LinkLocal: %v, %v; want fe80::5054:ff:fe0b:1", a, err)
	}
	if _, err := LinkLocal("52:54:00:0b:00"); err == nil {
		t.Error("a short MAC was accepted")
	}
}
