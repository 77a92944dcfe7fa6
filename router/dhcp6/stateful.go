package dhcp6

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/vishvananda/netlink"
)

// Host is a LAN host that gets stateful addresses: its MAC and its
// interface identifier (the low 64 bits of ID), the same in every /64.
type Host struct {
	MAC net.HardwareAddr
	ID  netip.Addr
}

// AddrPrefix is one of the LAN's /64s and the lifetimes a host's address
// in it gets: the ones the router advertisements give the prefix, so a
// DHCPv6 address never outlives the SLAAC ones (nor the delegation).
type AddrPrefix struct {
	Prefix           netip.Prefix
	Valid, Preferred time.Duration
	// ValidEnds and PreferredEnds, when set, cap the lifetimes at what
	// is left of them when a host asks (the delegation's ends, as the
	// advertisements' ra.Prefix).
	ValidEnds, PreferredEnds time.Time
}

// at is p's lifetimes as given at now, in whole seconds as the wire
// carries them, never beyond an end.
func (p AddrPrefix) at(now time.Time) AddrPrefix {
	if !p.ValidEnds.IsZero() {
		p.Valid = max(0, min(p.Valid, p.ValidEnds.Sub(now).Truncate(time.Second)))
	}
	if !p.PreferredEnds.IsZero() {
		p.Preferred = max(0, min(p.Preferred, p.PreferredEnds.Sub(now).Truncate(time.Second)))
	}
	return p
}

// Stateful says whether the server gives addresses (some host is
// listed): the router advertisements' M flag.
func (s *InfoServer) Stateful() bool { return len(s.cfg.Hosts) > 0 }

// SetPrefixes replaces the LAN's /64s the hosts' addresses are made in.
// An address in a /64 no longer listed is given lifetime 0 when its
// host renews or rebinds it (RFC 8415 18.3.4).
func (s *InfoServer) SetPrefixes(ps []AddrPrefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prefixes = slices.Clone(ps)
}

// macOf is the MAC a DUID-LL or DUID-LLT of Ethernet carries, nil for
// other DUIDs.
func macOf(d dhcpv6.DUID) net.HardwareAddr {
	switch d := d.(type) {
	case *dhcpv6.DUIDLL:
		if d.HWType == iana.HWTypeEthernet && len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr
		}
	case *dhcpv6.DUIDLLT:
		if d.HWType == iana.HWTypeEthernet && len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr
		}
	}
	return nil
}

// host is the listed host the client is: the MAC in its DUID first, else
// the link-layer address of its source (cfg.LinkAddr), which also
// matches a host whose DUID was made from another of its interfaces.
func (s *InfoServer) host(cid dhcpv6.DUID, src netip.Addr) (Host, bool) {
	find := func(mac net.HardwareAddr) (Host, bool) {
		for _, h := range s.cfg.Hosts {
			if mac != nil && bytes.Equal(h.MAC, mac) {
				return h, true
			}
		}
		return Host{}, false
	}
	if len(s.cfg.Hosts) == 0 {
		return Host{}, false
	}
	if h, ok := find(macOf(cid)); ok {
		return h, true
	}
	if s.cfg.LinkAddr != nil && src.IsValid() {
		return find(s.cfg.LinkAddr(src))
	}
	return Host{}, false
}

// linkAddr is the MAC of the LAN host at src: the kernel's neighbour
// entry for it on the interface when there is one (a host that sent a
// router solicitation with its link-layer address, or that the router
// spoke to before: the server's own first answer makes one), else the
// MAC a modified EUI-64 link-local address (RFC 4291 appendix A) was
// made from; nil for neither (a privacy or RFC 7217 address the kernel
// has not resolved yet: the client's retransmission finds the entry).
func linkAddr(h *netlink.Handle, ifindex int, src netip.Addr) net.HardwareAddr {
	src = src.WithZone("")
	if ns, err := h.NeighList(ifindex, netlink.FAMILY_V6); err == nil {
		for _, n := range ns {
			a, ok := netip.AddrFromSlice(n.IP)
			if ok && a == src && len(n.HardwareAddr) == 6 &&
				n.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED|netlink.NUD_NOARP) == 0 {
				return n.HardwareAddr
			}
		}
	}
	return eui64MAC(src)
}

