// Package dhcp is the router's DHCPv4: a server for the LAN (Server,
// with its address allocation in Pool, a pure type the host tests drive
// directly) and a client for the WAN (Client). Both are libraries run by
// the one long-running router process; neither changes interfaces or
// routes itself.
package dhcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"time"
)

// Lease is one address given to one client: what the LeaseStore keeps
// and what the status page shows.
type Lease struct {
	MAC      string     `json:"mac"` // lower-case, colon-separated
	IP       netip.Addr `json:"ip"`
	Hostname string     `json:"hostname,omitempty"`
	// Expires is when the lease ran out as last written. Renewals are
	// not written (see Server), so after a reboot it is a lower bound.
	Expires time.Time `json:"expires"`
	// Released: the client gave the address back; it stays this
	// client's preferred address but may go to another.
	Released bool `json:"released,omitempty"`
	// Static: from the site's static leases, not allocated.
	Static bool `json:"static,omitempty"`
}

// LeaseStore keeps leases across reboots; the board backs it with its
// power-safe store. Save gets every lease each time.
type LeaseStore interface {
	Load() ([]Lease, error)
	Save([]Lease) error
}

// Errors from Pool.
var (
	// ErrExhausted: no address of the range is free.
	ErrExhausted = errors.New("dhcp: no free address in the range")
	// ErrWrongAddress: the address cannot be this client's; the server
	// answers with a NAK so the client starts over.
	ErrWrongAddress = errors.New("dhcp: address not available to this client")
)

// PoolConfig is what a Pool allocates from.
type PoolConfig struct {
	First, Last netip.Addr            // the range, inclusive
	Static      map[string]netip.Addr // MAC (any case, : or -) -> fixed address
	Reserved    []netip.Addr          // never handed out (the router's own address)
	LeaseTime   time.Duration
	// MaxLeases bounds the entries kept (the NSLU2 has 32 MB and a MAC
	// flood must not grow the table); 0 means DefaultMaxLeases. Static
	// leases do not count.
	MaxLeases int
}

// DefaultMaxLeases bounds a pool's dynamic entries: far more than a home
// or office LAN has clients, about 150 KB at most.
const DefaultMaxLeases = 1024

// MaxStoredLeases bounds the leases Leases returns for the store: the
// lease document shares the card's 64 KiB state record with the SSH host
// keys, the policy, the boot number and the report index, and a LAN
// full of clients (or one client with many MACs) must never crowd them
// out. A lease is at most about 175 bytes of JSON (a 63-byte name, see
// MaxHostname), so 64 of them stay within LeaseDocBudget; the pool keeps
// serving more in RAM, and only the most recent 64 come back after a
// reboot.
const MaxStoredLeases = 64

// LeaseDocBudget is the most bytes the stored lease document may take
// (a test encodes the worst case): a quarter of the state record.
const LeaseDocBudget = 16 << 10

// OfferHold is how long an offered address stays reserved for the client
// it was offered to, waiting for its REQUEST.
const OfferHold = 30 * time.Second

type state int

const (
	offered state = iota
	bound
	released
	declined // in use by an unknown host (a client's ARP check found it)
)

type entry struct {
	mac      string // "" for a declined address
	ip       netip.Addr
	hostname string
	expires  time.Time
	state    state
	static   bool
}

// Pool allocates the addresses of one range. It is not safe for
// concurrent use (the server calls it from one goroutine) and does no I/O:
// the caller passes the time and persists Leases when a call says the
// lease set changed.
type Pool struct {
	first, last netip.Addr
	static      map[string]netip.Addr // by MAC
	staticIP    map[netip.Addr]string // by address
	reserved    map[netip.Addr]bool
	leaseTime   time.Duration
	max         int
	byMAC       map[string]*entry
	byIP        map[netip.Addr]*entry
	// staticSeen: the static clients bound now (one entry per static
	// lease at most), to tell a new static lease from its renewal.
	staticSeen map[string]*entry
}

