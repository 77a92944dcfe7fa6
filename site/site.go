// Package site is the site config: what the router does (WAN, LAN, DHCP,
// firewall, SSH, NTP, tunnels) and the tunnels' key files. The host
// validates and writes it as JSON; the board reads and checks it with the
// same code, so both sides judge a config alike.
package site

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/ocfw/ocfw/plan"
)

// File is where the host writes the site config into the initramfs,
// as JSON; CardFile is the copy a user may put on the data partition
// (in its ocfw folder) to change settings without rebuilding: when
// present and valid it wins.
const (
	File     = "/etc/ocfw/site.json"
	CardFile = "site.json"
)

// Site says what the router does: one YAML file on the host (kind: site),
// JSON in the image and on the card.
type Site struct {
	Kind string `yaml:"kind" json:"kind"`
	// Board is the board profile the site is for: its ports are the ones
	// the site may name.
	Board    string   `yaml:"board" json:"board"`
	Hostname string   `yaml:"hostname" json:"hostname"`
	WAN      WAN      `yaml:"wan" json:"wan"`
	LAN      LAN      `yaml:"lan" json:"lan"`
	Firewall Firewall `yaml:"firewall" json:"firewall"`
	SSH      SSH      `yaml:"ssh" json:"ssh"`
	NTP      NTP      `yaml:"ntp" json:"ntp"`
	// IPv6 is on by default (ipv6.go). Left out of the JSON when empty,
	// so a site.json without IPv6 settings still reads on firmware from
	// before the section (unknown fields are refused).
	IPv6 IPv6 `yaml:"ipv6" json:"ipv6,omitzero"`
	// Tunnels are site-to-site IPsec tunnels with manual keys (tunnel.go).
	Tunnels []Tunnel `yaml:"tunnels" json:"tunnels,omitempty"`
}

// WAN is the port towards the internet.
type WAN struct {
	Port string `yaml:"port" json:"port"`
	// Address is "dhcp" or a static address with its prefix
	// (198.51.100.2/24).
	Address WANAddress `yaml:"address" json:"address"`
	// Gateway and DNS are for a static address (DHCP gives them
	// otherwise).
	Gateway string   `yaml:"gateway" json:"gateway,omitempty"`
	DNS     []string `yaml:"dns" json:"dns,omitempty"`
	MTU     int      `yaml:"mtu" json:"mtu,omitempty"`
}

// LAN is the local network: its ports (bridged when more than one),
// the router's address on it, the DHCP server and the DNS forwarder.
type LAN struct {
	Ports   []string   `yaml:"ports" json:"ports"`
	Address LANAddress `yaml:"address" json:"address"`
	MTU     int        `yaml:"mtu" json:"mtu,omitempty"`
	DHCP    DHCP       `yaml:"dhcp" json:"dhcp"`
	// DNSForwarder answers LAN clients from the WAN's resolvers (on by
	// default; false turns it off).
	DNSForwarder *bool `yaml:"dns_forwarder" json:"dns_forwarder,omitempty"`
	// Domain is the LAN's local domain: DHCP hands it out and the DNS
	// forwarder answers its clients' names in it ("" means "lan").
	Domain string `yaml:"domain" json:"domain,omitempty"`
}

// DefaultDomain is the LAN's local domain when the site names none.
const DefaultDomain = "lan"

// LocalDomain is the LAN's domain, the default when none is set.
func (l LAN) LocalDomain() string {
	if l.Domain == "" {
		return DefaultDomain
	}
	return l.Domain
}

// DHCP is the LAN's DHCP server; off when Range is empty.
type DHCP struct {
	// Range is the first and last address handed out.
	Range []string `yaml:"range" json:"range,omitempty"`
	// Lease is a Go duration (12h); default 12h.
	Lease  string        `yaml:"lease" json:"lease,omitempty"`
	Static []StaticLease `yaml:"static" json:"static,omitempty"`
	// DNS and Router are the options handed out; default the router's
	// LAN address.
	DNS    []string `yaml:"dns" json:"dns,omitempty"`
	Router string   `yaml:"router" json:"router,omitempty"`
}

// StaticLease gives one MAC address a fixed address.
type StaticLease struct {
	MAC  string `yaml:"mac" json:"mac"`
	IP   string `yaml:"ip" json:"ip"`
	Name string `yaml:"name" json:"name,omitempty"`
}

