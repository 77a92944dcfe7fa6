// Package ra is the LAN's IPv6 router advertisement sender (RFC 4861
// section 6.2): periodic and solicited advertisements carrying the LAN's
// prefixes for SLAAC, its resolvers and search domains (RFC 8106), its
// MTU and the router lifetime, and a prefix that was replaced announced
// with preferred lifetime 0 so hosts stop using it at once (RFC 7084
// L-13, RFC 9096). Router advertisements from anyone else on the LAN are
// ignored and counted: the router is the LAN's router. On the WAN it
// listens instead (Listen, Parse): the ISP's advertisements say by
// their M and O flags how the router takes its own address and its
// other configuration, and carry resolvers (RDNSS).
//
// It is board-side code: it imports no host package.
package ra

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// ICMPv6 types (RFC 4861 section 4) and option types (RFC 4861, 8106).
const (
	typeRS = 133
	typeRA = 134

	optSourceLL = 1
	optPrefix   = 3
	optMTU      = 5
	optRoute    = 24
	optRDNSS    = 25
	optDNSSL    = 31
)

// Advert is what one router advertisement says.
type Advert struct {
	// Managed and Other are the M and O flags: addresses, or other
	// configuration only, from DHCPv6.
	Managed, Other bool
	// RouterLifetime is how long hosts use the router as a default
	// route; 0 when the router has no IPv6 upstream (it still gives
	// out its ULA prefix).
	RouterLifetime time.Duration
	// MTU is the link MTU announced; 0 for none.
	MTU int
	// SourceMAC is the interface's link-layer address (source
	// link-layer address option); nil for none.
	SourceMAC net.HardwareAddr
	Prefixes  []Prefix
	// Routes are route information options (RFC 4191): prefixes beyond
	// the link the router routes to, whether or not it is a default
	// router.
	Routes []Route
	// RDNSS and DNSSL are the resolvers and search domains, valid for
	// DNSLifetime.
	RDNSS       []netip.Addr
	DNSSL       []string
	DNSLifetime time.Duration
}

// Prefix is one prefix information option: on-link, and autonomous
// (hosts make their SLAAC address in it) unless NoSLAAC.
type Prefix struct {
	Prefix             netip.Prefix
	Valid, Preferred   time.Duration
	NoSLAAC, NotOnLink bool
	// ValidEnds and PreferredEnds, when set, are when the lifetimes
	// run out whatever Valid and Preferred say (the delegation's): an
	// advertisement sent later announces what is left then (Advert.At),
	// never beyond the delegation (RFC 9096's L-15).
	ValidEnds, PreferredEnds time.Time
}

// Route is one route information option (RFC 4191 2.3): hosts may
// send to Prefix through the router for Lifetime, at medium preference.
type Route struct {
	Prefix   netip.Prefix
	Lifetime time.Duration
	// Ends, when set, is when the route runs out whatever Lifetime
	// says, as Prefix.ValidEnds.
	Ends time.Time
}

// At is a as announced at now: each lifetime with an end is at most
// what is left of it then (0 once past). Between two renumberings the
// advertisements count down in real time, as RFC 9096 asks, instead of
// repeating the lifetimes the last renumbering computed.
func (a Advert) At(now time.Time) Advert {
	left := func(d time.Duration, end time.Time) time.Duration {
		if end.IsZero() {
			return d
		}
		return max(0, min(d, end.Sub(now)))
	}
	a.Prefixes = slices.Clone(a.Prefixes)
	for i, p := range a.Prefixes {
		a.Prefixes[i].Valid = left(p.Valid, p.ValidEnds)
		a.Prefixes[i].Preferred = left(p.Preferred, p.PreferredEnds)
	}
	a.Routes = slices.Clone(a.Routes)
	for i, r := range a.Routes {
		a.Routes[i].Lifetime = left(r.Lifetime, r.Ends)
	}
	return a
}

// seconds is d in whole seconds for a 32-bit lifetime field, capped at
// the field's infinity (0xffffffff), never negative.
func seconds(d time.Duration) uint32 {
	s := d / time.Second
	switch {
	case s <= 0:
		return 0
	case s >= 0xffffffff:
		return 0xffffffff
	}
	return uint32(s)
}

