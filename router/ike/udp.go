package ike

import (
	"net"
	"net/netip"
)

// udpConn adapts a UDP socket to Conn.
type udpConn struct{ c *net.UDPConn }

// UDPConn makes a Conn of a UDP socket (port 500 or 4500 on the board).
func UDPConn(c *net.UDPConn) Conn { return udpConn{c} }

func (u udpConn) ReadFrom(b []byte) (int, netip.AddrPort, error) {
	n, a, err := u.c.ReadFromUDPAddrPort(b)
	return n, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()), err
}

func (u udpConn) WriteTo(b []byte, to netip.AddrPort) error {
	_, err := u.c.WriteToUDPAddrPort(b, to)
	return err
}

func (u udpConn) LocalAddr() netip.AddrPort {
	a := u.c.LocalAddr().(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

func (u udpConn) Close() error { return u.c.Close() }
