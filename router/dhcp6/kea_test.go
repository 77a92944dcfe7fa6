package dhcp6

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/realclient"
)

// keaConf is a kea-dhcp6 config delegating the one /56 pd from a pool
// of its own, with RFC 6603's excluded prefix x in it, on the link's
// server interface.
func keaConf(dir, ifname string, pd, x netip.Prefix) string {
	return `{"Dhcp6": {
  "data-directory": "` + dir + `",
  "server-id": {"type": "LLT", "persist": false},
  "interfaces-config": {"interfaces": ["` + ifname + `"]},
  "lease-database": {"type": "memfile", "persist": false},
  "preferred-lifetime": 20, "valid-lifetime": 40, "renew-timer": 10, "rebind-timer": 16,
  "option-data": [{"name": "dns-servers", "data": "2001:db8:ffff::53"}],
  "subnet6": [{"subnet": "2001:db8:ffff::/64", "interface": "` + ifname + `",
    "pools": [{"pool": "2001:db8:ffff::100-2001:db8:ffff::1ff"}],
    "pd-pools": [{"prefix": "` + pd.Addr().String() + `", "prefix-len": ` + strconv.Itoa(pd.Bits()) + `, "delegated-len": ` + strconv.Itoa(pd.Bits()) + `,
      "excluded-prefix": "` + x.Addr().String() + `", "excluded-prefix-len": ` + strconv.Itoa(x.Bits()) + `}]}],
  "loggers": [{"name": "kea-dhcp6", "output_options": [{"output": "stdout"}], "severity": "DEBUG", "debuglevel": 40}]
}}
`
}

// TestDHCPv6PrefixDelegationExcludeKea: ISC Kea (kea-dhcp6 from Debian)
// delegates a /56 with RFC 6603's OPTION_PD_EXCLUDE, which a server sends
// only to a client that asks for it in its ORO: the client's lease
// carries the excluded /64 (the ISP's own, which the LAN's numbering
// then refuses: TestIPv6LANPlan's WPD-8 case), with the server's
// lifetimes and resolver. The first test of the exclude against a server
// nobody here wrote (dhcpd -6 has no PD_EXCLUDE).
func TestDHCPv6PrefixDelegationExcludeKea(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kea-dhcp6: a few seconds")
	}
	bin := realclient.Need(t, "kea-dhcp6")
	link := realclient.NewLink(t, wanServer)
	pd, x := netip.MustParsePrefix("2001:db8:100:100::/56"), netip.MustParsePrefix("2001:db8:100:105::/64")
	dir := t.TempDir()
	cf := filepath.Join(dir, "kea-dhcp6.conf")
	if err := os.WriteFile(cf, []byte(keaConf(dir, link.ServerIf, pd, x)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Kea binds its link-local address once, at its start: not while
	// it is still tentative.
	if err := link.Server.Settle(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Kea's pid and lock files in the test's directory, not /run.
	srv := realclient.Start(t, link.Server, realclient.Options{Env: []string{"KEA_PIDFILE_DIR=" + dir, "KEA_LOCKFILE_DIR=" + dir}},
		bin, "-c", cf)
	if !srv.WaitFor(regexp.MustCompile(`DHCP6_STARTED`), 1, 20*time.Second) {
		t.Fatalf("kea-dhcp6 did not start:\n%s", srv.Output())
	}
	cl := runClient(t, link, &memStore{}, false)
	l := cl.wait(1, 60*time.Second)
	if l == nil || l.Prefix != pd {
		t.Fatalf("lease %+v: want %v\nkea:\n%s", l, pd, srv.Output())
	}
	if l.Exclude != x {
		t.Errorf("excluded prefix %v, want Kea's %v\nkea:\n%s", l.Exclude, x, srv.Output())
	}
	if l.PrefixValid != 40*time.Second || l.PrefixPreferred != 20*time.Second {
		t.Errorf("lifetimes valid %v preferred %v, want 40s 20s", l.PrefixValid, l.PrefixPreferred)
	}
	if len(l.DNS) != 1 || l.DNS[0] != netip.MustParseAddr("2001:db8:ffff::53") {
		t.Errorf("DNS %v, want Kea's 2001:db8:ffff::53", l.DNS)
	}
}
