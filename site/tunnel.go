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
	// Peer is the other end's WAN address (IPv4).
	Peer string `yaml:"peer" json:"peer"`
	// Local is this box's end: empty or "wan" for the WAN's static
	// address, or an address. A tunnel needs an address that does not
	// change, so a WAN on DHCP must name the address its ISP always gives.
	Local string `yaml:"local" json:"local,omitempty"`
	// LocalSubnet is the network behind this box the tunnel carries,
	// inside the LAN; default the LAN's network.
	LocalSubnet string `yaml:"local_subnet" json:"local_subnet,omitempty"`
	// RemoteSubnet is the network behind the peer.
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
	if a.Peer, err = netip.ParseAddr(t.Peer); err != nil || !a.Peer.Is4() {
		return a, fmt.Errorf("tunnel %s: peer %q: want an IPv4 address", t.Name, t.Peer)
	}
	if a.LocalSubnet, err = s.tunnelLocalSubnet(t); err != nil {
		return a, fmt.Errorf("tunnel %s: local_subnet: %w", t.Name, err)
	}
	if a.RemoteSubnet, err = subnet(t.RemoteSubnet); err != nil {
		return a, fmt.Errorf("tunnel %s: remote_subnet: %w", t.Name, err)
	}
	return a, nil
}

func (s *Site) tunnelLocal(t Tunnel) (netip.Addr, error) {
	if t.Local == "" || t.Local == LocalWAN {
		p, err := s.WAN.Address.Prefix()
		if err != nil {
			return netip.Addr{}, fmt.Errorf("the WAN has no static address (%q): give the address your ISP always gives this box, e.g. local: 198.51.100.2", s.WAN.Address)
		}
		return p.Addr(), nil
	}
	a, err := netip.ParseAddr(t.Local)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("%q: want wan (the WAN's static address) or an IPv4 address", t.Local)
	}
	return a, nil
}

func (s *Site) tunnelLocalSubnet(t Tunnel) (netip.Prefix, error) {
	if t.LocalSubnet != "" {
		return subnet(t.LocalSubnet)
	}
	lan := s.LAN.Address.Network()
	if !lan.IsValid() {
		return netip.Prefix{}, fmt.Errorf("no LAN address to default to: give local_subnet")
	}
	return lan, nil
}

// subnet parses a network: IPv4, written as its network address (a
// 192.168.1.1/24 is a host's address, not a network).
func subnet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil || !p.Addr().Is4():
		return p, fmt.Errorf("%q: want an IPv4 network with its prefix, e.g. 192.168.2.0/24", s)
	case p != p.Masked():
		return p, fmt.Errorf("%q: not a network address: did you mean %s?", s, p.Masked())
	}
	return p, nil
}

// checkTunnels adds the tunnels' problems to Validate's. wan is the WAN's
// static address with its prefix (invalid for DHCP), lan the LAN's
// network (invalid when there is none or it is wrong).
func (s *Site) checkTunnels(bad func(string, string, ...any), wan, lan netip.Prefix) {
	names := map[string]int{}
	keys := map[string]int{}
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
		if err != nil {
			bad(p+".local", "%v", err)
		} else if wan.IsValid() && local != wan.Addr() {
			bad(p+".local", "%s is not this box's WAN address %s: leave local out (or write wan)", local, wan.Addr())
		}
		peer, err := netip.ParseAddr(t.Peer)
		switch {
		case t.Peer == "":
			bad(p+".peer", "give the other end's WAN address, e.g. peer: 203.0.113.2")
		case err != nil || !peer.Is4():
			bad(p+".peer", "%s: want the other end's WAN address (IPv4)", catalog.Quote(t.Peer))
		case !peer.IsGlobalUnicast():
			bad(p+".peer", "%s: want a unicast address", peer)
		case local.IsValid() && peer == local:
			bad(p+".peer", "%s is this box's own address: give the other end's", peer)
		case lan.IsValid() && lan.Contains(peer):
			bad(p+".peer", "%s is inside the LAN %s: the peer is reached over the WAN", peer, lan)
		}
		if t.LocalSubnet != "" || lan.IsValid() {
			ls, err := s.tunnelLocalSubnet(t)
			switch {
			case err != nil:
				bad(p+".local_subnet", "%v", err)
			case lan.IsValid() && (ls.Bits() < lan.Bits() || !lan.Contains(ls.Addr())):
				bad(p+".local_subnet", "%s is not inside the LAN %s: the tunnel carries the LAN's traffic", ls, lan)
			}
		}
		if t.RemoteSubnet == "" {
			bad(p+".remote_subnet", "give the network behind the peer, e.g. remote_subnet: 192.168.2.0/24")
		} else if rs, err := subnet(t.RemoteSubnet); err != nil {
			bad(p+".remote_subnet", "%v", err)
		} else {
			switch {
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
