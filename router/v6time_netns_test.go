package router

import (
	"context"
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
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/firewall"
	"github.com/ocfw/ocfw/router/netns"
	"github.com/ocfw/ocfw/site"
)

// BenchmarkFirstGlobalPacket is bench/run's v6time section: the time
// from the router's WAN coming up to the first LAN host reaching a WAN
// host, over IPv4 and over IPv6, both measured from the same moment in
// the same run (a dual-stack router, as it ships). Each iteration
// builds a fresh lab of three network namespaces:
//
//   - the ISP: a bridge (kept up by a port of its own, so its servers run
//     with carrier before the router's link comes up) running ISC
//     dhcpd -4 (the router's WAN lease), ISC dhcpd -6 (a /60 delegated)
//     and radvd (the WAN's advertisements: SLAAC, default route), and
//     a route for the delegated pool to the router;
//   - the router, its own code in-process, as Start leaves it: LAN
//     address, firewall (with the v4 NAT, in its own netfilter),
//     forwarding, the WAN DHCP client, the LAN DHCP server and IPv6
//     (the LAN's advertisements with the ULA, the WAN's DHCPv6 client)
//     running, the WAN port up but without carrier (the ISP's end of
//     the cable is down), the LAN's link-local address settled;
//   - a LAN host, its link down.
//
// At t0 the WAN gets carrier (the ISP's end comes up), the host's link
// comes up and its client starts. Two variants of the host, each a lab
// of its own in every iteration (one after the other, so that both see
// the same load):
//
//   - dhclient: Debian's dhclient for v4 (its script only sets the
//     address and route: no address-conflict detection), the kernel's
//     SLAAC for v6;
//   - dhcpcd: Debian's dhcpcd on its shipped defaults (/etc/dhcpcd.conf;
//     a no-op hook, so that it leaves the host's resolv.conf and hostname
//     alone) for both families: DHCPv4 with its ARP probe (RFC 5227)
//     before it binds, SLAAC from the router's advertisements done by
//     itself (stable private addresses).
//
// Done over v4: the host holds the router's lease and a ping to the
// ISP answers; over v6: the host holds an address, out of DAD, in the
// delegated prefix and a ping6 from it to the ISP answers. The pings
// are sent every 50 ms until one answers. Reported per iteration and
// variant, in ms from t0: the two totals (VARIANT-v4-ms, VARIANT-v6-ms)
// and their phases; the section takes the median of v6/v4 over
// iterations, per variant.
//
// Run with -benchtime 1x and -count N: every iteration is a new lab.
func BenchmarkFirstGlobalPacket(b *testing.B) {
	if testing.Short() {
		b.Skip("namespaces and real servers: seconds per iteration")
	}
	for range b.N {
		for _, v := range fpVariants {
			m := firstPacketTrial(b, v)
			for _, k := range firstPacketMetrics {
				if d, ok := m[k]; ok {
					b.ReportMetric(float64(d.Microseconds())/1000, v+"-"+k+"-ms")
				}
			}
		}
	}
}

// fpVariants are the LAN host's clients (see BenchmarkFirstGlobalPacket).
var fpVariants = []string{"dhclient", "dhcpcd"}

// firstPacketMetrics are the moments a trial records, in the order they
// usually come: for v4 the router's WAN lease, (dhcpcd only, from its
// log) the host's first DISCOVER sent and the router's ACK in with
// dhcpcd's ARP probe begun, the host's lease, the
// first answered ping; for v6 the router's WAN link-local address out
// of DAD (its DHCPv6 client can send from then on), the router's WAN
// default route (from the ISP's advertisement), the delegation, the
// host's link-local address out of DAD (dhcpcd solicits from it), the
// host's address in the delegated prefix (the router's advertisement
// heard), that
// address out of DAD, the first answered ping6.
var firstPacketMetrics = []string{"v4-wan", "v4-discover", "v4-ack", "v4-lease", "v4", "v6-wanll", "v6-wanroute", "v6-pd", "v6-hostll", "v6-ra", "v6-addr", "v6"}

// fpDhcpcdOnly are the moments only the dhcpcd variant has.
var fpDhcpcdOnly = map[string]bool{"v4-discover": true, "v4-ack": true}

