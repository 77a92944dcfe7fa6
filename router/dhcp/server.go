package dhcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ocfw/ocfw/site"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ServerConfig is one LAN's DHCP server.
type ServerConfig struct {
	Interface string       // the LAN interface (its bridge when it has several ports)
	Address   netip.Prefix // the router's LAN address and prefix: server identifier and subnet mask
	Router    netip.Addr   // the default gateway handed out
	DNS       []netip.Addr // the DNS servers handed out
	Domain    string       // the LAN's domain (option 15); "" sends none
	MTU       int          // the LAN's interface MTU (option 26); 0 sends none
	NTP       []netip.Addr // time servers (option 42); none sends none
	Pool      PoolConfig
	// Store keeps leases across reboots; nil keeps them in memory only.
	Store LeaseStore
	// Log gets one line per new or changed lease, NAK, release, decline
	// and store error; nil discards them.
	Log func(format string, args ...any)
}

// ServerConfigFromSite is the LAN DHCP server the site asks for on iface.
// The router, DNS server and the address reserved from the range default
// to the router's LAN address.
func ServerConfigFromSite(sc *site.Site, iface string) (ServerConfig, error) {
	d := sc.LAN.DHCP
	if len(d.Range) == 0 {
		return ServerConfig{}, errors.New("dhcp: the site has no LAN DHCP range: the server is off")
	}
	if len(d.Range) != 2 {
		return ServerConfig{}, fmt.Errorf("dhcp: range %v: want [first, last]", d.Range)
	}
	addr, err := sc.LAN.Address.Prefix()
	if err != nil {
		return ServerConfig{}, fmt.Errorf("dhcp: LAN address %w", err)
	}
	parse := func(what, s string) (netip.Addr, error) {
		a, err := netip.ParseAddr(s)
		if err != nil || !site.IsHostAddr(addr, a) {
			return netip.Addr{}, fmt.Errorf("dhcp: %s %q: want a host's IPv4 address in %s (not its network or broadcast address)", what, s, addr.Masked())
		}
		return a, nil
	}
	cfg := ServerConfig{Interface: iface, Address: addr, Router: addr.Addr(), DNS: []netip.Addr{addr.Addr()},
		Domain: sc.LAN.LocalDomain(), MTU: sc.LAN.MTU}
	if cfg.Pool.First, err = parse("range start", d.Range[0]); err != nil {
		return ServerConfig{}, err
	}
	if cfg.Pool.Last, err = parse("range end", d.Range[1]); err != nil {
		return ServerConfig{}, err
	}
	if d.Router != "" {
		if cfg.Router, err = parse("router", d.Router); err != nil {
			return ServerConfig{}, err
		}
	}
	if len(d.DNS) > 0 {
		cfg.DNS = nil
		for _, s := range d.DNS {
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is4() {
				return ServerConfig{}, fmt.Errorf("dhcp: DNS server %q: want an IPv4 address", s)
			}
			cfg.DNS = append(cfg.DNS, a)
		}
	}
	cfg.Pool.LeaseTime = d.LeaseTime()
	cfg.Pool.Reserved = []netip.Addr{addr.Addr()}
	cfg.Pool.Static = map[string]netip.Addr{}
	for _, st := range d.Static {
		a, err := parse("static lease for "+st.MAC, st.IP)
		if err != nil {
			return ServerConfig{}, err
		}
		cfg.Pool.Static[st.MAC] = a
	}
	return cfg, nil
}

// Server answers DHCP on one interface. Its pool is consulted and changed
// under a lock, one message at a time.
//
// Store writes: the whole lease list is saved when a client gets a new
// lease or another address, its host name changes, it takes a lease up
// again after releasing it, releases it, or declines an address it held;
// renewals that change nothing but the expiry are not written. A LAN
// whose clients stay put therefore costs no writes at all in steady
// state, and one write per new client. The price: after a reboot the
// stored expiry is stale, so Load holds every stored lease a full lease
// time (see Pool.Load).
type Server struct {
	cfg  ServerConfig
	now  func() time.Time
	mu   sync.Mutex
	pool *Pool
	// neighbour points the kernel's neighbour entry for an address at a
	// hardware address before a unicast reply (set by Serve).
	neighbour func(ip net.IP, hw net.HardwareAddr) error
}

// NewServer makes the pool and loads the stored leases. A store that
// cannot be read is logged and the server starts empty: clients asking
// for their old addresses still get them when free.
func NewServer(cfg ServerConfig) (*Server, error) {
	if !cfg.Address.IsValid() || !cfg.Address.Addr().Is4() {
		return nil, fmt.Errorf("dhcp: server address %v: want the router's IPv4 address with its prefix", cfg.Address)
	}
	for _, a := range []netip.Addr{cfg.Pool.First, cfg.Pool.Last} {
		if !cfg.Address.Masked().Contains(a) {
			return nil, fmt.Errorf("dhcp: range %v-%v is not inside %s", cfg.Pool.First, cfg.Pool.Last, cfg.Address.Masked())
		}
	}
	res := append([]netip.Addr(nil), cfg.Pool.Reserved...)
	cfg.Pool.Reserved = append(res, cfg.Address.Addr())
	pool, err := NewPool(cfg.Pool)
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	s := &Server{cfg: cfg, now: time.Now, pool: pool}
	if cfg.Store != nil {
		leases, err := cfg.Store.Load()
		if err != nil {
			cfg.Log("dhcp: reading stored leases: %v; starting without them", err)
		}
		pool.Load(leases, s.now())
	}
	return s, nil
}

