package site

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// How a tunnel's SAs are keyed: by IKEv2 (RFC 7296, authenticated by a
// pre-shared key) or by hand (a key file both ends share).
const (
	KeyingIKEv2  = "ikev2"
	KeyingManual = "manual"
)

// Keyings are the values keying takes.
var Keyings = []string{KeyingIKEv2, KeyingManual}

// Mode is how the tunnel is keyed. IKEv2 is the default, but configs
// written before it existed name a key file (keys) and algorithms (cipher,
// auth) and no keying: a tunnel with any of those fields and no keying
// stays manual, so an existing pair keeps running unchanged.
func (t Tunnel) Mode() string {
	switch {
	case t.Keying != "":
		return t.Keying
	case t.Keys != "" || t.Cipher != "" || t.Auth != "":
		return KeyingManual
	}
	return KeyingIKEv2
}

// IKEv2 defaults and bounds. The lifetimes are strongSwan's rekey times
// (4 h for the IKE SA, 1 h for a CHILD SA), so a pair with strongSwan's
// defaults rekeys alike; the bounds keep a box from rekeying all the time
// (each rekey is a Diffie-Hellman on a slow CPU) or keeping a key for days.
const (
	DefaultIKELifetime   = 4 * time.Hour
	MinIKELifetime       = 10 * time.Minute
	MaxIKELifetime       = 24 * time.Hour
	DefaultChildLifetime = time.Hour
	MinChildLifetime     = 5 * time.Minute
	MaxChildLifetime     = 8 * time.Hour
	DefaultDPD           = 30 * time.Second
	MinDPD               = 10 * time.Second
	MaxDPD               = time.Hour
	// DPDOff turns the liveness check off.
	DPDOff = "off"
	// MaxProposals bounds each proposal list: more would only make the
	// IKE_SA_INIT packet bigger than a peer wants.
	MaxProposals = 8
)

// The default proposals, strongSwan's syntax. AES-128 first: the boards'
// engines that do AES do 128-bit keys (the Geode's only those); SHA-256;
// Curve25519 first since it is by far the cheapest on the boards' CPUs,
// then ECP-256 and MODP-2048 for peers without it. 3DES and SHA-1 are
// there for old peers only when the site names them.
var (
	DefaultIKEProposals = []string{"aes128-aes256-sha256-curve25519-ecp256-modp2048"}
	DefaultESPProposals = []string{"aes128-aes256-sha256"}
)

// Transform types (RFC 7296 3.3.2).
const (
	TransformEncr  = 1
	TransformPRF   = 2
	TransformInteg = 3
	TransformDH    = 4
)

// Transform is one algorithm of a proposal: its IANA transform type and
// ID (and key length for AES), the name the site config used, and for
// ciphers and MACs the catalog's name (what the kernel's ESP takes and
// the engines are proven for).
type Transform struct {
	Type    int
	ID      uint16
	KeyBits int    // ENCR_AES_CBC's key length attribute; 0 otherwise
	Token   string // strongSwan's name: aes128, sha256, prfsha1, ecp256
	Cipher  string // catalog name (aes-128-cbc, hmac-sha256); "" for PRF and DH
}

// proposalTokens are the algorithms of issue 21's list, by strongSwan's
// names. An integrity token in an IKE proposal also gives the PRF of the
// same hash when the proposal names none, as strongSwan does.
var proposalTokens = map[string]Transform{
	"aes128":     {Type: TransformEncr, ID: 12, KeyBits: 128, Cipher: "aes-128-cbc"},
	"aes192":     {Type: TransformEncr, ID: 12, KeyBits: 192, Cipher: "aes-192-cbc"},
	"aes256":     {Type: TransformEncr, ID: 12, KeyBits: 256, Cipher: "aes-256-cbc"},
	"3des":       {Type: TransformEncr, ID: 3, Cipher: "des-ede3-cbc"},
	"sha1":       {Type: TransformInteg, ID: 2, Cipher: "hmac-sha1"},
	"sha256":     {Type: TransformInteg, ID: 12, Cipher: "hmac-sha256"},
	"prfsha1":    {Type: TransformPRF, ID: 2},
	"prfsha256":  {Type: TransformPRF, ID: 5},
	"modp2048":   {Type: TransformDH, ID: 14},
	"ecp256":     {Type: TransformDH, ID: 19},
	"curve25519": {Type: TransformDH, ID: 31},
	"x25519":     {Type: TransformDH, ID: 31},
}

