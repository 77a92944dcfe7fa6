// Package netns makes network namespaces on the box and joins them with
// veth pairs: a piece of network inside one kernel, cut off from the
// box's own interfaces. The ESP measurement (router/ipsec/espspeed)
// sends traffic between two of them through an SA, and the kernel tests
// build their LANs and WANs from them.
//
// A namespace is held open by a file descriptor, not a name under
// /var/run/netns, so nothing is left behind when the process ends; it
// goes away (with its veth ends) when Close has been called and the last
// socket opened in it is closed. Entering one is per OS thread (setns),
// so Do runs its function on a locked thread and puts the thread back.
package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NS is a network namespace made by New.
type NS struct {
	Name string // for messages
	fd   int
	nl   *netlink.Handle // rtnetlink, opened inside the namespace
}

// New makes a network namespace with its loopback up. Needs
// CAP_SYS_ADMIN (the boot sequence and the kernel tests run as root).
func New(name string) (*NS, error) {
	ns := &NS{Name: name, fd: -1}
	err := onLockedThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		ns.fd = fd
		return err
	})
	if err != nil {
		if ns.fd >= 0 {
			unix.Close(ns.fd)
		}
		return nil, fmt.Errorf("netns %s: %w", name, err)
	}
	err = ns.Do(func() error {
		// The ROUTE family only: netlink's default handle also opens a
		// netfilter socket, which fails until nfnetlink is loaded.
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
		ns.Close()
		return nil, fmt.Errorf("netns %s: %w", name, err)
	}
	return ns, nil
}

// FD is the namespace's file descriptor (for ipsec.OpenInNetNS, setns).
func (ns *NS) FD() int { return ns.fd }

// Netlink is an rtnetlink handle inside the namespace.
func (ns *NS) Netlink() *netlink.Handle { return ns.nl }

// Close lets the namespace go: the kernel removes it, and its veth ends
// with it, once no socket opened in it is left.
func (ns *NS) Close() error {
	if ns.nl != nil {
		ns.nl.Close()
		ns.nl = nil
	}
	if ns.fd < 0 {
		return nil
	}
	err := unix.Close(ns.fd)
	ns.fd = -1
	return err
}

// Do runs f inside the namespace on a locked OS thread; sockets f opens
// stay in it whichever thread uses them later.
func (ns *NS) Do(f func() error) error {
	return onLockedThread(func() error {
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns %s: %w", ns.Name, err)
		}
		return f()
	})
}

// onLockedThread runs f on a locked OS thread and puts the thread back in
// its network namespace; if that fails the thread stays locked and dies
// with the goroutine rather than serve others from the wrong namespace.
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
			errc <- errors.Join(ferr, fmt.Errorf("back to the original netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Veth joins a and b with a veth pair, aName in a and bName in b, gives
// each end its address (a prefix such as "198.51.100.1/24"; "" for none,
// as a DHCP client's end starts) and brings both up. Needs module veth.
func Veth(a *NS, aName, aAddr string, b *NS, bName, bAddr string) error {
	if err := a.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName}); err != nil {
		return fmt.Errorf("netns: veth %s-%s: %w%s", aName, bName, err, vethHint(err))
	}
	peer, err := a.nl.LinkByName(bName)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	if err := a.nl.LinkSetNsFd(peer, b.fd); err != nil {
		return fmt.Errorf("netns: moving %s to %s: %w", bName, b.Name, err)
	}
	for _, end := range []struct {
		ns         *NS
		name, addr string
	}{{a, aName, aAddr}, {b, bName, bAddr}} {
		if end.addr != "" {
			if err := end.ns.AddAddr(end.name, end.addr); err != nil {
				return err
			}
		}
		l, err := end.ns.nl.LinkByName(end.name)
		if err != nil {
			return fmt.Errorf("netns: %s in %s: %w", end.name, end.ns.Name, err)
		}
		if err := end.ns.nl.LinkSetUp(l); err != nil {
			return fmt.Errorf("netns: %s in %s up: %w", end.name, end.ns.Name, err)
		}
	}
	return nil
}

