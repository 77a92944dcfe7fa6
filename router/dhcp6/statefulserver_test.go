package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/ra"
)

// The LAN's two /64s in these tests: a ULA and a delegated one.
var (
	labULA64 = netip.MustParsePrefix("fd12:3456:789a:10::/64")
	labPD64  = netip.MustParsePrefix("2001:db8:1:10::/64")
	labID    = netip.MustParseAddr("::10")
)

// serveStateful runs the server on the link's service end for hosts,
// with the /64s ps; adv, when not nil, is advertised there too.
func serveStateful(t *testing.T, link *realclient.Link, hosts []Host, ps []AddrPrefix, adv *ra.Advert) *InfoServer {
	t.Helper()
	logs := &logBuf{}
	srv, err := NewInfoServer(InfoConfig{Interface: link.ServerIf, DNS: []netip.Addr{netip.MustParseAddr("fd12:3456:789a:10::1")},
		Domains: []string{"home.example"}, Hosts: hosts, Log: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetPrefixes(ps)
	ctx, cancel := context.WithCancel(context.Background())
	n := 1
	done := make(chan error, 2)
	go func() { done <- link.Server.Do(func() error { return srv.Serve(ctx) }) }()
	if adv != nil {
		rsrv, err := ra.New(ra.Config{Interface: link.ServerIf}, *adv)
		if err != nil {
			t.Fatal(err)
		}
		n++
		go func() { done <- link.Server.Do(func() error { return rsrv.Serve(ctx) }) }()
	}
	t.Cleanup(func() {
		cancel()
		for range n {
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Serve returned %v, want context.Canceled", err)
			}
		}
		if t.Failed() {
			t.Logf("server: %+v\n%s", srv.Stats(), logs.String())
		}
	})
	return srv
}

type logBuf struct {
	strings.Builder
}

func (l *logBuf) logf(f string, a ...any) { fmt.Fprintf(&l.Builder, f+"\n", a...) }

// clientMAC is the MAC of the link's client end.
func clientMAC(t *testing.T, link *realclient.Link) net.HardwareAddr {
	t.Helper()
	l, err := link.Client.Netlink().LinkByName(link.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().HardwareAddr
}

// globals6 are the client end's global and ULA IPv6 addresses, sorted.
func globals6(t *testing.T, link *realclient.Link) []string {
	t.Helper()
	l, err := link.Client.Netlink().LinkByName(link.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	as, err := link.Client.Netlink().AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.IsLinkLocalUnicast() {
			out = append(out, ip.String())
		}
	}
	slices.Sort(out)
	return out
}

// waitGlobals waits until the client end's addresses are want exactly
// and says whether they came.
func waitGlobals(t *testing.T, link *realclient.Link, want []string, timeout time.Duration) ([]string, bool) {
	t.Helper()
	var got []string
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if got = globals6(t, link); slices.Equal(got, want) {
			return got, true
		}
	}
	return got, false
}

// waitLinkLocal waits until the client end's link-local address is
// usable (not tentative).
func waitLinkLocal(t *testing.T, link *realclient.Link) {
	t.Helper()
	l, err := link.Client.Netlink().LinkByName(link.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		as, err := link.Client.Netlink().AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.IP.IsLinkLocalUnicast() && a.Flags&unix.IFA_F_TENTATIVE == 0 {
				return
			}
		}
	}
	t.Fatalf("%s has no usable link-local address after 10 s", link.ClientIf)
}

// dhclient runs ISC dhclient -6 (Debian's isc-dhcp-client) on the
// link's client end with a DUID of duidType (LL or LLT), a fresh lease
// file, and a script that sets the addresses as Debian's does (without
// touching the host's resolv.conf) and appends its environment to the
// returned file.
func dhclient(t *testing.T, link *realclient.Link, duidType string) (*realclient.Proc, string) {
	t.Helper()
	bin := realclient.Need(t, "dhclient")
	realclient.Need(t, "ip")
	dir := t.TempDir()
	env := filepath.Join(dir, "env")
	script := realclient.Script(t, "dhclient-script", fmt.Sprintf(`{ echo "== $reason"; env | grep -E '^(new|old|cur)_|^reason'; } >> %q
case "$reason" in
BOUND6|RENEW6|REBIND6)
	[ -n "$new_ip6_address" ] && ip -6 addr replace "$new_ip6_address/128" dev "$interface" valid_lft "$new_max_life" preferred_lft "$new_preferred_life" ;;
DEPREF6)
	ip -6 addr change "$cur_ip6_address/128" dev "$interface" preferred_lft 0 ;;
EXPIRE6|RELEASE6|STOP6)
	[ -n "$old_ip6_address" ] && ip -6 addr del "$old_ip6_address/128" dev "$interface" ;;
esac
exit 0
`, env))
	// dhclient binds to the link-local address: it must have passed
	// duplicate address detection.
	waitLinkLocal(t, link)
	p := realclient.Start(t, link.Client, realclient.Options{}, bin, "-6", "-d", "-v", "-D", duidType,
		"-lf", filepath.Join(dir, "leases"), "-pf", filepath.Join(dir, "pid"), "-sf", script, link.ClientIf)
	return p, env
}