// Firewall: inbound on WAN is dropped except established/related
// traffic, the port forwards and the WAN services named here.
type Firewall struct {
	PortForwards []PortForward `yaml:"port_forwards" json:"port_forwards,omitempty"`
	// WANServices are router services reachable from the WAN: "ssh".
	WANServices []string `yaml:"wan_services" json:"wan_services,omitempty"`
}

// PortForward sends a WAN port to a LAN host (DNAT).
type PortForward struct {
	Proto string `yaml:"proto" json:"proto"` // tcp or udp
	Port  int    `yaml:"port" json:"port"`
	// To is the LAN host's IPv4 address the port is forwarded to
	// (DNAT); it may be left out when IPv6Host names the host: a
	// forward over IPv6 only.
	To     string `yaml:"to" json:"to,omitempty"`
	ToPort int    `yaml:"to_port" json:"to_port,omitempty"`
	// IPv6Host names an entry of ipv6.hosts: the same port is opened to
	// that host over IPv6 too, at its interface identifier in the LAN's
	// global prefix. No translation (no NAT66): the WAN reaches the
	// host's own address and port, so to_port must be the port or left
	// out (IPv6Forwards).
	IPv6Host string `yaml:"ipv6_host" json:"ipv6_host,omitempty"`
}

// SSH is management access: keys only, never passwords.
type SSH struct {
	AuthorizedKeys []string `yaml:"authorized_keys" json:"authorized_keys,omitempty"`
	Port           int      `yaml:"port" json:"port,omitempty"` // default 22
	// User is the one login name the router accepts (default "root");
	// any other is refused at authentication. Every session runs as
	// the router's own user whatever the name.
	User string `yaml:"user" json:"user,omitempty"`
	// RSAHostKey serves a 3072-bit RSA host key beside the ed25519 one,
	// for clients without ed25519 (default on). Off, the box never
	// makes one: on a slow board that is up to a minute of the CPU at
	// the first start (on an NSLU2 more), for clients that all speak
	// ed25519 (OpenSSH since 6.5, PuTTY since 0.68).
	RSAHostKey *bool `yaml:"rsa_host_key" json:"rsa_host_key,omitempty"`
}

// RSAHostKeyOn says whether SSH serves an RSA host key too.
func (s SSH) RSAHostKeyOn() bool { return s.RSAHostKey == nil || *s.RSAHostKey }

// DefaultSSHUser is the login name when the site names none.
const DefaultSSHUser = "root"

// LoginName is the one login name the router accepts.
func (s SSH) LoginName() string {
	if s.User != "" {
		return s.User
	}
	return DefaultSSHUser
}

// userRE is a POSIX-ish user name, as Debian's useradd accepts by
// default: a lower-case letter or underscore, then up to 31 lower-case
// letters, digits, underscores or dashes.
var userRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// NTP sets the clock once the WAN is up.
type NTP struct {
	Servers []string `yaml:"servers" json:"servers,omitempty"`
}

// Error is one problem in a site config, at a field path
// ("lan.dhcp.range[1]") that the YAML or JSON reader turns into a line
// and column.
type Error struct {
	Path string
	Msg  string
}

func (e Error) Error() string { return e.Path + ": " + e.Msg }

var hostnameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Defaults for fields left out.
const (
	DefaultLease   = 12 * time.Hour
	DefaultSSHPort = 22
	DefaultMTU     = 1500
)

// HasLAN says whether the site has a LAN side at all.
func (l LAN) HasLAN() bool {
	return len(l.Ports) > 0 || l.Address != "" || len(l.DHCP.Range) > 0 || len(l.DHCP.Static) > 0
}

// ForwarderOn says whether the LAN DNS forwarder runs.
func (l LAN) ForwarderOn() bool { return l.DNSForwarder == nil || *l.DNSForwarder }

// LeaseTime is the DHCP lease time, DefaultLease when unset.
func (d DHCP) LeaseTime() time.Duration {
	t, _ := d.ParseLease() // DefaultLease when invalid; Validate reports it
	return t
}

// SSHPort is the SSH port, DefaultSSHPort when unset.
func (s SSH) SSHPort() int {
	if s.Port > 0 {
		return s.Port
	}
	return DefaultSSHPort
}

