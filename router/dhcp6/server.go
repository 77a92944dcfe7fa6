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

// InfoConfig is a stateless server's interface and what it tells.
type InfoConfig struct {
	// Interface is the LAN's; requests from elsewhere are never seen.
	Interface string
	DNS       []netip.Addr
	Domains   []string
	Log       func(format string, args ...any)
}

// InfoStats count what the server did and ignored.
type InfoStats struct {
	Replies uint64 // Information-request answered
	Ignored uint64 // malformed, or another message type (no addresses here)
}

// InfoServer is a stateless DHCPv6 server (RFC 8415 6.1): it answers
// Information-request with the resolvers and search domains, what the
// router advertisement's O flag sends hosts to ask for. It gives no
// addresses and answers nothing else.
type InfoServer struct {
	cfg  InfoConfig
	duid dhcpv6.DUID

	mu    sync.Mutex
	dns   []netip.Addr
	doms  []string
	stats InfoStats
}

// NewInfoServer makes a server for cfg; Serve runs it.
func NewInfoServer(cfg InfoConfig) (*InfoServer, error) {
	if cfg.Interface == "" {
		return nil, errors.New("dhcp6: no interface")
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
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
		rep := s.answer(buf[:n])
		if rep == nil {
			continue
		}
		if _, err := c.WriteTo(rep, from); err != nil {
			s.cfg.Log("dhcp6: reply to %v: %v", from, err)
		}
	}
}

// answer is the reply to one request, nil for none.
func (s *InfoServer) answer(b []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := dhcpv6.FromBytes(b)
	m, ok := d.(*dhcpv6.Message)
	// RFC 8415 16.12: an Information-request naming another server, or
	// asking for addresses (an IA), is discarded.
	if err != nil || !ok || m.Type() != dhcpv6.MessageTypeInformationRequest ||
		len(m.Options.IANA()) > 0 || len(m.Options.IATA()) > 0 || len(m.Options.IAPD()) > 0 ||
		(m.Options.ServerID() != nil && !m.Options.ServerID().Equal(s.duid)) {
		s.stats.Ignored++
		return nil
	}
	rep := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: m.TransactionID}
	if cid := m.Options.ClientID(); cid != nil {
		rep.AddOption(dhcpv6.OptClientID(cid))
	}
	rep.AddOption(dhcpv6.OptServerID(s.duid))
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
	rep.AddOption(dhcpv6.OptInformationRefreshTime(InfoRefresh))
	s.stats.Replies++
	return rep.ToBytes()
}
