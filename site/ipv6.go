package site

import (
	"crypto/rand"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// IPv6 is the site's IPv6: on unless turned off, and with nothing
// written it asks the ISP for a delegated /60 by DHCPv6 (the WAN's own
// address as the ISP's router advertisements say) and gives the LAN a /64
// of it for SLAAC, plus a ULA /64 that does not depend on the ISP. See
// docs/site.md (the ipv6 section) for what the board does with it today.
type IPv6 struct {
	// Enable is true unless set to false.
	Enable *bool   `yaml:"enable" json:"enable,omitempty"`
	WAN    IPv6WAN `yaml:"wan" json:"wan,omitzero"`
	LAN    IPv6LAN `yaml:"lan" json:"lan,omitzero"`
	// ULA is the site's unique local prefix (RFC 4193): "" for one
	// generated on the box at first boot and kept in its store, "off" for
	// none, or a /48 inside fd00::/8 to use that one (two boxes that must
	// agree on it, or a replacement box).
	ULA string `yaml:"ula" json:"ula,omitempty"`
	// Hosts are LAN hosts with a fixed interface identifier: their names
	// answer AAAA with it in each of the LAN's prefixes.
	Hosts []IPv6Host `yaml:"hosts" json:"hosts,omitempty"`
}

// IPv6WAN is how the WAN gets its IPv6 address and the LAN's prefix.
type IPv6WAN struct {
	// Mode is one of the IPv6Mode* values; "" means auto.
	Mode string `yaml:"mode" json:"mode,omitempty"`
	// Address and Gateway are a static WAN's (mode: static): the
	// address with its prefix (2001:db8::2/64) and the default route (a
	// link-local address or one inside the WAN's prefix).
	Address string `yaml:"address" json:"address,omitempty"`
	Gateway string `yaml:"gateway" json:"gateway,omitempty"`
	// Prefix is the prefix a static WAN's ISP routes to this box for
	// its LAN (/48 to /64); none means the LAN gets only the ULA.
	Prefix string `yaml:"prefix" json:"prefix,omitempty"`
	// DNS are a static WAN's resolvers (DHCPv6 gives them otherwise).
	DNS []string `yaml:"dns" json:"dns,omitempty"`
	// PDLength is the delegated prefix's length asked for by DHCPv6
	// prefix delegation, a hint: the box takes what the ISP gives (48 to
	// 64); default DefaultPDLength.
	PDLength int `yaml:"pd_length" json:"pd_length,omitempty"`
}

// IPv6LAN is what the LAN gets: a /64 of each prefix and router
// advertisements with SLAAC, DNS servers and search domains.
type IPv6LAN struct {
	// SubnetID picks the LAN's /64 inside the delegated (or static)
	// prefix and inside the ULA /48; default 0.
	SubnetID int `yaml:"subnet_id" json:"subnet_id,omitempty"`
	// DNS are the resolvers announced (RDNSS); default the router's own
	// LAN addresses when the DNS forwarder runs.
	DNS []string `yaml:"dns" json:"dns,omitempty"`
	// Domains are the search domains announced (DNSSL); default
	// lan.domain.
	Domains []string `yaml:"domains" json:"domains,omitempty"`
	// SLAAC is the advertised prefixes' A flag (RFC 4861 4.6.2): hosts
	// make their own addresses in them. Default true; false leaves
	// global addresses to stateful DHCPv6 (hosts listed with a MAC)
	// and to hosts configured by hand (RFC 7084 L-7).
	SLAAC *bool `yaml:"slaac" json:"slaac,omitempty"`
	// OnLink is their L flag: hosts reach the LAN's other addresses
	// directly, not through the router. Default true (RFC 7084 L-6).
	OnLink *bool `yaml:"on_link" json:"on_link,omitempty"`
}

// SLAACOn is the A flag: true unless slaac is false.
func (l IPv6LAN) SLAACOn() bool { return l.SLAAC == nil || *l.SLAAC }

// OnLinkOn is the L flag: true unless on_link is false.
func (l IPv6LAN) OnLinkOn() bool { return l.OnLink == nil || *l.OnLink }

// IPv6Host gives one LAN host a fixed interface identifier (::10): its
// address in each LAN prefix, for names that keep working when the
// delegated prefix changes.
type IPv6Host struct {
	Name string `yaml:"name" json:"name"`
	// MAC is the host's MAC address (optional, unique, unicast): with
	// it the LAN's DHCPv6 server gives the host its address (ID in each
	// LAN /64) by stateful DHCPv6 too, and the advertisements set the M
	// flag.
	MAC string `yaml:"mac" json:"mac,omitempty"`
	// ID is the interface identifier: the low 64 bits, as ::10.
	ID string `yaml:"id" json:"id"`
}

// The WAN's IPv6 modes.
const (
	// IPv6ModeAuto follows the ISP's router advertisements: M flag,
	// DHCPv6 address; O flag or none, SLAAC (RFC 4861, RFC 8415). The
	// delegated prefix is asked for by DHCPv6 either way.
	IPv6ModeAuto   = "auto"
	IPv6ModeDHCPv6 = "dhcpv6"
	IPv6ModeSLAAC  = "slaac"
	IPv6ModeStatic = "static"
	// IPv6ModeOff: no IPv6 on the WAN; the LAN still gets the ULA.
	IPv6ModeOff = "off"
	// ULAOff turns the ULA prefix off.
	ULAOff = "off"
)

var ipv6Modes = []string{IPv6ModeAuto, IPv6ModeDHCPv6, IPv6ModeSLAAC, IPv6ModeStatic, IPv6ModeOff}

// DefaultPDLength is the delegated prefix asked for: a /60 gives 16 LANs
// and is what most ISPs that delegate hand out at least.
const DefaultPDLength = 60

// The delegated prefix lengths a box takes: a /48 is the most an ISP
// gives a site, a /64 the least that still makes one SLAAC LAN.
const (
	MinPDLength = 48
	MaxPDLength = 64
)

// ulaSpace is RFC 4193's locally assigned half of fc00::/7.
var ulaSpace = netip.MustParsePrefix("fd00::/8")

// On says whether the router does IPv6 at all.
func (v IPv6) On() bool { return v.Enable == nil || *v.Enable }

// WANMode is the WAN's mode, auto when unset.
func (w IPv6WAN) WANMode() string {
	if w.Mode == "" {
		return IPv6ModeAuto
	}
	return w.Mode
}

// WantsPD says whether the WAN asks for a delegated prefix.
func (w IPv6WAN) WantsPD() bool {
	m := w.WANMode()
	return m == IPv6ModeAuto || m == IPv6ModeDHCPv6 || m == IPv6ModeSLAAC
}

// PDHint is the delegated prefix length asked for.
func (w IPv6WAN) PDHint() int {
	if w.PDLength == 0 {
		return DefaultPDLength
	}
	return w.PDLength
}

// NewULA draws a ULA /48 as RFC 4193 section 3.2 wants: fd00::/8 and a
// 40-bit global ID from r (crypto/rand when nil). The RFC's SHA-1 of
// time and EUI-64 is one way to get random bits; a CSPRNG is as good.
func NewULA(r io.Reader) (netip.Prefix, error) {
	if r == nil {
		r = rand.Reader
	}
	var a [16]byte
	a[0] = 0xfd
	if _, err := io.ReadFull(r, a[1:6]); err != nil {
		return netip.Prefix{}, fmt.Errorf("ULA: random global ID: %w", err)
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), 48), nil
}