// Validate checks a site against the board's ports and returns every
// problem, each at its field path. It needs no YAML: the board runs it on
// the JSON copy from the card, the host on the YAML file.
func (s *Site) Validate(ports []plan.Port) []Error {
	c := newChecker(ports)
	if s.Kind != "site" {
		c.bad("kind", "want kind: site, got %q", s.Kind)
	}
	if !hostnameRE.MatchString(s.Hostname) {
		c.bad("hostname", "%q: want a host name of lower-case letters, digits and dashes, 1-63 long", s.Hostname)
	}
	wanNet := c.wan(s.WAN)
	c.lan(s.LAN, wanNet)
	c.dhcp(s.LAN.DHCP)
	c.firewall(s)
	c.ssh(s.SSH)
	c.ipv6(s)
	_, errs := s.IPv6Forwards()
	c.errs = append(c.errs, errs...)
	for i, n := range s.NTP.Servers {
		if strings.TrimSpace(n) == "" || strings.ContainsAny(n, " /") {
			c.bad(fmt.Sprintf("ntp.servers[%d]", i), "%q: want a host name or address", n)
		}
	}
	var lanNet netip.Prefix
	if c.hasLAN && c.lanOK {
		lanNet = c.lanAddr.Masked()
	}
	s.checkTunnels(c.bad, wanNet, lanNet)
	return c.errs
}

// checker gathers Validate's problems and what its steps share: the
// board's ports, which roles took them, and the LAN address.
type checker struct {
	errs      []Error
	names     map[string]bool   // the board's ports
	portsList string            // for messages
	used      map[string]string // port → role that took it
	hasLAN    bool
	lanAddr   netip.Prefix
	lanOK     bool // lanAddr is good, or there is no LAN to check against
}

func newChecker(ports []plan.Port) *checker {
	c := &checker{names: map[string]bool{}, used: map[string]string{}}
	var valid []string
	for _, p := range ports {
		c.names[p.Name] = true
		valid = append(valid, p.Name)
	}
	c.portsList = strings.Join(valid, ", ")
	return c
}