// NewPool checks cfg and returns an empty pool.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if !cfg.First.Is4() || !cfg.Last.Is4() || cfg.Last.Less(cfg.First) {
		return nil, fmt.Errorf("dhcp: range %v-%v: want two IPv4 addresses, first first", cfg.First, cfg.Last)
	}
	if cfg.LeaseTime < time.Minute {
		return nil, fmt.Errorf("dhcp: lease time %v: want a minute or more", cfg.LeaseTime)
	}
	p := &Pool{
		first: cfg.First, last: cfg.Last,
		static: map[string]netip.Addr{}, staticIP: map[netip.Addr]string{},
		reserved: map[netip.Addr]bool{}, leaseTime: cfg.LeaseTime, max: cfg.MaxLeases,
		byMAC: map[string]*entry{}, byIP: map[netip.Addr]*entry{},
		staticSeen: map[string]*entry{},
	}
	if p.max <= 0 {
		p.max = DefaultMaxLeases
	}
	for m, ip := range cfg.Static {
		mac, err := NormalMAC(m)
		if err != nil {
			return nil, err
		}
		if !ip.Is4() {
			return nil, fmt.Errorf("dhcp: static lease for %s: %v is not an IPv4 address", mac, ip)
		}
		if other, ok := p.staticIP[ip]; ok {
			return nil, fmt.Errorf("dhcp: static lease %v is given to both %s and %s", ip, other, mac)
		}
		p.static[mac], p.staticIP[ip] = ip, mac
	}
	for _, ip := range cfg.Reserved {
		p.reserved[ip] = true
	}
	return p, nil
}

// NormalMAC returns a MAC address as Lease.MAC spells it.
func NormalMAC(s string) (string, error) {
	hw, err := net.ParseMAC(strings.ReplaceAll(s, "-", ":"))
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("dhcp: %q is not an Ethernet MAC address", s)
	}
	return hw.String(), nil
}

// LeaseTime is the time every lease is given for.
func (p *Pool) LeaseTime() time.Duration { return p.leaseTime }

func (p *Pool) inRange(ip netip.Addr) bool {
	return ip.Is4() && !ip.Less(p.first) && !p.last.Less(ip)
}

// dynamic: an address the pool may give to any client.
func (p *Pool) dynamic(ip netip.Addr) bool {
	_, st := p.staticIP[ip]
	return p.inRange(ip) && !st && !p.reserved[ip]
}

// free: the entry's address may go to another client.
func (e *entry) free(now time.Time) bool {
	return e.state == released || !now.Before(e.expires)
}

// Load puts stored leases back. Each one that was not released is held
// for its client a full lease time from now: renewals were not written,
// and the clock at boot may be far off, so the stored expiry says little.
// Leases that no longer fit the configuration (outside the range, now
// static for some client) are dropped.
func (p *Pool) Load(leases []Lease, now time.Time) {
	if len(leases) > MaxStoredLeases {
		leases = leases[:MaxStoredLeases]
	}
	for _, l := range leases {
		mac, err := NormalMAC(l.MAC)
		if err != nil || l.Static || !p.dynamic(l.IP) || len(p.byIP) >= p.max {
			continue
		}
		if _, ok := p.static[mac]; ok {
			continue
		}
		if p.byMAC[mac] != nil || p.byIP[l.IP] != nil {
			continue // a duplicate in the store: first one wins
		}
		name, _ := HostLabel(l.Hostname) // a store written before names were checked
		e := &entry{mac: mac, ip: l.IP, hostname: name, state: bound, expires: now.Add(p.leaseTime)}
		if l.Released {
			e.state, e.expires = released, now
		}
		p.byMAC[mac], p.byIP[l.IP] = e, e
	}
}

