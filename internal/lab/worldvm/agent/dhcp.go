package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/vishvananda/netlink"
)

// pool is the DHCP server's allocator: addresses first..last, one per
// MAC, an offer held for offerHold, a lease for its lease time. Test
// use only: no persistence, no conflict detection.
type pool struct {
	first, last uint32
	lease       time.Duration

	mu     sync.Mutex
	byMAC  map[string]*poolLease
	now    func() time.Time
	events func(format string, args ...any)
}

type poolLease struct {
	mac     string
	ip      uint32
	acked   bool
	expires time.Time
}

const offerHold = 30 * time.Second

func newPool(first, last net.IP, lease time.Duration) (*pool, error) {
	f, l := ip4(first), ip4(last)
	if first.To4() == nil || last.To4() == nil || f > l {
		return nil, fmt.Errorf("range %s..%s: want two IPv4 addresses, first <= last", first, last)
	}
	return &pool{first: f, last: l, lease: lease, byMAC: map[string]*poolLease{}, now: time.Now,
		events: func(string, ...any) {}}, nil
}

func ip4(ip net.IP) uint32 {
	if v4 := ip.To4(); v4 != nil {
		return binary.BigEndian.Uint32(v4)
	}
	return 0
}

func ipFrom(v uint32) net.IP {
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, v)
	return ip
}

// holder returns the MAC holding ip now, or "".
func (p *pool) holder(ip uint32) string {
	now := p.now()
	for _, l := range p.byMAC {
		if l.ip == ip && now.Before(l.expires) {
			return l.mac
		}
	}
	return ""
}

// offer picks mac's address: the one it has, else the lowest free one.
func (p *pool) offer(mac string) (net.IP, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.byMAC[mac]; ok && p.holder(l.ip) == mac {
		if !l.acked {
			l.expires = p.now().Add(offerHold)
		}
		return ipFrom(l.ip), true
	}
	for ip := p.first; ip <= p.last && ip >= p.first; ip++ {
		if p.holder(ip) == "" {
			p.byMAC[mac] = &poolLease{mac: mac, ip: ip, expires: p.now().Add(offerHold)}
			return ipFrom(ip), true
		}
	}
	return nil, false
}

// request leases ip to mac if it is in the range and nobody else holds it.
func (p *pool) request(mac string, ip net.IP) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := ip4(ip)
	if ip.To4() == nil || v < p.first || v > p.last {
		return false
	}
	if h := p.holder(v); h != "" && h != mac {
		return false
	}
	p.byMAC[mac] = &poolLease{mac: mac, ip: v, acked: true, expires: p.now().Add(p.lease)}
	return true
}

func (p *pool) release(mac string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byMAC, mac)
}

// list is one line per lease held now, by address.
func (p *pool) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ls []*poolLease
	for _, l := range p.byMAC {
		if p.now().Before(l.expires) {
			ls = append(ls, l)
		}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].ip < ls[j].ip })
	var lines []string
	for _, l := range ls {
		state := "offered"
		if l.acked {
			state = "acked"
		}
		lines = append(lines, fmt.Sprintf("%s %s %s", l.mac, ipFrom(l.ip), state))
	}
	return lines
}

// dhcpServer answers DISCOVER, REQUEST and RELEASE on one interface.
type dhcpServer struct {
	pool       *pool
	serverIP   net.IP
	mask       net.IPMask
	router     net.IP // nil: no option
	dns        net.IP // nil: no option
	leaseTime  time.Duration
	event      func(format string, args ...any)
	ifname, ns string
}

func (s *dhcpServer) reply(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	mac := req.ClientHWAddr.String()
	mods := []dhcpv4.Modifier{dhcpv4.WithServerIP(s.serverIP), dhcpv4.WithOption(dhcpv4.OptServerIdentifier(s.serverIP))}
	lease := func(t dhcpv4.MessageType, ip net.IP) []dhcpv4.Modifier {
		m := append(mods, dhcpv4.WithMessageType(t), dhcpv4.WithYourIP(ip), dhcpv4.WithNetmask(s.mask),
			dhcpv4.WithLeaseTime(uint32(s.leaseTime/time.Second)))
		if s.router != nil {
			m = append(m, dhcpv4.WithRouter(s.router))
		}
		if s.dns != nil {
			m = append(m, dhcpv4.WithDNS(s.dns))
		}
		return m
	}
	var m []dhcpv4.Modifier
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		ip, ok := s.pool.offer(mac)
		if !ok {
			s.event("dhcp %s pool exhausted, no offer to %s", s.ifname, mac)
			return nil
		}
		s.event("dhcp %s offer %s %s", s.ifname, mac, ip)
		m = lease(dhcpv4.MessageTypeOffer, ip)
	case dhcpv4.MessageTypeRequest:
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(s.serverIP) {
			s.pool.release(mac) // it chose another server
			return nil
		}
		ip := req.RequestedIPAddress()
		if ip == nil || ip.IsUnspecified() {
			ip = req.ClientIPAddr // renewing
		}
		if !s.pool.request(mac, ip) {
			s.event("dhcp %s nak %s %s", s.ifname, mac, ip)
			m = append(mods, dhcpv4.WithMessageType(dhcpv4.MessageTypeNak))
			break
		}
		s.event("dhcp %s ack %s %s", s.ifname, mac, ip)
		m = lease(dhcpv4.MessageTypeAck, ip)
	case dhcpv4.MessageTypeRelease:
		s.pool.release(mac)
		s.event("dhcp %s release %s %s", s.ifname, mac, req.ClientIPAddr)
		return nil
	default:
		return nil
	}
	resp, err := dhcpv4.NewReplyFromRequest(req, m...)
	if err != nil {
		s.event("dhcp %s: building the reply: %v", s.ifname, err)
		return nil
	}
	return resp
}

