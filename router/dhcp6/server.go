package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// allServers is All_DHCP_Relay_Agents_and_Servers (RFC 8415 7.1): where
// LAN hosts send their requests.
var allServers = net.ParseIP("ff02::1:2")

// InfoRefresh is how long hosts keep the options before asking again
// (RFC 8415 21.23's INFORMATION_REFRESH_TIME): a day is its default; a
// shorter one lets a changed resolver reach hosts within hours.
const InfoRefresh = 4 * time.Hour

// InfoConfig is the LAN server's interface and what it tells.
type InfoConfig struct {
	// Interface is the LAN's; requests from elsewhere are never seen.
	Interface string
	DNS       []netip.Addr
	Domains   []string
	// Hosts get a stateful address (IA_NA) in each of the LAN's /64s;
	// none: the server is stateless only (RFC 8415 6.1).
	Hosts []Host
	// LinkAddr is the MAC of the LAN host whose link-local address is
	// given, nil when unknown: how a client whose DUID carries no MAC
	// (DUID-EN, DUID-UUID) is matched. Nil: the kernel's neighbour
	// table, then the EUI-64 of the address (linkAddr).
	LinkAddr func(src netip.Addr) net.HardwareAddr
	Log      func(format string, args ...any)
}

// InfoStats count what the server did and ignored.
type InfoStats struct {
	Replies  uint64 // messages answered (Advertise or Reply)
	Ignored  uint64 // malformed, not for this server, or a type it does not answer
	Limited  uint64 // dropped over the rate limit (repliesPerSecond)
	Assigned uint64 // answers that gave a host its addresses
	Refused  uint64 // IAs answered with no address (NoAddrsAvail, NoBinding, NoPrefixAvail)
}

// InfoServer is the LAN's DHCPv6 server. Stateless (RFC 8415 6.1), it
// answers Information-request with the resolvers and search domains,
// what the router advertisement's O flag sends hosts to ask for. With
// Hosts it is stateful for them as well (RFC 8415 6.2, IA_NA only):
// a host whose DUID or link-layer address is a listed MAC gets its
// interface identifier in each of the LAN's /64s; every other client's
// IA is told NoAddrsAvail (SLAAC is theirs). No binding is kept: a
// host's addresses follow from its MAC and the current prefixes, so the
// server's memory does not grow with the clients it has seen.
type InfoServer struct {
	cfg  InfoConfig
	duid dhcpv6.DUID

	mu       sync.Mutex
	dns      []netip.Addr
	doms     []string
	prefixes []AddrPrefix
	stats    InfoStats
	// rate: answers sent in the second that began at rateStart.
	rate      int
	rateStart time.Time
}

