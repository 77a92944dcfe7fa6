package ike

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// MultiConn serves an IPv4 and an IPv6 socket on one port as one Conn:
// datagrams from both families come out of ReadFrom with their senders,
// and a reply leaves on the socket of its destination's family (the
// client sees it come from the address it sent to).
func TestMultiConnIPv6(t *testing.T) {
	c4, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := c4.LocalAddr().(*net.UDPAddr).Port
	c6, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback, Port: port})
	if err != nil {
		c4.Close()
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	m := MultiConn(UDPConn(c4), UDPConn(c6))
	defer m.Close()
	if m.LocalAddr().Port() != uint16(port) {
		t.Errorf("local port %d, want %d", m.LocalAddr().Port(), port)
	}
	for _, srv := range []netip.AddrPort{
		netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)),
		netip.AddrPortFrom(netip.IPv6Loopback(), uint16(port)),
	} {
		cl, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(srv))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.Write([]byte("hello " + srv.Addr().String())); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		n, from, err := m.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "hello "+srv.Addr().String() || from != cl.LocalAddr().(*net.UDPAddr).AddrPort() {
			t.Fatalf("read %q from %v (%v), want the client %v", buf[:n], from, err, cl.LocalAddr())
		}
		if err := m.WriteTo([]byte("back"), from); err != nil {
			t.Fatal(err)
		}
		cl.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, rfrom, err := cl.ReadFromUDPAddrPort(buf)
		if err != nil || string(buf[:n]) != "back" || rfrom.Addr().Unmap() != srv.Addr() {
			t.Errorf("reply %q from %v (%v), want from %v", buf[:n], rfrom, err, srv)
		}
	}
	m.Close()
	if _, _, err := m.ReadFrom(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after close: %v, want net.ErrClosed", err)
	}
}
