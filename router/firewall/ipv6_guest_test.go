package firewall

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

const (
	wan6Host   = "2001:db8:ffff::1"
	router6WAN = "2001:db8:ffff::2"
	router6LAN = "2001:db8:1:10::1"
	lan6Host   = "2001:db8:1:10::100"
	lan6ULA    = "fd12:3456:789a:10::100"
)

// TestGuestIPv6Firewall applies Build's ruleset with AddIPv6 to a router
// namespace that forwards IPv6 between a wan and a lan host and checks
// what gets through: the LAN's global prefix out (neighbour discovery
// working under the rules), a ULA source out dropped and counted, a WAN
// host posing as the LAN's prefix dropped before conntrack and counted,
// the WAN's connection to the router's SSH dropped; and, with the rules
// rebuilt for a new delegated /64, a source in the old one dropped.
func TestGuestIPv6Firewall(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("needs netfilter, network namespaces and veth: runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	wan, router, lan := newNetNS(t, "wan6"), newNetNS(t, "router6"), newNetNS(t, "lan6")
	for _, ns := range []*netNS{wan, router, lan} {
		// No duplicate address detection: the addresses are usable at
		// once, and a test of the firewall waits for nothing else.
		if err := ns.Sysctl("net/ipv6/conf/default/accept_dad", "0"); err != nil {
			t.Fatal(err)
		}
	}
	link(t, router, "wan0", router6WAN+"/64", wan, "w0", wan6Host+"/64")
	link(t, router, "lan0", router6LAN+"/64", lan, "l0", lan6Host+"/64")
	for _, step := range []error{
		lan.AddAddr("l0", lan6ULA+"/64"),
		router.AddAddr("lan0", "fd12:3456:789a:10::1/64"),
		lan.Route("default", netip.MustParseAddr(router6LAN), netip.Addr{}),
		wan.Route("2001:db8:1::/48", netip.MustParseAddr(router6WAN), netip.Addr{}),
		wan.Route("fd12:3456:789a::/48", netip.MustParseAddr(router6WAN), netip.Addr{}),
		router.Sysctl("net/ipv6/conf/all/forwarding", "1"),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	settle(t, wan, router, lan)
	wan.serveTCP6(t, "["+wan6Host+"]:9000")
	router.serveTCP6(t, "[::]:22")
	// Before the firewall the ULA source gets out: a failure later is
	// the firewall's doing.
	if _, err := lan.dialTCP6(lan6ULA, "["+wan6Host+"]:9000", 10*time.Second); err != nil {
		t.Fatalf("without the firewall, a ULA source to the wan: %v", err)
	}

	rs, err := Build(baseSite(), "wan0", "lan0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	err = AddIPv6(rs, "wan0", "lan0", IPv6{LANPrefixes: []netip.Prefix{
		netip.MustParsePrefix("2001:db8:1:10::/64"), netip.MustParsePrefix("fd12:3456:789a:10::/64")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(rs, InNetNS(router.FD())); err != nil {
		t.Fatal(err)
	}
	t.Run("global prefix out", func(t *testing.T) {
		src, err := lan.dialTCP6(lan6Host, "["+wan6Host+"]:9000", 10*time.Second)
		if err != nil || src.String() != lan6Host {
			t.Errorf("lan -> wan over v6: %v, seen from %v", err, src)
		}
	})
	t.Run("ULA source dropped", func(t *testing.T) {
		before := counter(t, router, CounterForwardDrop)
		if _, err := lan.dialTCP6(lan6ULA, "["+wan6Host+"]:9000", refused); err == nil {
			t.Fatal("a ULA source got out of the WAN")
		}
		if after := counter(t, router, CounterForwardDrop); after <= before {
			t.Errorf("forward_drop %d -> %d", before, after)
		}
	})
	t.Run("spoofed LAN prefix from the WAN", func(t *testing.T) {
		if err := wan.AddAddr("w0", "2001:db8:1:10::99/128"); err != nil {
			t.Fatal(err)
		}
		before := counter(t, router, CounterSpoofDrop)
		if _, err := wan.dialTCP6("2001:db8:1:10::99", "["+lan6Host+"]:9001", refused); err == nil {
			t.Fatal("a WAN host posing as the LAN's prefix connected")
		}
		if after := counter(t, router, CounterSpoofDrop); after <= before {
			t.Errorf("spoof_drop %d -> %d", before, after)
		}
	})
	t.Run("wan ssh closed", func(t *testing.T) {
		before := counter(t, router, CounterInputDrop)
		if _, err := wan.dialTCP6(wan6Host, "["+router6WAN+"]:22", refused); err == nil {
			t.Fatal("wan -> router SSH over v6 connected")
		}
		if after := counter(t, router, CounterInputDrop); after <= before {
			t.Errorf("input_drop %d -> %d", before, after)
		}
	})
	// Last, as the router does when the delegation changes: the rules
	// rebuilt with the new /64 only. The host's address in the withdrawn
	// prefix (still on it, deprecated) gets nothing out of the WAN.
	t.Run("withdrawn prefix not forwarded", func(t *testing.T) {
		rs, err := Build(baseSite(), "wan0", "lan0", lanAddr)
		if err != nil {
			t.Fatal(err)
		}
		err = AddIPv6(rs, "wan0", "lan0", IPv6{LANPrefixes: []netip.Prefix{
			netip.MustParsePrefix("2001:db8:1:20::/64"), netip.MustParsePrefix("fd12:3456:789a:10::/64")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := Apply(rs, InNetNS(router.FD())); err != nil {
			t.Fatal(err)
		}
		before := counter(t, router, CounterForwardDrop)
		if _, err := lan.dialTCP6(lan6Host, "["+wan6Host+"]:9000", refused); err == nil {
			t.Fatal("a source in the withdrawn prefix got out of the WAN")
		}
		if after := counter(t, router, CounterForwardDrop); after <= before {
			t.Errorf("forward_drop %d -> %d", before, after)
		}
	})
}

// serveTCP6 is serveTCP over IPv6.
func (ns *netNS) serveTCP6(t *testing.T, addr string) {
	t.Helper()
	var l net.Listener
	if err := ns.Do(func() (err error) { l, err = net.Listen("tcp6", addr); return }); err != nil {
		t.Fatalf("%s: listen %s: %v", ns.Name, addr, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, c.RemoteAddr().(*net.TCPAddr).IP)
			c.Close()
		}
	}()
}

// dialTCP6 is dialTCP over IPv6 from the source address src.
func (ns *netNS) dialTCP6(src, addr string, timeout time.Duration) (netip.Addr, error) {
	var seen netip.Addr
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp6", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading the server's answer: %w", err)
		}
		seen, err = netip.ParseAddr(line[:len(line)-1])
		return err
	})
	return seen, err
}
