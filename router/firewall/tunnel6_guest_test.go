package firewall

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/site"
)

// An IPv6 tunnel in the v6 lab of TestGuestIPv6Firewall: its peer is a
// second address of the wan host, its remote network (a ULA /64) one
// the wan host answers on, so that the firewall's own part shows without
// an SA, as tunnelChecks does for IPv4.
const (
	tunnel6Peer = "2001:db8:ffff::3"
	remote6Net  = "fd00:d::/64"
	remote6Host = "fd00:d::5"
)

// TestGuestTunnelIPv6Firewall applies Build's ruleset for a tunnel
// between IPv6 WAN addresses carrying IPv6 networks, with AddIPv6, to a
// router namespace, and checks in the kernel: ESP from the peer's IPv6
// address reaches the router's stack and from another address is dropped
// and counted; the LAN's packets to the remote network are dropped and
// counted while no SA carries them (rt ipsec missing), never forwarded
// in the clear; the remote network's addresses in the clear from the WAN
// are dropped in antispoof and counted. Each connection the firewall
// must stop is made once before it is applied.
func TestGuestTunnelIPv6Firewall(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("needs netfilter, network namespaces and veth: runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	wan, router, lan := newNetNS(t, "wan6t"), newNetNS(t, "router6t"), newNetNS(t, "lan6t")
	for _, ns := range []*netNS{wan, router, lan} {
		if err := ns.Sysctl("net/ipv6/conf/default/accept_dad", "0"); err != nil {
			t.Fatal(err)
		}
	}
	link(t, router, "wan0", router6WAN+"/64", wan, "w0", wan6Host+"/64")
	link(t, router, "lan0", router6LAN+"/64", lan, "l0", lan6Host+"/64")
	for _, step := range []error{
		wan.AddAddr("w0", tunnel6Peer+"/64"),
		wan.AddAddr("w0", remote6Host+"/128"),
		lan.Route("default", netip.MustParseAddr(router6LAN), netip.Addr{}),
		wan.Route("2001:db8:1::/48", netip.MustParseAddr(router6WAN), netip.Addr{}),
		router.Route(remote6Net, netip.MustParseAddr(wan6Host), netip.Addr{}),
		router.Sysctl("net/ipv6/conf/all/forwarding", "1"),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	settle(t, wan, router, lan)
	wan.serveTCP6(t, "["+remote6Host+"]:9000")
	lan.serveTCP6(t, "["+lan6Host+"]:9001")
	if _, err := lan.dialTCP6(lan6Host, "["+remote6Host+"]:9000", 10*time.Second); err != nil {
		t.Fatalf("without the firewall, the LAN to the remote network: %v", err)
	}
	if _, err := wan.dialTCP6(remote6Host, "["+lan6Host+"]:9001", 10*time.Second); err != nil {
		t.Fatalf("without the firewall, the remote network to the LAN: %v", err)
	}

	s := baseSite()
	s.Tunnels = []site.Tunnel{{Name: "a-d", Keying: site.KeyingIKEv2, Peer: tunnel6Peer, Local: router6WAN,
		LocalSubnet: "2001:db8:1:10::/64", RemoteSubnet: remote6Net, PSK: "a-d.psk"}}
	rs, err := Build(s, "wan0", "lan0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := AddIPv6(rs, "wan0", "lan0", IPv6{LANPrefixes: []netip.Prefix{netip.MustParsePrefix("2001:db8:1:10::/64")}}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(rs, InNetNS(router.FD())); err != nil {
		t.Fatal(err)
	}
	t.Run("IPv6 ESP from the peer only", func(t *testing.T) {
		if !wan.sendESP6(t, tunnel6Peer, router6WAN) {
			t.Error("ESP from the IPv6 peer got no parameter problem: the firewall dropped it")
		}
		before := counter(t, router, CounterInputDrop)
		if wan.sendESP6(t, wan6Host, router6WAN) {
			t.Error("ESP from a non-peer reached the router's stack")
		}
		if after := counter(t, router, CounterInputDrop); after <= before {
			t.Errorf("input_drop %d -> %d, want the non-peer's ESP counted", before, after)
		}
	})
	t.Run("IPv6 to the tunnel's network not in the clear", func(t *testing.T) {
		before := counter(t, router, CounterForwardDrop)
		if _, err := lan.dialTCP6(lan6Host, "["+remote6Host+"]:9000", refused); err == nil {
			t.Fatal("the LAN reached the tunnel's remote network in the clear with no SA")
		}
		if after := counter(t, router, CounterForwardDrop); after <= before {
			t.Errorf("forward_drop %d -> %d, want the LAN's packets counted", before, after)
		}
	})
	t.Run("IPv6 tunnel addresses in the clear dropped", func(t *testing.T) {
		before := counter(t, router, CounterSpoofDrop)
		if _, err := wan.dialTCP6(remote6Host, "["+lan6Host+"]:9001", refused); err == nil {
			t.Fatal("a plaintext packet from the tunnel's remote network was forwarded to the LAN")
		}
		if after := counter(t, router, CounterSpoofDrop); after <= before {
			t.Errorf("spoof_drop %d -> %d, want it counted", before, after)
		}
	})
}

// sendESP6 sends one ESP packet over IPv6 from src (an address of ns) to
// dst and says whether dst answered within two seconds with the ICMPv6
// parameter problem a stack without an ESP handler sends (unrecognized
// next header, RFC 4443 3.4): the packet got past the firewall.
func (ns *netNS) sendESP6(t *testing.T, src, dst string) bool {
	t.Helper()
	var ic *icmp.PacketConn
	var esp net.PacketConn
	err := ns.Do(func() (err error) {
		if ic, err = icmp.ListenPacket("ip6:ipv6-icmp", "::"); err != nil {
			return err
		}
		esp, err = net.ListenPacket("ip6:50", src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	defer esp.Close()
	pkt := []byte{0, 0, 0x10, 0, 0, 0, 0, 1, 'n', 'o', 't', ' ', 'a', 'n', ' ', 'S', 'A'}
	if _, err := esp.WriteTo(pkt, &net.IPAddr{IP: net.ParseIP(dst)}); err != nil {
		t.Fatal(err)
	}
	ic.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 1500)
	for {
		n, from, err := ic.ReadFrom(buf)
		if err != nil {
			return false
		}
		m, err := icmp.ParseMessage(58, buf[:n])
		if err != nil || m.Type != ipv6.ICMPTypeParameterProblem || m.Code != 1 || from.(*net.IPAddr).IP.String() != dst {
			continue
		}
		// The quoted header: next header ESP, from src.
		if pp, ok := m.Body.(*icmp.ParamProb); ok && len(pp.Data) >= 40 && pp.Data[6] == 50 &&
			netip.AddrFrom16([16]byte(pp.Data[8:24])).String() == src {
			return true
		}
	}
}
