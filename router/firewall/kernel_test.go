package firewall

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/site"

	"github.com/google/nftables"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

// TestKernelInTheLoop boots Debian's 686 kernel in QEMU with Modules (and
// veth) and runs the TestGuest* tests there: this host's own netfilter is
// never touched.
func TestKernelInTheLoop(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("inside the guest: this test only starts it")
	}
	res := kerneltest.Run(t, kerneltest.Options{
		Modules: append(append([]string(nil), Modules...), "veth"),
		Run:     "TestGuest",
	})
	for _, name := range []string{"TestGuestRouter", "TestGuestIPv6Firewall", "TestGuestTunnelIPv6Firewall"} {
		if res != nil && !strings.Contains(res.Output, "--- PASS: "+name) {
			t.Errorf("the guest did not run %s", name)
		}
	}
}

const (
	wanHost   = "198.51.100.1"
	routerWAN = "198.51.100.2"
	routerLAN = "192.168.1.1"
	lanHost   = "192.168.1.100"
	// A dropped SYN gets no answer at all; this is how long a connection
	// attempt that must fail is given (the drop counters then say it was
	// the firewall).
	refused = 1500 * time.Millisecond
)

// TestGuestRouter builds a wan host, the router and a lan host in three
// network namespaces joined by veth pairs, applies Build's ruleset to the
// router and checks what gets through.
func TestGuestRouter(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("needs netfilter, network namespaces and veth: runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	wan, router, lan := newNetNS(t, "wan"), newNetNS(t, "router"), newNetNS(t, "lan")
	link(t, router, "wan0", routerWAN+"/24", wan, "w0", wanHost+"/24")
	link(t, router, "lan0", routerLAN+"/24", lan, "l0", lanHost+"/24")
	if err := lan.Route("default", netip.MustParseAddr(routerLAN), netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	// The wan host routes the LAN's private network to the router, as
	// a hostile neighbour on the ISP's segment could: without the
	// firewall those packets would be forwarded.
	if err := wan.Route("192.168.1.0/24", netip.MustParseAddr(routerWAN), netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := router.Sysctl("net/ipv4/ip_forward", "1"); err != nil {
		t.Fatal(err)
	}

	// Another program's table in the router, which Apply must leave alone.
	other := &nftables.Table{Name: "other", Family: nftables.TableFamilyIPv4}
	c, err := nftables.New(nftables.WithNetNSFd(router.FD()))
	if err != nil {
		t.Fatal(err)
	}
	c.AddTable(other)
	c.AddChain(&nftables.Chain{Name: "keep", Table: other})
	if err := c.Flush(); err != nil {
		t.Fatalf("adding the other table: %v", err)
	}

	wan.serveTCP(t, wanHost+":9000")
	lan.serveTCP(t, lanHost+":9001")
	lan.serveTCP(t, lanHost+":80")
	router.serveTCP(t, "0.0.0.0:22")

	// Before the firewall, the wan host reaches the LAN host: the test
	// network is right, so a failure later is the firewall's doing.
	if _, err := wan.dialTCP(lanHost+":9001", 10*time.Second); err != nil {
		t.Fatalf("without the firewall, wan -> lan: %v", err)
	}

	site := &site.Site{
		Kind: "site", Hostname: "gw",
		WAN: site.WAN{Port: "wan", Address: routerWAN + "/24", Gateway: wanHost},
		LAN: site.LAN{Ports: []string{"lan1"}, Address: routerLAN + "/24"},
		Firewall: site.Firewall{PortForwards: []site.PortForward{
			{Proto: "tcp", Port: 8080, To: lanHost, ToPort: 80},
		}},
		Tunnels: []site.Tunnel{{Name: "a-b", Peer: tunnelPeer, RemoteSubnet: remoteNet,
			Cipher: "aes-128-cbc", Auth: "hmac-sha1", Keys: "a-b.keys"}},
	}
	var rs *Ruleset
	apply := func() {
		t.Helper()
		var err error
		rs, err = Build(site, "wan0", "lan0", netip.MustParsePrefix(routerLAN+"/24"))
		if err != nil {
			t.Fatal(err)
		}
		if err := Apply(rs, InNetNS(router.FD())); err != nil {
			t.Fatal(err)
		}
	}
	apply()
	apply() // replacing an existing table works too

	t.Run("masquerade", func(t *testing.T) {
		src, err := lan.dialTCP(wanHost+":9000", 10*time.Second)
		if err != nil {
			t.Fatalf("lan -> wan: %v", err)
		}
		if src.String() != routerWAN {
			t.Errorf("the wan server saw %s, want the router's WAN address %s", src, routerWAN)
		}
	})
	t.Run("lan manages router", func(t *testing.T) {
		if _, err := lan.dialTCP(routerLAN+":22", 10*time.Second); err != nil {
			t.Errorf("lan -> router SSH: %v", err)
		}
	})
	t.Run("listing counts each rule", func(t *testing.T) {
		// The LAN's SSH above went through the input rule that lets
		// the LAN manage the router: its counter saw it.
		ls, err := Listing(rs, InNetNS(router.FD()))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ch := range ls {
			for _, r := range ch.Rules {
				if ch.Name == "input" && strings.Contains(r.Rule, `iifname "lan0" meta nfproto ipv4 ip saddr 192.168.1.0/24 accept`) {
					found = true
					if r.Packets == 0 || r.Bytes == 0 {
						t.Errorf("%s: %d packets, %d bytes after the LAN's SSH", r.Rule, r.Packets, r.Bytes)
					}
				}
			}
		}
		if !found || len(ls) != len(rs.Chains) {
			t.Errorf("no LAN management rule in the listing (%d chains): %+v", len(ls), ls)
		}
	})
	t.Run("wan to lan dropped", func(t *testing.T) {
		before := counter(t, router, CounterForwardDrop)
		if _, err := wan.dialTCP(lanHost+":9001", refused); err == nil {
			t.Fatal("wan -> lan host connected through the firewall")
		}
		if after := counter(t, router, CounterForwardDrop); after <= before {
			t.Errorf("forward_drop %d -> %d, want it counted", before, after)
		}
	})
	t.Run("wan ssh closed", func(t *testing.T) {
		before := counter(t, router, CounterInputDrop)
		if _, err := wan.dialTCP(routerWAN+":22", refused); err == nil {
			t.Fatal("wan -> router SSH connected without wan_services: ssh")
		}
		if after := counter(t, router, CounterInputDrop); after <= before {
			t.Errorf("input_drop %d -> %d, want it counted", before, after)
		}
	})
	t.Run("port forward", func(t *testing.T) {
		src, err := wan.dialTCP(routerWAN+":8080", 10*time.Second)
		if err != nil {
			t.Fatalf("wan -> router:8080 -> lan:80: %v", err)
		}
		if src.String() != wanHost {
			t.Errorf("the lan server saw %s, want the wan host %s (DNAT keeps the source)", src, wanHost)
		}
		if n := counter(t, router, "dnat_tcp_8080"); n != 1 {
			t.Errorf("dnat_tcp_8080 = %d, want 1 connection", n)
		}
	})
	t.Run("dhcp replies only from port 67", func(t *testing.T) {
		var l net.PacketConn
		if err := router.Do(func() (err error) { l, err = net.ListenPacket("udp4", "0.0.0.0:68"); return }); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		send := func(sport int, msg string) {
			err := wan.Do(func() error {
				c, err := net.DialUDP("udp4", &net.UDPAddr{Port: sport}, &net.UDPAddr{IP: net.ParseIP(routerWAN), Port: 68})
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write([]byte(msg))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		send(4000, "from 4000") // dropped: not a DHCP server's port
		send(67, "from 67")
		l.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 64)
		n, _, err := l.ReadFrom(buf)
		if err != nil {
			t.Fatalf("the reply from port 67 never came: %v", err)
		}
		if got := string(buf[:n]); got != "from 67" {
			t.Errorf("received %q first, want only %q through", got, "from 67")
		}
	})

	t.Run("ping rate-limited", func(t *testing.T) {
		before := counter(t, router, CounterInputDrop)
		const sent = 100
		got, err := wan.ping(routerWAN, sent)
		if err != nil {
			t.Fatal(err)
		}
		// Sending 100 requests takes well under a second here; at
		// PingRate a second after a burst of PingBurst, far fewer than
		// 100 are answered, and the rest are counted as drops.
		if got == 0 || got >= sent {
			t.Errorf("%d of %d pings answered, want some but not all", got, sent)
		}
		if after := counter(t, router, CounterInputDrop); after < before+uint64(sent-got) {
			t.Errorf("input_drop %d -> %d, want the %d unanswered pings counted", before, after, sent-got)
		}
		t.Logf("%d of %d pings answered", got, sent)
	})

	tunnelChecks(t, wan, router, lan)
	spoofChecks(t, wan, router, lan, false)
	rpFilterChecks(t, router)
	spoofChecks(t, wan, router, lan, true)
	t.Run("honest traffic with rp_filter", func(t *testing.T) {
		if src, err := lan.dialTCP(wanHost+":9000", 10*time.Second); err != nil || src.String() != routerWAN {
			t.Errorf("lan -> wan: seen as %s, %v; want %s", src, err, routerWAN)
		}
		if _, err := lan.dialTCP(routerLAN+":22", 10*time.Second); err != nil {
			t.Errorf("lan -> router SSH: %v", err)
		}
		if src, err := wan.dialTCP(routerWAN+":8080", 10*time.Second); err != nil || src.String() != wanHost {
			t.Errorf("port forward: seen as %s, %v; want %s", src, err, wanHost)
		}
		if got, err := wan.ping(routerWAN, 3); err != nil || got == 0 {
			t.Errorf("wan -> router ping: %d of 3 answered, %v", got, err)
		}
		if got, err := lan.ping(routerLAN, 3); err != nil || got != 3 {
			t.Errorf("lan -> router ping: %d of 3 answered, %v", got, err)
		}
	})

	site.Firewall.WANServices = []string{"ssh"}
	apply()
	t.Run("wan ssh open", func(t *testing.T) {
		src, err := wan.dialTCP(routerWAN+":22", 10*time.Second)
		if err != nil {
			t.Fatalf("wan -> router SSH with wan_services: ssh: %v", err)
		}
		if src.String() != wanHost {
			t.Errorf("router saw %s", src)
		}
		if _, err := wan.dialTCP(lanHost+":9001", refused); err == nil {
			t.Error("opening SSH opened the LAN as well")
		}
	})

	t.Run("counters", func(t *testing.T) {
		cs, err := Counters(InNetNS(router.FD()))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		if got, want := strings.Join(names, " "), "dnat_tcp_8080 forward_drop input_drop spoof_drop"; got != want {
			t.Errorf("counters %q, want %q", got, want)
		}
		t.Logf("after the last Apply: %+v", cs)
	})
	t.Run("other table kept", func(t *testing.T) {
		ts, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, tb := range ts {
			found = found || tb.Name == "other"
		}
		if !found {
			t.Error("Apply removed the table ip other")
		}
	})
}

// counter reads one named counter's packets in ns.
func counter(t *testing.T, ns *netNS, name string) uint64 {
	t.Helper()
	cs, err := Counters(InNetNS(ns.FD()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Name == name {
			return c.Packets
		}
	}
	t.Fatalf("no counter %s in %+v", name, cs)
	return 0
}
