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

// Prefix is the address with its prefix: IPv4, a prefix of /8 to /30
// (room for the router and at least one host; a /0 LAN would take in the
// whole internet), and a host's address, not the network's or its
// broadcast.
func (a LANAddress) Prefix() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(string(a))
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q: want the router's LAN address with its prefix, e.g. 192.168.1.1/24", string(a))
	}
	if p.Bits() < MinLANBits || p.Bits() > MaxLANBits {
		return netip.Prefix{}, fmt.Errorf("%q: want the router's LAN address with its prefix, e.g. 192.168.1.1/24: the prefix must be /%d to /%d", string(a), MinLANBits, MaxLANBits)
	}
	switch p.Addr() {
	case p.Masked().Addr():
		return netip.Prefix{}, fmt.Errorf("%q: %s is the LAN's network address: give the router a host's address in %s, e.g. %s/%d", string(a), p.Addr(), p.Masked(), p.Addr().Next(), p.Bits())
	case Broadcast(p):
		return netip.Prefix{}, fmt.Errorf("%q: %s is the LAN's broadcast address: give the router a host's address in %s, e.g. %s/%d", string(a), p.Addr(), p.Masked(), p.Masked().Addr().Next(), p.Bits())
	}
	return p, nil
}

// The LAN's prefix lengths: /30 leaves two hosts (the router and one
// more); /8 is the largest private network.
const (
	MinLANBits = 8
	MaxLANBits = 30
)

// Broadcast is the last address of p's IPv4 network.
func Broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// IsHostAddr says whether a is an address a host in the IPv4 network p
// may have: inside it, not its network or broadcast address (a /31 or /32
// has neither).
func IsHostAddr(p netip.Prefix, a netip.Addr) bool {
	if !a.Is4() || !p.Masked().Contains(a) {
		return false
	}
	return p.Bits() >= 31 || (a != p.Masked().Addr() && a != Broadcast(p))
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
