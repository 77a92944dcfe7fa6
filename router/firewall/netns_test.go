package firewall

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// netNS is a network namespace made for a guest test, kept open by fd.
// Only used inside the kerneltest guest: the host's namespaces are never
// touched.
type netNS struct {
	name string
	fd   int
	nl   *netlink.Handle // rtnetlink socket opened inside the namespace
}

// newNetNS creates a network namespace: unshare on a locked thread, keep
// an fd to it, switch the thread back.
func newNetNS(t *testing.T, name string) *netNS {
	t.Helper()
	ns := &netNS{name: name}
	err := onLockedThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		ns.fd = fd
		return nil
	})
	if err != nil {
		t.Fatalf("netns %s: %v", name, err)
	}
	t.Cleanup(func() { unix.Close(ns.fd) })
	err = ns.do(func() error {
		// The ROUTE family only: netlink's default handle also opens a
		// netfilter socket.
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		ns.nl = h
		lo, err := h.LinkByName("lo")
		if err != nil {
			return err
		}
		return h.LinkSetUp(lo)
	})
	if err != nil {
		t.Fatalf("netns %s: %v", name, err)
	}
	t.Cleanup(ns.nl.Close)
	return ns
}

// onLockedThread runs f on a locked OS thread and puts the thread back in
// the network namespace it started in. If that fails the thread stays
// locked, and Go ends it with the goroutine rather than reuse it.
func onLockedThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(orig)
		ferr := f()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("back to the original netns: %w", err)
			return // thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// do runs f inside the namespace. Sockets f opens stay in it.
func (ns *netNS) do(f func() error) error {
	return onLockedThread(func() error {
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns %s: %w", ns.name, err)
		}
		return f()
	})
}

// link joins a and b with a veth pair named aName (in a) and bName (in
// b), gives each end its address and brings both up.
func link(t *testing.T, a *netNS, aName, aAddr string, b *netNS, bName, bAddr string) {
	t.Helper()
	err := a.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName})
	if err != nil {
		t.Fatalf("veth %s-%s: %v", aName, bName, err)
	}
	peer, err := a.nl.LinkByName(bName)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.nl.LinkSetNsFd(peer, b.fd); err != nil {
		t.Fatalf("moving %s to %s: %v", bName, b.name, err)
	}
	for _, end := range []struct {
		ns         *netNS
		name, addr string
	}{{a, aName, aAddr}, {b, bName, bAddr}} {
		l, err := end.ns.nl.LinkByName(end.name)
		if err != nil {
			t.Fatalf("%s in %s: %v", end.name, end.ns.name, err)
		}
		addr, err := netlink.ParseAddr(end.addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := end.ns.nl.AddrAdd(l, addr); err != nil {
			t.Fatalf("%s %s: %v", end.name, end.addr, err)
		}
		if err := end.ns.nl.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
}

// route adds a route in ns: to dst ("default" or a prefix) via gw.
func (ns *netNS) route(t *testing.T, dst, gw string) {
	t.Helper()
	r := &netlink.Route{Gw: net.ParseIP(gw)}
	if dst != "default" {
		_, n, err := net.ParseCIDR(dst)
		if err != nil {
			t.Fatal(err)
		}
		r.Dst = n
	}
	if err := ns.nl.RouteAdd(r); err != nil {
		t.Fatalf("%s: route %s via %s: %v", ns.name, dst, gw, err)
	}
}

// sysctl writes a /proc/sys file inside ns (net sysctls are per
// namespace, resolved for the opening thread).
func (ns *netNS) sysctl(t *testing.T, path, val string) {
	t.Helper()
	if err := ns.do(func() error { return os.WriteFile("/proc/sys/"+path, []byte(val), 0o644) }); err != nil {
		t.Fatalf("%s: %s=%s: %v", ns.name, path, val, err)
	}
}

// serveTCP listens on addr in ns and answers every connection with the
// address it came from, one line, then closes it.
func (ns *netNS) serveTCP(t *testing.T, addr string) {
	t.Helper()
	var l net.Listener
	if err := ns.do(func() (err error) { l, err = net.Listen("tcp4", addr); return }); err != nil {
		t.Fatalf("%s: listen %s: %v", ns.name, addr, err)
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

// dialTCP connects from ns to addr and returns the source address the
// server saw, or an error when no connection came about within timeout.
func (ns *netNS) dialTCP(addr string, timeout time.Duration) (netip.Addr, error) {
	var seen netip.Addr
	err := ns.do(func() error {
		c, err := net.DialTimeout("tcp4", addr, timeout)
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

// ping sends n ICMP echo requests from ns to addr as fast as it can and
// counts the replies that come back within two seconds of the last.
func (ns *netNS) ping(addr string, n int) (int, error) {
	var c *icmp.PacketConn
	if err := ns.do(func() (err error) { c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0"); return }); err != nil {
		return 0, err
	}
	defer c.Close()
	dst := &net.IPAddr{IP: net.ParseIP(addr)}
	for i := 0; i < n; i++ {
		m := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 0x0cf, Seq: i, Data: []byte("ocfw")}}
		b, err := m.Marshal(nil)
		if err != nil {
			return 0, err
		}
		if _, err := c.WriteTo(b, dst); err != nil {
			return 0, err
		}
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	seen := map[int]bool{}
	buf := make([]byte, 1500)
	for {
		k, _, err := c.ReadFrom(buf)
		if err != nil {
			break // deadline: all that will come has come
		}
		m, err := icmp.ParseMessage(1, buf[:k])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == 0x0cf {
			seen[e.Seq] = true
		}
	}
	return len(seen), nil
}
