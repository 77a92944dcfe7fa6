package ike

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
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

// MultiConn makes one Conn of several sockets on the same port, one per
// address family (the WAN's IPv4 and IPv6 addresses): it reads from all
// of them and writes each datagram on the socket of its destination's
// family. One endpoint then serves IPv4 and IPv6 peers alike; its SAs
// only need the port, which the sockets share. With one conn it is that
// conn.
func MultiConn(conns ...Conn) Conn {
	if len(conns) == 1 {
		return conns[0]
	}
	m := &multiConn{conns: conns, in: make(chan datagram), done: make(chan struct{})}
	for _, c := range conns {
		go m.pump(c)
	}
	return m
}

type multiConn struct {
	conns []Conn
	in    chan datagram
	done  chan struct{}
	once  sync.Once
}

type datagram struct {
	b    []byte
	from netip.AddrPort
	err  error
}

// pump hands c's datagrams to ReadFrom, in a buffer of their own size
// (a 32 MB board should not hold a full-size buffer per datagram).
func (m *multiConn) pump(c Conn) {
	buf := make([]byte, MaxMessage)
	for {
		n, from, err := c.ReadFrom(buf)
		d := datagram{from: from, err: err}
		if err == nil {
			d.b = append([]byte(nil), buf[:n]...)
		}
		select {
		case m.in <- d:
		case <-m.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (m *multiConn) ReadFrom(b []byte) (int, netip.AddrPort, error) {
	select {
	case d := <-m.in:
		return copy(b, d.b), d.from, d.err
	case <-m.done:
		return 0, netip.AddrPort{}, net.ErrClosed
	}
}

func (m *multiConn) WriteTo(b []byte, to netip.AddrPort) error {
	for _, c := range m.conns {
		if c.LocalAddr().Addr().Is4() == to.Addr().Unmap().Is4() {
			return c.WriteTo(b, to)
		}
	}
	return fmt.Errorf("ike: no socket of %s's family", to.Addr())
}

// LocalAddr is the first socket's: the endpoint takes the port from it,
// which all share.
func (m *multiConn) LocalAddr() netip.AddrPort { return m.conns[0].LocalAddr() }

func (m *multiConn) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		for _, c := range m.conns {
			if e := c.Close(); err == nil {
				err = e
			}
		}
	})
	return err
}
