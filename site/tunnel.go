package site

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// Tunnel is one site-to-site IPsec tunnel: ESP in tunnel mode between
// this box's WAN address and the peer's, carrying traffic between
// LocalSubnet (behind this box) and RemoteSubnet (behind the peer). Keys
// come from IKEv2 with a pre-shared key (keying: ikev2, the default; see
// ike.go) or are manual: generated on the host for both ends (TunnelKeys),
// never renegotiated (keying: manual, or any tunnel naming keys, cipher or
// auth without keying, as every tunnel did before IKEv2).
type Tunnel struct {
	// Name identifies the tunnel in both sites' configs and in its key
	// file: the two ends use the same name.
	Name string `yaml:"name" json:"name"`
	// Peer is the other end's WAN address, IPv4 or IPv6.
	Peer string `yaml:"peer" json:"peer"`
	// Local is this box's end: empty or "wan" for the WAN's static
	// address (ipv6.wan.address when the peer is IPv6), or an address of
	// the peer's family. A tunnel needs an address that does not change,
	// so a WAN on DHCP (or SLAAC) must name the address its ISP always
	// gives.
	Local string `yaml:"local" json:"local,omitempty"`
	// LocalSubnet is the network behind this box the tunnel carries,
	// inside the LAN; default the LAN's (IPv4) network. IPv6 prefixes
	// work too (over an IPv4 or IPv6 WAN); the two subnets are of one
	// family, and an IPv6 one is always written out.
	LocalSubnet string `yaml:"local_subnet" json:"local_subnet,omitempty"`
	// RemoteSubnet is the network behind the peer, of LocalSubnet's
	// family.
	RemoteSubnet string `yaml:"remote_subnet" json:"remote_subnet"`
	// Keying is KeyingIKEv2 or KeyingManual; "" means Mode's default.
	Keying string `yaml:"keying" json:"keying,omitempty"`
	// Manual keys. Cipher is one of TunnelCiphers and Auth one of
	// TunnelAuths, as the catalog names them.
	Cipher string `yaml:"cipher" json:"cipher,omitempty"`
	Auth   string `yaml:"auth" json:"auth,omitempty"`
	// Keys is the key file's name: on the host beside the site config, on
	// the box in the data partition's ocfw folder (beside site.json). It
	// is never built into an image.
	Keys string `yaml:"keys" json:"keys,omitempty"`

	// IKEv2. PSK is the PSK file's name, kept like the key file (on the
	// card, never in an image).
	PSK string `yaml:"psk" json:"psk,omitempty"`
	// IKEProposals and ESPProposals are proposals in strongSwan's syntax
	// (aes128-sha256-modp2048), most wanted first; default
	// DefaultIKEProposals and DefaultESPProposals.
	IKEProposals []string `yaml:"ike_proposals" json:"ike_proposals,omitempty"`
	ESPProposals []string `yaml:"esp_proposals" json:"esp_proposals,omitempty"`
	// LocalID and RemoteID are the IKE identities; default the two WAN
	// addresses.
	LocalID  string `yaml:"local_id" json:"local_id,omitempty"`
	RemoteID string `yaml:"remote_id" json:"remote_id,omitempty"`
	// IKELifetime and Lifetime (the CHILD SAs') are Go durations; DPD is
	// the liveness check's interval, or "off".
	IKELifetime string `yaml:"ike_lifetime" json:"ike_lifetime,omitempty"`
	Lifetime    string `yaml:"lifetime" json:"lifetime,omitempty"`
	DPD         string `yaml:"dpd" json:"dpd,omitempty"`
	// PFS: each CHILD SA rekey runs a Diffie-Hellman of its own in the
	// IKE SA's group; default true.
	PFS *bool `yaml:"pfs" json:"pfs,omitempty"`
}

// LocalWAN is the Local value for the WAN's static address.
const LocalWAN = "wan"

