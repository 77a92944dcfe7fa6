package router

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/ike"
)

// The router's IKE sockets on an IPv4 and an IPv6 WAN address, in a
// namespace of this host's kernel: listenIKE binds the IPv6 ones while
// the address is not yet on the box (IPV6_FREEBIND: a WAN address still
// in duplicate address detection, or not yet configured, must not fail
// IKE), and once it is, datagrams to 500 and 4500 of either address
// reach the endpoint's one Conn per port, and replies leave from the
// address they were sent to.
func TestListenIKEIPv6(t *testing.T) {
	ns := pfNS(t, "ike6")
	v4, v6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("2001:db8:a::2")
	var c500, c4500 ike.Conn
	if err := ns.Do(func() (err error) {
		c500, c4500, err = listenIKE([]netip.Addr{v4, v6})
		return err
	}); err != nil {
		t.Fatalf("listenIKE before the IPv6 address is there: %v", err)
	}
	defer c500.Close()
	defer c4500.Close()
	if err := ns.AddAddr("lo", v6.String()+"/128"); err != nil {
		t.Fatal(err)
	}
	// The address is on the box once the kernel's local route for it is:
	// the kernel adds that from its DAD work (on lo too, where DAD is at
	// once), after the address, and a datagram sent before it was lost
	// (2 runs in 100 under load).
	if err := ns.Settle(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		conn ike.Conn
		port uint16
	}{{c500, 500}, {c4500, 4500}} {
		if c.conn.LocalAddr().Port() != c.port {
			t.Errorf("local port %d, want %d", c.conn.LocalAddr().Port(), c.port)
		}
		for _, a := range []netip.Addr{v4, v6} {
			to := netip.AddrPortFrom(a, c.port)
			var cl *net.UDPConn
			if err := ns.Do(func() (err error) {
				// From the address itself, as a peer's datagram comes
				// from its own address, not ::1.
				cl, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)), net.UDPAddrFromAddrPort(to))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			// On 4500 the non-ESP marker: IKE for the endpoint, not
			// ESP for the kernel (RFC 3948 2.2).
			msg := []byte{0, 0, 0, 0, 'i', 'k', 'e'}
			if _, err := cl.Write(msg); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			var from netip.AddrPort
			go func() {
				buf := make([]byte, 64)
				n, f, err := c.conn.ReadFrom(buf)
				from = f
				if err == nil && string(buf[:n]) != string(msg) {
					err = net.UnknownNetworkError("got " + string(buf[:n]))
				}
				got <- err
			}()
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("%v: %v", to, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%v: nothing reached the endpoint's conn", to)
			}
			if err := c.conn.WriteTo([]byte("back"), from); err != nil {
				t.Fatalf("reply to %v: %v", from, err)
			}
			cl.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 64)
			n, rfrom, err := cl.ReadFromUDPAddrPort(buf)
			if err != nil || string(buf[:n]) != "back" || rfrom.Addr().Unmap() != a || rfrom.Port() != c.port {
				t.Errorf("reply %q from %v (%v), want from %v", buf[:n], rfrom, err, to)
			}
		}
	}
}