// vethHint names the module a refused veth most likely lacks.
func vethHint(err error) string {
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOENT) {
		return " (kernel module veth loaded?)"
	}
	return ""
}

// AddAddr gives the interface ifname in ns an address (a prefix such as
// "10.1.0.1/32").
func (ns *NS) AddAddr(ifname, addr string) error {
	l, err := ns.nl.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("netns: %s in %s: %w", ifname, ns.Name, err)
	}
	a, err := netlink.ParseAddr(addr)
	if err != nil {
		return fmt.Errorf("netns: address %q: %w", addr, err)
	}
	if err := ns.nl.AddrAdd(l, a); err != nil {
		return fmt.Errorf("netns: %s: %s %s: %w", ns.Name, ifname, addr, err)
	}
	return nil
}

// Route adds a route in ns: to dst ("default" or a prefix) via gw, with
// src as the preferred source address when valid.
func (ns *NS) Route(dst string, gw, src netip.Addr) error {
	r := &netlink.Route{Gw: gw.AsSlice()}
	if src.IsValid() {
		r.Src = src.AsSlice()
	}
	if dst != "default" {
		p, err := netip.ParsePrefix(dst)
		if err != nil {
			return fmt.Errorf("netns: route %q: %w", dst, err)
		}
		r.Dst = &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
	}
	if err := ns.nl.RouteAdd(r); err != nil {
		return fmt.Errorf("netns: %s: route %s via %s: %w", ns.Name, dst, gw, err)
	}
	return nil
}

// Sysctl writes a /proc/sys file (path relative to /proc/sys, e.g.
// "net/ipv4/ip_forward") inside ns: the net/ part is per namespace.
func (ns *NS) Sysctl(path, val string) error {
	err := ns.Do(func() error { return os.WriteFile("/proc/sys/"+path, []byte(val), 0o644) })
	if err != nil {
		return fmt.Errorf("netns: %s: %s=%s: %w", ns.Name, path, val, err)
	}
	return nil
}

// Settle waits until every IPv6 address in ns is usable: past duplicate
// address detection (not tentative; a failed one is an error) and with
// its local route, which the kernel adds from its DAD work after clearing
// the flag. Until then a bind to the address fails ("cannot assign
// requested address") and a packet to it is lost; with accept_dad 0 the
// wait is short but not nil, as an address added to an interface whose
// carrier the kernel has not yet seen stays tentative until it has.
func (ns *NS) Settle(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pending, err := ns.unsettled()
		if err != nil || pending == "" {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns %s: %s after %v", ns.Name, pending, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unsettled names the first IPv6 address in ns not yet usable, or "".
func (ns *NS) unsettled() (string, error) {
	addrs, err := ns.nl.AddrList(nil, netlink.FAMILY_V6)
	if err != nil {
		return "", fmt.Errorf("netns %s: addresses: %w", ns.Name, err)
	}
	for _, a := range addrs {
		switch {
		case a.Flags&unix.IFA_F_DADFAILED != 0:
			return "", fmt.Errorf("netns %s: %v failed duplicate address detection", ns.Name, a.IP)
		case a.Flags&unix.IFA_F_TENTATIVE != 0:
			return fmt.Sprintf("%v still tentative", a.IP), nil
		}
		rs, err := ns.nl.RouteListFiltered(netlink.FAMILY_V6,
			&netlink.Route{Table: unix.RT_TABLE_LOCAL, Dst: &net.IPNet{IP: a.IP, Mask: net.CIDRMask(128, 128)}},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
		if err != nil {
			return "", fmt.Errorf("netns %s: routes: %w", ns.Name, err)
		}
		if len(rs) == 0 {
			return fmt.Sprintf("no local route for %v", a.IP), nil
		}
	}
	return "", nil
}
