// Package dhcp6 is the WAN's DHCPv6 client (RFC 8415): a delegated
// prefix (IA_PD) for the LAN and, when asked, an address for the WAN
// itself (IA_NA), with the resolvers and search domains, or those
// alone by Information-request (Config.Info). It solicits,
// requests, renews at T1, rebinds at T2 and, when the lease runs out,
// withdraws the prefix and starts over. The lease is kept in a store, so
// a reboot asks for the same prefix again (RFC 8415 section 18.2.1's
// hint; RFC 7084 WPD-4 wants a CE router to keep it).
//
// It is board-side code: it imports no host package. The transport is
// insomniacslk/dhcp's nclient6; the messages are built here, since that
// library's Solicit and Request always carry an IA_NA and a PD-only
// exchange (the common ISP case) needs none.
package dhcp6

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"github.com/insomniacslk/dhcp/iana"
)

// Lease is what the server gave: the delegated prefix and the address,
// each with its lifetimes counted from Obtained.
type Lease struct {
	// ServerID is the server's DUID, for renewals.
	ServerID []byte        `json:"server_id"`
	Obtained time.Time     `json:"obtained"`
	T1       time.Duration `json:"t1"`
	T2       time.Duration `json:"t2"`

	Prefix          netip.Prefix  `json:"prefix,omitzero"`
	PrefixPreferred time.Duration `json:"prefix_preferred,omitempty"`
	PrefixValid     time.Duration `json:"prefix_valid,omitempty"`
	// Exclude is the part of Prefix the ISP keeps for itself (RFC 6603's
	// prefix exclude option, often its side of the WAN link): no LAN may
	// be numbered from it (RFC 7084 WPD-8).
	Exclude netip.Prefix `json:"exclude,omitzero"`

	Address       netip.Addr    `json:"address,omitzero"`
	AddrPreferred time.Duration `json:"addr_preferred,omitempty"`
	AddrValid     time.Duration `json:"addr_valid,omitempty"`

	DNS     []netip.Addr `json:"dns,omitempty"`
	Domains []string     `json:"domains,omitempty"`
	// NTP are the ISP's time servers: the SNTP servers option (RFC
	// 4075) and the NTP server option's addresses (RFC 5908), RFC 7084
	// WAA-5 and WAA-10.
	NTP []netip.Addr `json:"ntp,omitempty"`
}

// requested are the options every client message asks for (its ORO):
// resolvers and search domains, time servers, and SOL_MAX_RT (RFC 7083,
// RFC 7084 WAA-11).
var requested = []dhcpv6.OptionCode{dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionDomainSearchList,
	dhcpv6.OptionSNTPServerList, dhcpv6.OptionNTPServer, dhcpv6.OptionPDExclude, dhcpv6.OptionSolMaxRT}

// pdExclude decodes RFC 6603's OPTION_PD_EXCLUDE for the delegated
// prefix p: a prefix length, then the subnet ID, the excluded prefix's
// bits after p's length, left-aligned in as few octets as hold them.
func pdExclude(p netip.Prefix, data []byte) (netip.Prefix, bool) {
	if len(data) < 2 || !p.IsValid() {
		return netip.Prefix{}, false
	}
	n := int(data[0])
	bits := n - p.Bits()
	// RFC 6603 section 4.2: longer than the delegated prefix, at most
	// 128 bits, and exactly the octets the subnet ID needs.
	if n <= p.Bits() || n > 128 || len(data)-1 != (bits+7)/8 {
		return netip.Prefix{}, false
	}
	a := p.Addr().As16()
	for i := 0; i < bits; i++ {
		if data[1+i/8]&(0x80>>(i%8)) != 0 {
			pos := p.Bits() + i
			a[pos/8] |= 0x80 >> (pos % 8)
		}
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), n), true
}

// The bounds RFC 8415 section 21.24 puts on SOL_MAX_RT, and the longest
// wait between failed Solicits when no server named one: shorter than
// RFC 8415's 3600 s default, as a router with no delegation has no v6
// for its LAN.
const (
	solMaxRTMin     = 60 * time.Second
	solMaxRTMax     = 86400 * time.Second
	solMaxRTDefault = 2 * time.Minute
)

