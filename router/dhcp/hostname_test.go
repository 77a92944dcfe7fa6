package dhcp

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestHostLabel(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"laptop", "laptop", true},
		{"Laptop-2", "laptop-2", true},
		{strings.Repeat("a", 63), strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), "", false},
		{"-lead", "", false},
		{"trail-", "", false},
		{"two.labels", "", false},
		{"under_score", "", false},
		{"sp ace", "", false},
		{evilName, "", false},
		{"caf\u00e9", "", false},
		{"nul\x00", "", false},
	} {
		got, ok := HostLabel(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("HostLabel(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// The stored lease document has a bounded worst case: a pool holding
// its maximum of leases, every one with the longest name, the longest
// addresses and expiry times, encodes within LeaseDocBudget, keeping
// the leases that run longest. Before the bound, 60 clients with
// 255-byte names filled the card's whole 64 KiB state record.
func TestStoredLeasesWorstCase(t *testing.T) {
	p, err := NewPool(PoolConfig{First: ip("100.100.100.100"), Last: ip("100.100.255.254"), LeaseTime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// The longest RFC 3339 time: nanoseconds and a zone offset.
	zone := time.FixedZone("far", -(12*3600 + 59*60))
	now := time.Date(2026, 12, 31, 23, 59, 59, 999999999, zone)
	name := strings.Repeat("h", MaxHostname)
	for i := 0; i < DefaultMaxLeases; i++ {
		mac := fmt.Sprintf("aa:bb:cc:dd:%02x:%02x", i>>8, i&0xff)
		at := now.Add(time.Duration(i) * time.Nanosecond)
		a, err := p.Offer(mac, netip.Addr{}, at)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.Ack(mac, a, name+strings.Repeat("x", 200), at); err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.Ack(mac, a, name, at); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			p.Release(mac, a, at)
		}
	}
	ls := p.Leases()
	b, err := json.Marshal(ls)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != MaxStoredLeases || len(b) > LeaseDocBudget {
		t.Fatalf("%d leases stored in %d bytes, want %d in at most %d", len(ls), len(b), MaxStoredLeases, LeaseDocBudget)
	}
	t.Logf("worst case: %d leases in %d bytes (budget %d)", len(ls), len(b), LeaseDocBudget)
	// The bound ones that run longest: the even clients from the end.
	newest := now.Add(time.Duration(DefaultMaxLeases-2) * time.Nanosecond)
	for _, l := range ls {
		if l.Released || l.Hostname != name || newest.Sub(l.Expires.Add(-time.Hour)) >= time.Duration(2*MaxStoredLeases)*time.Nanosecond {
			t.Errorf("stored %+v: want only the %d bound leases that run longest", l, MaxStoredLeases)
			break
		}
	}
	// What is stored comes back.
	q, _ := NewPool(PoolConfig{First: ip("100.100.100.100"), Last: ip("100.100.255.254"), LeaseTime: time.Hour})
	q.Load(ls, now)
	if n := len(q.Leases()); n != MaxStoredLeases {
		t.Errorf("loaded %d leases, want %d", n, MaxStoredLeases)
	}
}
