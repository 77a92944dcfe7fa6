package router

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/router/firewall"
	"github.com/ocfw/ocfw/router/netns"
	"github.com/ocfw/ocfw/site"
)

// The port forward lab's addresses: the ISP's host on the WAN's /64, the
// LAN's first and second delegated /64 (the same subnet of two
// delegations), its ULA /64, and the interface identifiers of nas (the
// forward's ipv6_host) and of another LAN host without a forward.
var (
	pfISP      = netip.MustParseAddr("2001:db8:ffff::1")
	pfRouter   = netip.MustParseAddr("2001:db8:ffff::2")
	pfGlobal1  = netip.MustParsePrefix("2001:db8:1:10::/64")
	pfGlobal2  = netip.MustParsePrefix("2001:db8:2:10::/64")
	pfULA      = netip.MustParsePrefix("fd12:3456:789a:10::/64")
	pfNAS      = netip.MustParseAddr("::10")
	pfOther    = netip.MustParseAddr("::20")
	pfRouterID = netip.MustParseAddr("::1")
)

// pfSite forwards tcp 443 to nas, over v4 (DNAT to 192.168.1.10) and over
// v6 (ipv6_host: nas, id ::10).
func pfSite() *site.Site {
	return &site.Site{Kind: "site", Hostname: "gw",
		WAN: site.WAN{Port: "wan", Address: "dhcp"},
		LAN: site.LAN{Ports: []string{"lan1"}, Address: "192.168.1.1/24"},
		Firewall: site.Firewall{PortForwards: []site.PortForward{
			{Proto: "tcp", Port: 443, To: "192.168.1.10", IPv6Host: "nas"},
		}},
		IPv6: site.IPv6{ULA: "fd12:3456:789a::/48",
			Hosts: []site.IPv6Host{{Name: "nas", ID: pfNAS.String()}, {Name: "printer", ID: pfOther.String()}}},
	}
}

// pfNS makes a namespace without duplicate address detection (addresses
// usable at once: a firewall test waits for nothing else), skipping the
// test when this host cannot (not root).
func pfNS(t *testing.T, name string) *netns.NS {
	t.Helper()
	ns, err := netns.New(name)
	if err != nil {
		labtest.SkipOrFail(t, "this host cannot make a network namespace (needs root): %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	if err := ns.Sysctl("net/ipv6/conf/default/accept_dad", "0"); err != nil {
		t.Fatal(err)
	}
	return ns
}

// serve6 answers every TCP connection to port (on any of ns's
// addresses) with the client's address and the address it reached, one
// line, then closes it.
func serve6(t *testing.T, ns *netns.NS, port int) {
	t.Helper()
	var l net.Listener
	if err := ns.Do(func() (err error) { l, err = net.Listen("tcp6", fmt.Sprintf("[::]:%d", port)); return }); err != nil {
		t.Fatalf("%s: listen on %d: %v", ns.Name, port, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, c.RemoteAddr().(*net.TCPAddr).IP, c.LocalAddr().(*net.TCPAddr).IP)
			c.Close()
		}
	}()
}

// dial6 connects from ns to dst and port and returns the server's line:
// "client-address reached-address".
func dial6(ns *netns.NS, dst netip.Addr, port int, timeout time.Duration) (string, error) {
	var line string
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp6", netip.AddrPortFrom(dst, uint16(port)).String(), timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		line, err = br.ReadString('\n')
		line = strings.TrimSpace(line)
		if err != nil {
			return err
		}
		// Up to the server's FIN before closing: our ACK of a FIN that
		// came late (a loaded machine) would cross the firewall applied
		// next and count on its ULA rule, which the tests read.
		_, err = io.Copy(io.Discard, br)
		return err
	})
	return line, err
}