// Leases are the leases in use, static ones included, for the status
// page.
func (s *Server) Leases() []Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pool.Active(s.now())
}

// Serve answers on the interface until ctx ends; it then returns
// ctx.Err(). The interface must be up with its address. Messages are
// handled one after another with one buffer: a LAN's DHCP traffic is a
// few messages a minute, and a flood must not grow goroutines and
// buffers (server4's Serve starts one goroutine per message).
func (s *Server) Serve(ctx context.Context) error {
	if err := waitEntropy(ctx); err != nil {
		return err
	}
	conn, err := server4.NewIPv4UDPConn(s.cfg.Interface, &net.UDPAddr{Port: dhcpv4.ServerPort})
	if err != nil {
		return fmt.Errorf("dhcp: listening on %s: %w", s.cfg.Interface, err)
	}
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		conn.Close()
		return fmt.Errorf("dhcp: netlink: %w", err)
	}
	defer nl.Close()
	link, err := nl.LinkByName(s.cfg.Interface)
	if err != nil {
		conn.Close()
		return fmt.Errorf("dhcp: %s: %w", s.cfg.Interface, err)
	}
	idx := link.Attrs().Index
	s.neighbour = func(ip net.IP, hw net.HardwareAddr) error {
		return nl.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_INET,
			State: netlink.NUD_REACHABLE, IP: ip, HardwareAddr: hw})
	}
	return s.serve(ctx, conn)
}

func (s *Server) serve(ctx context.Context, conn net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	buf := make([]byte, 1500) // a DHCP message in one Ethernet frame
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("dhcp: reading on %s: %w", s.cfg.Interface, err)
		}
		req, err := dhcpv4.FromBytes(buf[:n])
		if err != nil {
			continue
		}
		peer, _ := from.(*net.UDPAddr)
		reply, dst := s.handle(req, peer)
		if reply == nil {
			continue
		}
		// A unicast ACK goes to the client's hardware address, not to
		// whoever the kernel's neighbour table last saw on the address
		// (its previous owner, or a host that answered ARP for it): the
		// entry is set from chaddr first. Only for a lease just ACKed to
		// this very MAC, so a client cannot point another's address at
		// itself.
		if s.neighbour != nil && reply.MessageType() == dhcpv4.MessageTypeAck &&
			!dst.IP.Equal(net.IPv4bcast) && dst.IP.Equal(reply.YourIPAddr) {
			if err := s.neighbour(dst.IP, req.ClientHWAddr); err != nil {
				s.cfg.Log("dhcp: neighbour entry %s -> %s: %v", dst.IP, req.ClientHWAddr, err)
			}
		}
		if _, err := conn.WriteTo(reply.ToBytes(), dst); err != nil {
			s.cfg.Log("dhcp: sending %s to %s: %v", reply.MessageType(), dst, err)
		}
	}
}

var broadcast = &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}