// ParseULA parses a ULA /48 as the site or the store gives it.
func ParseULA(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil || !p.Addr().Is6() || p.Addr().Is4In6():
		return netip.Prefix{}, fmt.Errorf("%q: want a ULA /48 inside fd00::/8, e.g. fd12:3456:789a::/48 (or leave it out for one made once on the box, or off)", s)
	case p.Bits() != 48 || !ulaSpace.Contains(p.Addr()):
		return netip.Prefix{}, fmt.Errorf("%q: want a /48 inside fd00::/8 (RFC 4193), e.g. fd12:3456:789a::/48", s)
	case p.Masked() != p:
		return netip.Prefix{}, fmt.Errorf("%q: has bits set after /48: want %s", s, p.Masked())
	}
	return p, nil
}

// Subnet64 is the /64 with subnet id id inside p (a /48 to /64); false
// when id does not fit.
func Subnet64(p netip.Prefix, id int) (netip.Prefix, bool) {
	free := 64 - p.Bits()
	if !p.Addr().Is6() || free < 0 || id < 0 || id >= 1<<free {
		return netip.Prefix{}, false
	}
	a := p.Masked().Addr().As16()
	hi := uint64(0)
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(a[i])
	}
	hi |= uint64(id)
	for i := 7; i >= 0; i-- {
		a[i] = byte(hi)
		hi >>= 8
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), 64), true
}

// WithID is the address with interface identifier id (its low 64
// bits) inside the /64 p.
func WithID(p netip.Prefix, id netip.Addr) netip.Addr {
	a, b := p.Masked().Addr().As16(), id.As16()
	copy(a[8:], b[8:])
	return netip.AddrFrom16(a)
}

