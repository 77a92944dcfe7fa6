package ra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/ipv6"

	"github.com/ocfw/ocfw/internal/lab/realclient"
)

// The real clients (the Linux kernel's SLAAC, rdisc6, dhcpcd) run in a
// network namespace joined by a veth pair to the server's, which runs
// in-process (package realclient). No packet leaves the two namespaces.

var (
	labPrefix  = netip.MustParsePrefix("2001:db8:1:10::/64")
	labPrefix2 = netip.MustParsePrefix("2001:db8:2:20::/64")
	labULA     = netip.MustParsePrefix("fd12:3456:789a:10::/64")
	labRouter  = netip.MustParseAddr("2001:db8:1:10::1")
)

func labAdvert(prefixes ...netip.Prefix) Advert {
	a := Advert{
		RouterLifetime: 1800 * time.Second, MTU: 1400,
		RDNSS: []netip.Addr{labRouter}, DNSSL: []string{"home.example"}, DNSLifetime: 1800 * time.Second,
	}
	for _, p := range prefixes {
		a.Prefixes = append(a.Prefixes, Prefix{Prefix: p, Valid: ValidLimit, Preferred: PreferredLimit})
	}
	return a
}

// raLab is a running server and the link its clients join.
type raLab struct {
	t    *testing.T
	link *realclient.Link
	srv  *Server
	mu   sync.Mutex
	logs []string
}

// newRALab starts a server announcing a on the server end of a new
// link; it stops when t ends.
func newRALab(t *testing.T, a Advert) *raLab {
	t.Helper()
	l := &raLab{t: t, link: realclient.NewLink(t, labRouter.String()+"/64")}
	l.srv, _ = l.serve(Config{}, a)
	return l
}

// serve starts a server for cfg (its interface and log filled in)
// announcing a on l's server end, until stop or the end of the test.
func (l *raLab) serve(cfg Config, a Advert) (srv *Server, stop func()) {
	t := l.t
	t.Helper()
	cfg.Interface = l.link.ServerIf
	cfg.Log = func(f string, args ...any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.logs = append(l.logs, fmt.Sprintf(f, args...))
	}
	srv, err := New(cfg, a)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.link.Server.Do(func() error { return srv.Serve(ctx) }) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Serve returned %v, want context.Canceled", err)
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			l.mu.Lock()
			t.Logf("server log:\n%s\nstats %+v", strings.Join(l.logs, "\n"), srv.Stats())
			l.mu.Unlock()
		}
	})
	return srv, stop
}

// addrs are the client's IPv6 addresses in p.
func (l *raLab) addrs(p netip.Prefix) []netlink.Addr {
	l.t.Helper()
	nl := l.link.Client.Netlink()
	link, err := nl.LinkByName(l.link.ClientIf)
	if err != nil {
		l.t.Fatal(err)
	}
	as, err := nl.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		l.t.Fatal(err)
	}
	var in []netlink.Addr
	for _, a := range as {
		ip, _ := netip.AddrFromSlice(a.IP)
		if p.Contains(ip) {
			in = append(in, a)
		}
	}
	return in
}

// deprecated says whether the client's address a in p has preferred
// lifetime 0.
func (l *raLab) deprecated(p netip.Prefix, a netlink.Addr) bool {
	for _, b := range l.addrs(p) {
		if b.IP.Equal(a.IP) && b.PreferedLft == 0 {
			return true
		}
	}
	return false
}

// waitFor polls cond every 100 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	for end := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// Generous: the machine running the suite may be loaded, and each side's
// link-local address waits out duplicate address detection first.
const clientTimeout = 60 * time.Second