// handle answers one message: the reply and where to send it, or nil.
func (s *Server) handle(req *dhcpv4.DHCPv4, peer *net.UDPAddr) (*dhcpv4.DHCPv4, *net.UDPAddr) {
	if req.OpCode != dhcpv4.OpcodeBootRequest || len(req.ClientHWAddr) != 6 {
		return nil, nil
	}
	if g := req.GatewayIPAddr; g != nil && !g.IsUnspecified() {
		return nil, nil // relayed: this server serves its own link only
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	mac := req.ClientHWAddr.String()
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		want, _ := netip.AddrFromSlice(req.RequestedIPAddress().To4())
		ip, err := s.pool.Offer(mac, want, now)
		if err != nil {
			s.cfg.Log("dhcp: no address for %s: %v", mac, err)
			return nil, nil
		}
		return s.reply(req, dhcpv4.MessageTypeOffer, ip, true), s.dest(req, peer)

	case dhcpv4.MessageTypeRequest:
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(s.serverIP()) {
			s.pool.Unoffer(mac) // it took another server's offer
			return nil, nil
		}
		// SELECTING and INIT-REBOOT name the address in option 50;
		// RENEWING and REBINDING put it in ciaddr.
		ipb := req.RequestedIPAddress()
		if ipb == nil || ipb.IsUnspecified() {
			ipb = req.ClientIPAddr
		}
		ip, ok := netip.AddrFromSlice(ipb.To4())
		if !ok || !ip.IsValid() || ip.IsUnspecified() {
			return nil, nil
		}
		name, nameOK := HostLabel(req.HostName())
		lease, res, err := s.pool.Ack(mac, ip, name, now)
		if err != nil {
			s.cfg.Log("dhcp: NAK %s for %s: %v", ip, mac, err)
			return s.nak(req), broadcast
		}
		if res != Renewed {
			dropped := ""
			if !nameOK {
				dropped = fmt.Sprintf("; host name %s dropped: not an RFC 1123 label", quoteName(req.HostName()))
			}
			s.cfg.Log("lease %s to %s (%s) for %s%s", ip, mac, hostOrDash(lease.Hostname), shortDuration(s.pool.LeaseTime()), dropped)
		}
		if res == Bound {
			s.save()
		}
		return s.reply(req, dhcpv4.MessageTypeAck, ip, true), s.dest(req, peer)

	case dhcpv4.MessageTypeRelease:
		ip, _ := netip.AddrFromSlice(req.ClientIPAddr.To4())
		if s.pool.Release(mac, ip, now) {
			s.cfg.Log("dhcp: %s released %s", mac, ip)
			s.save()
		}
		return nil, nil

	case dhcpv4.MessageTypeDecline:
		ip, _ := netip.AddrFromSlice(req.RequestedIPAddress().To4())
		s.cfg.Log("dhcp: %s declined %s: another host uses it; it rests for %s", mac, ip, shortDuration(s.pool.LeaseTime()))
		if s.pool.Decline(mac, ip, now) {
			s.save()
		}
		return nil, nil

	case dhcpv4.MessageTypeInform:
		// A host with a static address asks for the options only: the
		// ACK echoes ciaddr and has no yiaddr and no lease time (RFC
		// 2131 4.3.5; dhcpcd rejects one without its ciaddr).
		ci := req.ClientIPAddr.To4()
		if ci == nil || ci.IsUnspecified() || !s.cfg.Address.Masked().Contains(netip.AddrFrom4([4]byte(ci))) {
			return nil, nil
		}
		return s.reply(req, dhcpv4.MessageTypeAck, netip.Addr{}, false),
			&net.UDPAddr{IP: req.ClientIPAddr, Port: dhcpv4.ClientPort}
	}
	return nil, nil
}

func (s *Server) serverIP() net.IP { return net.IP(s.cfg.Address.Addr().AsSlice()) }

// dest is where a reply goes: back to the client's own address when it
// sent from one (renewing), else broadcast, since a client without an
// address cannot answer the ARP a unicast needs (RFC 2131 4.1 allows the
// broadcast).
func (s *Server) dest(req *dhcpv4.DHCPv4, peer *net.UDPAddr) *net.UDPAddr {
	ci := req.ClientIPAddr
	if peer != nil && ci != nil && !ci.IsUnspecified() && peer.IP.Equal(ci) {
		return &net.UDPAddr{IP: ci, Port: dhcpv4.ClientPort}
	}
	return broadcast
}

func (s *Server) reply(req *dhcpv4.DHCPv4, typ dhcpv4.MessageType, yiaddr netip.Addr, lease bool) *dhcpv4.DHCPv4 {
	mods := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(typ),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(s.serverIP())),
		dhcpv4.WithOption(dhcpv4.OptSubnetMask(net.CIDRMask(s.cfg.Address.Bits(), 32))),
	}
	if yiaddr.IsValid() {
		mods = append(mods, dhcpv4.WithYourIP(yiaddr.AsSlice()))
	}
	if typ == dhcpv4.MessageTypeAck && req.ClientIPAddr != nil {
		// RFC 2131 table 3: an ACK carries the request's ciaddr.
		mods = append(mods, dhcpv4.WithClientIP(req.ClientIPAddr))
	}
	if s.cfg.Domain != "" {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptDomainName(s.cfg.Domain)))
	}
	if s.cfg.MTU > 0 {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionInterfaceMTU, binary.BigEndian.AppendUint16(nil, uint16(s.cfg.MTU))))
	}
	if len(s.cfg.NTP) > 0 {
		var ips []net.IP
		for _, a := range s.cfg.NTP {
			ips = append(ips, a.AsSlice())
		}
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptNTPServers(ips...)))
	}
	if s.cfg.Router.IsValid() {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptRouter(s.cfg.Router.AsSlice())))
	}
	if len(s.cfg.DNS) > 0 {
		var ips []net.IP
		for _, a := range s.cfg.DNS {
			ips = append(ips, a.AsSlice())
		}
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptDNS(ips...)))
	}
	if lease {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(s.pool.LeaseTime())))
	}
	r, err := dhcpv4.NewReplyFromRequest(req, mods...)
	if err != nil { // only a failing random transaction ID, which a reply does not draw
		s.cfg.Log("dhcp: building a reply: %v", err)
		return nil
	}
	return r
}

func (s *Server) nak(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	r, err := dhcpv4.NewReplyFromRequest(req,
		dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(s.serverIP())),
		dhcpv4.WithBroadcast(true))
	if err != nil {
		return nil
	}
	return r
}

func (s *Server) save() {
	if s.cfg.Store == nil {
		return
	}
	if err := s.cfg.Store.Save(s.pool.Leases()); err != nil {
		s.cfg.Log("dhcp: storing leases: %v", err)
	}
}

func hostOrDash(h string) string {
	if h == "" {
		return "-"
	}
	return h
}

// shortDuration prints 12h rather than 12h0m0s.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
