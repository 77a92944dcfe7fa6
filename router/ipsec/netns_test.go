package ipsec

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netNS is a network namespace made for a guest test, kept open by fd.
// Only used inside the kerneltest guest: the host's namespaces are never
// touched. (The same approach as router/firewall's tests.)
type netNS struct {
	name string
	fd   int
	nl   *netlink.Handle // rtnetlink, opened inside the namespace
}

func newNetNS(t *testing.T, name string) *netNS {
	t.Helper()
	ns := &netNS{name: name}
	err := onLockedThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		ns.fd = fd
		return err
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
// its network namespace; if that fails the thread stays locked and dies
// with the goroutine.
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
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// do runs f inside the namespace; sockets f opens stay in it.
func (ns *netNS) do(f func() error) error {
	return onLockedThread(func() error {
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns %s: %w", ns.name, err)
		}
		return f()
	})
}

// link joins a and b with a veth pair, gives each end its address and
// brings both up.
func link(t *testing.T, a *netNS, aName, aAddr string, b *netNS, bName, bAddr string) {
	t.Helper()
	if err := a.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName}); err != nil {
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
		p := netip.MustParsePrefix(dst)
		r.Dst = &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
	}
	if err := ns.nl.RouteAdd(r); err != nil {
		t.Fatalf("%s: route %s via %s: %v", ns.name, dst, gw, err)
	}
}

// sysctl writes a /proc/sys file inside ns.
func (ns *netNS) sysctl(t *testing.T, path, val string) {
	t.Helper()
	if err := ns.do(func() error { return os.WriteFile("/proc/sys/"+path, []byte(val), 0o644) }); err != nil {
		t.Fatalf("%s: %s=%s: %v", ns.name, path, val, err)
	}
}