// NewInfoServer makes a server for cfg; Serve runs it.
func NewInfoServer(cfg InfoConfig) (*InfoServer, error) {
	if cfg.Interface == "" {
		return nil, errors.New("dhcp6: no interface")
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	for i, h := range cfg.Hosts {
		if len(h.MAC) != 6 || !h.ID.Is6() {
			return nil, fmt.Errorf("dhcp6: host %d: want a MAC and an IPv6 interface identifier, have %v %v", i, h.MAC, h.ID)
		}
	}
	return &InfoServer{cfg: cfg, dns: cfg.DNS, doms: cfg.Domains}, nil
}

// Set replaces what the replies tell (the router's LAN addresses move
// with the delegation).
func (s *InfoServer) Set(dns []netip.Addr, domains []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dns, s.doms = append([]netip.Addr(nil), dns...), append([]string(nil), domains...)
}

// Stats returns the counters.
func (s *InfoServer) Stats() InfoStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Serve answers on the interface until ctx is done. It must run in the
// interface's network namespace.
func (s *InfoServer) Serve(ctx context.Context) error {
	ifi, err := net.InterfaceByName(s.cfg.Interface)
	if err != nil {
		return fmt.Errorf("dhcp6: %w", err)
	}
	s.duid = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: ifi.HardwareAddr}
	// Bound to the LAN's device: the same port on the WAN (where the
	// router is a client) is never answered.
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, s.cfg.Interface)
			if serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			}
		})
		return errors.Join(err, serr)
	}}
	c, err := lc.ListenPacket(ctx, "udp6", fmt.Sprintf("[::]:%d", dhcpv6.DefaultServerPort))
	if err != nil {
		return fmt.Errorf("dhcp6: server on %s: %w", s.cfg.Interface, err)
	}
	defer c.Close()
	pc := ipv6.NewPacketConn(c)
	if err := pc.JoinGroup(ifi, &net.UDPAddr{IP: allServers}); err != nil {
		return fmt.Errorf("dhcp6: joining %s on %s: %w", allServers, s.cfg.Interface, err)
	}
	if s.cfg.LinkAddr == nil && len(s.cfg.Hosts) > 0 {
		// In the interface's namespace, as Serve runs.
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("dhcp6: netlink: %w", err)
		}
		defer h.Close()
		s.cfg.LinkAddr = func(src netip.Addr) net.HardwareAddr { return linkAddr(h, ifi.Index, src) }
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("dhcp6: server on %s: %w", s.cfg.Interface, err)
		}
		var src netip.Addr
		if ua, ok := from.(*net.UDPAddr); ok {
			src, _ = netip.AddrFromSlice(ua.IP)
		}
		if !s.allow(time.Now()) {
			continue
		}
		rep := s.answer(buf[:n], src)
		if rep == nil {
			continue
		}
		if _, err := c.WriteTo(rep, from); err != nil {
			s.cfg.Log("dhcp6: reply to %v: %v", from, err)
		}
	}
}

// repliesPerSecond bounds the requests the server looks at, in all: a
// host flooding it costs a few dozen parses (and neighbour table
// lookups) a second, and real clients retransmit.
const repliesPerSecond = 20

// allow says whether a request arriving at now is looked at.
func (s *InfoServer) allow(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.rateStart) >= time.Second || now.Before(s.rateStart) {
		s.rateStart, s.rate = now, 0
	}
	if s.rate >= repliesPerSecond {
		s.stats.Limited++
		return false
	}
	s.rate++
	return true
}

// answer is the reply to one request from src (the client's link-local
// address), nil for none.
func (s *InfoServer) answer(b []byte, src netip.Addr) []byte {
	d, err := dhcpv6.FromBytes(b)
	m, ok := d.(*dhcpv6.Message)
	if err != nil || !ok {
		s.count(func(st *InfoStats) { st.Ignored++ })
		return nil
	}
	if m.Type() == dhcpv6.MessageTypeInformationRequest {
		return s.info(m)
	}
	return s.stateful(m, src)
}

// count changes the counters under the lock.
func (s *InfoServer) count(f func(*InfoStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

// addOptions adds the resolvers and search domains to rep.
func (s *InfoServer) addOptions(rep *dhcpv6.Message) {
	if len(s.dns) > 0 {
		var ips []net.IP
		for _, a := range s.dns {
			ips = append(ips, a.AsSlice())
		}
		dhcpv6.WithDNS(ips...)(rep)
	}
	if len(s.doms) > 0 {
		dhcpv6.WithDomainSearchList(s.doms...)(rep)
	}
}

// info is the reply to an Information-request, nil for none.
func (s *InfoServer) info(m *dhcpv6.Message) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	// RFC 8415 16.12: an Information-request naming another server, or
	// asking for addresses (an IA), is discarded.
	if len(m.Options.IANA()) > 0 || len(m.Options.IATA()) > 0 || len(m.Options.IAPD()) > 0 ||
		(m.Options.ServerID() != nil && !m.Options.ServerID().Equal(s.duid)) {
		s.stats.Ignored++
		return nil
	}
	rep := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: m.TransactionID}
	if cid := m.Options.ClientID(); cid != nil {
		rep.AddOption(dhcpv6.OptClientID(cid))
	}
	rep.AddOption(dhcpv6.OptServerID(s.duid))
	s.addOptions(rep)
	rep.AddOption(dhcpv6.OptInformationRefreshTime(InfoRefresh))
	s.stats.Replies++
	return rep.ToBytes()
}
