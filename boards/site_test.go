package boards

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The example site configs in the repository are valid: one per board,
// named for it, and the two ends of a tunnel (site-a, site-b).
func TestExampleSites(t *testing.T) {
	cat := embeddedT(t)
	files, _ := filepath.Glob("../examples/sites/*.yaml")
	if len(files) < 4 {
		t.Fatalf("want an example site per board, have %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, b, err := cat.ParseSite(f, data)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if b == nil || s.Board != b.Name || filepath.Base(f) != b.Name+".yaml" && !strings.HasPrefix(filepath.Base(f), "site-") {
			t.Errorf("%s: board %q", f, s.Board)
		}
	}
}

// A site with several mistakes gets all of them in one run, each at
// FILE:LINE:COLUMN.
func TestSiteMistakesAllAtOnce(t *testing.T) {
	cat := embeddedT(t)
	src := `kind: site
board: alix2d13
hostname: My_Router
wan:
  port: wan
  address: dhcp
  gatway: 198.51.100.1
lan:
  ports: [lan1, lan7]
  address: 192.168.1.1/24
  dhcp:
    range: [192.168.1.200, 192.168.2.10]
firewall:
  port_forwards:
    - {proto: icmp, port: 99999, to: 10.0.0.5}
ssh:
  authorized_keys: [hunter2]
`
	_, _, err := cat.ParseSite("site.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`site.yaml:3:11: "My_Router": want a host name`,
		`site.yaml:7:3: unknown field "gatway"`,
		`did you mean "gateway"?`,
		`site.yaml:9:17: "lan7" is not a port of this board; its ports: wan, lan1, lan2`,
		`site.yaml:12:28: 192.168.2.10 is outside the LAN 192.168.1.0/24`,
		`site.yaml:15:15: "icmp": want tcp or udp`,
		`site.yaml:15:27: 99999: want a port 1-65535`,
		`site.yaml:15:38: 10.0.0.5 is outside the LAN`,
		`site.yaml:17:21: not a public key`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}

func TestSiteBoardMustExist(t *testing.T) {
	cat := embeddedT(t)
	_, _, err := cat.ParseSite("s.yaml", []byte("kind: site\nboard: alix2d31\nhostname: gw\nwan: {port: wan, address: dhcp}\n"))
	if err == nil || !strings.Contains(err.Error(), "s.yaml:2:8:") || !strings.Contains(err.Error(), `alix2d13`) {
		t.Errorf("unknown board: %v", err)
	}
}

// A second document after --- was dropped by the reader without a word:
// it is refused at its line.
func TestSiteSecondDocument(t *testing.T) {
	cat := embeddedT(t)
	one := "kind: site\nboard: alix2d13\nhostname: gw\nwan: {port: wan, address: dhcp}\n"
	if _, _, err := cat.ParseSite("s.yaml", []byte(one+"---\n# only a comment\n")); err != nil {
		t.Errorf("a trailing comment-only document: %v", err)
	}
	_, _, err := cat.ParseSite("s.yaml", []byte(one+"---\n"+strings.Replace(one, "gw", "other", 1)))
	if err == nil || !strings.Contains(err.Error(), "s.yaml:5:1: a second YAML document (---)") {
		t.Errorf("second document: %v", err)
	}
}

// The typed values (WAN and LAN address, lease) read from YAML as
// strings and are still placed at FILE:LINE:COLUMN when bad.
func TestSiteTypedValuesPlaced(t *testing.T) {
	cat := embeddedT(t)
	for _, tc := range []struct{ wan, lan, lease, want string }{
		{"dhcpp", "192.168.1.1/24", "12h", `s.yaml:4:27: "dhcpp": want dhcp or an IPv4 address with its prefix`},
		{"dhcp", "192.168.1.1/31", "12h", `s.yaml:5:31: "192.168.1.1/31": want the router's LAN address with its prefix`},
		{"dhcp", "192.168.1.1/24", "30s", `s.yaml:5:100: "30s": want a duration of a minute or more`},
		{"[dhcp]", "192.168.1.1/24", "12h", `s.yaml:4:27: field "wan.address": want a string, got a list`},
	} {
		src := "kind: site\nboard: alix2d13\nhostname: gw\nwan: {port: wan, address: " + tc.wan +
			"}\nlan: {ports: [lan1], address: " + tc.lan + ", dhcp: {range: [192.168.1.100, 192.168.1.199], lease: " + tc.lease + "}}\n"
		_, _, err := cat.ParseSite("s.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("wan %s, lan %s, lease %s: got %v; want %q", tc.wan, tc.lan, tc.lease, err, tc.want)
		}
	}
}
