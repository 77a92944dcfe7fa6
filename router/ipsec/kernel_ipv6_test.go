package ipsec

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

// TestGuestTunnelIPv6 joins two IPv6 LANs through a manual-key tunnel,
// over IPv4 WAN addresses (inner family differing from the outer one)
// and over IPv6 ones, and checks that UDP over IPv6 goes through it and
// only ESP crosses the WAN:
//
//	lanA 2001:db8:1::2 -- gwA WAN -- WAN gwB -- 2001:db8:2::2 lanB
func TestGuestTunnelIPv6(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("needs XFRM, network namespaces and veth: runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	const n, size = 10, 600
	for _, c := range []struct{ name, wanA, wanB string }{
		{"over IPv4", "198.51.100.1", "198.51.100.2"},
		{"over IPv6", "2001:db8:ff::1", "2001:db8:ff::2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lanA, gwA, gwB, lanB := newNetNS(t, "lanA"), newNetNS(t, "gwA"), newNetNS(t, "gwB"), newNetNS(t, "lanB")
			for _, ns := range []*netNS{lanA, gwA, gwB, lanB} {
				// No duplicate address detection: the addresses are
				// usable at once (veths carry no other host).
				ns.sysctl(t, "net/ipv6/conf/default/accept_dad", "0")
				ns.sysctl(t, "net/ipv6/conf/all/accept_dad", "0")
			}
			bits := "/24"
			if netip.MustParseAddr(c.wanA).Is6() {
				bits = "/64"
			}
			link(t, lanA, "eth0", "2001:db8:1::2/64", gwA, "lan0", "2001:db8:1::1/64")
			link(t, gwA, "wan0", c.wanA+bits, gwB, "wan1", c.wanB+bits)
			link(t, gwB, "lan0", "2001:db8:2::1/64", lanB, "eth0", "2001:db8:2::2/64")
			lanA.route(t, "default", "2001:db8:1::1")
			lanB.route(t, "default", "2001:db8:2::1")
			// The inner routes point at the peer's WAN address; over an
			// IPv4 WAN an IPv6 route cannot have an IPv4 gateway, so the
			// route goes through the WAN device (the policy takes the
			// packet before it leaves).
			for _, r := range []struct {
				ns       *netNS
				dst, dev string
			}{{gwA, "2001:db8:2::/64", "wan0"}, {gwB, "2001:db8:1::/64", "wan1"}} {
				if err := r.ns.RouteDev(r.dst, r.dev); err != nil {
					t.Fatal(err)
				}
			}
			for _, gw := range []*netNS{gwA, gwB} {
				gw.sysctl(t, "net/ipv6/conf/all/forwarding", "1")
			}
			hA, err := OpenInNetNS(gwA.fd)
			if err != nil {
				t.Fatal(err)
			}
			defer hA.Close()
			hB, err := OpenInNetNS(gwB.fd)
			if err != nil {
				t.Fatal(err)
			}
			defer hB.Close()
			a := testTunnel("aes-128-cbc", "hmac-sha256", true)
			a.Local, a.Remote = netip.MustParseAddr(c.wanA), netip.MustParseAddr(c.wanB)
			a.LocalNet, a.RemoteNet = netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
			b := mirror(a, "site-a")
			install(t, hA, a)
			install(t, hB, b)

			var srv net.PacketConn
			if err := lanB.do(func() (err error) {
				srv, err = net.ListenPacket("udp6", fmt.Sprintf("[2001:db8:2::2]:%d", echoPort))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			go func() {
				buf := make([]byte, 2048)
				for {
					k, from, err := srv.ReadFrom(buf)
					if err != nil {
						return
					}
					srv.WriteTo(buf[:k], from)
				}
			}()
			wA := (&sites{}).capture(t, gwA, "wan0")
			var cl *net.UDPConn
			if err := lanA.do(func() (err error) {
				cl, err = net.DialUDP("udp6", nil, &net.UDPAddr{IP: net.ParseIP("2001:db8:2::2"), Port: echoPort})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ok := 0
			buf := make([]byte, 2048)
			for i := range n {
				msg := fmt.Appendf(nil, "%s %d ", marker, i)
				msg = append(msg, bytes.Repeat([]byte{'x'}, size-len(msg))...)
				if _, err := cl.Write(msg); err != nil {
					t.Fatalf("datagram %d: %v", i, err)
				}
				cl.SetReadDeadline(time.Now().Add(3 * time.Second))
				if k, err := cl.Read(buf); err == nil && bytes.Equal(buf[:k], msg) {
					ok++
				}
			}
			if ok != n {
				t.Fatalf("%d of %d IPv6 datagrams came back through the tunnel", ok, n)
			}
			var esp, inClear int
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				esp, inClear = wA.counts()
				if esp >= n || time.Now().After(deadline) {
					break
				}
			}
			wA.stop()
			if esp != n || inClear != 0 {
				t.Errorf("gwA sent %d ESP packets on the WAN (want %d) and %d with the marker in the clear (want 0)", esp, n, inClear)
			}
			ca, cb := counters(t, hA, a), counters(t, hB, b)
			// The SAs count inner packets: payload, UDP and IPv6 headers.
			if ca.Out.Packets != n || cb.In.Packets != n || ca.Out.Bytes != n*(size+48) || cb.In.Bytes != ca.Out.Bytes {
				t.Errorf("A out %+v, B in %+v: want %d packets of %d bytes each", ca.Out, cb.In, n, size+48)
			}
		})
	}
}

// RouteDev adds a route in ns to dst out of the device dev, without a
// gateway.
func (ns *netNS) RouteDev(dst, dev string) error {
	l, err := ns.Netlink().LinkByName(dev)
	if err != nil {
		return err
	}
	p := netip.MustParsePrefix(dst)
	return ns.Netlink().RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index,
		Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}})
}