// ipv6 checks the ipv6 section. A section turned off is still checked:
// turning it on again must not bring surprises.
func (c *checker) ipv6(s *Site) {
	v := s.IPv6
	w := v.WAN
	mode := w.WANMode()
	if !contains(ipv6Modes, mode) {
		c.bad("ipv6.wan.mode", "%q: want one of auto, dhcpv6, slaac, static, off (default auto)", w.Mode)
	}
	static := mode == IPv6ModeStatic
	var wanNet netip.Prefix
	if static {
		if w.Address == "" {
			c.bad("ipv6.wan.address", "mode: static needs the WAN's IPv6 address with its prefix, e.g. 2001:db8::2/64")
		} else if p, err := netip.ParsePrefix(w.Address); err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() < 1 {
			c.bad("ipv6.wan.address", "%q: want an IPv6 address with its prefix, e.g. 2001:db8::2/64", w.Address)
		} else if why := notUnicast6(p.Addr()); why != "" {
			c.bad("ipv6.wan.address", "%s is %s: want the global address the ISP gave this box", p.Addr(), why)
		} else if p.Bits() < 128 && p.Addr() == p.Masked().Addr() {
			c.bad("ipv6.wan.address", "%s is the subnet-router anycast address of %s: want this box's own address", p.Addr(), p.Masked())
		} else {
			wanNet = p
		}
		if w.Gateway == "" {
			c.bad("ipv6.wan.gateway", "mode: static needs the gateway (the default route), e.g. fe80::1 or 2001:db8::1")
		} else if g, err := netip.ParseAddr(w.Gateway); err != nil || !g.Is6() || g.Is4In6() || g.Zone() != "" {
			c.bad("ipv6.wan.gateway", "%q: want an IPv6 address without a zone, e.g. fe80::1 or 2001:db8::1", w.Gateway)
		} else if g.IsMulticast() || g.IsUnspecified() || g.IsLoopback() {
			c.bad("ipv6.wan.gateway", "%s: want the ISP router's unicast address", g)
		} else if wanNet.IsValid() && !g.IsLinkLocalUnicast() && !wanNet.Masked().Contains(g) {
			c.bad("ipv6.wan.gateway", "%s: want a link-local address or one inside %s", g, wanNet.Masked())
		} else if wanNet.IsValid() && g == wanNet.Addr() {
			c.bad("ipv6.wan.gateway", "%s is this box's own WAN address: want the ISP's router's", g)
		}
		if w.Prefix != "" {
			p, err := netip.ParsePrefix(w.Prefix)
			switch {
			case err != nil || !p.Addr().Is6() || p.Addr().Is4In6():
				c.bad("ipv6.wan.prefix", "%q: want the IPv6 prefix routed to this box, e.g. 2001:db8:1::/48", w.Prefix)
			case p.Bits() < MinPDLength || p.Bits() > MaxPDLength:
				c.bad("ipv6.wan.prefix", "%s: want a /%d to /%d (a LAN needs a /64 of it)", p, MinPDLength, MaxPDLength)
			case p.Masked() != p:
				c.bad("ipv6.wan.prefix", "%s has bits set after /%d: want %s", p, p.Bits(), p.Masked())
			case notUnicast6(p.Addr()) != "":
				c.bad("ipv6.wan.prefix", "%s is %s: want the global prefix the ISP routes to this box", p, notUnicast6(p.Addr()))
			case wanNet.IsValid() && p.Overlaps(wanNet.Masked()):
				c.bad("ipv6.wan.prefix", "%s overlaps the WAN's own %s", p, wanNet.Masked())
			}
		}
	} else {
		for _, f := range []struct{ path, val string }{
			{"ipv6.wan.address", w.Address}, {"ipv6.wan.gateway", w.Gateway}, {"ipv6.wan.prefix", w.Prefix},
		} {
			if f.val != "" {
				c.bad(f.path, "only with mode: static (mode is %s: the ISP gives it)", mode)
			}
		}
		if len(w.DNS) > 0 {
			c.bad("ipv6.wan.dns", "only with mode: static (mode is %s: DHCPv6 gives the resolvers)", mode)
		}
	}
	for i, d := range w.DNS {
		if a, err := netip.ParseAddr(d); err != nil || !a.Is6() || a.Is4In6() || notUnicast6(a) != "" {
			c.bad(fmt.Sprintf("ipv6.wan.dns[%d]", i), "%q: want a resolver's IPv6 unicast address", d)
		}
	}
	if w.PDLength != 0 {
		if !w.WantsPD() {
			c.bad("ipv6.wan.pd_length", "only when the box asks for a delegated prefix (mode auto, dhcpv6 or slaac; mode is %s)", mode)
		} else if w.PDLength < MinPDLength || w.PDLength > MaxPDLength {
			c.bad("ipv6.wan.pd_length", "%d: want %d-%d (the delegated prefix's length to ask for; default %d)", w.PDLength, MinPDLength, MaxPDLength, DefaultPDLength)
		}
	}

	if v.ULA != "" && v.ULA != ULAOff {
		if _, err := ParseULA(v.ULA); err != nil {
			c.bad("ipv6.ula", "%v", err)
		}
	}

	l := v.LAN
	lanField := func(path string) {
		c.bad(path, "the site has no lan for it")
	}
	if !c.hasLAN {
		if l.SubnetID != 0 {
			lanField("ipv6.lan.subnet_id")
		}
		if len(l.DNS) > 0 {
			lanField("ipv6.lan.dns")
		}
		if len(l.Domains) > 0 {
			lanField("ipv6.lan.domains")
		}
		if len(v.Hosts) > 0 {
			lanField("ipv6.hosts")
		}
	}
	// The subnet id must fit every prefix the LAN takes a /64 of: the
	// delegated one as asked for (a smaller one from the ISP is the
	// board's to report), a static one, the ULA's /48.
	maxBits := 48 // the ULA
	switch {
	case static && w.Prefix != "":
		if p, err := netip.ParsePrefix(w.Prefix); err == nil && p.Bits() >= MinPDLength && p.Bits() <= MaxPDLength {
			maxBits = p.Bits()
		}
	case w.WantsPD() && w.PDHint() >= MinPDLength && w.PDHint() <= MaxPDLength:
		maxBits = w.PDHint()
	}
	if l.SubnetID < 0 || l.SubnetID >= 1<<(64-maxBits) {
		c.bad("ipv6.lan.subnet_id", "%d: want 0-%d (a /64 inside a /%d)", l.SubnetID, 1<<(64-maxBits)-1, maxBits)
	}
	for i, d := range l.DNS {
		a, err := netip.ParseAddr(d)
		switch {
		case err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "":
			c.bad(fmt.Sprintf("ipv6.lan.dns[%d]", i), "%q: want an IPv6 address (no zone), e.g. fd12:3456:789a::1", d)
		case a.IsLinkLocalUnicast():
			c.bad(fmt.Sprintf("ipv6.lan.dns[%d]", i), "%s is link-local: RDNSS addresses may be, but many clients ignore them; want a global or ULA address", a)
		case notUnicast6(a) != "":
			c.bad(fmt.Sprintf("ipv6.lan.dns[%d]", i), "%s is %s: want a resolver's unicast address", a, notUnicast6(a))
		}
	}
	if len(l.DNS) > MaxRDNSS {
		c.bad("ipv6.lan.dns", "%d resolvers: clients take at most %d (RFC 8106 section 5.3.1 advice)", len(l.DNS), MaxRDNSS)
	}
	for i, d := range l.Domains {
		if len(d) > 253 || !domainRE.MatchString(d) {
			c.bad(fmt.Sprintf("ipv6.lan.domains[%d]", i), "%q: want a domain of dot-separated labels (lower-case letters, digits, dashes), e.g. home.arpa", d)
		}
	}

	names := map[string]int{}
	macs := map[string]int{}
	ids := map[netip.Addr]int{}
	for i, h := range v.Hosts {
		p := fmt.Sprintf("ipv6.hosts[%d]", i)
		if !hostnameRE.MatchString(h.Name) {
			c.bad(p+".name", "%q: want a host name of lower-case letters, digits and dashes, 1-63 long", h.Name)
		} else if j, dup := names[h.Name]; dup {
			c.bad(p+".name", "%s is ipv6.hosts[%d]'s name already", h.Name, j)
		} else {
			names[h.Name] = i
		}
		if h.MAC != "" {
			mac, ok := normalMAC(h.MAC)
			if !ok {
				c.bad(p+".mac", "%q: want a MAC address like 52:54:00:12:34:56", h.MAC)
			} else if why := notHostMAC(mac); why != "" {
				c.bad(p+".mac", "%s is %s, no one host's", mac, why)
			} else if j, dup := macs[mac]; dup {
				c.bad(p+".mac", "%s is ipv6.hosts[%d]'s already", mac, j)
			} else {
				macs[mac] = i
			}
		}
		id, err := ParseIPv6ID(h.ID)
		switch {
		case err != nil:
			c.bad(p+".id", "%v", err)
		case ids[id] != 0:
			c.bad(p+".id", "%s is ipv6.hosts[%d]'s already", id, ids[id]-1)
		default:
			ids[id] = i + 1
		}
	}
}