// eui64MAC is the MAC inside a link-local address made by modified
// EUI-64, nil when src is none.
func eui64MAC(src netip.Addr) net.HardwareAddr {
	if !src.Is6() || !src.IsLinkLocalUnicast() {
		return nil
	}
	a := src.As16()
	if a[11] != 0xff || a[12] != 0xfe {
		return nil
	}
	mac := net.HardwareAddr{a[8] ^ 2, a[9], a[10], a[13], a[14], a[15]}
	if mac[0]&1 != 0 {
		return nil
	}
	return mac
}

// addrsFor are host's addresses: its ID in each current /64.
func (s *InfoServer) addrsFor(h Host) []*dhcpv6.OptIAAddress {
	var out []*dhcpv6.OptIAAddress
	now := time.Now()
	for _, p := range s.prefixes {
		p = p.at(now)
		if p.Valid <= 0 {
			continue
		}
		a := withID(p.Prefix, h.ID)
		out = append(out, &dhcpv6.OptIAAddress{IPv6Addr: a.AsSlice(), PreferredLifetime: max(0, min(p.Preferred, p.Valid)), ValidLifetime: p.Valid})
	}
	return out
}

// withID is the address with interface identifier id in the /64 p.
func withID(p netip.Prefix, id netip.Addr) netip.Addr {
	a, b := p.Masked().Addr().As16(), id.As16()
	copy(a[8:], b[8:])
	return netip.AddrFrom16(a)
}

// onLink says whether a is inside one of the current /64s.
func (s *InfoServer) onLink(a netip.Addr) bool {
	now := time.Now()
	for _, p := range s.prefixes {
		if p.at(now).Valid > 0 && p.Prefix.Masked().Contains(a) {
			return true
		}
	}
	return false
}

// times are an IA's T1 and T2 for its addresses: RFC 8415 21.4's
// recommended 0.5 and 0.8 of the shortest preferred lifetime (the
// valid one for addresses already deprecated).
func times(addrs []*dhcpv6.OptIAAddress) (t1, t2 time.Duration) {
	var least time.Duration
	for _, a := range addrs {
		l := a.PreferredLifetime
		if l <= 0 {
			l = a.ValidLifetime
		}
		if l > 0 && (least == 0 || l < least) {
			least = l
		}
	}
	return (least / 2).Truncate(time.Second), (least * 4 / 5).Truncate(time.Second)
}

func statusOpt(code iana.StatusCode, msg string) *dhcpv6.OptStatusCode {
	return &dhcpv6.OptStatusCode{StatusCode: code, StatusMessage: msg}
}

// refusals add to rep the client's IA_TAs and IA_PDs, which this server
// never gives, with code (NoAddrsAvail/NoPrefixAvail in answers to
// Solicit and Request, NoBinding otherwise); it says how many.
func refusals(m, rep *dhcpv6.Message, code iana.StatusCode) int {
	n := 0
	for _, ta := range m.Options.IATA() {
		c := code
		if c == iana.StatusNoPrefixAvail {
			c = iana.StatusNoAddrsAvail
		}
		o := &dhcpv6.OptIATA{IaId: ta.IaId}
		o.Options.Add(statusOpt(c, "no temporary addresses here"))
		rep.AddOption(o)
		n++
	}
	for _, pd := range m.Options.IAPD() {
		o := &dhcpv6.OptIAPD{IaId: pd.IaId}
		o.Options.Add(statusOpt(code, "no prefixes delegated on the LAN"))
		rep.AddOption(o)
		n++
	}
	return n
}