// Marshal is the advertisement as an ICMPv6 message with the checksum
// left 0: the kernel fills it in for ICMPv6 raw sockets.
func (a Advert) Marshal() ([]byte, error) {
	b := make([]byte, 16, 256)
	b[0] = typeRA
	b[4] = 64 // current hop limit hosts should use
	if a.Managed {
		b[5] |= 0x80
	}
	if a.Other {
		b[5] |= 0x40
	}
	rl := a.RouterLifetime / time.Second
	if rl > 9000 { // RFC 4861 section 6.2.1: at most 9000 s
		rl = 9000
	}
	binary.BigEndian.PutUint16(b[6:], uint16(rl))
	// Reachable time and retransmit timer: 0, unspecified.
	if len(a.SourceMAC) > 0 {
		n := (2 + len(a.SourceMAC) + 7) / 8
		o := make([]byte, n*8)
		o[0], o[1] = optSourceLL, byte(n)
		copy(o[2:], a.SourceMAC)
		b = append(b, o...)
	}
	if a.MTU > 0 {
		o := make([]byte, 8)
		o[0], o[1] = optMTU, 1
		binary.BigEndian.PutUint32(o[4:], uint32(a.MTU))
		b = append(b, o...)
	}
	for _, p := range a.Prefixes {
		if !p.Prefix.Addr().Is6() || p.Prefix.Addr().Is4In6() {
			return nil, fmt.Errorf("ra: %s is no IPv6 prefix", p.Prefix)
		}
		o := make([]byte, 32)
		o[0], o[1], o[2] = optPrefix, 4, byte(p.Prefix.Bits())
		if !p.NotOnLink {
			o[3] |= 0x80
		}
		if !p.NoSLAAC {
			o[3] |= 0x40
		}
		pref := p.Preferred
		if pref > p.Valid {
			pref = p.Valid // RFC 4862 section 5.5.3 c: hosts drop it otherwise
		}
		binary.BigEndian.PutUint32(o[4:], seconds(p.Valid))
		binary.BigEndian.PutUint32(o[8:], seconds(pref))
		a16 := p.Prefix.Masked().Addr().As16()
		copy(o[16:], a16[:])
		b = append(b, o...)
	}
	for _, r := range a.Routes {
		if !r.Prefix.Addr().Is6() || r.Prefix.Addr().Is4In6() {
			return nil, fmt.Errorf("ra: route %s is no IPv6 prefix", r.Prefix)
		}
		// RFC 4191 2.3: the option's length in 8-octet units is 1, 2
		// or 3 as the prefix needs 0, 8 or 16 octets.
		n := 3
		switch bits := r.Prefix.Bits(); {
		case bits == 0:
			n = 1
		case bits <= 64:
			n = 2
		}
		o := make([]byte, n*8)
		o[0], o[1], o[2] = optRoute, byte(n), byte(r.Prefix.Bits())
		binary.BigEndian.PutUint32(o[4:], seconds(r.Lifetime))
		a16 := r.Prefix.Masked().Addr().As16()
		copy(o[8:], a16[:(n-1)*8])
		b = append(b, o...)
	}
	if len(a.RDNSS) > 0 {
		o := make([]byte, 8, 8+16*len(a.RDNSS))
		o[0], o[1] = optRDNSS, byte(1+2*len(a.RDNSS))
		binary.BigEndian.PutUint32(o[4:], seconds(a.DNSLifetime))
		for _, r := range a.RDNSS {
			if !r.Is6() || r.Is4In6() {
				return nil, fmt.Errorf("ra: RDNSS %s is no IPv6 address", r)
			}
			a16 := r.As16()
			o = append(o, a16[:]...)
		}
		b = append(b, o...)
	}
	if len(a.DNSSL) > 0 {
		o := make([]byte, 8)
		o[0] = optDNSSL
		binary.BigEndian.PutUint32(o[4:], seconds(a.DNSLifetime))
		for _, d := range a.DNSSL {
			wire, err := domainWire(d)
			if err != nil {
				return nil, err
			}
			o = append(o, wire...)
		}
		for len(o)%8 != 0 {
			o = append(o, 0)
		}
		if len(o)/8 > 255 {
			return nil, errors.New("ra: the search domains do not fit one DNSSL option")
		}
		o[1] = byte(len(o) / 8)
		b = append(b, o...)
	}
	return b, nil
}

// domainWire is d in DNS wire form (RFC 1035 section 3.1), as DNSSL
// carries it (no compression).
func domainWire(d string) ([]byte, error) {
	d = strings.TrimSuffix(d, ".")
	var w []byte
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 {
			return nil, fmt.Errorf("ra: search domain %q: empty label or one over 63 bytes", d)
		}
		w = append(w, byte(len(l)))
		w = append(w, l...)
	}
	return append(w, 0), nil
}

// checkRS says whether an ICMPv6 message is a valid router
// solicitation (RFC 4861 section 6.1.1) from src received with hopLimit:
// hop limit 255 (it came from this link), code 0, 8 bytes or more, every
// option of non-zero length, and no source link-layer address option
// when the source is unspecified.
func checkRS(m []byte, src netip.Addr, hopLimit int) error {
	switch {
	case len(m) < 8:
		return errors.New("shorter than 8 bytes")
	case m[0] != typeRS:
		return fmt.Errorf("type %d, not a router solicitation", m[0])
	case m[1] != 0:
		return fmt.Errorf("code %d, not 0", m[1])
	case hopLimit != 255:
		return fmt.Errorf("hop limit %d, not 255: not from this link", hopLimit)
	}
	for o := m[8:]; len(o) > 0; {
		if len(o) < 2 || o[1] == 0 || int(o[1])*8 > len(o) {
			return errors.New("an option of bad length")
		}
		if o[0] == optSourceLL && src.IsUnspecified() {
			return errors.New("a link-layer address option from the unspecified address")
		}
		o = o[int(o[1])*8:]
	}
	return nil
}