// ProposalTokens lists the names a proposal may use, for messages.
var ProposalTokens = []string{"aes128", "aes192", "aes256", "3des", "sha1", "sha256", "prfsha1", "prfsha256", "modp2048", "ecp256", "curve25519"}

var prfFor = map[string]string{"sha1": "prfsha1", "sha256": "prfsha256"}

// Proposal is one parsed proposal: the transforms of each type in the
// site config's order.
type Proposal struct {
	Encr, Integ, PRF, DH []Transform
}

// ParseProposal reads one proposal in strongSwan's syntax (algorithms
// joined by dashes, e.g. aes128-sha256-modp2048), for the IKE SA (esp
// false: encryption, integrity, optional PRF, DH group) or a CHILD SA (esp
// true: encryption and integrity only; PFS takes the IKE SA's group, see
// Tunnel.PFS).
func ParseProposal(s string, esp bool) (Proposal, error) {
	var p Proposal
	if s == "" {
		return p, fmt.Errorf("empty: want e.g. %s", map[bool]string{false: DefaultIKEProposals[0], true: DefaultESPProposals[0]}[esp])
	}
	seen := map[string]bool{}
	for _, tok := range strings.Split(s, "-") {
		tr, ok := proposalTokens[tok]
		if !ok {
			return p, fmt.Errorf("%s is not an algorithm this firmware speaks: want %s%s", catalog.Quote(tok), strings.Join(ProposalTokens, ", "), catalog.Suggest(tok, ProposalTokens))
		}
		if tok == "x25519" {
			tok = "curve25519"
		}
		if seen[tok] {
			return p, fmt.Errorf("%s appears twice", tok)
		}
		seen[tok] = true
		tr.Token = tok
		switch tr.Type {
		case TransformEncr:
			p.Encr = append(p.Encr, tr)
		case TransformInteg:
			p.Integ = append(p.Integ, tr)
		case TransformPRF:
			if esp {
				return p, fmt.Errorf("%s: a PRF belongs to the IKE SA's proposals, not esp_proposals", tok)
			}
			p.PRF = append(p.PRF, tr)
		case TransformDH:
			if esp {
				return p, fmt.Errorf("%s: esp_proposals name no Diffie-Hellman group: with pfs: true (the default) the CHILD SAs' rekeys use the IKE SA's group", tok)
			}
			p.DH = append(p.DH, tr)
		}
	}
	switch {
	case len(p.Encr) == 0:
		return p, fmt.Errorf("no encryption algorithm: add aes128, aes192, aes256 or 3des")
	case len(p.Integ) == 0:
		return p, fmt.Errorf("no integrity algorithm: add sha256 or sha1")
	case !esp && len(p.DH) == 0:
		return p, fmt.Errorf("no Diffie-Hellman group: add curve25519, ecp256 or modp2048")
	}
	if !esp && len(p.PRF) == 0 {
		for _, in := range p.Integ {
			tr := proposalTokens[prfFor[in.Token]]
			tr.Token = prfFor[in.Token]
			p.PRF = append(p.PRF, tr)
		}
	}
	return p, nil
}

