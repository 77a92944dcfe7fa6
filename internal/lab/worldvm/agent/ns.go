package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netNS is a network namespace and what runs in it.
type netNS struct {
	name string
	fd   int             // the namespace, open for setns
	nl   *netlink.Handle // route netlink, bound to the namespace

	mu       sync.Mutex
	dns      net.IP               // learned by dhcp-client
	services map[string]io.Closer // running servers by "kind:detail"
	dhcp     *dhcpServer
	events   []string
}

const maxEvents = 1000

func (n *netNS) event(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.events) >= maxEvents {
		n.events = n.events[1:]
	}
	n.events = append(n.events, fmt.Sprintf(format, args...))
}

// addService registers a running server; a second of the same key is
// refused.
func (n *netNS) addService(key string, c io.Closer) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.services[key]; ok {
		c.Close()
		return fmt.Errorf("%s already runs in %s", key, n.name)
	}
	n.services[key] = c
	return nil
}

// run calls f on an OS thread that has entered the namespace. Sockets
// and netlink handles f opens belong to the namespace for their whole
// life, whichever thread uses them afterwards. The thread is never
// unlocked, so it ends with f's goroutine instead of going back to
// Go's pool inside another namespace.
func (n *netNS) run(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering namespace %s: %w", n.name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

func rootNS() (*netNS, error) {
	fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the root network namespace: %w", err)
	}
	// Only route netlink: the default handle also wants netfilter's,
	// which needs nfnetlink loaded.
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	n := &netNS{name: "root", fd: fd, nl: h, services: map[string]io.Closer{}}
	if err := n.setUp(context.Background(), "lo"); err != nil {
		return nil, err
	}
	return n, nil
}

// newNS makes a network namespace: unshare on a locked thread, keep an
// fd of it and a netlink handle into it, lo up.
func newNS(name string) (*netNS, error) {
	type result struct {
		n   *netNS
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread dies in the new namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			c <- result{err: fmt.Errorf("unshare: %w", err)}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			c <- result{err: err}
			return
		}
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			unix.Close(fd)
			c <- result{err: fmt.Errorf("netlink: %w", err)}
			return
		}
		c <- result{n: &netNS{name: name, fd: fd, nl: h, services: map[string]io.Closer{}}}
	}()
	r := <-c
	if r.err != nil {
		return nil, r.err
	}
	if err := r.n.setUp(context.Background(), "lo"); err != nil {
		return nil, err
	}
	return r.n, nil
}