// stateful is the answer to a Solicit, Request, Renew, Rebind, Release,
// Decline or Confirm (RFC 8415 18.3), nil for none.
func (s *InfoServer) stateful(m *dhcpv6.Message, src netip.Addr) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	cid, sid := m.Options.ClientID(), m.Options.ServerID()
	// RFC 8415 16: which messages must and must not name a server.
	var needSID bool
	switch m.Type() {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeRebind:
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		needSID = true
	default:
		s.stats.Ignored++
		return nil
	}
	if cid == nil || (sid != nil) != needSID || (sid != nil && !sid.Equal(s.duid)) {
		s.stats.Ignored++
		return nil
	}
	h, known := s.host(cid, src)

	rep := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: m.TransactionID}
	rep.AddOption(dhcpv6.OptClientID(cid))
	rep.AddOption(dhcpv6.OptServerID(s.duid))
	assigned := false
	switch m.Type() {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest:
		// 18.3.1, 18.3.2, 18.3.9: the host's addresses in its first
		// IA_NA; any other IA none, with NoAddrsAvail.
		give := known
		for _, ia := range m.Options.IANA() {
			o := &dhcpv6.OptIANA{IaId: ia.IaId}
			addrs := []*dhcpv6.OptIAAddress(nil)
			if give {
				addrs = s.addrsFor(h)
			}
			if len(addrs) > 0 {
				o.T1, o.T2 = times(addrs)
				for _, a := range addrs {
					o.Options.Add(a)
				}
				give, assigned = false, true
			} else {
				o.Options.Add(statusOpt(iana.StatusNoAddrsAvail, "no address for this host: use SLAAC"))
				s.stats.Refused++
			}
			rep.AddOption(o)
		}
		s.stats.Refused += uint64(refusals(m, rep, iana.StatusNoPrefixAvail))
		if m.Type() == dhcpv6.MessageTypeSolicit {
			// 18.3.9, and RFC 8415 21.14's Rapid Commit: a Reply at
			// once only when it commits an address.
			if assigned && m.GetOneOption(dhcpv6.OptionRapidCommit) != nil {
				dhcpv6.WithRapidCommit(rep)
			} else {
				rep.MessageType = dhcpv6.MessageTypeAdvertise
			}
		}
		s.addOptions(rep)
	case dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
		// 18.3.4, 18.3.5: the host's current addresses with their
		// lifetimes, and any other it names with lifetime 0 (not
		// appropriate for the link any more: a prefix that went
		// away). An IA of nobody's: NoBinding (the client starts
		// over with Request), or for Rebind its addresses with
		// lifetime 0 when it names any.
		give := known
		for _, ia := range m.Options.IANA() {
			o := &dhcpv6.OptIANA{IaId: ia.IaId}
			hostIA := give
			var addrs []*dhcpv6.OptIAAddress
			if hostIA {
				addrs = s.addrsFor(h)
				give = false
			}
			mine := len(addrs) > 0
			for _, old := range ia.Options.Addresses() {
				a, _ := netip.AddrFromSlice(old.IPv6Addr)
				if !slices.ContainsFunc(addrs, func(x *dhcpv6.OptIAAddress) bool { return x.IPv6Addr.Equal(old.IPv6Addr) }) &&
					(hostIA || m.Type() == dhcpv6.MessageTypeRebind) {
					addrs = append(addrs, &dhcpv6.OptIAAddress{IPv6Addr: a.AsSlice()})
				}
			}
			if mine {
				o.T1, o.T2 = times(addrs)
				assigned = true
			}
			for _, a := range addrs {
				o.Options.Add(a)
			}
			if len(addrs) == 0 {
				o.Options.Add(statusOpt(iana.StatusNoBinding, "no binding for this IA"))
				s.stats.Refused++
			}
			rep.AddOption(o)
		}
		s.stats.Refused += uint64(refusals(m, rep, iana.StatusNoBinding))
		s.addOptions(rep)
	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		// 18.3.7, 18.3.8: nothing to free (the host's address is kept
		// for it whether it holds it or not); an IA that was no
		// binding of this server's is told NoBinding. A declined
		// address is in use by someone else: said in the log.
		first := known
		for _, ia := range m.Options.IANA() {
			if first {
				first = false
				if m.Type() == dhcpv6.MessageTypeDecline {
					for _, a := range ia.Options.Addresses() {
						s.cfg.Log("dhcp6: host %s declined %s: another host on the LAN uses it", h.MAC, a.IPv6Addr)
					}
				}
				continue
			}
			o := &dhcpv6.OptIANA{IaId: ia.IaId}
			o.Options.Add(statusOpt(iana.StatusNoBinding, "no binding for this IA"))
			rep.AddOption(o)
		}
		refusals(m, rep, iana.StatusNoBinding)
		rep.AddOption(statusOpt(iana.StatusSuccess, "done"))
	case dhcpv6.MessageTypeConfirm:
		// 18.3.3: whether the addresses are still on the link; none
		// named, no answer.
		n, on := 0, true
		for _, ia := range m.Options.IANA() {
			for _, a := range ia.Options.Addresses() {
				ip, _ := netip.AddrFromSlice(a.IPv6Addr)
				n++
				on = on && s.onLink(ip)
			}
		}
		if n == 0 {
			s.stats.Ignored++
			return nil
		}
		if on {
			rep.AddOption(statusOpt(iana.StatusSuccess, "on link"))
		} else {
			rep.AddOption(statusOpt(iana.StatusNotOnLink, "not on this link"))
		}
	}
	if assigned {
		s.stats.Assigned++
	}
	s.stats.Replies++
	return rep.ToBytes()
}