// TestRouterAdvertRdisc6: ndisc6's rdisc6 solicits on the client's link
// and prints the advertisement it got off the wire: flags, router
// lifetime, MTU, both prefixes with SLAAC, the routes (RFC 4191), the
// resolver and the search domain.
func TestRouterAdvertRdisc6(t *testing.T) {
	rdisc6 := realclient.Need(t, "rdisc6")
	adv := labAdvert(labPrefix, labULA)
	adv.Routes = []Route{{Prefix: netip.MustParsePrefix("2001:db8:1::/56"), Lifetime: ValidLimit}, {Prefix: netip.MustParsePrefix("fd12:3456:789a::/48"), Lifetime: ValidLimit}}
	l := newRALab(t, adv)
	var out string
	// rdisc6 gives up after its tries; under load the server's
	// link-local address may still be tentative, so run it again.
	if !waitFor(clientTimeout, func() bool {
		p := realclient.Start(t, l.link.Client, realclient.Options{}, rdisc6, "-1", "-n", "-r", "3", "-w", "2000", l.link.ClientIf)
		p.Wait(30 * time.Second)
		out = p.Output()
		return strings.Contains(out, "Prefix")
	}) {
		t.Fatalf("rdisc6 saw no advertisement:\n%s", out)
	}
	for _, re := range []string{
		`Stateful address conf\.\s*:\s*No`,
		`Router lifetime\s*:\s*1800 `,
		`MTU\s*:\s*1400 bytes`,
		`Prefix\s*:\s*2001:db8:1:10::/64\s+On-link\s*:\s*Yes\s+Autonomous address conf\.\s*:\s*Yes\s+Valid time\s*:\s*5400 \S+ seconds\s+Pref\. time\s*:\s*2700 `,
		`Prefix\s*:\s*fd12:3456:789a:10::/64`,
		`Recursive DNS server\s*:\s*2001:db8:1:10::1`,
		`Route\s*:\s*2001:db8:1::/56\s+Route preference\s*:\s*medium\s+Route lifetime\s*:\s*5400 `, // RFC 4191
		`Route\s*:\s*fd12:3456:789a::/48`,
		`DNS search list\s*:\s*home\.example`,
		`from fe80::`, // a link-local source, as hosts require
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("rdisc6's output lacks %s:\n%s", re, out)
		}
	}
	if st := l.srv.Stats(); st.Solicited == 0 {
		t.Errorf("no solicitation counted: %+v", st)
	}
}

// TestRouterAdvertKernelSLAAC: a Linux host's kernel makes its global
// address in the prefix and takes the router as its default route; when
// the prefix changes it makes one in the new prefix and the old address
// is deprecated (preferred lifetime 0, `ip -6 addr` says so) from the
// one advertisement Update sends.
func TestRouterAdvertKernelSLAAC(t *testing.T) {
	ip := realclient.Need(t, "ip")
	l := newRALab(t, labAdvert(labPrefix, labULA))
	if !waitFor(clientTimeout, func() bool { return len(l.addrs(labPrefix)) > 0 && len(l.addrs(labULA)) > 0 }) {
		t.Fatalf("the kernel made no address in %s and %s: %v %v", labPrefix, labULA, l.addrs(labPrefix), l.addrs(labULA))
	}
	routes, err := l.link.Client.Netlink().RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Dst: nil}, 0)
	if err != nil {
		t.Fatal(err)
	}
	def := false
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.String() == "::/0") && r.Gw != nil && r.Gw.IsLinkLocalUnicast() {
			def = true
		}
	}
	if !def {
		t.Errorf("no default route via the router's link-local address: %v", routes)
	}

	old := l.addrs(labPrefix)[0]
	sentBefore := l.srv.Stats().Sent
	if err := l.srv.Update(labAdvert(labPrefix2, labULA)); err != nil {
		t.Fatal(err)
	}
	if !waitFor(clientTimeout, func() bool { return l.deprecated(labPrefix, old) && len(l.addrs(labPrefix2)) > 0 }) {
		t.Fatalf("after the change: old %v, new %v", l.addrs(labPrefix), l.addrs(labPrefix2))
	}
	// The server's periodic advertisements are minutes apart (the
	// initial ones 16 s): the one Update sent did it.
	if sent := l.srv.Stats().Sent - sentBefore; sent > 3 {
		t.Errorf("%d advertisements between the change and the deprecation", sent)
	}
	p := realclient.Start(t, l.link.Client, realclient.Options{}, ip, "-6", "addr", "show", "dev", l.link.ClientIf)
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	oldIP, _ := netip.AddrFromSlice(old.IP)
	if !regexp.MustCompile(regexp.QuoteMeta(oldIP.String()) + `/64 [^\n]*deprecated[^\n]*\n\s+valid_lft \d+sec preferred_lft 0sec`).MatchString(p.Output()) {
		t.Errorf("ip -6 addr does not show %s deprecated:\n%s", oldIP, p.Output())
	}
	// The ULA, still announced, is not deprecated.
	for _, a := range l.addrs(labULA) {
		if a.PreferedLft == 0 {
			t.Errorf("the ULA address %v was deprecated too", a)
		}
	}
}