func (c *checker) bad(path, format string, args ...any) {
	c.errs = append(c.errs, Error{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) usePort(path, name, role string) {
	switch {
	case !c.names[name]:
		c.bad(path, "%q is not a port of this board; its ports: %s", name, c.portsList)
	case c.used[name] != "":
		c.bad(path, "port %s is already the %s port", name, c.used[name])
	default:
		c.used[name] = role
	}
}

// wan checks the WAN side and returns its static address with its
// prefix (invalid for DHCP or a bad address).
func (c *checker) wan(w WAN) netip.Prefix {
	if w.Port == "" {
		c.bad("wan.port", "name the WAN port (one of %s)", c.portsList)
	} else {
		c.usePort("wan.port", w.Port, "WAN")
	}
	var wanNet netip.Prefix
	switch a := w.Address; {
	case a.IsDHCP():
		if w.Gateway != "" {
			c.bad("wan.gateway", "the gateway comes from DHCP with address: dhcp; give a static address to set one")
		}
	case a == "":
		c.bad("wan.address", "want dhcp or a static address with its prefix, e.g. 198.51.100.2/24")
	default:
		p, err := a.Prefix()
		if err != nil {
			c.bad("wan.address", "%v", err)
			break
		}
		wanNet = p
		if !IsHostAddr(p, p.Addr()) {
			c.bad("wan.address", "%s is the network's %s address of %s: want the address the ISP gave this box", p.Addr(), netOrBroadcast(p, p.Addr()), p.Masked())
		}
		if w.Gateway == "" {
			c.bad("wan.gateway", "a static WAN address needs the gateway (the default route), e.g. 198.51.100.1")
		} else if g, err := netip.ParseAddr(w.Gateway); err != nil || !p.Masked().Contains(g) {
			c.bad("wan.gateway", "%q: want an address inside %s", w.Gateway, p.Masked())
		} else if g == p.Addr() {
			c.bad("wan.gateway", "%s is this box's own WAN address: want the ISP's router's address inside %s", g, p.Masked())
		} else if !IsHostAddr(p, g) {
			c.bad("wan.gateway", "%s is the %s address of %s: want the ISP's router's address", g, netOrBroadcast(p, g), p.Masked())
		}
	}
	for i, d := range w.DNS {
		if _, err := netip.ParseAddr(d); err != nil {
			c.bad(fmt.Sprintf("wan.dns[%d]", i), "%q: want an IP address", d)
		}
	}
	checkMTU(c.bad, "wan.mtu", w.MTU)
	return wanNet
}

// lan checks the LAN's ports and address, and keeps the address for the
// checks of addresses inside it. The LAN is optional (a one-port box is a
// host on someone's LAN).
func (c *checker) lan(l LAN, wanNet netip.Prefix) {
	c.hasLAN = l.HasLAN()
	if c.hasLAN && len(l.Ports) == 0 {
		c.bad("lan.ports", "name at least one LAN port (of %s), or leave lan out", c.portsList)
	}
	for i, p := range l.Ports {
		c.usePort(fmt.Sprintf("lan.ports[%d]", i), p, "LAN")
	}
	lan, err := l.Address.Prefix()
	c.lanAddr, c.lanOK = lan, err == nil
	if !c.hasLAN {
		c.lanOK = true // nothing to check against
	} else if !c.lanOK {
		c.bad("lan.address", "%v", err)
	} else if wanNet.IsValid() && wanNet.Masked().Overlaps(lan.Masked()) {
		c.bad("lan.address", "%s overlaps the WAN network %s", lan.Masked(), wanNet.Masked())
	}
	checkMTU(c.bad, "lan.mtu", l.MTU)
	if l.Domain != "" && (len(l.Domain) > 253 || !domainRE.MatchString(l.Domain)) {
		c.bad("lan.domain", "%q: want a domain of dot-separated labels (lower-case letters, digits, dashes), e.g. home.arpa", l.Domain)
	}
}

// domainRE is a DNS domain of RFC 1123 labels, at most 253 long.
var domainRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// inLAN checks that a is a LAN host's address: inside the LAN, not the
// router's own.
func (c *checker) inLAN(path, a string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(a)
	switch {
	case err != nil || !ip.Is4():
		c.bad(path, "%q: want an IPv4 address", a)
	case !c.hasLAN:
		c.bad(path, "%s: the site has no lan for it to be in", ip)
	case c.lanOK && !c.lanAddr.Masked().Contains(ip):
		c.bad(path, "%s is outside the LAN %s", ip, c.lanAddr.Masked())
	case c.lanOK && ip == c.lanAddr.Addr():
		c.bad(path, "%s is the router's own address", ip)
	case c.lanOK && !IsHostAddr(c.lanAddr, ip):
		c.bad(path, "%s is the %s address of the LAN %s: want a host's address", ip, netOrBroadcast(c.lanAddr, ip), c.lanAddr.Masked())
	default:
		return ip, true
	}
	return ip, false
}

func (c *checker) dhcp(d DHCP) {
	if len(d.Range) != 0 {
		if len(d.Range) != 2 {
			c.bad("lan.dhcp.range", "want [first, last], e.g. [192.168.1.100, 192.168.1.199]")
		} else {
			lo, ok1 := c.inLAN("lan.dhcp.range[0]", d.Range[0])
			hi, ok2 := c.inLAN("lan.dhcp.range[1]", d.Range[1])
			if ok1 && ok2 && hi.Less(lo) {
				c.bad("lan.dhcp.range", "%s comes before %s: give the first address first", hi, lo)
			}
		}
	}
	if _, err := d.ParseLease(); err != nil {
		c.bad("lan.dhcp.lease", "%v", err)
	}
	macs := map[string]int{}
	ips := map[netip.Addr]int{}
	for i, st := range d.Static {
		p := fmt.Sprintf("lan.dhcp.static[%d]", i)
		mac, ok := normalMAC(st.MAC)
		if !ok {
			c.bad(p+".mac", "%q: want a MAC address like 52:54:00:12:34:56", st.MAC)
		} else if j, dup := macs[mac]; dup {
			c.bad(p+".mac", "%s has a static lease already (lan.dhcp.static[%d])", mac, j)
		} else if why := notHostMAC(mac); why != "" {
			c.bad(p+".mac", "%s is %s, no one host's: want the client's own MAC address, e.g. 52:54:00:12:34:56", mac, why)
		} else {
			macs[mac] = i
		}
		if ip, ok := c.inLAN(p+".ip", st.IP); ok {
			if j, dup := ips[ip]; dup {
				c.bad(p+".ip", "%s is lan.dhcp.static[%d]'s address already: each static lease needs its own", ip, j)
			} else {
				ips[ip] = i
			}
		}
	}
	for i, a := range d.DNS {
		if ip, err := netip.ParseAddr(a); err != nil || !ip.Is4() {
			c.bad(fmt.Sprintf("lan.dhcp.dns[%d]", i), "%q: want an IPv4 address (DHCPv4 hands out no others)", a)
		}
	}
	if d.Router != "" {
		c.inLAN("lan.dhcp.router", d.Router)
	}
}

func (c *checker) firewall(s *Site) {
	seen := map[string]int{}
	for i, f := range s.Firewall.PortForwards {
		p := fmt.Sprintf("firewall.port_forwards[%d]", i)
		key := fmt.Sprintf("%s %d", f.Proto, f.Port)
		if j, dup := seen[key]; dup {
			c.bad(p+".port", "%s is forwarded by firewall.port_forwards[%d] already: one WAN port goes to one host", key, j)
		} else {
			seen[key] = i
		}
		if f.Proto != "tcp" && f.Proto != "udp" {
			c.bad(p+".proto", "%q: want tcp or udp", f.Proto)
		}
		if f.Port < 1 || f.Port > 65535 {
			c.bad(p+".port", "%d: want a port 1-65535", f.Port)
		}
		if f.ToPort < 0 || f.ToPort > 65535 {
			c.bad(p+".to_port", "%d: want a port 1-65535 (or leave it out for the same port)", f.ToPort)
		}
		switch {
		case f.To == "" && f.IPv6Host == "":
			c.bad(p+".to", "missing: want the LAN host's IPv4 address, or ipv6_host for a forward over IPv6 only")
		case f.To == "":
			// Over IPv6 only: IPv6Forwards checks ipv6_host and to_port.
		default:
			c.inLAN(p+".to", f.To)
		}
		if f.Proto == "tcp" && f.Port == s.SSH.SSHPort() && contains(s.Firewall.WANServices, "ssh") {
			c.bad(p+".port", "tcp %d is the router's SSH port, open on the WAN too", f.Port)
		}
	}
	for i, w := range s.Firewall.WANServices {
		if w != "ssh" {
			c.bad(fmt.Sprintf("firewall.wan_services[%d]", i), "%q: the router offers ssh on the WAN, nothing else", w)
		}
	}
}

// ssh checks management access: keys only.
func (c *checker) ssh(s SSH) {
	for i, k := range s.AuthorizedKeys {
		if err := checkAuthorizedKey(k); err != nil {
			c.bad(fmt.Sprintf("ssh.authorized_keys[%d]", i), "%v", err)
		}
	}
	if s.Port < 0 || s.Port > 65535 {
		c.bad("ssh.port", "%d: want a port 1-65535", s.Port)
	}
	if s.User != "" && !userRE.MatchString(s.User) {
		c.bad("ssh.user", "%q: want a user name: a lower-case letter or _, then up to 31 lower-case letters, digits, _ or - (or leave it out for %s)", s.User, DefaultSSHUser)
	}
}

func checkMTU(bad func(string, string, ...any), path string, mtu int) {
	if mtu != 0 && (mtu < 576 || mtu > 9000) {
		bad(path, "%d: want 576-9000 (or leave it out for %d)", mtu, DefaultMTU)
	}
}

func normalMAC(s string) (string, bool) {
	s = strings.ToLower(strings.ReplaceAll(s, "-", ":"))
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return "", false
	}
	for _, p := range parts {
		if len(p) != 2 || strings.Trim(p, "0123456789abcdef") != "" {
			return "", false
		}
	}
	return s, true
}

// notHostMAC says why a MAC address cannot be one client's: the
// broadcast, a multicast (group bit set) or the zero address; "" when it
// can.
func notHostMAC(mac string) string {
	hw, err := net.ParseMAC(mac)
	switch {
	case err != nil:
		return "not a MAC address"
	case mac == "ff:ff:ff:ff:ff:ff":
		return "the broadcast address"
	case hw[0]&1 == 1:
		return "a multicast address"
	case mac == "00:00:00:00:00:00":
		return "the zero address"
	}
	return ""
}

// netOrBroadcast names which of p's two reserved addresses a is.
func netOrBroadcast(p netip.Prefix, a netip.Addr) string {
	if a == p.Masked().Addr() {
		return "network"
	}
	return "broadcast"
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