// TestDHCPv6StatefulDhclient: Debian's dhclient -6 on a host listed by
// its MAC (DUID-LLT, dhclient's default kind, from that MAC) gets
// exactly its interface identifier in each of the LAN's /64s; renews
// them at T1; and when the delegated /64 is replaced, the next Renew
// hands out the new address and the old one with lifetime 0, which
// dhclient removes.
func TestDHCPv6StatefulDhclient(t *testing.T) {
	link := realclient.NewLink(t, "fd12:3456:789a:10::1/64")
	mac := clientMAC(t, link)
	// Preferred 6 s: T1 3 s, so the renewals come within the test.
	ps := []AddrPrefix{{Prefix: labULA64, Valid: 600 * time.Second, Preferred: 6 * time.Second},
		{Prefix: labPD64, Valid: 600 * time.Second, Preferred: 6 * time.Second}}
	srv := serveStateful(t, link, []Host{{MAC: net.HardwareAddr{0x52, 0x54, 0, 1, 2, 3}, ID: netip.MustParseAddr("::99")}, {MAC: mac, ID: labID}}, ps, nil)
	p, env := dhclient(t, link, "LLT")
	want := []string{"2001:db8:1:10::10", "fd12:3456:789a:10::10"}
	if got, ok := waitGlobals(t, link, want, 30*time.Second); !ok {
		b, _ := os.ReadFile(env)
		t.Fatalf("client's addresses %v, want %v\nscript saw:\n%s\ndhclient:\n%s", got, want, b, p.Output())
	}
	if b, _ := os.ReadFile(env); !strings.Contains(string(b), "new_dhcp6_name_servers=fd12:3456:789a:10::1") {
		t.Errorf("dhclient's script saw no resolver:\n%s", b)
	}
	// A renewal (T1 is 3 s): the Renew counted as another assignment.
	assigned := srv.Stats().Assigned
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && srv.Stats().Assigned == assigned; time.Sleep(200 * time.Millisecond) {
	}
	if srv.Stats().Assigned == assigned {
		t.Fatalf("no renewal within 20 s: %+v\n%s", srv.Stats(), p.Output())
	}
	// A new delegation: the old /64 goes, a new one comes.
	srv.SetPrefixes([]AddrPrefix{ps[0], {Prefix: netip.MustParsePrefix("2001:db8:2:10::/64"), Valid: 600 * time.Second, Preferred: 6 * time.Second}})
	want = []string{"2001:db8:2:10::10", "fd12:3456:789a:10::10"}
	if got, ok := waitGlobals(t, link, want, 30*time.Second); !ok {
		b, _ := os.ReadFile(env)
		t.Fatalf("after renumbering the client's addresses are %v, want %v\nscript saw:\n%s\ndhclient:\n%s", got, want, b, p.Output())
	}
}

// TestDHCPv6StatefulUnlisted: dhclient -6 on a host that is not listed
// is told NoAddrsAvail and takes no address; the server holds nothing
// for it.
func TestDHCPv6StatefulUnlisted(t *testing.T) {
	link := realclient.NewLink(t, "fd12:3456:789a:10::1/64")
	ps := []AddrPrefix{{Prefix: labULA64, Valid: 600 * time.Second, Preferred: 300 * time.Second},
		{Prefix: labPD64, Valid: 600 * time.Second, Preferred: 300 * time.Second}}
	srv := serveStateful(t, link, []Host{{MAC: net.HardwareAddr{0x52, 0x54, 0, 1, 2, 3}, ID: labID}}, ps, nil)
	p, env := dhclient(t, link, "LL")
	// dhclient solicits again and again: three refusals are enough.
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && srv.Stats().Refused < 3; time.Sleep(200 * time.Millisecond) {
	}
	if st := srv.Stats(); st.Refused < 3 || st.Assigned != 0 {
		t.Fatalf("stats %+v: want 3 refusals and no assignment\n%s", st, p.Output())
	}
	if got := globals6(t, link); len(got) != 0 {
		t.Errorf("the unlisted client has addresses %v", got)
	}
	if b, _ := os.ReadFile(env); strings.Contains(string(b), "== BOUND6") {
		t.Errorf("dhclient bound:\n%s", b)
	}
}