// Offer picks the address to offer mac: its static address; else its
// current or last address; else want (the client's requested address)
// when free; else the lowest address never given out; else the one free
// the longest. A new choice is held for the client for OfferHold.
func (p *Pool) Offer(mac string, want netip.Addr, now time.Time) (netip.Addr, error) {
	mac, err := NormalMAC(mac)
	if err != nil {
		return netip.Addr{}, err
	}
	if ip, ok := p.static[mac]; ok {
		return ip, nil
	}
	if e := p.byMAC[mac]; e != nil {
		if e.state == offered || e.state == released || e.free(now) {
			e.state, e.expires = offered, now.Add(OfferHold)
		}
		return e.ip, nil
	}
	ip, ok := netip.Addr{}, false
	if want.IsValid() && p.dynamic(want) {
		if e := p.byIP[want]; e == nil && len(p.byIP) < p.max {
			ip, ok = want, true
		} else if e != nil && e.free(now) {
			p.evict(e)
			ip, ok = want, true
		}
	}
	if !ok && len(p.byIP) < p.max {
		ip, ok = p.unused()
	}
	if !ok {
		if e := p.oldestFree(now); e != nil {
			p.evict(e)
			ip, ok = e.ip, true
		}
	}
	if !ok {
		return netip.Addr{}, ErrExhausted
	}
	e := &entry{mac: mac, ip: ip, state: offered, expires: now.Add(OfferHold)}
	p.byMAC[mac], p.byIP[ip] = e, e
	return ip, nil
}

// unused is the lowest dynamic address without an entry. With at most
// max entries the scan ends within max+statics+reserved steps of a free
// one, whatever the range's size.
func (p *Pool) unused() (netip.Addr, bool) {
	for ip := p.first; p.inRange(ip); ip = ip.Next() {
		if p.dynamic(ip) && p.byIP[ip] == nil {
			return ip, true
		}
		if ip == p.last {
			break
		}
	}
	return netip.Addr{}, false
}

// oldestFree is the entry whose address has been free the longest:
// taking it disturbs the client least likely to come back.
func (p *Pool) oldestFree(now time.Time) *entry {
	var best *entry
	for _, e := range p.byIP {
		if e.free(now) && (best == nil || e.expires.Before(best.expires) ||
			e.expires.Equal(best.expires) && e.ip.Less(best.ip)) {
			best = e
		}
	}
	return best
}

func (p *Pool) evict(e *entry) {
	delete(p.byIP, e.ip)
	if e.mac != "" && p.byMAC[e.mac] == e {
		delete(p.byMAC, e.mac)
	}
}

// AckResult says what an Ack did, for the log and the store.
type AckResult int

// Outcomes of Ack.
const (
	// Renewed: the client's lease went on; nothing to write.
	Renewed AckResult = iota
	// Bound: a new lease, a new address, another host name or a
	// lease taken up again after a release: write the store.
	Bound
	// StaticBound: a static lease taken up (not a renewal), which comes
	// from the config and is not stored.
	StaticBound
)

// Ack binds ip to mac for a lease time from now, when it may: ip is mac's
// static address, or a dynamic address that is mac's, free, or never
// given out. Otherwise it returns ErrWrongAddress and changes nothing.
// An empty hostname keeps the one known; one that is not an RFC 1123
// label (HostLabel) counts as empty.
func (p *Pool) Ack(mac string, ip netip.Addr, hostname string, now time.Time) (Lease, AckResult, error) {
	mac, err := NormalMAC(mac)
	if err != nil {
		return Lease{}, 0, err
	}
	hostname, _ = HostLabel(hostname)
	if st, ok := p.static[mac]; ok {
		if ip != st {
			return Lease{}, 0, ErrWrongAddress
		}
		res := Renewed
		e := p.staticSeen[mac]
		if e == nil || e.free(now) || hostname != "" && hostname != e.hostname {
			res = StaticBound
		}
		if e == nil {
			e = &entry{mac: mac, ip: ip, static: true}
			p.staticSeen[mac] = e
		}
		if hostname != "" {
			e.hostname = hostname
		}
		e.state, e.expires = bound, now.Add(p.leaseTime)
		return e.lease(), res, nil
	}
	if !p.dynamic(ip) {
		return Lease{}, 0, ErrWrongAddress
	}
	holder := p.byIP[ip]
	if holder != nil && holder.mac != mac && !holder.free(now) {
		return Lease{}, 0, ErrWrongAddress
	}
	if holder == nil && len(p.byIP) >= p.max && p.byMAC[mac] == nil {
		return Lease{}, 0, ErrWrongAddress
	}
	res := Renewed
	if holder != nil && holder.mac != mac {
		p.evict(holder) // free, so another client's address may be taken
		holder = nil
	}
	e := p.byMAC[mac]
	if e != nil && e.ip != ip {
		// The client moved to another address; its old one is free.
		delete(p.byIP, e.ip)
		e = nil
	}
	if e == nil {
		e = &entry{mac: mac, ip: ip}
		p.byMAC[mac], p.byIP[ip] = e, e
		res = Bound
	}
	if e.state == offered || e.state == released {
		res = Bound
	}
	if hostname != "" && hostname != e.hostname {
		e.hostname = hostname
		res = Bound
	}
	e.state, e.expires = bound, now.Add(p.leaseTime)
	return e.lease(), res, nil
}