const (
	fpWAN4    = "198.51.100.1"
	fpPool6   = "2001:db8:100::/56"
	fpLAN4    = "192.168.1.1/24"
	fpTimeout = 60 * time.Second
)

func firstPacketTrial(b *testing.B, variant string) map[string]time.Duration {
	b.Helper()
	for _, p := range []string{"dhcpd", "radvd", "dhclient", "dhcpcd", "ping", "nsenter", "unshare"} {
		realclient.Need(b, p)
	}
	mk := func(name string) *netns.NS {
		ns, err := netns.New(name)
		if err != nil {
			labtest.SkipOrFail(b, "this host cannot make a network namespace (needs root): %v", err)
		}
		b.Cleanup(func() { ns.Close() })
		return ns
	}
	isp, rt, host := mk("isp"), mk("router"), mk("lanhost")
	check := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	// The ISP's bridge: a veth port whose peer stays up (there is no
	// dummy module everywhere) keeps its carrier, svc0 joins the
	// router's WAN.
	f := false
	check(isp.Netlink().LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "isp0"}, MulticastSnooping: &f}))
	check(netns.Veth(isp, "hold0", "", isp, "hold1", ""))
	check(netns.Veth(isp, "svc0", "", rt, "cli0", ""))
	check(netns.Veth(rt, "lan0", "", host, "eth0", ""))
	br, err := isp.Netlink().LinkByName("isp0")
	check(err)
	for _, name := range []string{"hold0", "svc0"} {
		ln, err := isp.Netlink().LinkByName(name)
		check(err)
		check(isp.Netlink().LinkSetMaster(ln, br))
		check(isp.Netlink().LinkSetUp(ln))
	}
	check(isp.Netlink().LinkSetUp(br))
	check(isp.AddAddr("isp0", fpWAN4+"/24"))
	check(addAddrNoDAD(isp, "isp0", isp6+"/64"))
	linkDown := func(ns *netns.NS, name string) {
		ln, err := ns.Netlink().LinkByName(name)
		check(err)
		check(ns.Netlink().LinkSetDown(ln))
	}
	// The ISP routes the pool it delegates from to the router's WAN
	// link-local address (what an ISP's server sets up with the
	// delegation), known in advance from the MAC (EUI-64).
	cli, err := rt.Netlink().LinkByName("cli0")
	check(err)
	svc, err := isp.Netlink().LinkByName("isp0")
	check(err)
	pool := netip.MustParsePrefix(fpPool6)
	check(isp.Netlink().RouteAdd(&netlink.Route{LinkIndex: svc.Attrs().Index, Gw: eui64LinkLocal(cli.Attrs().HardwareAddr),
		Dst: &net.IPNet{IP: pool.Addr().AsSlice(), Mask: net.CIDRMask(pool.Bits(), 128)}}))
	check(isp.Sysctl("net/ipv6/conf/all/forwarding", "1"))

	// The ISP has been up for long, and so has the router's LAN: their
	// link-local addresses are out of DAD before t0 (the ISP's servers
	// answer from it; the router's advertisements leave from its own).
	// The LAN keeps it while the host's link is down (carrier lost, not
	// the interface); the router's WAN (the ISP's end goes down) and the
	// host lose theirs.
	ll := netip.MustParsePrefix("fe80::/64")
	if !waitUntil(10*time.Second, func() bool {
		_, isp := firstAddr(isp, "isp0", netlink.FAMILY_V6, ll)
		_, lan := firstAddr(rt, "lan0", netlink.FAMILY_V6, ll)
		return isp && lan
	}) {
		b.Fatal("the ISP's bridge or the router's LAN has no link-local address out of DAD")
	}
	// The WAN port is up without carrier and has never had it: no
	// link-local address until the ISP's end comes up.
	linkDown(rt, "cli0")
	linkDown(isp, "svc0")
	linkDown(host, "eth0")
	dir := b.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		check(os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	dhcpd := realclient.Need(b, "dhcpd")
	v4conf := write("dhcpd4.conf", `ddns-update-style none;
authoritative;
ping-check false;
default-lease-time 600;
max-lease-time 600;
subnet 198.51.100.0 netmask 255.255.255.0 {
  range 198.51.100.50 198.51.100.60;
  option routers `+fpWAN4+`;
  option domain-name-servers `+fpWAN4+`;
}
`)
	v6conf := write("dhcpd6.conf", `ddns-update-style none;
authoritative;
default-lease-time 600;
max-lease-time 600;
option dhcp6.name-servers `+ispDNS6+`;
subnet6 2001:db8:ffff::/64 {
  prefix6 2001:db8:100:: 2001:db8:100:f0:: /60;
}
`)
	write("leases4", "")
	write("leases6", "")
	srv4 := realclient.Start(b, isp, realclient.Options{}, dhcpd, "-4", "-f", "-d", "-cf", v4conf,
		"-lf", filepath.Join(dir, "leases4"), "-pf", filepath.Join(dir, "pid4"), "isp0")
	srv6 := realclient.Start(b, isp, realclient.Options{}, dhcpd, "-6", "-f", "-d", "-cf", v6conf,
		"-lf", filepath.Join(dir, "leases6"), "-pf", filepath.Join(dir, "pid6"), "isp0")
	radvdConf := write("radvd.conf", `interface isp0 {
  AdvSendAdvert on;
  MinRtrAdvInterval 3;
  MaxRtrAdvInterval 6;
  AdvManagedFlag off;
  AdvOtherConfigFlag on;
  prefix 2001:db8:ffff::/64 { AdvAutonomous on; };
};
`)
	radvd := realclient.Start(b, isp, realclient.Options{}, realclient.Need(b, "radvd"), "--nodaemon", "--logmethod", "stderr", "--debug", "1",
		"--config", radvdConf, "--pidfile", filepath.Join(dir, "radvd.pid"))
	ready := regexp.MustCompile(`(?m)^(Sending on|Server starting service)`)
	for _, p := range []*realclient.Proc{srv4, srv6} {
		if !p.WaitFor(ready, 1, 30*time.Second) {
			b.Fatalf("%s did not start:\n%s", p.Name, p.Output())
		}
	}
	// radvd's first advertisement is out (its debug log names each).
	if !radvd.WaitFor(regexp.MustCompile(`timer_handler called`), 1, 30*time.Second) {
		b.Fatalf("radvd sent nothing:\n%s", radvd.Output())
	}

	// The router as Start leaves it before the WAN comes up: the LAN's
	// address, the firewall (NAT included) in its own netfilter,
	// forwarding.
	s := &site.Site{Hostname: "gw", WAN: site.WAN{Address: site.DHCPAddress},
		LAN:  site.LAN{Address: fpLAN4, Domain: "home.arpa", DHCP: site.DHCP{Range: []string{"192.168.1.100", "192.168.1.150"}}},
		IPv6: site.IPv6{ULA: ula6Lab}}
	var logMu sync.Mutex
	var logs []string
	r := newRouter(Config{Site: s, Log: func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, time.Now().Format("15:04:05.000 ")+strings.TrimSpace(fmt.Sprintf(format, args...)))
	}})
	r.links = &links{h: rt.Netlink()}
	r.wanIf, r.lanIf, r.started = "cli0", "lan0", time.Now()
	r.inNS = rt.Do
	r.applyRules = func(rs *firewall.Ruleset) error { return firewall.Apply(rs, firewall.InNetNS(rt.FD())) }
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(func() {
		cancel()
		r.wg.Wait()
		if b.Failed() {
			logMu.Lock()
			b.Logf("router log:\n%s", strings.Join(logs, "\n"))
			logMu.Unlock()
		}
	})
	check(r.links.up("lan0", 0))
	check(r.links.setAddr("lan0", netip.MustParsePrefix(fpLAN4)))
	check(rt.Do(func() error {
		if err := r.applyFirewall(); err != nil {
			return err
		}
		return enableForwarding("", "cli0", "lan0")
	}))

	// The rest of Start: the WAN port up (no carrier yet) and the
	// services.
	check(r.links.up("cli0", 0))
	check(rt.Do(func() error {
		r.startDHCPClient(ctx)
		if errs := r.startDHCPServer(ctx); len(errs) > 0 {
			return errs[0]
		}
		return r.startIPv6(ctx)
	}))
	// The LAN's advertisements (the ULA) and the DHCPv6 client waiting
	// for the WAN's link-local address are under way before t0.
	if !waitUntil(10*time.Second, func() bool { return r.svc.lan6 != nil && r.svc.lan6.ra.Stats().Sent > 0 }) {
		b.Fatal("the router sent no advertisement on its LAN")
	}

	// The host's client, started at t0.
	var startHost func() *realclient.Proc
	switch variant {
	case "dhclient":
		dhclient := realclient.Need(b, "dhclient")
		script := realclient.Script(b, "dhclient-script", `case "$reason" in
BOUND|RENEW|REBOOT)
  ip addr add "$new_ip_address/$new_subnet_mask" dev "$interface"
  for r in $new_routers; do ip route replace default via "$r" dev "$interface"; break; done;;
esac
`)
		cf := write("dhclient.conf", "request subnet-mask, routers, domain-name-servers;\n")
		startHost = func() *realclient.Proc {
			return realclient.Start(b, host, realclient.Options{}, dhclient, "-d", "-1", "-v", "-cf", cf, "-sf", script,
				"-lf", filepath.Join(dir, "dhclient.leases"), "-pf", filepath.Join(dir, "dhclient.pid"), "eth0")
		}
	case "dhcpcd":
		dhcpcd := realclient.Need(b, "dhcpcd")
		// Its default configuration (/etc/dhcpcd.conf, read as it
		// ships); the hook does nothing, as dhcpcd itself sets the
		// addresses and routes (the shipped hooks would write the
		// host's resolv.conf and hostname). -B: in the foreground, -d:
		// its log, for the probe's moment.
		hook := realclient.Script(b, "dhcpcd-hook", "")
		startHost = func() *realclient.Proc {
			return realclient.Start(b, host, realclient.Options{Tmpfs: []string{"/run", "/var/lib/dhcpcd"}},
				dhcpcd, "-B", "-d", "-c", hook, "eth0")
		}
	default:
		b.Fatalf("no host variant %q", variant)
	}
	var client struct {
		mu sync.Mutex
		p  *realclient.Proc
	}
	clientLog := func() string {
		client.mu.Lock()
		defer client.mu.Unlock()
		if client.p == nil {
			return ""
		}
		return client.p.Output()
	}
	discover := regexp.MustCompile(`sending DISCOVER`)
	probing := regexp.MustCompile(`probing (address|for) 192\.168\.1\.`)

	// The watch starts before t0: nothing it looks for holds yet.
	watch := newMoments()
	var host4, host6 netip.Addr
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conds := map[string]func() bool{
			"v4-wan": func() bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				return r.wan.Addr.IsValid()
			},
			"v4-discover": func() bool { return discover.MatchString(clientLog()) },
			"v4-ack":      func() bool { return probing.MatchString(clientLog()) },
			"v4-lease": func() bool {
				a, ok := firstAddr(host, "eth0", netlink.FAMILY_V4, netip.MustParsePrefix("192.168.1.0/24"))
				if ok {
					watch.setAddr(&host4, a)
				}
				return ok
			},
			"v6-wanll": func() bool {
				_, ok := firstAddr(rt, "cli0", netlink.FAMILY_V6, ll)
				return ok
			},
			"v6-hostll": func() bool {
				_, ok := firstAddr(host, "eth0", netlink.FAMILY_V6, ll)
				return ok
			},
			"v6-wanroute": func() bool { return hasDefault6(rt, "cli0") },
			"v6-pd": func() bool {
				st := r.ipv6Status()
				if st == nil {
					return false
				}
				for _, a := range st.LAN {
					if p, err := netip.ParsePrefix(a); err == nil && pool.Contains(p.Addr()) {
						return true
					}
				}
				return false
			},
			"v6-ra": func() bool {
				ln, err := host.Netlink().LinkByName("eth0")
				if err != nil {
					return false
				}
				as, _ := host.Netlink().AddrList(ln, netlink.FAMILY_V6)
				for _, a := range as {
					if ip, ok := netip.AddrFromSlice(a.IP); ok && pool.Contains(ip) {
						return true
					}
				}
				return false
			},
			"v6-addr": func() bool {
				a, ok := firstAddr(host, "eth0", netlink.FAMILY_V6, pool)
				if ok {
					watch.setAddr(&host6, a)
				}
				return ok
			},
		}
		if variant != "dhcpcd" {
			delete(conds, "v4-discover")
			delete(conds, "v4-ack")
		}
		watch.poll(fpTimeout, conds)
	}()
	// t0: the ISP's end of the WAN comes up, the host plugs in.
	t0 := time.Now()
	check(isp.Netlink().LinkSetUp(mustLink(b, isp, "svc0")))
	check(host.Netlink().LinkSetUp(mustLink(b, host, "eth0")))
	p := startHost()
	client.mu.Lock()
	client.p = p
	client.mu.Unlock()

	ping := realclient.Need(b, "ping")
	pingUntil := func(name, family string, src func() netip.Addr, dst string) {
		defer wg.Done()
		for time.Since(t0) < fpTimeout {
			a := src()
			if !a.IsValid() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			// Every 50 ms until one answer: a ping sent too early is
			// not waited out.
			p := realclient.Start(b, host, realclient.Options{}, ping, family, "-n", "-q", "-c", "1", "-i", "0.05", "-w", "10", "-I", a.String(), dst)
			if p.Wait(15*time.Second) == nil {
				watch.set(name)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wg.Add(2)
	go pingUntil("v4", "-4", func() netip.Addr { return watch.addr(&host4) }, fpWAN4)
	go pingUntil("v6", "-6", func() netip.Addr { return watch.addr(&host6) }, isp6)
	wg.Wait()
	got := watch.since(t0)
	for _, k := range firstPacketMetrics {
		if _, ok := got[k]; !ok && (variant == "dhcpcd" || !fpDhcpcdOnly[k]) {
			b.Fatalf("%s: no %s within %v (reached: %v)\ndhcpd -4:\n%s\ndhcpd -6:\n%s\n%s:\n%s", variant, k, fpTimeout, got,
				srv4.Output(), srv6.Output(), variant, p.Output())
		}
	}
	return got
}

// moments records when each named condition first held.
type moments struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newMoments() *moments { return &moments{at: map[string]time.Time{}} }

func (m *moments) set(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.at[name]; !ok {
		m.at[name] = time.Now()
	}
}

// setAddr and addr write and read an address the poll's conditions and
// the pings share.
func (m *moments) setAddr(p *netip.Addr, a netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	*p = a
}

func (m *moments) addr(a *netip.Addr) netip.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return *a
}

// poll checks each condition every 5 ms, each in a goroutine of its
// own (one that waits on the router's locks delays no other), until
// each has held or timeout passes.
func (m *moments) poll(timeout time.Duration, conds map[string]func() bool) {
	end := time.Now().Add(timeout)
	var wg sync.WaitGroup
	for name, c := range conds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if c() {
					m.set(name)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

func (m *moments) since(t0 time.Time) map[string]time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]time.Duration{}
	for k, t := range m.at {
		out[k] = t.Sub(t0)
	}
	return out
}

func mustLink(b testing.TB, ns *netns.NS, name string) netlink.Link {
	b.Helper()
	ln, err := ns.Netlink().LinkByName(name)
	if err != nil {
		b.Fatal(err)
	}
	return ln
}

// firstAddr is ifname's first address in p, out of duplicate address
// detection.
func firstAddr(ns *netns.NS, ifname string, family int, p netip.Prefix) (netip.Addr, bool) {
	ln, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		return netip.Addr{}, false
	}
	as, _ := ns.Netlink().AddrList(ln, family)
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && p.Contains(ip.Unmap()) && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// hasDefault6 says whether ns has an IPv6 default route on ifname.
func hasDefault6(ns *netns.NS, ifname string) bool {
	ln, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		return false
	}
	rs, _ := ns.Netlink().RouteList(ln, netlink.FAMILY_V6)
	for _, rt := range rs {
		if rt.Dst == nil || rt.Dst.String() == "::/0" {
			return true
		}
	}
	return false
}

// eui64LinkLocal is the link-local address the kernel makes from mac
// (addr_gen_mode eui64, the default).
func eui64LinkLocal(mac net.HardwareAddr) net.IP {
	ip := make(net.IP, 16)
	ip[0], ip[1] = 0xfe, 0x80
	copy(ip[8:11], mac[0:3])
	ip[8] ^= 0x02
	ip[11], ip[12] = 0xff, 0xfe
	copy(ip[13:16], mac[3:6])
	return ip
}