// TestRouterAdvertKernelSLAACAfterReboot: a Linux host holds addresses
// in a delegated prefix and the ULA; the router restarts (a new server
// on the same store, as after a reboot) and announces another delegated
// prefix. From its first advertisements the host's address in the old
// prefix is deprecated (RFC 9096 section 3.3: the old prefix comes with
// lifetimes 0, not left to run out for up to 90 minutes), it makes one
// in the new prefix, and its ULA address stays preferred. Without the
// store the old address would stay preferred.
func TestRouterAdvertKernelSLAACAfterReboot(t *testing.T) {
	realclient.Need(t, "ip")
	l := &raLab{t: t, link: realclient.NewLink(t, labRouter.String()+"/64")}
	st := &lockedStore{}
	_, stop := l.serve(Config{Store: st}, labAdvert(labPrefix, labULA))
	if !waitFor(clientTimeout, func() bool { return len(l.addrs(labPrefix)) > 0 && len(l.addrs(labULA)) > 0 }) {
		t.Fatalf("the kernel made no address in %s and %s: %v %v", labPrefix, labULA, l.addrs(labPrefix), l.addrs(labULA))
	}
	old := l.addrs(labPrefix)[0]
	if old.PreferedLft == 0 {
		t.Fatalf("%v deprecated before the restart", old)
	}
	stop()

	srv, _ := l.serve(Config{Store: st}, labAdvert(labPrefix2, labULA))
	if !waitFor(clientTimeout, func() bool { return l.deprecated(labPrefix, old) && len(l.addrs(labPrefix2)) > 0 }) {
		t.Fatalf("after the restart: old %v, new %v", l.addrs(labPrefix), l.addrs(labPrefix2))
	}
	// The first advertisements are at most MaxInitialInterval apart;
	// the one the host first heard did it.
	if sent := srv.Stats().Sent; sent > 3 {
		t.Errorf("%d advertisements before the old address was deprecated", sent)
	}
	for _, a := range l.addrs(labULA) {
		if a.PreferedLft == 0 {
			t.Errorf("the ULA address %v was deprecated too", a)
		}
	}
	// The host keeps what it had left of the valid lifetime (at most
	// two hours, RFC 4862 5.5.3 e); lifetime 0 did not lengthen it.
	for _, a := range l.addrs(labPrefix) {
		if a.IP.Equal(old.IP) && (a.ValidLft <= 0 || a.ValidLft > int(ValidLimit/time.Second)) {
			t.Errorf("the old address's valid lifetime %d s, want 1-%d", a.ValidLft, int(ValidLimit/time.Second))
		}
	}
}

// lockedStore is memStore for a server running in another goroutine.
type lockedStore struct {
	mu sync.Mutex
	m  memStore
}

func (s *lockedStore) Value(name string, v any) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Value(name, v)
}

func (s *lockedStore) SetValue(name string, v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.SetValue(name, v)
}

