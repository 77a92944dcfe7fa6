package site

import (
	"fmt"
	"net/netip"
	"time"
)

// WANAddress is the WAN's address as a site gives it: DHCPAddress, or a
// static IPv4 address with its prefix (198.51.100.2/24). It is a string
// in the YAML and JSON forms; Prefix is its one parser, so the host's
// check and the board's use cannot read it differently.
type WANAddress string

// DHCPAddress asks for the WAN's address by DHCP.
const DHCPAddress WANAddress = "dhcp"

// IsDHCP says whether the WAN takes its address by DHCP.
func (a WANAddress) IsDHCP() bool { return a == DHCPAddress }

// Prefix is the static address with its prefix; an error for dhcp, an
// empty address or anything but an IPv4 address with its prefix.
func (a WANAddress) Prefix() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(string(a))
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q: want dhcp or an IPv4 address with its prefix, e.g. 198.51.100.2/24", string(a))
	}
	return p, nil
}

// LANAddress is the router's own address on the LAN with the LAN's prefix
// (192.168.1.1/24), a string in the YAML and JSON forms; Prefix is its
// one parser.
type LANAddress string

// Prefix is the address with its prefix: IPv4, and a prefix that leaves
// room for the router and at least one host (at most /30).
func (a LANAddress) Prefix() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(string(a))
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return netip.Prefix{}, fmt.Errorf("%q: want the router's LAN address with its prefix, e.g. 192.168.1.1/24", string(a))
	}
	return p, nil
}

// Network is the LAN's network (the prefix masked), invalid when the
// address does not parse.
func (a LANAddress) Network() netip.Prefix {
	p, err := a.Prefix()
	if err != nil {
		return netip.Prefix{}
	}
	return p.Masked()
}

// ParseLease parses the DHCP lease time: DefaultLease when unset, an error
// when it is not a Go duration of a minute or more.
func (d DHCP) ParseLease() (time.Duration, error) {
	if d.Lease == "" {
		return DefaultLease, nil
	}
	t, err := time.ParseDuration(d.Lease)
	if err != nil || t < time.Minute {
		return DefaultLease, fmt.Errorf("%q: want a duration of a minute or more, e.g. 12h", d.Lease)
	}
	return t, nil
}