func (s *dhcpServer) handle(conn net.PacketConn, peer net.Addr, req *dhcpv4.DHCPv4) {
	if req.OpCode != dhcpv4.OpcodeBootRequest {
		return
	}
	resp := s.reply(req)
	if resp == nil {
		return
	}
	// server4 turns a peer without an address into the broadcast address.
	if _, err := conn.WriteTo(resp.ToBytes(), peer); err != nil {
		s.event("dhcp %s: sending to %s: %v", s.ifname, peer, err)
	}
}

func parseOptIP(s, what string) (net.IP, error) {
	if s == "-" {
		return nil, nil
	}
	ip := net.ParseIP(s).To4()
	if ip == nil {
		return nil, kinded("usage", fmt.Errorf("%s %q: want an IPv4 address or -", what, s))
	}
	return ip, nil
}

func cmdDHCPServer(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	ifname := args[1]
	router, err := parseOptIP(args[4], "router")
	if err != nil {
		return "", err
	}
	dns, err := parseOptIP(args[5], "DNS server")
	if err != nil {
		return "", err
	}
	lease, err := time.ParseDuration(args[6])
	if err != nil || lease < time.Minute {
		return "", kinded("usage", fmt.Errorf("lease %q: want a duration of a minute or more, like 10m", args[6]))
	}
	p, err := newPool(net.ParseIP(args[2]), net.ParseIP(args[3]), lease)
	if err != nil {
		return "", kinded("usage", err)
	}
	own, err := n.ifaceAddr(ifname)
	if err != nil {
		return "", err
	}
	if !own.Contains(ipFrom(p.first)) || !own.Contains(ipFrom(p.last)) {
		return "", kinded("usage", fmt.Errorf("range %s..%s is not in %s's subnet %s", args[2], args[3], ifname, own))
	}
	if v := ip4(own.IP); v >= p.first && v <= p.last {
		return "", kinded("usage", fmt.Errorf("range %s..%s holds the server's own %s", args[2], args[3], own.IP))
	}
	s := &dhcpServer{pool: p, serverIP: own.IP.To4(), mask: own.Mask, router: router, dns: dns,
		leaseTime: lease, event: n.event, ifname: ifname, ns: n.name}
	p.events = n.event
	var srv *server4.Server
	if err := n.run(func() (err error) {
		srv, err = server4.NewServer(ifname, nil, s.handle)
		return err
	}); err != nil {
		return "", err
	}
	if err := n.addService("dhcp-server:"+ifname, srv); err != nil {
		return "", err
	}
	n.mu.Lock()
	n.dhcp = s
	n.mu.Unlock()
	go srv.Serve()
	return fmt.Sprintf("dhcp-server on %s (%s): %s..%s router %s dns %s lease %v", ifname, own.IP, args[2], args[3], args[4], args[5], lease), nil
}

func cmdLeases(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	s := n.dhcp
	n.mu.Unlock()
	if s == nil {
		return "", fmt.Errorf("no dhcp-server runs in %s", n.name)
	}
	return strings.Join(s.pool.list(), "\n"), nil
}

func cmdDHCPClient(ctx context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	ifname := args[1]
	if err := n.setUp(ctx, ifname); err != nil {
		return "", err
	}
	var c *nclient4.Client
	if err := n.run(func() (err error) {
		c, err = nclient4.New(ifname, nclient4.WithTimeout(3*time.Second), nclient4.WithRetry(10))
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	lease, err := c.Request(ctx)
	if err != nil {
		if errors.Is(err, nclient4.ErrNoResponse) || ctx.Err() != nil {
			return "", kinded("timeout", fmt.Errorf("no DHCP lease on %s: %w", ifname, err))
		}
		return "", err
	}
	ack := lease.ACK
	mask := ack.SubnetMask()
	if mask == nil {
		mask = ack.YourIPAddr.DefaultMask()
	}
	addr := &net.IPNet{IP: ack.YourIPAddr.To4(), Mask: mask}
	l, err := n.link(ifname)
	if err != nil {
		return "", err
	}
	if err := n.nl.AddrReplace(l, &netlink.Addr{IPNet: addr}); err != nil {
		return "", fmt.Errorf("adding %s to %s: %w", addr, ifname, err)
	}
	router, dns := "-", "-"
	if rs := ack.Router(); len(rs) > 0 {
		router = rs[0].String()
		if err := n.nl.RouteReplace(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: rs[0]}); err != nil {
			return "", fmt.Errorf("default route via %s: %w", rs[0], err)
		}
	}
	if ds := ack.DNS(); len(ds) > 0 {
		dns = ds[0].String()
		n.mu.Lock()
		n.dns = ds[0]
		n.mu.Unlock()
	}
	return fmt.Sprintf("addr %s router %s dns %s server %s lease %v", addr, router, dns,
		ack.ServerIdentifier(), ack.IPAddressLeaseTime(0)), nil
}