func (a *agent) ns(name string) (*netNS, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.nss[name]
	if !ok {
		var names []string
		for k := range a.nss {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, kinded("no-ns", fmt.Errorf("no namespace %q (have %s; make one with ns)", name, strings.Join(names, " ")))
	}
	return n, nil
}

var nsName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,15}$`)

func cmdNS(_ context.Context, a *agent, args []string) (string, error) {
	name := args[0]
	if !nsName.MatchString(name) {
		return "", kinded("usage", fmt.Errorf("namespace name %q: want lower-case letters, digits, dashes", name))
	}
	a.mu.Lock()
	n, ok := a.nss[name]
	root := a.nss["root"]
	a.mu.Unlock()
	made := ""
	if !ok {
		var err error
		if n, err = newNS(name); err != nil {
			return "", err
		}
		a.mu.Lock()
		a.nss[name] = n
		a.mu.Unlock()
		made = " (new)"
	}
	if n == root && len(args) > 1 {
		return "", kinded("usage", errors.New("links move from the root namespace into another, not back"))
	}
	for _, ifname := range args[1:] {
		link, err := root.nl.LinkByName(ifname)
		if err != nil {
			return "", fmt.Errorf("%s is not in the root namespace: %w", ifname, err)
		}
		if err := root.nl.LinkSetNsFd(link, n.fd); err != nil {
			return "", fmt.Errorf("moving %s into %s: %w", ifname, name, err)
		}
	}
	return strings.TrimSpace(fmt.Sprintf("%s%s %s", name, made, strings.Join(args[1:], " "))), nil
}

func (n *netNS) link(ifname string) (netlink.Link, error) {
	l, err := n.nl.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("no link %s in namespace %s: %w", ifname, n.name, err)
	}
	return l, nil
}

func cmdAddr(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	l, err := n.link(args[1])
	if err != nil {
		return "", err
	}
	addr, err := netlink.ParseAddr(args[2])
	if err != nil {
		return "", kinded("usage", fmt.Errorf("address %q: want a CIDR like 10.0.0.1/24 or 2001:db8::1/64", args[2]))
	}
	if addr.IP.To4() == nil {
		// A v6 address set by hand is usable at once, as a static
		// server's is: no duplicate address detection to wait for.
		addr.Flags |= unix.IFA_F_NODAD
	}
	if err := n.nl.AddrAdd(l, addr); err != nil {
		return "", fmt.Errorf("adding %s to %s: %w", args[2], args[1], err)
	}
	return args[1] + " " + args[2], nil
}

func cmdUp(ctx context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := n.setUp(ctx, args[1]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s up, carrier after %v", args[1], time.Since(start).Round(10*time.Millisecond)), nil
}

// setUp sets the link up and waits for the kernel to see a carrier, so
// the next command's packets are not dropped (e1000 reports its link a
// moment after it is opened).
func (n *netNS) setUp(ctx context.Context, ifname string) error {
	l, err := n.link(ifname)
	if err != nil {
		return err
	}
	if err := n.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("setting %s up: %w", ifname, err)
	}
	for {
		l, err := n.link(ifname)
		if err != nil {
			return err
		}
		if l.Attrs().RawFlags&unix.IFF_RUNNING != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return kinded("timeout", fmt.Errorf("%s has no carrier (operstate %s)", ifname, l.Attrs().OperState))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func cmdRoute(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	r := &netlink.Route{}
	v6 := false
	if args[1] != "default" {
		_, dst, err := net.ParseCIDR(args[1])
		if err != nil {
			return "", kinded("usage", fmt.Errorf("route %q: want default or a CIDR", args[1]))
		}
		r.Dst, v6 = dst, dst.IP.To4() == nil
	}
	// GW is an address of the destination's family (a link-local v6 one
	// names its interface as a zone: fe80::1%eth0; with default, the
	// gateway's family decides), or dev:IF for a route onto a link
	// without a gateway (an IPv6 network through an IPsec tunnel over
	// IPv4, as the router's tunnel routes).
	if dev, ok := strings.CutPrefix(args[2], "dev:"); ok {
		l, err := n.link(dev)
		if err != nil {
			return "", err
		}
		r.LinkIndex = l.Attrs().Index
	} else {
		gw, err := netip.ParseAddr(args[2])
		if err == nil && gw.Is4In6() {
			gw = gw.Unmap()
		}
		if err != nil || (args[1] != "default" && gw.Is6() != v6) || (gw.Zone() != "" && !gw.Is6()) {
			return "", kinded("usage", fmt.Errorf("gateway %q: want an address of the route's family (fe80::...%%IF for a link-local one), or dev:IF", args[2]))
		}
		if args[1] == "default" && gw.Is6() {
			v6 = true
			r.Dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		if zone := gw.Zone(); zone != "" {
			l, err := n.link(zone)
			if err != nil {
				return "", err
			}
			r.LinkIndex = l.Attrs().Index
		}
		r.Gw = net.IP(gw.WithZone("").AsSlice())
	}
	// SRC: the source address connections over this route take (one of
	// the namespace's addresses), for a host with two on one link.
	if len(args) > 3 {
		src, err := netip.ParseAddr(args[3])
		if err != nil || src.Is6() != v6 {
			return "", kinded("usage", fmt.Errorf("source %q: want an address of the route's family", args[3]))
		}
		r.Src = net.IP(src.AsSlice())
	}
	if err := n.nl.RouteAdd(r); err != nil {
		return "", fmt.Errorf("adding route %s via %s: %w", args[1], args[2], err)
	}
	return args[1] + " via " + args[2], nil
}

func cmdShow(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	return n.show()
}

func (n *netNS) show() (string, error) {
	links, err := n.nl.LinkList()
	if err != nil {
		return "", err
	}
	var lines []string
	names := map[int]string{}
	for _, l := range links {
		at := l.Attrs()
		names[at.Index] = at.Name
		state := "DOWN"
		if at.Flags&net.FlagUp != 0 {
			state = "UP"
		}
		line := fmt.Sprintf("%s %s", at.Name, state)
		if len(at.HardwareAddr) > 0 {
			line += " " + at.HardwareAddr.String()
		}
		addrs, err := n.nl.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return "", err
		}
		for _, ad := range addrs {
			line += " " + ad.IPNet.String()
		}
		lines = append(lines, line)
	}
	routes, err := n.nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return "", err
	}
	for _, r := range routes {
		line := "route "
		if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
			line += "default"
		} else {
			line += r.Dst.String()
		}
		if r.Gw != nil {
			line += " via " + r.Gw.String()
		}
		line += " dev " + names[r.LinkIndex]
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n"), nil
}

func cmdEvents(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ev := n.events
	n.events = nil
	return strings.Join(ev, "\n"), nil
}

// listen opens a listener (tcp) or packet socket (udp) in the namespace.
func (n *netNS) listenTCP(addr string) (net.Listener, error) {
	var l net.Listener
	err := n.run(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

func (n *netNS) listenUDP(addr string) (net.PacketConn, error) {
	return n.listenUDPNet("udp4", addr)
}

// listenUDPNet is listenUDP on network udp4 or udp6.
func (n *netNS) listenUDPNet(network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := n.run(func() (err error) {
		c, err = net.ListenPacket(network, addr)
		return err
	})
	return c, err
}

// dial connects from the namespace; only IP literals (the world has no
// resolver).
func (n *netNS) dial(ctx context.Context, network, hostport string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil || net.ParseIP(host) == nil {
		return nil, kinded("usage", fmt.Errorf("%q: want IP:PORT", hostport))
	}
	network = familyFor(network, net.ParseIP(host))
	var c net.Conn
	err = n.run(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, hostport)
		return err
	})
	if err != nil {
		return nil, kinded(netKind(err, "failed"), err)
	}
	return c, nil
}

var errNoAddr = errors.New("no IPv4 address")

// ifaceAddr is the first IPv4 address of the link.
func (n *netNS) ifaceAddr(ifname string) (*net.IPNet, error) {
	l, err := n.link(ifname)
	if err != nil {
		return nil, err
	}
	addrs, err := n.nl.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s in %s: %w: give it one with addr first", ifname, n.name, errNoAddr)
	}
	return addrs[0].IPNet, nil
}

// familyFor turns the commands' "tcp4"/"udp4" into "tcp6"/"udp6" for an
// IPv6 literal: the commands name v4 so that nothing goes v6 by surprise,
// and an address written in v6 asks for v6 itself.
func familyFor(network string, ip net.IP) string {
	if ip == nil || ip.To4() != nil || !strings.HasSuffix(network, "4") {
		return network
	}
	return strings.TrimSuffix(network, "4") + "6"
}

func cmdShow6(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	return n.show6()
}

// show6 lists the namespace's IPv6 addresses other than link-local and
// loopback ones ("IF ADDR/LEN [deprecated|tentative]") and its IPv6
// routes ("route6 DST [via GW] dev IF"), the view a LAN host's SLAAC
// gives; show stays v4 only, as the tests that read it expect.
func (n *netNS) show6() (string, error) {
	links, err := n.nl.LinkList()
	if err != nil {
		return "", err
	}
	var lines []string
	names := map[int]string{}
	for _, l := range links {
		at := l.Attrs()
		names[at.Index] = at.Name
		addrs, err := n.nl.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return "", err
		}
		for _, ad := range addrs {
			if ad.IP.IsLinkLocalUnicast() || ad.IP.IsLoopback() {
				continue
			}
			line := at.Name + " " + ad.IPNet.String()
			if ad.Flags&unix.IFA_F_DEPRECATED != 0 {
				line += " deprecated"
			}
			if ad.Flags&unix.IFA_F_TENTATIVE != 0 {
				line += " tentative"
			}
			lines = append(lines, line)
		}
	}
	routes, err := n.nl.RouteList(nil, netlink.FAMILY_V6)
	if err != nil {
		return "", err
	}
	for _, r := range routes {
		if r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
			continue
		}
		line := "route6 "
		if r.Dst == nil || r.Dst.String() == "::/0" {
			line += "default"
		} else {
			line += r.Dst.String()
		}
		if r.Gw != nil {
			line += " via " + r.Gw.String()
		}
		line += " dev " + names[r.LinkIndex]
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n"), nil
}