// TestDHCPv6StatefulDhcpcd: dhcpcd with a DUID-UUID (no MAC in it),
// sent to DHCPv6 by the advertisement's M flag, is known by its
// link-layer address and gets its address in both /64s, besides its own
// SLAAC ones (the A flag stays on): from its EUI-64 link-local source,
// and with a random link-local address (addr_gen_mode 3) from the
// server's neighbour table.
func TestDHCPv6StatefulDhcpcd(t *testing.T) {
	t.Run("eui64", func(t *testing.T) { testDhcpcdStateful(t, false) })
	t.Run("random-link-local", func(t *testing.T) { testDhcpcdStateful(t, true) })
}

func testDhcpcdStateful(t *testing.T, randomLL bool) {
	bin := realclient.Need(t, "dhcpcd")
	link := realclient.NewLink(t, "fd12:3456:789a:10::1/64")
	mac := clientMAC(t, link)
	if randomLL {
		// A new link-local address that carries no MAC: set the mode,
		// then take the link down and up.
		if err := link.Client.Sysctl("net/ipv6/conf/"+link.ClientIf+"/addr_gen_mode", "3"); err != nil {
			t.Fatal(err)
		}
		l, err := link.Client.Netlink().LinkByName(link.ClientIf)
		if err != nil {
			t.Fatal(err)
		}
		if err := link.Client.Netlink().LinkSetDown(l); err != nil {
			t.Fatal(err)
		}
		if err := link.Client.Netlink().LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		waitLinkLocal(t, link)
		as, _ := link.Client.Netlink().AddrList(l, netlink.FAMILY_V6)
		for _, a := range as {
			if ip, _ := netip.AddrFromSlice(a.IP); ip.IsLinkLocalUnicast() && eui64MAC(ip) != nil {
				t.Fatalf("%s still has the EUI-64 link-local %s", link.ClientIf, ip)
			}
		}
	}
	ps := []AddrPrefix{{Prefix: labULA64, Valid: 600 * time.Second, Preferred: 300 * time.Second},
		{Prefix: labPD64, Valid: 600 * time.Second, Preferred: 300 * time.Second}}
	adv := &ra.Advert{Managed: true, Other: true, RouterLifetime: 30 * time.Minute}
	for _, p := range ps {
		adv.Prefixes = append(adv.Prefixes, ra.Prefix{Prefix: p.Prefix, Valid: p.Valid, Preferred: p.Preferred})
	}
	srv := serveStateful(t, link, []Host{{MAC: mac, ID: labID}}, ps, adv)
	dir := t.TempDir()
	conf := filepath.Join(dir, "dhcpcd.conf")
	if err := os.WriteFile(conf, []byte("ipv6only\nnoipv4ll\nslaac hwaddr\noption domain_name_servers, domain_search\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, "env")
	hook := realclient.Script(t, "hook", fmt.Sprintf("{ echo \"== $reason\"; env; } >> %q\n", env))
	// A DUID-UUID in dhcpcd's DUID file (in its own tmpfs): no MAC in
	// it, so the server knows the host by its link-layer address only.
	const uuid = "00:04:01:02:03:04:05:06:07:08:09:0a:0b:0c:0d:0e:0f:10"
	p := realclient.Start(t, link.Client, realclient.Options{Tmpfs: []string{"/run", "/var/lib/dhcpcd"}},
		"/bin/sh", "-c", `echo `+uuid+` > /var/lib/dhcpcd/duid && exec "$@"`, "sh",
		bin, "-f", conf, "-c", hook, "-6", "-B", "-d", "-t", "0", link.ClientIf)
	want := []string{"2001:db8:1:10::10", "fd12:3456:789a:10::10"}
	var got []string
	ok := false
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end) && !ok; time.Sleep(200 * time.Millisecond) {
		got = globals6(t, link)
		ok = slices.Contains(got, want[0]) && slices.Contains(got, want[1])
	}
	if !ok {
		b, _ := os.ReadFile(env)
		t.Fatalf("client's addresses %v, want %v among them\nhook saw:\n%s\ndhcpcd:\n%s", got, want, b, p.Output())
	}
	if st := srv.Stats(); st.Assigned == 0 {
		t.Errorf("stats %+v: no assignment counted", st)
	}
	// The SLAAC ones from the advertisement are there too.
	if len(got) < 4 {
		t.Errorf("client's addresses %v: want its SLAAC ones besides %v", got, want)
	}
	if !strings.Contains(p.Output(), "DUID "+uuid) {
		t.Errorf("dhcpcd did not use the DUID-UUID %s:\n%s", uuid, p.Output())
	}
}