// PreferCiphers reorders CHILD SA proposals so that the ciphers the box's
// proven engines run fastest are proposed first: fastest lists catalog
// cipher names, fastest first (the boot's engine choice). Within each
// proposal those ciphers come first in fastest's order, the others after
// them in the site config's order; proposals whose best cipher ranks
// higher move ahead, ties keeping the config's order. With no fastest the
// config's order stands.
func PreferCiphers(props []Proposal, fastest []string) []Proposal {
	rank := func(tr Transform) int {
		if i := slices.Index(fastest, tr.Cipher); i >= 0 {
			return i
		}
		return len(fastest)
	}
	out := make([]Proposal, len(props))
	for i, p := range props {
		p.Encr = slices.Clone(p.Encr)
		slices.SortStableFunc(p.Encr, func(a, b Transform) int { return rank(a) - rank(b) })
		out[i] = p
	}
	slices.SortStableFunc(out, func(a, b Proposal) int { return rank(a.Encr[0]) - rank(b.Encr[0]) })
	return out
}

// Identity types (RFC 7296 3.5) an IKEv2 tunnel's ids may be.
const (
	IDIPv4  = 1
	IDFQDN  = 2
	IDEmail = 3
	IDIPv6  = 5
)

// Identity is a parsed local_id or remote_id.
type Identity struct {
	Type  int
	Value string // the address, the name (without strongSwan's @) or the e-mail address
}

func (id Identity) String() string { return id.Value }

var (
	fqdnRE  = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
	emailRE = regexp.MustCompile(`^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}$`)
)

// ParseIdentity reads an id as strongSwan writes it: an IPv4 or IPv6
// address, a DNS name (with or without a leading @) or an e-mail address.
func ParseIdentity(s string) (Identity, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" || a.Is4In6() {
			return Identity{}, fmt.Errorf("%s: want an IPv4 or IPv6 address without a zone, a DNS name or an e-mail address", s)
		}
		return addrIdentity(a), nil
	}
	name := strings.TrimPrefix(s, "@")
	switch {
	case len(name) <= 253 && fqdnRE.MatchString(name) && strings.ContainsAny(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-"):
		return Identity{IDFQDN, name}, nil
	case emailRE.MatchString(s):
		return Identity{IDEmail, s}, nil
	}
	return Identity{}, fmt.Errorf("%s: want an IP address, a DNS name (east.example) or an e-mail address (gw@east.example)", catalog.Quote(s))
}

// addrIdentity is an address as an IKE id: ID_IPV4_ADDR or ID_IPV6_ADDR
// by its family (RFC 7296 3.5), the default id of a tunnel's end.
func addrIdentity(a netip.Addr) Identity {
	if a.Is6() {
		return Identity{IDIPv6, a.String()}
	}
	return Identity{IDIPv4, a.String()}
}

// IKE is an IKEv2 tunnel's settings resolved, from this box's side:
// everything the IKE daemon needs besides the PSK's octets.
type IKE struct {
	Name                      string
	Local, Peer               netip.Addr
	LocalSubnet, RemoteSubnet netip.Prefix
	LocalID, RemoteID         Identity
	// IKEProposals and ESPProposals in the site config's order; the
	// router passes ESPProposals through PreferCiphers with its engines.
	IKEProposals, ESPProposals []Proposal
	IKELifetime, ChildLifetime time.Duration
	DPD                        time.Duration // 0: off
	PFS                        bool
	// PSK is the PSK file's name, in the card's ocfw folder.
	PSK string
}