// TestRouterAdvertDhcpcd: dhcpcd (IPv6 only, no kernel SLAAC) makes its
// address in the prefix and takes the resolver and search domain.
func TestRouterAdvertDhcpcd(t *testing.T) {
	bin := realclient.Need(t, "dhcpcd")
	l := newRALab(t, labAdvert(labPrefix))
	dir := t.TempDir()
	conf := filepath.Join(dir, "dhcpcd.conf")
	if err := os.WriteFile(conf, []byte("ipv6only\nnoipv4ll\nnodhcp6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, "env")
	hook := realclient.Script(t, "hook", fmt.Sprintf("{ echo \"== $reason\"; env; } >> %q\n", env))
	p := realclient.Start(t, l.link.Client, realclient.Options{Tmpfs: []string{"/run", "/var/lib/dhcpcd"}},
		bin, "-f", conf, "-c", hook, "-6", "-B", "-d", "-t", "0", l.link.ClientIf)
	if !waitFor(clientTimeout, func() bool { return len(l.addrs(labPrefix)) > 0 }) {
		t.Fatalf("dhcpcd made no address in %s:\n%s", labPrefix, p.Output())
	}
	var seen string
	if !waitFor(clientTimeout, func() bool {
		b, _ := os.ReadFile(env)
		seen = string(b)
		return strings.Contains(seen, "rdnss") && strings.Contains(seen, "dnssl")
	}) {
		t.Fatalf("dhcpcd's hook saw no RDNSS/DNSSL:\n%s\ndhcpcd:\n%s", seen, p.Output())
	}
	for _, re := range []string{`nd\d+_rdnss\d+_servers=2001:db8:1:10::1`, `nd\d+_dnssl\d+_search=home\.example`, `nd\d+_mtu=1400`} {
		if !regexp.MustCompile(re).MatchString(seen) {
			t.Errorf("dhcpcd's hook environment lacks %s:\n%s", re, seen)
		}
	}
}

// TestRouterAdvertIgnores: a solicitation that did not come from the
// link (hop limit 64) gets no answer, and an advertisement from a LAN
// host is ignored and counted.
func TestRouterAdvertIgnores(t *testing.T) {
	l := newRALab(t, labAdvert(labPrefix))
	// The client's link-local address, once usable, to send from.
	err := l.link.Client.Do(func() error {
		c, err := net.ListenPacket("ip6:ipv6-icmp", "::")
		if err != nil {
			return err
		}
		defer c.Close()
		pc := ipv6.NewPacketConn(c)
		ifi, err := net.InterfaceByName(l.link.ClientIf)
		if err != nil {
			return err
		}
		send := func(m []byte, hop int) error {
			return waitErr(clientTimeout, func() error {
				_, err := pc.WriteTo(m, &ipv6.ControlMessage{IfIndex: ifi.Index, HopLimit: hop}, &net.IPAddr{IP: allRouters, Zone: ifi.Name})
				return err
			})
		}
		if err := send([]byte{133, 0, 0, 0, 0, 0, 0, 0}, 64); err != nil {
			return err
		}
		ra, _ := labAdvert(labPrefix2).Marshal()
		return send(ra, 255)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !waitFor(clientTimeout, func() bool { st := l.srv.Stats(); return st.BadRS >= 1 && st.ForeignRAs >= 1 }) {
		t.Fatalf("stats %+v: want the routed solicitation and the foreign advertisement counted", l.srv.Stats())
	}
	// The one solicitation with hop limit 64 was refused as such (the
	// client's kernel sends valid ones of its own meanwhile).
	if st := l.srv.Stats(); st.BadRS != 1 {
		t.Errorf("BadRS %d, want 1", st.BadRS)
	}
}

// waitErr retries f every 200 ms until it succeeds or timeout passes
// (a tentative source address refuses sends for a second or two).
func waitErr(timeout time.Duration, f func() error) error {
	var err error
	waitFor(timeout, func() bool { err = f(); return err == nil })
	return err
}
