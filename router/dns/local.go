package dns

import (
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// TTLs of local answers: short, as leases come and go.
const (
	localTTL    = 60
	negativeTTL = 10
)

// localAnswer answers names the LAN owns, or says it does not:
//   - NAME.DOMAIN and a bare NAME of a host in Hosts (A, authoritative);
//   - any other name in DOMAIN: NXDOMAIN, or no data for another type;
//   - the reverse name of an IPv4 address in Allowed: PTR NAME.DOMAIN,
//     or NXDOMAIN.
//
// Other bare names are forwarded. Nothing here goes upstream: the LAN's
// names are not the WAN resolver's business.
func (f *Forwarder) localAnswer(qu query) (*dnsmessage.Message, bool) {
	name := strings.TrimSuffix(strings.ToLower(qu.q.Name.String()), ".")
	if qu.q.Class != dnsmessage.ClassINET {
		return nil, false
	}
	if addr, ok := f.reverseLAN(name); ok {
		for _, h := range f.hosts() {
			if h.Addr == addr {
				return f.authoritative(qu, dnsmessage.TypePTR, &dnsmessage.PTRResource{PTR: f.fqdn(h.Name)}), true
			}
		}
		return f.authoritative(qu, 0, nil), true
	}
	label, inDomain := name, false
	if f.domain != "" && (name == f.domain || strings.HasSuffix(name, "."+f.domain)) {
		label, inDomain = strings.TrimSuffix(strings.TrimSuffix(name, f.domain), "."), true
	}
	if !inDomain && strings.Contains(name, ".") {
		return nil, false
	}
	if label != "" && validLabel(label) {
		// A name's first IPv4 entry answers A; its IPv6 entries
		// (one per LAN prefix: the ULA's, the delegated one's) answer
		// AAAA together.
		var a4 netip.Addr
		var a6 []netip.Addr
		for _, h := range f.hosts() {
			switch {
			case h.Name != label:
			case h.Addr.Is4() && !a4.IsValid():
				a4 = h.Addr
			case h.Addr.Is6():
				a6 = append(a6, h.Addr)
			}
		}
		switch {
		case qu.q.Type == dnsmessage.TypeAAAA && len(a6) > 0:
			m := f.authoritative(qu, dnsmessage.TypeAAAA, &dnsmessage.AAAAResource{AAAA: a6[0].As16()})
			for _, a := range a6[1:] {
				rr := m.Answers[0]
				rr.Body = &dnsmessage.AAAAResource{AAAA: a.As16()}
				m.Answers = append(m.Answers, rr)
			}
			return m, true
		case a4.IsValid():
			return f.authoritative(qu, dnsmessage.TypeA, &dnsmessage.AResource{A: a4.As4()}), true
		case len(a6) > 0:
			return f.authoritative(qu, dnsmessage.TypeAAAA, &dnsmessage.AAAAResource{AAAA: a6[0].As16()}), true
		}
	}
	if !inDomain {
		return nil, false // an unknown bare name ("com"): the world's
	}
	if label == "" {
		return f.nodata(qu), true // the domain itself
	}
	return f.authoritative(qu, 0, nil), true
}

// hosts are Hosts' entries with valid names, lower-cased.
func (f *Forwarder) hosts() []Host {
	if f.cfg.Hosts == nil {
		return nil
	}
	var out []Host
	for _, h := range f.cfg.Hosts() {
		h.Name = strings.ToLower(h.Name)
		if validLabel(h.Name) && h.Addr.IsValid() {
			h.Addr = h.Addr.Unmap()
			out = append(out, h)
		}
	}
	return out
}

// validLabel: RFC 1123, letters, digits and inner dashes, 1-63 long.
// Anything else (escapes, dots, spaces) a DHCP client sent is never
// answered.
func validLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// reverseLAN parses "d.c.b.a.in-addr.arpa" for an address in Allowed.
func (f *Forwarder) reverseLAN(name string) (netip.Addr, bool) {
	rest, ok := strings.CutSuffix(name, ".in-addr.arpa")
	if !ok {
		return netip.Addr{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil || (len(p) > 1 && p[0] == '0') {
			return netip.Addr{}, false
		}
		b[3-i] = byte(n)
	}
	a := netip.AddrFrom4(b)
	for _, p := range f.cfg.Allowed {
		if p.Contains(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (f *Forwarder) fqdn(label string) dnsmessage.Name {
	s := label + "."
	if f.domain != "" {
		s = label + "." + f.domain + "."
	}
	n, _ := dnsmessage.NewName(s)
	return n
}

// authoritative answers qu with body when qu asks for typ, with no data
// when the name exists (body non-nil) but qu asks another type, and
// NXDOMAIN when body is nil.
func (f *Forwarder) authoritative(qu query, typ dnsmessage.Type, body dnsmessage.ResourceBody) *dnsmessage.Message {
	if body == nil {
		m := f.nodata(qu)
		m.RCode = dnsmessage.RCodeNameError
		return m
	}
	if qu.q.Type != typ && qu.q.Type != dnsmessage.TypeALL {
		return f.nodata(qu)
	}
	return &dnsmessage.Message{Header: dnsmessage.Header{Authoritative: true},
		Answers: []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: qu.q.Name, Type: typ, Class: dnsmessage.ClassINET, TTL: localTTL}, Body: body}}}
}

// nodata is an authoritative empty answer, with the local zone's SOA so
// that clients cache the absence briefly.
func (f *Forwarder) nodata(qu query) *dnsmessage.Message {
	zone := f.domain
	if strings.HasSuffix(strings.ToLower(qu.q.Name.String()), ".in-addr.arpa.") || zone == "" {
		zone = "in-addr.arpa"
	}
	name := strings.ToLower(qu.q.Name.String())
	if name != zone+"." && !strings.HasSuffix(name, "."+zone+".") {
		// A bare name: no zone of ours holds it, so no SOA to show.
		return &dnsmessage.Message{Header: dnsmessage.Header{Authoritative: true}}
	}
	zn, _ := dnsmessage.NewName(zone + ".")
	mbox, _ := dnsmessage.NewName("hostmaster." + zone + ".")
	return &dnsmessage.Message{Header: dnsmessage.Header{Authoritative: true},
		Authorities: []dnsmessage.Resource{{
			Header: dnsmessage.ResourceHeader{Name: zn, Type: dnsmessage.TypeSOA, Class: dnsmessage.ClassINET, TTL: negativeTTL},
			Body:   &dnsmessage.SOAResource{NS: zn, MBox: mbox, Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, MinTTL: negativeTTL},
		}}}
}