// IKE resolves an IKEv2 tunnel of s. It checks only what it parses;
// Validate reports every problem at its field.
func (s *Site) IKE(t Tunnel) (*IKE, error) {
	if t.Mode() != KeyingIKEv2 {
		return nil, fmt.Errorf("tunnel %s: keying is %s, not %s", t.Name, t.Mode(), KeyingIKEv2)
	}
	a, err := s.TunnelAddrs(t)
	if err != nil {
		return nil, err
	}
	k := &IKE{Name: t.Name, Local: a.Local, Peer: a.Peer, LocalSubnet: a.LocalSubnet, RemoteSubnet: a.RemoteSubnet, PSK: t.PSK, PFS: t.PFSOn()}
	fail := func(field string, err error) (*IKE, error) {
		return nil, fmt.Errorf("tunnel %s: %s: %w", t.Name, field, err)
	}
	if k.LocalID, err = t.localID(a.Local); err != nil {
		return fail("local_id", err)
	}
	if k.RemoteID, err = t.remoteID(a.Peer); err != nil {
		return fail("remote_id", err)
	}
	for _, l := range []struct {
		field string
		list  []string
		esp   bool
		out   *[]Proposal
	}{{"ike_proposals", t.IKEProposalList(), false, &k.IKEProposals}, {"esp_proposals", t.ESPProposalList(), true, &k.ESPProposals}} {
		for _, ps := range l.list {
			p, err := ParseProposal(ps, l.esp)
			if err != nil {
				return fail(l.field, err)
			}
			*l.out = append(*l.out, p)
		}
	}
	if k.IKELifetime, err = lifetime(t.IKELifetime, DefaultIKELifetime, MinIKELifetime, MaxIKELifetime); err != nil {
		return fail("ike_lifetime", err)
	}
	if k.ChildLifetime, err = lifetime(t.Lifetime, DefaultChildLifetime, MinChildLifetime, MaxChildLifetime); err != nil {
		return fail("lifetime", err)
	}
	if k.DPD, err = t.dpd(); err != nil {
		return fail("dpd", err)
	}
	return k, nil
}

// IKEProposalList is the tunnel's IKE proposals, the default when none.
func (t Tunnel) IKEProposalList() []string {
	if len(t.IKEProposals) == 0 {
		return DefaultIKEProposals
	}
	return t.IKEProposals
}

// ESPProposalList is the tunnel's CHILD SA proposals, the default when
// none.
func (t Tunnel) ESPProposalList() []string {
	if len(t.ESPProposals) == 0 {
		return DefaultESPProposals
	}
	return t.ESPProposals
}

// PFSOn says whether CHILD SA rekeys run a Diffie-Hellman of their own:
// on unless pfs: false.
func (t Tunnel) PFSOn() bool { return t.PFS == nil || *t.PFS }

func (t Tunnel) localID(local netip.Addr) (Identity, error) {
	if t.LocalID == "" {
		return addrIdentity(local), nil
	}
	return ParseIdentity(t.LocalID)
}

func (t Tunnel) remoteID(peer netip.Addr) (Identity, error) {
	if t.RemoteID == "" {
		return addrIdentity(peer), nil
	}
	return ParseIdentity(t.RemoteID)
}

func lifetime(s string, def, lo, hi time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		return 0, fmt.Errorf("%s: want a duration from %v to %v, e.g. %v (or leave it out for %v)", catalog.Quote(s), lo, hi, def, def)
	}
	return d, nil
}

func (t Tunnel) dpd() (time.Duration, error) {
	if t.DPD == DPDOff {
		return 0, nil
	}
	d, err := lifetime(t.DPD, DefaultDPD, MinDPD, MaxDPD)
	if err != nil {
		return 0, fmt.Errorf("%w; or off", err)
	}
	return d, nil
}