// MaxRDNSS is how many resolvers the LAN's advertisements carry: RFC
// 8106 section 5.3.1 has clients keep three.
const MaxRDNSS = 3

// notUnicast6 says why a is no unicast address a host or network can
// have on the internet or a LAN ("" when it can): unspecified, loopback,
// multicast, link-local, or IPv4-mapped.
func notUnicast6(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLoopback():
		return "the loopback address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.Is4In6():
		return "an IPv4-mapped address"
	}
	return ""
}

// IPv6Forward is a port forward's IPv6 side (firewall.port_forwards[i]
// with ipv6_host): new connections from the WAN over IPv6 to the host's
// interface identifier ID, in whatever global prefix the LAN has, on
// Proto and Port, are let in. The port is the host's own: IPv6 has no
// translation (no NAT66).
type IPv6Forward struct {
	Index int    // in firewall.port_forwards
	Proto string // tcp or udp
	Port  int
	Host  string     // the ipv6.hosts entry's name
	ID    netip.Addr // its interface identifier, ::10
}

// IPv6Forwards resolves the port forwards' ipv6_host fields: ocfw
// validate and the board (through Validate) and the firewall (which
// builds its v6 rules from the result) share this one check. Errors are
// at the forward's field paths; a forward with an error is left out.
// The forward's other fields (proto, port, to) are checked by Validate's
// firewall step and again by the firewall itself.
func (s *Site) IPv6Forwards() ([]IPv6Forward, []Error) {
	var out []IPv6Forward
	var errs []Error
	bad := func(path, format string, args ...any) {
		errs = append(errs, Error{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	for i, f := range s.Firewall.PortForwards {
		if f.IPv6Host == "" {
			continue
		}
		p := fmt.Sprintf("firewall.port_forwards[%d]", i)
		ok := true
		if f.ToPort != 0 && f.ToPort != f.Port {
			bad(p+".to_port", "%d differs from port %d: over IPv6 the WAN reaches %s's own address and port, nothing is translated (no NAT66); leave to_port out or set it to %d, or drop ipv6_host", f.ToPort, f.Port, f.IPv6Host, f.Port)
			ok = false
		}
		switch {
		case !s.IPv6.On():
			bad(p+".ipv6_host", "%q: ipv6 is off (ipv6.enable: false): there is no IPv6 to open the port over", f.IPv6Host)
			continue
		case s.IPv6.WAN.WANMode() == IPv6ModeOff:
			bad(p+".ipv6_host", "%q: ipv6.wan.mode is off: nothing comes in over IPv6 on the WAN", f.IPv6Host)
			continue
		}
		h, j := IPv6Host{}, -1
		var names []string
		for k, x := range s.IPv6.Hosts {
			names = append(names, x.Name)
			if x.Name == f.IPv6Host && j < 0 {
				h, j = x, k
			}
		}
		if j < 0 {
			known := "ipv6.hosts is empty"
			if len(names) > 0 {
				known = "its names: " + strings.Join(names, ", ")
			}
			bad(p+".ipv6_host", "%q is not a name in ipv6.hosts (%s)", f.IPv6Host, known)
			continue
		}
		id, err := ParseIPv6ID(h.ID)
		if err != nil {
			bad(p+".ipv6_host", "%s's id (ipv6.hosts[%d].id) is not usable: %v", h.Name, j, err)
			continue
		}
		if ok {
			out = append(out, IPv6Forward{Index: i, Proto: f.Proto, Port: f.Port, Host: h.Name, ID: id})
		}
	}
	return out, errs
}

// ParseIPv6ID parses an ipv6.hosts id: an interface identifier written
// as an IPv6 address with the high 64 bits zero (::10), neither :: nor
// ::1 (the subnet-router anycast address, the router's own).
func ParseIPv6ID(s string) (netip.Addr, error) {
	id, err := netip.ParseAddr(s)
	a := id.As16()
	switch {
	case err != nil || !id.Is6() || id.Is4In6() || id.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q: want an interface identifier written as an IPv6 address with the high 64 bits zero, e.g. ::10", s)
	case [8]byte(a[:8]) != [8]byte{}:
		return netip.Addr{}, fmt.Errorf("%s: want only the low 64 bits (the interface identifier), e.g. ::10; the prefix comes from the LAN", id)
	case id.Compare(netip.MustParseAddr("::1")) <= 0:
		return netip.Addr{}, fmt.Errorf("%s: ::1 is the router's own, :: the subnet-router anycast; want another, e.g. ::10", id)
	}
	return id, nil
}
