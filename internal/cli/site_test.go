package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/boards"
)

func TestValidateSite(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "site.yaml")
	os.WriteFile(bad, []byte(`kind: site
board: alix2d13
hostname: gw
wan: {port: wan, address: 198.51.100.2/24}
lan:
  ports: [lan1, lan1]
  address: 192.168.1.1/24
  dhcp: {range: [192.168.1.10, 192.168.1.9], lease: 5s}
firewall:
  wan_services: [telnet]
ssh: {user: Root}
`), 0o644)
	out, errs, code := ocfw(t, "validate", bad, "../../examples/sites/alix2d13.yaml")
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		bad + ":4:6: a static WAN address needs the gateway",
		bad + ":6:17: port lan1 is already the LAN port",
		bad + `:8:17: 192.168.1.9 comes before 192.168.1.10`,
		bad + `:8:53: "5s": want a duration of a minute or more`,
		bad + `:10:18: "telnet": the router offers ssh on the WAN, nothing else`,
		bad + `:11:13: "Root": want a user name`,
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}

	// A site for another board, and a site with a ready initramfs, are
	// refused before anything is built.
	_, errs, code = ocfw(t, "build", "--board", "net5501", "--site", "../../examples/sites/alix2d13.yaml", "-o", filepath.Join(dir, "x.img"))
	if code == 0 || !strings.Contains(errs, "is for board alix2d13, but --board is net5501") {
		t.Errorf("site for another board: exit %d %s", code, errs)
	}
	_, errs, code = ocfw(t, "build", "--board", "alix2d13", "--site", bad, "-o", filepath.Join(dir, "x.img"))
	if code == 0 || !strings.Contains(errs, "a static WAN address needs the gateway") {
		t.Errorf("bad site at build: exit %d %s", code, errs)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("a refused build left files: %v", es)
	}
}

func TestRunNetFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--net", "tap", "x.img"}, "--net \"tap\": want user"},
		{[]string{"run", "--port", "wan", "x.img"}, "--port \"wan\": want NAME=SOCKET"},
		{[]string{"run", "--port", "wan=/s,server", "x.img"}, "want NAME=SOCKET or NAME=SOCKET,listen"},
		{[]string{"run", "--net", "none", "--port", "wan=/s", "x.img"}, "--net none and --port"},
		{[]string{"run", "--ssh-port", "70000", "x.img"}, "--ssh-port 70000"},
	} {
		_, errs, code := ocfw(t, tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, errs, tc.want)
		}
	}
}

// ocfw site json writes what the board reads: site.Read takes it
// back against the board's ports.
func TestSiteJSON(t *testing.T) {
	out, errs, code := ocfw(t, "site", "json", "../../examples/sites/alix2d13.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := cat.Board("alix2d13")
	s, perrs := site.Read("site.json", []byte(out), b.Ports)
	if len(perrs) != 0 || s.Hostname != "alix" || len(s.Firewall.PortForwards) != 1 {
		t.Errorf("the board reads back %+v, %v", s, perrs)
	}
	if _, errs, code := ocfw(t, "site", "json", "../../examples/sites/nope.yaml"); code == 0 || !strings.Contains(errs, "nope.yaml") {
		t.Errorf("missing file: %d %s", code, errs)
	}
}