// Release ends mac's lease on ip at the client's request. It reports
// whether the stored leases changed.
func (p *Pool) Release(mac string, ip netip.Addr, now time.Time) bool {
	mac, err := NormalMAC(mac)
	if err != nil {
		return false
	}
	if e := p.staticSeen[mac]; e != nil && e.ip == ip {
		e.expires = now
		return false
	}
	e := p.byMAC[mac]
	if e == nil || e.ip != ip || e.state != bound {
		return false
	}
	e.state, e.expires = released, now
	return true
}

// Decline takes ip out of use after mac found another host on it; the
// address rests for one lease time. It reports whether the stored
// leases changed (mac's binding to ip is gone).
func (p *Pool) Decline(mac string, ip netip.Addr, now time.Time) bool {
	mac, err := NormalMAC(mac)
	if err != nil {
		return false
	}
	e := p.byMAC[mac]
	if e == nil || e.ip != ip {
		return false
	}
	wasStored := e.state == bound || e.state == released
	delete(p.byMAC, mac)
	e.mac, e.hostname, e.state, e.expires = "", "", declined, now.Add(p.leaseTime)
	return wasStored
}

// Unoffer drops what was offered to mac when it chose another server.
func (p *Pool) Unoffer(mac string) {
	if mac, err := NormalMAC(mac); err == nil {
		if e := p.byMAC[mac]; e != nil && e.state == offered {
			p.evict(e)
		}
	}
}

// Leases are the dynamic leases to store (bound and released), sorted by
// address. Static leases come from the config and are not included. Of
// more than MaxStoredLeases, the bound ones that run longest are kept,
// then the released ones released last.
func (p *Pool) Leases() []Lease {
	var out []Lease
	for _, e := range p.byIP {
		if e.state == bound || e.state == released {
			out = append(out, e.lease())
		}
	}
	if len(out) > MaxStoredLeases {
		sort.Slice(out, func(i, j int) bool {
			if out[i].Released != out[j].Released {
				return !out[i].Released
			}
			if !out[i].Expires.Equal(out[j].Expires) {
				return out[i].Expires.After(out[j].Expires)
			}
			return out[i].IP.Less(out[j].IP)
		})
		out = out[:MaxStoredLeases]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out
}

// Active are the leases in use now, static ones included, sorted by
// address: who is on the LAN, for the status page.
func (p *Pool) Active(now time.Time) []Lease {
	var out []Lease
	for _, set := range []map[string]*entry{p.byMAC, p.staticSeen} {
		for _, e := range set {
			if e.state == bound && !e.free(now) {
				out = append(out, e.lease())
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out
}

func (e *entry) lease() Lease {
	return Lease{MAC: e.mac, IP: e.ip, Hostname: e.hostname, Expires: e.expires,
		Released: e.state == released, Static: e.static}
}
