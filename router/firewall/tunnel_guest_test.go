package firewall

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// The tunnel in TestGuestRouter's site: its peer is a second address of
// the wan host, its remote network one the wan host also answers on (as
// if it were behind the peer), so that what the firewall alone does can
// be seen without any SA: the XFRM side is tested with the router.
const (
	tunnelPeer = "198.51.100.3"
	remoteNet  = "192.168.2.0/24"
	remoteHost = "192.168.2.5"
)

// tunnelChecks runs after the firewall with the tunnel is applied.
func tunnelChecks(t *testing.T, wan, router, lan *netNS) {
	for _, a := range []string{tunnelPeer + "/24", remoteHost + "/32"} {
		if err := wan.AddAddr("w0", a); err != nil {
			t.Fatal(err)
		}
	}
	if err := router.Route(remoteNet, netip.MustParseAddr(wanHost), netip.Addr{}); err != nil {
		t.Fatal(err)
	}

	// No ESP handler is loaded in the guest, so ESP the firewall lets in
	// is answered with ICMP protocol unreachable: that answer is the
	// sign it passed.
	t.Run("esp from the peer only", func(t *testing.T) {
		if !wan.sendESP(t, tunnelPeer, routerWAN) {
			t.Error("ESP from the peer got no protocol-unreachable: the firewall dropped it")
		}
		before := counter(t, router, CounterInputDrop)
		if wan.sendESP(t, wanHost, routerWAN) {
			t.Error("ESP from a non-peer reached the router's stack")
		}
		if after := counter(t, router, CounterInputDrop); after <= before {
			t.Errorf("input_drop %d -> %d, want the non-peer's ESP counted", before, after)
		}
	})
	// The remote network's addresses in the clear, from the WAN: without
	// the secpath match the forward rule would let this connection in.
	// The antispoof chain drops it before the forward chain sees it.
	t.Run("tunnel addresses in the clear dropped", func(t *testing.T) {
		before := counter(t, router, CounterSpoofDrop)
		if _, err := wan.dialTCPFrom(remoteHost, lanHost+":9001", refused); err == nil {
			t.Fatal("a plaintext packet from the tunnel's remote network was forwarded to the LAN")
		}
		if after := counter(t, router, CounterSpoofDrop); after <= before {
			t.Errorf("spoof_drop %d -> %d, want it counted", before, after)
		}
	})
	// Without an SA (the tunnel down) the LAN's packets to the remote
	// network would be routed out of the WAN in the clear: the forward
	// chain drops them (rt ipsec missing) and counts them. That they
	// enter a tunnel unmasqueraded is checked where one is up
	// (e2e TestIKEv2AgainstStrongswan's traffic, from the LAN host's
	// own address).
	t.Run("nothing to the tunnel's network in the clear", func(t *testing.T) {
		got := wan.udpEcho(t, remoteHost+":9002")
		before := counter(t, router, CounterForwardDrop)
		err := lan.Do(func() error {
			c, err := net.DialUDP("udp4", nil, udpAddr(remoteHost, 9002))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("hello"))
			return err
		})
		if err != nil {
			t.Fatalf("lan -> remote network: %v", err)
		}
		if m := next(t, got); m != "" {
			t.Errorf("the remote host read %q in the clear with no SA", m)
		}
		if after := counter(t, router, CounterForwardDrop); after <= before {
			t.Errorf("forward_drop %d -> %d, want the LAN's packet counted", before, after)
		}
	})
}

// sendESP sends one ESP packet from src (an address of ns) to dst and
// says whether dst answered with ICMP protocol unreachable for it within
// two seconds.
func (ns *netNS) sendESP(t *testing.T, src, dst string) bool {
	t.Helper()
	var ic *icmp.PacketConn
	var esp net.PacketConn
	err := ns.Do(func() (err error) {
		if ic, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0"); err != nil {
			return err
		}
		esp, err = net.ListenPacket("ip4:50", src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	defer esp.Close()
	// SPI 0x1000, sequence 1, then bytes that stand for ciphertext.
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
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeDestinationUnreachable || m.Code != 2 || from.String() != dst {
			continue
		}
		// The quoted header: protocol ESP, from src.
		if du, ok := m.Body.(*icmp.DstUnreach); ok && len(du.Data) >= 20 && du.Data[9] == 50 &&
			netip.AddrFrom4([4]byte(du.Data[12:16])).String() == src {
			return true
		}
	}
}

// dialTCPFrom is dialTCP from a given local address of ns.
func (ns *netNS) dialTCPFrom(src, addr string, timeout time.Duration) (netip.Addr, error) {
	var seen netip.Addr
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp4", addr)
		if err != nil {
			return err
		}
		c.Close()
		return nil
	})
	return seen, err
}