// The algorithms a tunnel may use: the block ciphers and MACs the boards'
// engines do and the kernel's ESP takes.
var (
	TunnelCiphers = []string{"aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "des-ede3-cbc"}
	TunnelAuths   = []string{"hmac-sha1", "hmac-sha256"}
)

// authTruncBits is each MAC's ICV length in ESP: 96 bits for HMAC-SHA1
// (RFC 2404), 128 for HMAC-SHA256 (RFC 4868). The kernel's plain
// XFRMA_ALG_AUTH would truncate SHA-256 to 96 bits, which no other
// implementation speaks, so the installer must pass these.
var authTruncBits = map[string]int{"hmac-sha1": 96, "hmac-sha256": 128}

var (
	tunnelNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)
	keysNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// tunnelLinkLocal6 is fe80::/10: never a tunnel's network (it stays on
// its link).
var tunnelLinkLocal6 = netip.MustParsePrefix("fe80::/10")

// TunnelAddrs are a tunnel's addresses, parsed, from this box's side.
type TunnelAddrs struct {
	Local, Peer               netip.Addr   // outer: the WAN addresses
	LocalSubnet, RemoteSubnet netip.Prefix // inner: what the tunnel carries
}

// TunnelAddrs resolves a tunnel's addresses against the site: Local
// defaults to the WAN's static address, LocalSubnet to the LAN's network.
// It checks only what it needs to parse; Validate checks the rest.
func (s *Site) TunnelAddrs(t Tunnel) (TunnelAddrs, error) {
	var a TunnelAddrs
	var err error
	if a.Local, err = s.tunnelLocal(t); err != nil {
		return a, fmt.Errorf("tunnel %s: local: %w", t.Name, err)
	}
	if a.Peer, err = peerAddr(t.Peer); err != nil {
		return a, fmt.Errorf("tunnel %s: peer %q: want an IPv4 or IPv6 address", t.Name, t.Peer)
	}
	if a.Local.Is4() != a.Peer.Is4() {
		return a, fmt.Errorf("tunnel %s: local %s and peer %s: want two addresses of one family", t.Name, a.Local, a.Peer)
	}
	if a.LocalSubnet, err = s.tunnelLocalSubnet(t); err != nil {
		return a, fmt.Errorf("tunnel %s: local_subnet: %w", t.Name, err)
	}
	if a.RemoteSubnet, err = subnet(t.RemoteSubnet); err != nil {
		return a, fmt.Errorf("tunnel %s: remote_subnet: %w", t.Name, err)
	}
	if a.LocalSubnet.Addr().Is4() != a.RemoteSubnet.Addr().Is4() {
		return a, fmt.Errorf("tunnel %s: local_subnet %s and remote_subnet %s: want two networks of one family", t.Name, a.LocalSubnet, a.RemoteSubnet)
	}
	return a, nil
}

// peerAddr parses a tunnel's peer: an IPv4 or IPv6 address, no zone, no
// IPv4-mapped IPv6 (the kernel would take it for another family).
func peerAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err == nil && (a.Zone() != "" || a.Is4In6()) {
		err = fmt.Errorf("%q: zoned or IPv4-mapped", s)
	}
	return a, err
}

// peerIs6 says whether the tunnel's peer is written as an IPv6 address:
// the default local end is then the WAN's static IPv6 address.
func (t Tunnel) peerIs6() bool {
	a, err := peerAddr(t.Peer)
	return err == nil && a.Is6()
}