// solMaxRT is the SOL_MAX_RT option in m, when m has a valid one.
func solMaxRT(m *dhcpv6.Message) (time.Duration, bool) {
	o := m.Options.GetOne(dhcpv6.OptionSolMaxRT)
	if o == nil {
		return 0, false
	}
	b := o.ToBytes()
	if len(b) != 4 {
		return 0, false
	}
	d := time.Duration(binary.BigEndian.Uint32(b)) * time.Second
	if d < solMaxRTMin || d > solMaxRTMax {
		return 0, false // RFC 8415 21.24: ignored out of range
	}
	return d, true
}

// ntpServers are m's time servers, each once, in the order given.
func ntpServers(m *dhcpv6.Message) []netip.Addr {
	var out []netip.Addr
	for _, ip := range append(m.Options.SNTP(), m.Options.NTPServers()...) {
		if a, ok := netip.AddrFromSlice(ip); ok && !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// Expires is when the last thing the lease holds runs out.
func (l *Lease) Expires() time.Time {
	return l.Obtained.Add(max(l.PrefixValid, l.AddrValid))
}

// Store keeps the lease across reboots (the board's power-safe store).
type Store interface {
	// Load returns the kept lease, nil when none.
	Load() (*Lease, error)
	Save(*Lease) error
}

// Config is what a Client asks for and whom it tells.
type Config struct {
	// Interface is the WAN's interface.
	Interface string
	// PDLength is the delegated prefix's length to ask for (a hint);
	// 0 asks for no prefix.
	PDLength int
	// Address asks for an address for the WAN (IA_NA), as the RA's M
	// flag says.
	Address bool
	// Info asks for other configuration only (Information-request, RFC
	// 8415 section 18.2.6): the RA's O flag without M, when the router
	// wants neither a prefix nor an address. Its leases carry only the
	// resolvers and domains, and are not kept in Store.
	Info  bool
	Store Store
	// Update is told each lease, and nil when the lease ran out (its
	// prefix must leave the LAN). It must not block for long.
	Update func(*Lease)
	Log    func(format string, args ...any)
	// Timeout is the first wait for an answer (default 1 s, RFC 8415's
	// SOL_TIMEOUT), doubled on each retransmission up to 4 tries.
	Timeout time.Duration
}

// Client runs the exchanges on one interface.
type Client struct {
	cfg  Config
	duid dhcpv6.DUID
	iaid [4]byte
	// maxWait is the longest wait between failed Solicits: a server's
	// SOL_MAX_RT, or solMaxRTDefault.
	maxWait time.Duration
}

// New makes a client for cfg; Run runs it.
func New(cfg Config) (*Client, error) {
	if cfg.Interface == "" {
		return nil, errors.New("dhcp6: no interface")
	}
	if cfg.Info && (cfg.PDLength != 0 || cfg.Address) {
		return nil, errors.New("dhcp6: information-only asks for no prefix and no address")
	}
	if cfg.PDLength == 0 && !cfg.Address && !cfg.Info {
		return nil, errors.New("dhcp6: asks for neither a prefix nor an address")
	}
	if cfg.PDLength != 0 && (cfg.PDLength < 1 || cfg.PDLength > 64) {
		return nil, fmt.Errorf("dhcp6: prefix length %d: want 1-64", cfg.PDLength)
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if cfg.Update == nil {
		cfg.Update = func(*Lease) {}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	// The IAID is the same on every boot (one IA of each kind): with
	// the DUID, it is how the server knows the box again.
	return &Client{cfg: cfg, iaid: [4]byte{0, 0, 0, 1}, maxWait: solMaxRTDefault}, nil
}

// Run keeps a lease until ctx ends. It must run in the WAN interface's
// network namespace.
func (c *Client) Run(ctx context.Context) error {
	if c.cfg.Info {
		return c.runInfo(ctx)
	}
	var hint *Lease
	if c.cfg.Store != nil {
		l, err := c.cfg.Store.Load()
		if err != nil {
			c.cfg.Log("dhcp6: the kept lease: %v (asking afresh)", err)
		}
		hint = l
	}
	nc, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	for {
		l, err := c.acquire(ctx, nc, hint)
		if err != nil {
			return err // only ctx ends acquire
		}
		c.set(l)
		l, err = c.keep(ctx, nc, l)
		if err != nil {
			return err
		}
		hint = l
	}
}

// open binds the DHCPv6 client port on the interface's link-local
// address, waiting for it out of duplicate address detection.
func (c *Client) open(ctx context.Context) (*nclient6.Client, error) {
	logged := false
	for {
		ifi, err := net.InterfaceByName(c.cfg.Interface)
		if err == nil {
			var conn net.PacketConn
			conn, err = nclient6.NewIPv6UDPConn(c.cfg.Interface, dhcpv6.DefaultClientPort)
			if err == nil {
				if c.duid == nil {
					c.duid = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: ifi.HardwareAddr}
				}
				return nclient6.NewWithConn(conn, ifi.HardwareAddr, nclient6.WithTimeout(c.cfg.Timeout), nclient6.WithRetry(4))
			}
		}
		if !logged {
			c.cfg.Log("dhcp6: %s not ready: %v (waiting)", c.cfg.Interface, err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(openPoll):
		}
	}
}

// openPoll is how often open tries the link-local address again. DAD
// ends 1-2 s after the WAN link comes up, and the delegation waits on
// it: a poll every second left up to a second on top, the largest part
// of the router's own share of the time to a LAN host's first v6 packet
// (bench/run's v6time section).
const openPoll = 100 * time.Millisecond

func (c *Client) set(l *Lease) {
	if l != nil {
		c.cfg.Log("dhcp6: lease: prefix %v (preferred %v, valid %v), address %v, T1 %v T2 %v", l.Prefix, l.PrefixPreferred, l.PrefixValid, l.Address, l.T1, l.T2)
		if c.cfg.Store != nil {
			if err := c.cfg.Store.Save(l); err != nil {
				c.cfg.Log("dhcp6: keeping the lease: %v", err)
			}
		}
	}
	c.cfg.Update(l)
}

// acquire solicits and requests until a server gives a lease or ctx
// ends, asking for what hint held (a kept or expired lease).
func (c *Client) acquire(ctx context.Context, nc *nclient6.Client, hint *Lease) (*Lease, error) {
	wait := c.cfg.Timeout
	for {
		l, err := c.exchange(ctx, nc, hint)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.cfg.Log("dhcp6: %v (again in %v)", err, wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, c.maxWait)
	}
}

// exchange is one Solicit, Advertise, Request, Reply.
func (c *Client) exchange(ctx context.Context, nc *nclient6.Client, hint *Lease) (*Lease, error) {
	sol, err := c.message(dhcpv6.MessageTypeSolicit, nil, hint)
	if err != nil {
		return nil, err
	}
	adv, err := nc.SendAndRead(ctx, nclient6.AllDHCPRelayAgentsAndServers, sol, nclient6.IsMessageType(dhcpv6.MessageTypeAdvertise))
	if err != nil {
		return nil, fmt.Errorf("solicit: %w", err)
	}
	c.noteSolMaxRT(adv)
	offered, err := c.parse(adv)
	if err != nil {
		return nil, fmt.Errorf("advertise: %w", err)
	}
	req, err := c.message(dhcpv6.MessageTypeRequest, adv.Options.ServerID(), offered)
	if err != nil {
		return nil, err
	}
	rep, err := nc.SendAndRead(ctx, nclient6.AllDHCPRelayAgentsAndServers, req, nclient6.IsMessageType(dhcpv6.MessageTypeReply))
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	c.noteSolMaxRT(rep)
	return c.parse(rep)
}

// noteSolMaxRT takes a server's SOL_MAX_RT from m, even from an
// Advertise that gives nothing: that is what it is for (RFC 7083, a
// server telling clients it has nothing for to ask less often).
func (c *Client) noteSolMaxRT(m *dhcpv6.Message) {
	if d, ok := solMaxRT(m); ok && d != c.maxWait {
		c.cfg.Log("dhcp6: the server's SOL_MAX_RT: %v between Solicits at most", d)
		c.maxWait = d
	}
}

// keep renews l at T1 (Renew, to its server) and rebinds at T2 (Rebind,
// to any server) until it runs out; then it tells Update nil and
// returns the lease as a hint for the next Solicit.
func (c *Client) keep(ctx context.Context, nc *nclient6.Client, l *Lease) (*Lease, error) {
	for {
		t1, t2, end := l.Obtained.Add(l.T1), l.Obtained.Add(l.T2), l.Expires()
		if err := sleepUntil(ctx, t1); err != nil {
			return nil, err
		}
		var next *Lease
		for next == nil && time.Now().Before(end) {
			typ, sid := dhcpv6.MessageTypeRenew, dhcpv6.DUID(nil)
			if time.Now().Before(t2) {
				d, err := dhcpv6.DUIDFromBytes(l.ServerID)
				if err != nil {
					return nil, fmt.Errorf("dhcp6: the server's DUID: %w", err)
				}
				sid = d
			} else {
				typ = dhcpv6.MessageTypeRebind
			}
			m, err := c.message(typ, sid, l)
			if err != nil {
				return nil, err
			}
			rep, err := nc.SendAndRead(ctx, nclient6.AllDHCPRelayAgentsAndServers, m, nclient6.IsMessageType(dhcpv6.MessageTypeReply))
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err == nil {
				var nl *Lease
				nl, err = c.parse(rep)
				if errors.Is(err, errTakenBack) {
					c.cfg.Log("dhcp6: %s: the server took the lease back: prefix %v and address %v withdrawn", typ, l.Prefix, l.Address)
					c.set(nil)
					return l, nil
				}
				if errors.Is(err, errNoBinding) {
					// The server forgot the binding: ask afresh
					// (RFC 8415 section 18.2.10.1 says Request; a
					// Solicit with the hint gets the same).
					c.cfg.Log("dhcp6: %s: %v: asking afresh", typ, err)
					return l, nil
				}
				if err == nil {
					if nl.Prefix != l.Prefix {
						c.cfg.Log("dhcp6: the delegated prefix changed from %v to %v", l.Prefix, nl.Prefix)
					}
					next = nl
					break
				}
			}
			c.cfg.Log("dhcp6: %s: %v", typ, err)
			// Retry no sooner than a few seconds, and at T2 switch to
			// rebinding.
			wake := time.Now().Add(max(c.cfg.Timeout, 2*time.Second))
			if time.Now().Before(t2) && wake.After(t2) {
				wake = t2
			}
			if wake.After(end) {
				wake = end
			}
			if err := sleepUntil(ctx, wake); err != nil {
				return nil, err
			}
		}
		if next == nil {
			c.cfg.Log("dhcp6: the lease ran out: prefix %v and address %v withdrawn", l.Prefix, l.Address)
			c.set(nil)
			return l, nil
		}
		l = next
		c.set(l)
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// message builds a client message of typ, with the server's id when
// given and, from l, the prefix and address to ask for again.
func (c *Client) message(typ dhcpv6.MessageType, serverID dhcpv6.DUID, l *Lease) (*dhcpv6.Message, error) {
	m, err := dhcpv6.NewMessage()
	if err != nil {
		return nil, fmt.Errorf("dhcp6: %w", err)
	}
	m.MessageType = typ
	m.AddOption(dhcpv6.OptClientID(c.duid))
	if serverID != nil {
		m.AddOption(dhcpv6.OptServerID(serverID))
	}
	m.AddOption(dhcpv6.OptElapsedTime(0))
	m.AddOption(dhcpv6.OptRequestedOption(requested...))
	if c.cfg.Address {
		na := &dhcpv6.OptIANA{IaId: c.iaid}
		if l != nil && l.Address.IsValid() {
			na.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: l.Address.AsSlice()})
		}
		m.AddOption(na)
	}
	if c.cfg.PDLength != 0 {
		pd := &dhcpv6.OptIAPD{IaId: c.iaid}
		p := netip.PrefixFrom(netip.IPv6Unspecified(), c.cfg.PDLength)
		if l != nil && l.Prefix.IsValid() {
			p = l.Prefix
		}
		pd.Options.Add(&dhcpv6.OptIAPrefix{Prefix: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}})
		m.AddOption(pd)
	}
	return m, nil
}

var (
	errNoBinding = errors.New("NoBinding")
	// errTakenBack: every prefix and address in the reply has valid
	// lifetime 0.
	errTakenBack = errors.New("everything taken back")
)

// parse reads a server's Advertise or Reply: an error when it gave
// nothing this client asked for. A prefix or address with valid
// lifetime 0 is one the server takes back (RFC 8415 section 18.3.4):
// it is skipped, and a reply that only takes back is no lease.
func (c *Client) parse(m *dhcpv6.Message) (*Lease, error) {
	if s := m.Options.Status(); s != nil && s.StatusCode != iana.StatusSuccess {
		return nil, fmt.Errorf("%s: %s", s.StatusCode, s.StatusMessage)
	}
	sid := m.Options.ServerID()
	if sid == nil {
		return nil, errors.New("no server id")
	}
	l := &Lease{ServerID: sid.ToBytes(), Obtained: time.Now()}
	var t1, t2 []time.Duration
	takenBack := false
	if c.cfg.PDLength != 0 {
		for _, pd := range m.Options.IAPD() {
			if pd.IaId != c.iaid {
				continue
			}
			if s := pd.Options.Status(); s != nil && s.StatusCode == iana.StatusNoBinding {
				return nil, errNoBinding
			}
			for _, p := range pd.Options.Prefixes() {
				if p.Prefix != nil && p.ValidLifetime == 0 {
					takenBack = true
				}
				if p.Prefix == nil || p.ValidLifetime == 0 || l.Prefix.IsValid() {
					continue
				}
				a, ok := netip.AddrFromSlice(p.Prefix.IP)
				bits, _ := p.Prefix.Mask.Size()
				if !ok || bits < 1 || bits > 64 {
					continue // no LAN can take a /64 of it
				}
				l.Prefix = netip.PrefixFrom(a.Unmap(), bits).Masked()
				l.PrefixValid, l.PrefixPreferred = p.ValidLifetime, min(p.PreferredLifetime, p.ValidLifetime)
				if o := p.Options.GetOne(dhcpv6.OptionPDExclude); o != nil {
					if x, ok := pdExclude(l.Prefix, o.ToBytes()); ok {
						l.Exclude = x
					} else {
						c.cfg.Log("dhcp6: a malformed prefix exclude option for %v ignored", l.Prefix)
					}
				}
			}
			if l.Prefix.IsValid() {
				t1, t2 = append(t1, pd.T1), append(t2, pd.T2)
			}
		}
	}
	if c.cfg.Address {
		for _, na := range m.Options.IANA() {
			if na.IaId != c.iaid {
				continue
			}
			if s := na.Options.Status(); s != nil && s.StatusCode == iana.StatusNoBinding {
				return nil, errNoBinding
			}
			for _, a := range na.Options.Addresses() {
				ip, ok := netip.AddrFromSlice(a.IPv6Addr)
				if ok && a.ValidLifetime == 0 {
					takenBack = true
				}
				if !ok || a.ValidLifetime == 0 || l.Address.IsValid() {
					continue
				}
				l.Address, l.AddrValid, l.AddrPreferred = ip.Unmap(), a.ValidLifetime, min(a.PreferredLifetime, a.ValidLifetime)
			}
			if l.Address.IsValid() {
				t1, t2 = append(t1, na.T1), append(t2, na.T2)
			}
		}
	}
	if !l.Prefix.IsValid() && !l.Address.IsValid() {
		if takenBack {
			return nil, errTakenBack
		}
		return nil, errors.New("no prefix and no address given")
	}
	// T1 and T2: the smallest the IAs name; where the server leaves them
	// to the client (0), half and 0.8 of the shortest preferred
	// lifetime (RFC 8415 section 14.2).
	pref := l.PrefixPreferred
	if l.Address.IsValid() && (!l.Prefix.IsValid() || l.AddrPreferred < pref) {
		pref = l.AddrPreferred
	}
	l.T1, l.T2 = pref/2, pref*4/5
	if m := minPositive(t1); m > 0 {
		l.T1 = m
	}
	if m := minPositive(t2); m > 0 {
		l.T2 = m
	}
	if l.T2 < l.T1 {
		l.T2 = l.T1
	}
	// A lifetime of 0 preferred (a server deprecating it) still has to
	// be renewed: at least every few seconds, not in a busy loop.
	l.T1, l.T2 = max(l.T1, time.Second), max(l.T2, time.Second)
	for _, d := range m.Options.DNS() {
		if a, ok := netip.AddrFromSlice(d); ok {
			l.DNS = append(l.DNS, a.Unmap())
		}
	}
	if sl := m.Options.DomainSearchList(); sl != nil {
		l.Domains = append(l.Domains, sl.Labels...)
	}
	l.NTP = ntpServers(m)
	return l, nil
}

func minPositive(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		if d > 0 && (m == 0 || d < m) {
			m = d
		}
	}
	return m
}

// RFC 8415 section 21.23: the information refresh time when the server
// names none, and the least a client takes.
const (
	infRefreshDefault = 24 * time.Hour
	infRefreshMin     = 10 * time.Minute
)

// runInfo asks for other configuration only, again after the server's
// information refresh time, until ctx ends.
func (c *Client) runInfo(ctx context.Context) error {
	nc, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	wait := c.cfg.Timeout
	for {
		l, refresh, err := c.inform(ctx, nc)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		next := refresh
		if err != nil {
			c.cfg.Log("dhcp6: information-request: %v (again in %v)", err, wait)
			next, wait = wait, min(2*wait, 2*time.Minute)
		} else {
			wait = c.cfg.Timeout
			c.cfg.Log("dhcp6: other configuration: DNS %v, domains %v (again in %v)", l.DNS, l.Domains, refresh)
			c.cfg.Update(l)
		}
		if err := sleepUntil(ctx, time.Now().Add(next)); err != nil {
			return err
		}
	}
}

// inform is one Information-request and its Reply: the resolvers and
// domains as a lease with neither prefix nor address, and when to ask
// again.
func (c *Client) inform(ctx context.Context, nc *nclient6.Client) (*Lease, time.Duration, error) {
	m, err := dhcpv6.NewMessage()
	if err != nil {
		return nil, 0, fmt.Errorf("dhcp6: %w", err)
	}
	m.MessageType = dhcpv6.MessageTypeInformationRequest
	m.AddOption(dhcpv6.OptClientID(c.duid))
	m.AddOption(dhcpv6.OptElapsedTime(0))
	m.AddOption(dhcpv6.OptRequestedOption(append(slices.Clone(requested[:len(requested)-1]), dhcpv6.OptionInformationRefreshTime)...))
	rep, err := nc.SendAndRead(ctx, nclient6.AllDHCPRelayAgentsAndServers, m, nclient6.IsMessageType(dhcpv6.MessageTypeReply))
	if err != nil {
		return nil, 0, err
	}
	if s := rep.Options.Status(); s != nil && s.StatusCode != iana.StatusSuccess {
		return nil, 0, fmt.Errorf("%s: %s", s.StatusCode, s.StatusMessage)
	}
	sid := rep.Options.ServerID()
	if sid == nil {
		return nil, 0, errors.New("no server id")
	}
	l := &Lease{ServerID: sid.ToBytes(), Obtained: time.Now()}
	for _, d := range rep.Options.DNS() {
		if a, ok := netip.AddrFromSlice(d); ok {
			l.DNS = append(l.DNS, a.Unmap())
		}
	}
	if sl := rep.Options.DomainSearchList(); sl != nil {
		l.Domains = append(l.Domains, sl.Labels...)
	}
	l.NTP = ntpServers(rep)
	return l, max(rep.Options.InformationRefreshTime(infRefreshDefault), infRefreshMin), nil
}
