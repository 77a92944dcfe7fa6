package dhcp

import (
	"errors"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

const (
	macA = "52:54:00:00:00:0a"
	macB = "52:54:00:00:00:0b"
	macC = "52:54:00:00:00:0c"
	macS = "52:54:00:00:00:5e"
)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func newTestPool(t *testing.T, first, last string) *Pool {
	t.Helper()
	p, err := NewPool(PoolConfig{
		First: ip(first), Last: ip(last), LeaseTime: time.Hour,
		Static:   map[string]netip.Addr{"52-54-00-00-00-5E": ip("192.168.1.101")},
		Reserved: []netip.Addr{ip("192.168.1.1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bind runs DISCOVER/OFFER then REQUEST/ACK for mac and returns the address.
func bind(t *testing.T, p *Pool, mac string, now time.Time) netip.Addr {
	t.Helper()
	a, err := p.Offer(mac, netip.Addr{}, now)
	if err != nil {
		t.Fatalf("offer to %s: %v", mac, err)
	}
	if _, _, err := p.Ack(mac, a, "", now); err != nil {
		t.Fatalf("ack %s to %s: %v", a, mac, err)
	}
	return a
}

func TestPoolAllocates(t *testing.T) {
	p := newTestPool(t, "192.168.1.100", "192.168.1.103")
	a := bind(t, p, macA, t0)
	b := bind(t, p, macB, t0)
	if a != ip("192.168.1.100") || b != ip("192.168.1.102") {
		t.Errorf("A got %v, B got %v; want .100 and .102 (.101 is static for another MAC)", a, b)
	}
	// The same client asking again gets the same address.
	if again, _ := p.Offer(macA, netip.Addr{}, t0.Add(time.Minute)); again != a {
		t.Errorf("A asked again and was offered %v, want %v", again, a)
	}
	// A static MAC gets its fixed address, even when asking for another.
	if s, _ := p.Offer(macS, ip("192.168.1.103"), t0); s != ip("192.168.1.101") {
		t.Errorf("static MAC offered %v, want 192.168.1.101", s)
	}
	if _, _, err := p.Ack(macS, ip("192.168.1.103"), "", t0); !errors.Is(err, ErrWrongAddress) {
		t.Errorf("static MAC acked on another address: %v", err)
	}
	if l, res, err := p.Ack(macS, ip("192.168.1.101"), "printer", t0); err != nil || res != StaticBound || !l.Static {
		t.Errorf("static ack: %+v %v %v", l, res, err)
	}
	if _, res, _ := p.Ack(macS, ip("192.168.1.101"), "printer", t0.Add(time.Minute)); res != Renewed {
		t.Errorf("static renewal reported %v, want Renewed (no log line)", res)
	}
}

func TestPoolExhaustionAndExpiry(t *testing.T) {
	p := newTestPool(t, "192.168.1.100", "192.168.1.102") // .101 static: two dynamic addresses
	bind(t, p, macA, t0)
	bind(t, p, macB, t0)
	if got, err := p.Offer(macC, netip.Addr{}, t0.Add(time.Minute)); !errors.Is(err, ErrExhausted) {
		t.Fatalf("third client offered %v, %v; want ErrExhausted", got, err)
	}
	// B renews; A's lease runs out: C gets A's address.
	if _, res, err := p.Ack(macB, ip("192.168.1.102"), "", t0.Add(30*time.Minute)); err != nil || res != Renewed {
		t.Fatalf("B renewing: %v %v", res, err)
	}
	later := t0.Add(time.Hour + time.Minute)
	c, err := p.Offer(macC, netip.Addr{}, later)
	if err != nil || c != ip("192.168.1.100") {
		t.Fatalf("after A expired, C offered %v, %v; want 192.168.1.100", c, err)
	}
	if _, _, err := p.Ack(macC, c, "", later); err != nil {
		t.Fatal(err)
	}
	// A comes back: its old address is C's now, and nothing else is free.
	if _, _, err := p.Ack(macA, ip("192.168.1.100"), "", later); !errors.Is(err, ErrWrongAddress) {
		t.Errorf("A re-requesting its old address, now C's: %v, want ErrWrongAddress", err)
	}
	if _, err := p.Offer(macA, netip.Addr{}, later); !errors.Is(err, ErrExhausted) {
		t.Errorf("A offered with the pool full: %v", err)
	}
}

func TestPoolRequestForAnothersAddressNAKed(t *testing.T) {
	p := newTestPool(t, "192.168.1.100", "192.168.1.110")
	a := bind(t, p, macA, t0)
	if _, _, err := p.Ack(macB, a, "", t0.Add(time.Minute)); !errors.Is(err, ErrWrongAddress) {
		t.Errorf("B requesting A's %v: %v, want ErrWrongAddress", a, err)
	}
	for _, bad := range []string{"192.168.1.99", "192.168.1.1", "192.168.1.101", "10.0.0.5"} {
		if _, _, err := p.Ack(macB, ip(bad), "", t0); !errors.Is(err, ErrWrongAddress) {
			t.Errorf("B requesting %s (outside the range, reserved or static): %v", bad, err)
		}
	}
	// Requested addresses are honoured when free (INIT-REBOOT after the
	// server lost its leases).
	if l, res, err := p.Ack(macB, ip("192.168.1.107"), "laptop", t0); err != nil || res != Bound || l.Hostname != "laptop" {
		t.Errorf("B requesting a free address: %+v %v %v", l, res, err)
	}
	if off, _ := p.Offer(macC, ip("192.168.1.107"), t0); off == ip("192.168.1.107") {
		t.Error("C offered B's address because it asked for it")
	}
}

func TestPoolOfferHeld(t *testing.T) {
	p := newTestPool(t, "192.168.1.100", "192.168.1.110")
	a, _ := p.Offer(macA, netip.Addr{}, t0)
	if b, _ := p.Offer(macB, netip.Addr{}, t0); b == a {
		t.Fatalf("two clients offered %v at once", a)
	}
	if _, _, err := p.Ack(macB, a, "", t0.Add(time.Second)); !errors.Is(err, ErrWrongAddress) {
		t.Errorf("B took the address offered to A: %v", err)
	}
	// Not requested within OfferHold: free again, and not stored.
	if _, _, err := p.Ack(macB, a, "", t0.Add(OfferHold)); err != nil {
		t.Errorf("after the hold: %v", err)
	}
	if ls := p.Leases(); len(ls) != 1 || ls[0].MAC != macB {
		t.Errorf("stored leases %+v, want B's only (offers are not stored)", ls)
	}
}

func TestPoolReleaseDecline(t *testing.T) {
	p := newTestPool(t, "192.168.1.100", "192.168.1.110")
	a := bind(t, p, macA, t0)
	if p.Release(macB, a, t0) {
		t.Error("B released A's lease")
	}
	if !p.Release(macA, a, t0) {
		t.Fatal("A's release changed nothing")
	}
	if ls := p.Leases(); len(ls) != 1 || !ls[0].Released {
		t.Errorf("after release: %+v", ls)
	}
	// A comes back before anyone took it: same address, and a write.
	if got, _ := p.Offer(macA, netip.Addr{}, t0.Add(time.Minute)); got != a {
		t.Errorf("A offered %v after its release, want %v back", got, a)
	}
	if _, res, _ := p.Ack(macA, a, "", t0.Add(time.Minute)); res != Bound {
		t.Errorf("taking a released lease up again: %v, want Bound", res)
	}

	b := bind(t, p, macB, t0)
	if !p.Decline(macB, b, t0) {
		t.Fatal("B's decline changed nothing")
	}
	next, _ := p.Offer(macB, netip.Addr{}, t0.Add(time.Minute))
	if next == b {
		t.Errorf("B offered the address it declined, %v", b)
	}
	if c, _ := p.Offer(macC, b, t0.Add(time.Minute)); c == b {
		t.Errorf("C offered declined %v", b)
	}
}

func TestPoolMaxLeases(t *testing.T) {
	p, err := NewPool(PoolConfig{First: ip("10.0.0.1"), Last: ip("10.0.255.254"), LeaseTime: time.Hour, MaxLeases: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{macA, macB, macC} {
		bind(t, p, m, t0)
	}
	if _, err := p.Offer(macS, netip.Addr{}, t0); !errors.Is(err, ErrExhausted) {
		t.Errorf("fourth client with MaxLeases 3: %v, want ErrExhausted", err)
	}
	if _, _, err := p.Ack(macS, ip("10.0.9.9"), "", t0); !errors.Is(err, ErrWrongAddress) {
		t.Errorf("fourth client requesting directly: %v, want refused", err)
	}
}

// memStore is a LeaseStore in memory that counts its writes.
type memStore struct {
	mu     sync.Mutex
	leases []Lease
	saves  int
}

func (m *memStore) Load() ([]Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Lease(nil), m.leases...), nil
}

func (m *memStore) Save(l []Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leases = append([]Lease(nil), l...)
	m.saves++
	return nil
}

func (m *memStore) writes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}

func TestPoolPersistence(t *testing.T) {
	p := newTestPool(t, "192.168.1.100", "192.168.1.110")
	a := bind(t, p, macA, t0)
	b := bind(t, p, macB, t0)
	if _, _, err := p.Ack(macB, b, "laptop", t0); err != nil {
		t.Fatal(err)
	}
	p.Release(macB, b, t0)
	store := &memStore{}
	store.Save(p.Leases())

	// The router restarts with a wrong clock (no RTC, before NTP).
	boot := time.Date(1970, 1, 1, 0, 0, 30, 0, time.UTC)
	q := newTestPool(t, "192.168.1.100", "192.168.1.110")
	ls, _ := store.Load()
	q.Load(ls, boot)
	if !reflect.DeepEqual(q.Leases(), []Lease{
		{MAC: macA, IP: a, Expires: boot.Add(time.Hour)},
		{MAC: macB, IP: b, Hostname: "laptop", Expires: boot, Released: true},
	}) {
		t.Errorf("loaded %+v", q.Leases())
	}
	// C comes first: A's lease is held a lease time from boot, B's
	// released address is free but B's preferred one, so C gets a third.
	if c, _ := q.Offer(macC, netip.Addr{}, boot); c == a || c == b {
		t.Errorf("C offered %v, which belongs to A or B", c)
	}
	if got, _ := q.Offer(macA, netip.Addr{}, boot); got != a {
		t.Errorf("A offered %v after the restart, want %v", got, a)
	}
	if _, res, err := q.Ack(macA, a, "", boot); err != nil || res != Renewed {
		t.Errorf("A's request after the restart: %v %v, want a renewal (no write)", res, err)
	}
	if got, _ := q.Offer(macB, netip.Addr{}, boot); got != b {
		t.Errorf("B offered %v after the restart, want its released %v back", got, b)
	}

	// Leases that no longer fit the config are dropped on load.
	r, _ := NewPool(PoolConfig{First: ip("192.168.1.105"), Last: ip("192.168.1.110"), LeaseTime: time.Hour})
	r.Load(ls, boot)
	if len(r.Leases()) != 0 {
		t.Errorf("leases outside the new range kept: %+v", r.Leases())
	}
}

func TestNewPoolRefuses(t *testing.T) {
	for name, cfg := range map[string]PoolConfig{
		"reversed":   {First: ip("10.0.0.9"), Last: ip("10.0.0.1"), LeaseTime: time.Hour},
		"ipv6":       {First: ip("fd00::1"), Last: ip("fd00::9"), LeaseTime: time.Hour},
		"short":      {First: ip("10.0.0.1"), Last: ip("10.0.0.9"), LeaseTime: time.Second},
		"bad mac":    {First: ip("10.0.0.1"), Last: ip("10.0.0.9"), LeaseTime: time.Hour, Static: map[string]netip.Addr{"nope": ip("10.0.0.3")}},
		"shared fix": {First: ip("10.0.0.1"), Last: ip("10.0.0.9"), LeaseTime: time.Hour, Static: map[string]netip.Addr{macA: ip("10.0.0.3"), macB: ip("10.0.0.3")}},
	} {
		if _, err := NewPool(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