func (s *Site) tunnelLocal(t Tunnel) (netip.Addr, error) {
	if (t.Local == "" || t.Local == LocalWAN) && t.peerIs6() {
		w := s.IPv6.WAN
		p, err := netip.ParsePrefix(w.Address)
		if w.WANMode() != IPv6ModeStatic || err != nil || !p.Addr().Is6() {
			return netip.Addr{}, fmt.Errorf("the peer is IPv6 and the WAN has no static IPv6 address (ipv6.wan.mode static with its address): give the IPv6 address your ISP always gives this box, e.g. local: 2001:db8::2")
		}
		return p.Addr(), nil
	}
	if t.Local == "" || t.Local == LocalWAN {
		p, err := s.WAN.Address.Prefix()
		if err != nil {
			return netip.Addr{}, fmt.Errorf("the WAN has no static address (%q): give the address your ISP always gives this box, e.g. local: 198.51.100.2", s.WAN.Address)
		}
		return p.Addr(), nil
	}
	a, err := peerAddr(t.Local)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q: want wan (the WAN's static address) or an IPv4 or IPv6 address", t.Local)
	}
	return a, nil
}

func (s *Site) tunnelLocalSubnet(t Tunnel) (netip.Prefix, error) {
	if t.LocalSubnet != "" {
		return subnet(t.LocalSubnet)
	}
	if rs, err := subnet(t.RemoteSubnet); err == nil && rs.Addr().Is6() {
		// The LAN's IPv6 prefixes may come from the ISP and change;
		// the tunnel's must not, so it is written out.
		return netip.Prefix{}, fmt.Errorf("remote_subnet is IPv6: give the IPv6 prefix of this LAN the tunnel carries, e.g. local_subnet: fd12:3456:789a:1::/64 (a /64 of the site's ula)")
	}
	lan := s.LAN.Address.Network()
	if !lan.IsValid() {
		return netip.Prefix{}, fmt.Errorf("no LAN address to default to: give local_subnet")
	}
	return lan, nil
}

// subnet parses a network, IPv4 or IPv6, written as its network address
// (a 192.168.1.1/24 is a host's address, not a network).
func subnet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil || p.Addr().Is4In6() || p.Addr().Zone() != "":
		return p, fmt.Errorf("%q: want an IPv4 or IPv6 network with its prefix, e.g. 192.168.2.0/24 or fd12:3456:789a:2::/64", s)
	case p != p.Masked():
		return p, fmt.Errorf("%q: not a network address: did you mean %s?", s, p.Masked())
	case p.Addr().Is6() && (p.Bits() < 8 || notUnicast6(p.Addr()) != "" || p.Overlaps(tunnelLinkLocal6)):
		return p, fmt.Errorf("%q: want a site's unicast IPv6 prefix (a ULA or global one, e.g. fd12:3456:789a:2::/64), not link-local, multicast or shorter than /8", s)
	}
	return p, nil
}

