package ra

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Parse reads a router advertisement as the WAN hears it from the ISP:
// the M and O flags (which tell the router how to take its own WAN
// address and its other configuration), the router lifetime, the MTU,
// the prefixes and the resolvers and search domains (RFC 8106). It
// checks what RFC 4861 section 6.1.2 asks of a received advertisement
// (src link-local, hop limit 255, code 0, at least 16 bytes, options
// of non-zero length); the caller passes what the socket said (hop
// limit -1 for unknown, which fails). Options it does not know are
// skipped, as RFC 4861 section 4.6 wants.
func Parse(m []byte, src netip.Addr, hopLimit int) (Advert, error) {
	var a Advert
	switch {
	case len(m) < 16:
		return a, errors.New("shorter than 16 bytes")
	case m[0] != typeRA:
		return a, fmt.Errorf("type %d, not a router advertisement", m[0])
	case m[1] != 0:
		return a, fmt.Errorf("code %d, not 0", m[1])
	case hopLimit != 255:
		return a, fmt.Errorf("hop limit %d, not 255: not from this link", hopLimit)
	case !src.Unmap().IsLinkLocalUnicast():
		return a, fmt.Errorf("source %s is not link-local", src)
	}
	a.Managed, a.Other = m[5]&0x80 != 0, m[5]&0x40 != 0
	a.RouterLifetime = time.Duration(binary.BigEndian.Uint16(m[6:])) * time.Second
	for o := m[16:]; len(o) > 0; {
		if len(o) < 2 || o[1] == 0 || int(o[1])*8 > len(o) {
			return Advert{}, errors.New("an option of bad length")
		}
		body := o[:int(o[1])*8]
		o = o[len(body):]
		switch body[0] {
		case optSourceLL:
			a.SourceMAC = net.HardwareAddr(append([]byte(nil), body[2:8]...))
		case optMTU:
			a.MTU = int(binary.BigEndian.Uint32(body[4:8]))
		case optPrefix:
			if len(body) != 32 || body[2] > 128 {
				return Advert{}, errors.New("a prefix option of bad length")
			}
			addr := netip.AddrFrom16([16]byte(body[16:32]))
			p := Prefix{Prefix: netip.PrefixFrom(addr, int(body[2])).Masked(),
				NotOnLink: body[3]&0x80 == 0, NoSLAAC: body[3]&0x40 == 0,
				Valid:     lifetime(binary.BigEndian.Uint32(body[4:])),
				Preferred: lifetime(binary.BigEndian.Uint32(body[8:]))}
			a.Prefixes = append(a.Prefixes, p)
		case optRDNSS:
			// RFC 8106 5.1: length 3 or more, odd.
			if len(body) < 24 || (len(body)-8)%16 != 0 {
				return Advert{}, errors.New("an RDNSS option of bad length")
			}
			a.DNSLifetime = lifetime(binary.BigEndian.Uint32(body[4:]))
			for r := body[8:]; len(r) >= 16; r = r[16:] {
				a.RDNSS = append(a.RDNSS, netip.AddrFrom16([16]byte(r[:16])))
			}
		case optDNSSL:
			if len(body) < 16 {
				return Advert{}, errors.New("a DNSSL option of bad length")
			}
			ds, err := domainsWire(body[8:])
			if err != nil {
				return Advert{}, err
			}
			a.DNSSL = append(a.DNSSL, ds...)
		}
	}
	return a, nil
}

// lifetime is a 32-bit lifetime field; all ones (infinity) stays the
// largest Duration seconds() writes back as infinity.
func lifetime(s uint32) time.Duration {
	return time.Duration(s) * time.Second
}

// domainsWire reads DNSSL's names (RFC 8106 5.2: uncompressed, the
// rest of the option padded with zeros).
func domainsWire(b []byte) ([]string, error) {
	var out []string
	var labels []string
	for len(b) > 0 {
		n := int(b[0])
		b = b[1:]
		if n == 0 {
			if len(labels) > 0 {
				out = append(out, strings.Join(labels, "."))
				labels = nil
			}
			continue
		}
		if n > 63 || n > len(b) {
			return nil, errors.New("a DNSSL name of bad length")
		}
		if strings.IndexByte(string(b[:n]), '.') >= 0 {
			return nil, errors.New("a DNSSL label with a dot in it")
		}
		labels = append(labels, string(b[:n]))
		b = b[n:]
	}
	if len(labels) > 0 {
		return nil, errors.New("a DNSSL name without its end")
	}
	return out, nil
}