// TestIPv6PortForward: the router's rules (applyFirewall, as the board
// applies them, with the site's ipv6_host forward) in a router namespace
// between an ISP namespace and a LAN namespace, on this host's kernel.
// The LAN namespace holds nas's addresses (the global /64 and the ULA
// with id ::10) and another host's (::20); the ISP routes the LAN's /48s,
// the ULA's too (a hostile neighbour), to the router. From the ISP over
// v6: tcp 443 to nas gets through, counted in fwd6_tcp_443 and on its
// rule in the listing `ocf firewall` prints; 443 on the other host, 22 on
// nas and 443 to nas's ULA address are dropped, counted in forward_drop
// (the ULA one on its own rule). Then the ISP delegates another /64
// (same subnet, same id): the forward's rule, unchanged, matches nas's
// new address at once; the router's rebuild for the new prefix (which
// the LAN's source rules need for the reply) carries the same rule, and
// the connection gets through.
func TestIPv6PortForward(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces and nftables on this host's kernel (a few seconds)")
	}
	isp, rtr, lan := pfNS(t, "isp6pf"), pfNS(t, "router6pf"), pfNS(t, "lan6pf")
	if err := netns.Veth(rtr, "wan0", netip.PrefixFrom(pfRouter, 64).String(), isp, "w0", netip.PrefixFrom(pfISP, 64).String()); err != nil {
		labtest.SkipOrFail(t, "this host cannot make a veth pair: %v", err)
	}
	if err := netns.Veth(rtr, "lan0", "", lan, "l0", ""); err != nil {
		t.Fatal(err)
	}
	in := func(p netip.Prefix, id netip.Addr) netip.Addr { return site.WithID(p, id) }
	a64 := func(p netip.Prefix, id netip.Addr) string { return netip.PrefixFrom(in(p, id), 64).String() }
	for _, step := range []error{
		rtr.AddAddr("lan0", a64(pfGlobal1, pfRouterID)),
		rtr.AddAddr("lan0", a64(pfULA, pfRouterID)),
		lan.AddAddr("l0", a64(pfGlobal1, pfNAS)),
		lan.AddAddr("l0", a64(pfGlobal1, pfOther)),
		lan.AddAddr("l0", a64(pfULA, pfNAS)),
		// The LAN's default route by the router's ULA address, which
		// stays when the delegated prefix changes.
		lan.Route("default", in(pfULA, pfRouterID), netip.Addr{}),
		isp.Route("2001:db8:1::/48", pfRouter, netip.Addr{}),
		isp.Route("2001:db8:2::/48", pfRouter, netip.Addr{}),
		isp.Route("fd12:3456:789a::/48", pfRouter, netip.Addr{}),
		rtr.Sysctl("net/ipv6/conf/all/forwarding", "1"),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	serve6(t, lan, 443)
	serve6(t, lan, 22)
	// Without the firewall every one of them connects: a failure below
	// is the firewall's doing.
	for _, c := range []struct {
		dst  netip.Addr
		port int
	}{{in(pfGlobal1, pfNAS), 443}, {in(pfGlobal1, pfOther), 443}, {in(pfGlobal1, pfNAS), 22}, {in(pfULA, pfNAS), 443}} {
		if _, err := dial6(isp, c.dst, c.port, 10*time.Second); err != nil {
			t.Fatalf("without the firewall, [%s]:%d from the ISP: %v", c.dst, c.port, err)
		}
	}

	var mu sync.Mutex
	var applied []*firewall.Ruleset
	var logs []string
	r := newRouter(Config{Site: pfSite(), Log: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	r.wanIf, r.lanIf = "wan0", "lan0"
	r.applyRules = func(rs *firewall.Ruleset) error {
		mu.Lock()
		applied = append(applied, rs)
		mu.Unlock()
		return firewall.Apply(rs, firewall.InNetNS(rtr.FD()))
	}
	apply := func(prefixes ...netip.Prefix) *firewall.Ruleset {
		t.Helper()
		r.svc.mu.Lock()
		r.svc.lan6Prefixes = prefixes
		r.svc.mu.Unlock()
		if err := r.applyFirewall(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return applied[len(applied)-1]
	}
	rs := apply(pfULA, pfGlobal1)
	mu.Lock()
	if log := strings.Join(logs, "\n"); !strings.Contains(log, "tcp 443 to 192.168.1.10:443 and over v6 to nas") {
		t.Errorf("the router's log does not name the v6 forward:\n%s", log)
	}
	mu.Unlock()

	counters := func() map[string]uint64 {
		t.Helper()
		cs, err := firewall.Counters(firewall.InNetNS(rtr.FD()))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]uint64{}
		for _, c := range cs {
			m[c.Name] = c.Packets
		}
		return m
	}
	// rulePackets is what `ocf firewall` shows for the forward chain's
	// rule containing text (the router's own ruleset, r.svc.fw).
	rulePackets := func(text string) uint64 {
		t.Helper()
		r.svc.mu.Lock()
		fw := r.svc.fw
		r.svc.mu.Unlock()
		ls, err := firewall.Listing(fw, firewall.InNetNS(rtr.FD()))
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range ls {
			for _, rl := range ch.Rules {
				if ch.Name == "forward" && strings.Contains(rl.Rule, text) {
					return rl.Packets
				}
			}
		}
		t.Fatalf("no forward rule with %q in the listing", text)
		return 0
	}
	const fwdRule, ulaRule = `== ::10 tcp dport 443 ct state new counter name "fwd6_tcp_443" accept`, `drop comment "no ULA destination from the WAN`
	const refused = 1500 * time.Millisecond // a dropped SYN gets no answer; the counters say who dropped it

	t.Run("forwarded", func(t *testing.T) {
		before, rule := counters()[firewall.Fwd6Counter("tcp", 443)], rulePackets(fwdRule)
		nas := in(pfGlobal1, pfNAS)
		line, err := dial6(isp, nas, 443, 10*time.Second)
		if err != nil || line != pfISP.String()+" "+nas.String() {
			t.Fatalf("ISP -> [%s]:443: %q, %v; want %q (no translation either way)", nas, line, err, pfISP.String()+" "+nas.String())
		}
		if after := counters()[firewall.Fwd6Counter("tcp", 443)]; after != before+1 {
			t.Errorf("fwd6_tcp_443 %d -> %d: want one connection", before, after)
		}
		if after := rulePackets(fwdRule); after != rule+1 {
			t.Errorf("the forward's rule in the listing: %d -> %d packets, want its one SYN", rule, after)
		}
	})
	for _, c := range []struct {
		name string
		dst  netip.Addr
		port int
	}{
		{"same port, another host", in(pfGlobal1, pfOther), 443},
		{"another port on nas", in(pfGlobal1, pfNAS), 22},
		{"nas's ULA address", in(pfULA, pfNAS), 443},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, ula := counters(), rulePackets(ulaRule)
			if line, err := dial6(isp, c.dst, c.port, refused); err == nil {
				t.Fatalf("ISP -> [%s]:%d connected (%q)", c.dst, c.port, line)
			}
			after := counters()
			if after[firewall.CounterForwardDrop] <= before[firewall.CounterForwardDrop] {
				t.Errorf("forward_drop %d -> %d", before[firewall.CounterForwardDrop], after[firewall.CounterForwardDrop])
			}
			if f := firewall.Fwd6Counter("tcp", 443); after[f] != before[f] {
				t.Errorf("fwd6_tcp_443 counted it: %d -> %d", before[f], after[f])
			}
			if got := rulePackets(ulaRule) > ula; got != pfULA.Contains(c.dst) {
				t.Errorf("the ULA destination rule counted it: %v", got)
			}
		})
	}

	t.Run("new delegated prefix", func(t *testing.T) {
		// The ISP delegates another prefix: the LAN is renumbered (the
		// router's and the hosts' addresses in the old /64 go, the new
		// /64 with the same ids comes), the firewall not yet rebuilt.
		for _, ch := range []struct {
			ns     *netns.NS
			ifname string
			ids    []netip.Addr
		}{{rtr, "lan0", []netip.Addr{pfRouterID}}, {lan, "l0", []netip.Addr{pfNAS, pfOther}}} {
			ln, err := ch.ns.Netlink().LinkByName(ch.ifname)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ch.ids {
				old, _ := netlink.ParseAddr(a64(pfGlobal1, id))
				if err := ch.ns.Netlink().AddrDel(ln, old); err != nil {
					t.Fatal(err)
				}
				if err := ch.ns.AddAddr(ch.ifname, a64(pfGlobal2, id)); err != nil {
					t.Fatal(err)
				}
			}
		}
		nas := in(pfGlobal2, pfNAS)
		// The forward's rule matches nas's new address before any
		// rebuild (its SYN is counted and let in); the reply is the
		// LAN's source rules' business, which name the prefix.
		before := counters()[firewall.Fwd6Counter("tcp", 443)]
		line, err := dial6(isp, nas, 443, refused)
		if after := counters()[firewall.Fwd6Counter("tcp", 443)]; after <= before {
			t.Errorf("before the rebuild, fwd6_tcp_443 %d -> %d: the rule did not match the new address", before, after)
		}
		t.Logf("before the rebuild: %q %v (the reply from the new prefix waits for the LAN's source rule)", line, err)

		// The router rebuilds for the new LAN prefixes, as lan6 has it
		// do when the delegation changes.
		rs2 := apply(pfULA, pfGlobal2)
		if a, b := forwardRules(rs, "fwd6_"), forwardRules(rs2, "fwd6_"); len(a) != 1 || strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("the forward's rule changed with the prefix:\n%s\n%s", a, b)
		}
		before = counters()[firewall.Fwd6Counter("tcp", 443)]
		line, err = dial6(isp, nas, 443, 10*time.Second)
		if err != nil || line != pfISP.String()+" "+nas.String() {
			t.Fatalf("ISP -> [%s]:443 after the renumbering: %q, %v", nas, line, err)
		}
		if after := counters()[firewall.Fwd6Counter("tcp", 443)]; after != before+1 {
			t.Errorf("fwd6_tcp_443 %d -> %d: want one connection", before, after)
		}
		// The old address is gone from the LAN, and another host's new
		// address stays closed.
		if line, err := dial6(isp, in(pfGlobal2, pfOther), 443, refused); err == nil {
			t.Errorf("ISP -> the other host's new address connected (%q)", line)
		}
	})
}

// forwardRules are the forward chain's rules whose text holds s.
func forwardRules(rs *firewall.Ruleset, s string) []string {
	var out []string
	for _, ch := range rs.Chains {
		if ch.Name != "forward" {
			continue
		}
		for _, r := range ch.Rules {
			if strings.Contains(r.String(), s) {
				out = append(out, r.String())
			}
		}
	}
	return out
}