// checkTunnels adds the tunnels' problems to Validate's. wan is the WAN's
// static address with its prefix (invalid for DHCP), lan the LAN's
// network (invalid when there is none or it is wrong).
func (s *Site) checkTunnels(bad func(string, string, ...any), wan, lan netip.Prefix) {
	names := map[string]int{}
	keys := map[string]int{}
	ikePeers := map[netip.Addr]int{}
	type remote struct {
		i int
		p netip.Prefix
	}
	var remotes []remote
	for i, t := range s.Tunnels {
		p := fmt.Sprintf("tunnels[%d]", i)
		switch j, dup := names[t.Name]; {
		case !tunnelNameRE.MatchString(t.Name):
			bad(p+".name", "%s: want a name of lower-case letters, digits and dashes, 1-32 long, the same at both ends", catalog.Quote(t.Name))
		case dup:
			bad(p+".name", "tunnel %s is already tunnels[%d]", t.Name, j)
		default:
			names[t.Name] = i
		}
		if !s.LAN.HasLAN() {
			bad(p, "a tunnel joins this site's LAN to the peer's: the site has no lan")
		}
		local, err := s.tunnelLocal(t)
		wan6 := s.staticWAN6()
		switch {
		case err != nil:
			bad(p+".local", "%v", err)
		case local.Is4() && wan.IsValid() && local != wan.Addr():
			bad(p+".local", "%s is not this box's WAN address %s: leave local out (or write wan)", local, wan.Addr())
		case local.Is6() && wan6.IsValid() && local != wan6.Addr():
			bad(p+".local", "%s is not this box's WAN IPv6 address %s (ipv6.wan.address): leave local out (or write wan)", local, wan6.Addr())
		case local.Is6() && notUnicast6(local) != "":
			bad(p+".local", "%s is %s: want this box's global WAN address", local, notUnicast6(local))
		case local.Is6() && !s.IPv6.On():
			bad(p+".local", "%s is IPv6 and ipv6.enable is false: the WAN has no IPv6", local)
		}
		peer, err := peerAddr(t.Peer)
		switch {
		case t.Peer == "":
			bad(p+".peer", "give the other end's WAN address, e.g. peer: 203.0.113.2 (or an IPv6 one)")
		case err != nil:
			bad(p+".peer", "%s: want the other end's WAN address (IPv4 or IPv6)", catalog.Quote(t.Peer))
		case !peer.IsGlobalUnicast():
			bad(p+".peer", "%s: want a unicast address", peer)
		case local.IsValid() && peer == local:
			bad(p+".peer", "%s is this box's own address: give the other end's", peer)
		case local.IsValid() && local.Is4() != peer.Is4():
			bad(p+".peer", "%s and this end's address %s are of two families: ESP runs over one (an IPv6 peer needs this box's IPv6 WAN address as local)", peer, local)
		case lan.IsValid() && lan.Contains(peer):
			bad(p+".peer", "%s is inside the LAN %s: the peer is reached over the WAN", peer, lan)
		}
		var ls netip.Prefix
		if t.LocalSubnet != "" || lan.IsValid() {
			ls, err = s.tunnelLocalSubnet(t)
			switch {
			case err != nil:
				bad(p+".local_subnet", "%v", err)
			case ls.Addr().Is4() && lan.IsValid() && (ls.Bits() < lan.Bits() || !lan.Contains(ls.Addr())):
				bad(p+".local_subnet", "%s is not inside the LAN %s: the tunnel carries the LAN's traffic", ls, lan)
			case ls.Addr().Is6() && !s.IPv6.On():
				bad(p+".local_subnet", "%s is IPv6 and ipv6.enable is false: the LAN has no IPv6", ls)
			case ls.Addr().Is6() && peer.IsValid() && ls.Contains(peer):
				bad(p+".local_subnet", "%s holds the peer's address %s", ls, peer)
			}
		}
		if t.RemoteSubnet == "" {
			bad(p+".remote_subnet", "give the network behind the peer, e.g. remote_subnet: 192.168.2.0/24 (or an IPv6 prefix)")
		} else if rs, err := subnet(t.RemoteSubnet); err != nil {
			bad(p+".remote_subnet", "%v", err)
		} else {
			switch {
			case ls.IsValid() && ls.Addr().Is4() != rs.Addr().Is4():
				bad(p+".remote_subnet", "%s and local_subnet %s are of two families: a tunnel carries one (write a second tunnel for the other)", rs, ls)
			case rs.Addr().Is6() && ls.IsValid() && rs.Overlaps(ls):
				bad(p+".remote_subnet", "%s overlaps local_subnet %s: the two sites need different networks", rs, ls)
			case wan6.IsValid() && rs.Overlaps(wan6.Masked()):
				bad(p+".remote_subnet", "%s overlaps the WAN's IPv6 network %s", rs, wan6.Masked())
			case lan.IsValid() && rs.Overlaps(lan):
				bad(p+".remote_subnet", "%s overlaps the LAN %s: the two sites need different networks", rs, lan)
			case wan.IsValid() && rs.Overlaps(wan.Masked()):
				bad(p+".remote_subnet", "%s overlaps the WAN network %s", rs, wan.Masked())
			case peer.IsValid() && rs.Contains(peer):
				bad(p+".remote_subnet", "%s holds the peer's address %s: the tunnel's own packets would go into it", rs, peer)
			}
			for _, r := range remotes {
				if r.p.Overlaps(rs) {
					bad(p+".remote_subnet", "%s overlaps tunnels[%d]'s remote_subnet %s", rs, r.i, r.p)
					break
				}
			}
			remotes = append(remotes, remote{i, rs})
		}
		switch t.Mode() {
		case KeyingManual:
			checkManual(bad, p, t)
			if !contains(TunnelCiphers, t.Cipher) {
				bad(p+".cipher", "%s: want one of %s%s", catalog.Quote(t.Cipher), strings.Join(TunnelCiphers, ", "), catalog.Suggest(t.Cipher, TunnelCiphers))
			}
			if !contains(TunnelAuths, t.Auth) {
				bad(p+".auth", "%s: want one of %s%s", catalog.Quote(t.Auth), strings.Join(TunnelAuths, ", "), catalog.Suggest(t.Auth, TunnelAuths))
			}
			switch j, dup := keys[t.Keys]; {
			case t.Keys == "":
				bad(p+".keys", "name the tunnel's key file (made by ocfw tunnel keys), e.g. keys: %s.keys", orDefault(t.Name, "a-b"))
			case !keysNameRE.MatchString(t.Keys) || reservedName(t.Keys):
				bad(p+".keys", "%s: want a plain file name (letters, digits, . _ -; not site.json or the store's files): the file beside the site config, and in the card's ocfw folder", catalog.Quote(t.Keys))
			case dup:
				bad(p+".keys", "%s is already tunnels[%d]'s key file: each tunnel has its own", t.Keys, j)
			default:
				keys[t.Keys] = i
			}
		case KeyingIKEv2:
			s.checkIKE(bad, p, t, local)
			// The IKE endpoint (router/ike) answers a peer by its
			// address, one tunnel each: a second IKEv2 tunnel to the
			// same address (another family's networks, say) would get
			// the first one's settings when the peer initiates.
			if j, dup := ikePeers[peer]; dup && peer.IsValid() {
				bad(p+".peer", "%s is already tunnels[%d]'s IKEv2 peer: IKE runs one tunnel per peer address; carry the other networks between other WAN addresses (the IPv6 ones, say) or with keying: manual", peer, j)
			} else if peer.IsValid() {
				ikePeers[peer] = i
			}
			if j, dup := keys[t.PSK]; dup && t.PSK != "" {
				bad(p+".psk", "%s is already tunnels[%d]'s file: each tunnel has its own", t.PSK, j)
			} else if t.PSK != "" {
				keys[t.PSK] = i
			}
		default:
			bad(p+".keying", "%s: want %s (the default: IKEv2 with a pre-shared key) or %s (a key file made by ocfw tunnel keys)%s", catalog.Quote(t.Keying), KeyingIKEv2, KeyingManual, catalog.Suggest(t.Keying, Keyings))
		}
	}
	s.checkIKEPorts(bad)
}

// staticWAN6 is ipv6.wan.address of a static IPv6 WAN; invalid
// otherwise.
func (s *Site) staticWAN6() netip.Prefix {
	if !s.IPv6.On() || s.IPv6.WAN.WANMode() != IPv6ModeStatic {
		return netip.Prefix{}
	}
	p, err := netip.ParsePrefix(s.IPv6.WAN.Address)
	if err != nil || !p.Addr().Is6() {
		return netip.Prefix{}
	}
	return p
}

// reservedName says whether a file name in the ocfw folder is taken by
// site.json or the store's files (FAT compares names without case).
func reservedName(name string) bool {
	n := strings.ToLower(name)
	return n == CardFile || n == "readme.txt" || strings.HasSuffix(n, ".bin") || strings.HasPrefix(n, "report-")
}

func orDefault(s, d string) string {
	if tunnelNameRE.MatchString(s) {
		return s
	}
	return d
}