// checkIKE adds an IKEv2 tunnel's own problems (p is its path) to
// Validate's; addresses are checked with the manual tunnels'.
func (s *Site) checkIKE(bad func(string, string, ...any), p string, t Tunnel, local netip.Addr) {
	if t.Keys != "" {
		bad(p+".keys", "a key file is for keying: manual; an IKEv2 tunnel negotiates its keys and needs psk: %s.psk (made by ocfw tunnel psk)", orDefault(t.Name, "a-b"))
	}
	for _, f := range []struct{ field, v string }{{"cipher", t.Cipher}, {"auth", t.Auth}} {
		if f.v != "" {
			bad(p+"."+f.field, "%s is for keying: manual; an IKEv2 tunnel negotiates its algorithms: list them in esp_proposals, e.g. esp_proposals: [aes128-sha256]", f.field)
		}
	}
	if t.PSK == "" {
		bad(p+".psk", "name the tunnel's PSK file (made by ocfw tunnel psk), e.g. psk: %s.psk; or, for manual keys, keying: manual with keys", orDefault(t.Name, "a-b"))
	} else if !keysNameRE.MatchString(t.PSK) || reservedName(t.PSK) {
		bad(p+".psk", "%s: want a plain file name (letters, digits, . _ -; not site.json or the store's files): the file beside the site config, and in the card's ocfw folder", catalog.Quote(t.PSK))
	}
	for _, l := range []struct {
		field string
		list  []string
		esp   bool
	}{{"ike_proposals", t.IKEProposals, false}, {"esp_proposals", t.ESPProposals, true}} {
		if len(l.list) > MaxProposals {
			bad(p+"."+l.field, "%d proposals: want at most %d (one proposal may list several algorithms of each kind)", len(l.list), MaxProposals)
			continue
		}
		for i, ps := range l.list {
			if _, err := ParseProposal(ps, l.esp); err != nil {
				bad(fmt.Sprintf("%s.%s[%d]", p, l.field, i), "%s: %v", catalog.Quote(ps), err)
			}
		}
	}
	if t.LocalID != "" {
		if _, err := ParseIdentity(t.LocalID); err != nil {
			bad(p+".local_id", "%v (or leave it out for this end's address)", err)
		}
	}
	if t.RemoteID != "" {
		id, err := ParseIdentity(t.RemoteID)
		if err != nil {
			bad(p+".remote_id", "%v (or leave it out for the peer's address)", err)
		} else if lid, lerr := t.localID(local); lerr == nil && local.IsValid() && id == lid {
			bad(p+".remote_id", "%s is this end's own id too: the two ends need different ids", id)
		}
	}
	if _, err := lifetime(t.IKELifetime, DefaultIKELifetime, MinIKELifetime, MaxIKELifetime); err != nil {
		bad(p+".ike_lifetime", "%v", err)
	}
	if _, err := lifetime(t.Lifetime, DefaultChildLifetime, MinChildLifetime, MaxChildLifetime); err != nil {
		bad(p+".lifetime", "%v", err)
	}
	if _, err := t.dpd(); err != nil {
		bad(p+".dpd", "%v", err)
	}
}

// checkIKEPorts refuses a port forward of IKE's ports when an IKEv2
// tunnel needs them on the router: the forward would take its packets.
func (s *Site) checkIKEPorts(bad func(string, string, ...any)) {
	for _, t := range s.Tunnels {
		if t.Mode() != KeyingIKEv2 {
			continue
		}
		for i, f := range s.Firewall.PortForwards {
			if f.Proto == "udp" && (f.Port == 500 || f.Port == 4500) {
				bad(fmt.Sprintf("firewall.port_forwards[%d].port", i), "udp %d is IKE's port, which the IKEv2 tunnel %s needs on the router: forward another port", f.Port, t.Name)
			}
		}
		return
	}
}

// checkManual refuses IKEv2's fields on a manual tunnel: they would do
// nothing, and the owner meant one or the other.
func checkManual(bad func(string, string, ...any), p string, t Tunnel) {
	for _, f := range []struct {
		field string
		set   bool
	}{
		{"psk", t.PSK != ""}, {"ike_proposals", len(t.IKEProposals) > 0}, {"esp_proposals", len(t.ESPProposals) > 0},
		{"local_id", t.LocalID != ""}, {"remote_id", t.RemoteID != ""}, {"ike_lifetime", t.IKELifetime != ""},
		{"lifetime", t.Lifetime != ""}, {"dpd", t.DPD != ""}, {"pfs", t.PFS != nil},
	} {
		if f.set {
			bad(p+"."+f.field, "%s is for keying: ikev2; this tunnel has manual keys (keys, cipher, auth): drop %s, or write keying: ikev2 and drop keys, cipher and auth", f.field, f.field)
		}
	}
}
