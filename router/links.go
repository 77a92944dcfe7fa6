package router

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/router/firewall"
)

// LANBridge is the bridge's interface name when a site puts several
// ports on the LAN.
const LANBridge = "lan"

// links configures interfaces with netlink. Only the ROUTE family: the
// library's default handle also opens a netfilter socket, which fails
// until nfnetlink is loaded.
type links struct {
	h *netlink.Handle
}

func newLinks() (*links, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return &links{h: h}, nil
}

// wait returns once every named interface exists, or says which are
// missing after timeout: NIC drivers probe in the background.
func (l *links) wait(names []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		for _, n := range names {
			if _, err := l.h.LinkByName(n); err != nil {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no interface %v after %v (is the NIC driver loaded, its firmware present?)", missing, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (l *links) up(name string, mtu int) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	if mtu > 0 && ln.Attrs().MTU != mtu {
		if err := l.h.LinkSetMTU(ln, mtu); err != nil {
			return fmt.Errorf("%s: MTU %d: %w", name, mtu, err)
		}
	}
	if err := l.h.LinkSetUp(ln); err != nil {
		return fmt.Errorf("%s up: %w", name, err)
	}
	return nil
}

// bridge makes (or reuses) a bridge holding ports and brings it up.
func (l *links) bridge(name string, ports []string, mtu int) error {
	br, err := l.h.LinkByName(name)
	if err != nil {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = name
		if err := l.h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
			return fmt.Errorf("bridge %s: %w (is the bridge module loaded?)", name, err)
		}
		if br, err = l.h.LinkByName(name); err != nil {
			return err
		}
	}
	for _, p := range ports {
		ln, err := l.h.LinkByName(p)
		if err != nil {
			return err
		}
		if err := l.h.LinkSetMaster(ln, br); err != nil {
			return fmt.Errorf("%s into bridge %s: %w", p, name, err)
		}
		if err := l.up(p, mtu); err != nil {
			return err
		}
	}
	return l.up(name, mtu)
}

// setAddr gives name exactly the address p (replacing others of ours).
func (l *links) setAddr(name string, p netip.Prefix) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	old, err := l.h.AddrList(ln, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	keep := false
	for _, a := range old {
		ap, _ := netip.AddrFromSlice(a.IP.To4())
		ones, _ := a.Mask.Size()
		if netip.PrefixFrom(ap, ones) == p {
			keep = true
			continue
		}
		if err := l.h.AddrDel(ln, &a); err != nil {
			return fmt.Errorf("%s: removing %v: %w", name, a.IPNet, err)
		}
	}
	if keep {
		return nil
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}
	if err := l.h.AddrAdd(ln, addr); err != nil {
		return fmt.Errorf("%s: address %s: %w", name, p, err)
	}
	return nil
}

// defaultRoute points the default route at gw through name.
func (l *links) defaultRoute(name string, gw netip.Addr) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	r := &netlink.Route{LinkIndex: ln.Attrs().Index, Gw: gw.AsSlice(), Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}
	if err := l.h.RouteReplace(r); err != nil {
		return fmt.Errorf("default route via %s on %s: %w", gw, name, err)
	}
	return nil
}

// routeTo points a route out of name (a tunnel's remote subnet).
func (l *links) routeTo(name string, rt route) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	nr := &netlink.Route{LinkIndex: ln.Attrs().Index, Gw: rt.Via.AsSlice(),
		Dst: &net.IPNet{IP: rt.Dst.Addr().AsSlice(), Mask: net.CIDRMask(rt.Dst.Bits(), rt.Dst.Addr().BitLen())}}
	if rt.Src.IsValid() {
		nr.Src = rt.Src.AsSlice()
	}
	if err := l.h.RouteReplace(nr); err != nil {
		return fmt.Errorf("route %s on %s: %w", rt, name, err)
	}
	return nil
}

// addrs lists name's IPv4 addresses.
func (l *links) addrs(name string) []netip.Prefix {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return nil
	}
	as, _ := l.h.AddrList(ln, netlink.FAMILY_V4)
	var out []netip.Prefix
	for _, a := range as {
		ip, _ := netip.AddrFromSlice(a.IP.To4())
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip, ones))
	}
	return out
}

// LinkState is one interface for the status.
type LinkState struct {
	Name    string   `json:"name"`
	Up      bool     `json:"up"`
	Carrier bool     `json:"carrier"`
	MAC     string   `json:"mac"`
	MTU     int      `json:"mtu"`
	Addrs   []string `json:"addrs,omitempty"`
	RxBytes uint64   `json:"rx_bytes"`
	TxBytes uint64   `json:"tx_bytes"`
}

func (l *links) state(name string) (LinkState, error) {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return LinkState{Name: name}, err
	}
	a := ln.Attrs()
	st := LinkState{Name: name, Up: a.Flags&net.FlagUp != 0, Carrier: a.OperState == netlink.OperUp, MAC: a.HardwareAddr.String(), MTU: a.MTU}
	if a.Statistics != nil {
		st.RxBytes, st.TxBytes = a.Statistics.RxBytes, a.Statistics.TxBytes
	}
	for _, p := range l.addrs(name) {
		st.Addrs = append(st.Addrs, p.String())
	}
	// Then the IPv6 ones but link-local (every interface has one).
	as, _ := l.h.AddrList(ln, netlink.FAMILY_V6)
	for _, a := range as {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		ones, _ := a.Mask.Size()
		st.Addrs = append(st.Addrs, fmt.Sprintf("%s/%d", a.IP, ones))
	}
	return st, nil
}

// enableForwarding turns on reverse-path filtering on ifaces
// (firewall.ReversePathSysctls: the kernel drops packets from sources
// that belong to another interface) and then IPv4 routing between them.
// A failed rp_filter setting is reported but does not keep forwarding
// off: the firewall's antispoof and LAN-address rules hold without it.
func enableForwarding(root string, ifaces ...string) error {
	var errs []error
	for _, s := range firewall.ReversePathSysctls(ifaces...) {
		if err := os.WriteFile(root+"/proc/sys/"+s.Path, []byte(s.Value+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("reverse-path filter: %w", err))
		}
	}
	err := os.WriteFile(root+"/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
	if errors.Is(err, os.ErrNotExist) {
		err = fmt.Errorf("no %s/proc/sys/net/ipv4/ip_forward: is proc mounted?", root)
	}
	return errors.Join(append(errs, err)...)
}

// clearAddr removes every IPv4 address of name (a lost DHCP lease).
func (l *links) clearAddr(name string) error {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return err
	}
	old, err := l.h.AddrList(ln, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	for _, a := range old {
		if err := l.h.AddrDel(ln, &a); err != nil {
			return err
		}
	}
	return nil
}
