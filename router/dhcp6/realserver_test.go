package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/realclient"
)

// The server is ISC dhcpd -6 from Debian, run in a namespace of its own
// joined by veth to the client's (package realclient); the client runs
// in-process in the other. No packet leaves the two namespaces.

const wanServer = "2001:db8:ffff::1/64"

// dhcpdConf is a dhcpd -6 config delegating /60s from pool (the first
// and last prefix) and addresses from the WAN's /64, with short
// lifetimes so that renewals come within seconds.
func dhcpdConf(first, last string) string {
	return `ddns-update-style none;
authoritative;
default-lease-time 40;
max-lease-time 40;
preferred-lifetime 20;
option dhcp6.name-servers 2001:db8:ffff::53;
option dhcp6.domain-search "isp.example";
option dhcp6.sntp-servers 2001:db8:ffff::123;
subnet6 2001:db8:ffff::/64 {
  range6 2001:db8:ffff::100 2001:db8:ffff::1ff;
  prefix6 ` + first + ` ` + last + ` /60;
}
`
}

// dhcpd runs dhcpd -6 with conf in the link's server namespace, on a
// fresh lease file.
func dhcpd(t *testing.T, link *realclient.Link, conf string) *realclient.Proc {
	t.Helper()
	bin := realclient.Need(t, "dhcpd")
	dir := t.TempDir()
	cf, lf, pf := filepath.Join(dir, "dhcpd6.conf"), filepath.Join(dir, "leases6"), filepath.Join(dir, "pid")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return realclient.Start(t, link.Server, realclient.Options{}, bin, "-6", "-f", "-d", "-cf", cf, "-lf", lf, "-pf", pf, link.ServerIf)
}

// memStore is a Store in memory.
type memStore struct {
	mu    sync.Mutex
	l     *Lease
	saves int
}

func (m *memStore) Load() (*Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l, nil
}

func (m *memStore) Save(l *Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.l, m.saves = l, m.saves+1
	return nil
}

// client is a running Client and the leases it reported.
type client struct {
	t       *testing.T
	mu      sync.Mutex
	updates []*Lease
	logs    []string
}

func runClient(t *testing.T, link *realclient.Link, store Store, address bool) *client {
	t.Helper()
	cl := &client{t: t}
	c, err := New(Config{Interface: link.ClientIf, PDLength: 60, Address: address, Store: store,
		Update: func(l *Lease) { cl.mu.Lock(); cl.updates = append(cl.updates, l); cl.mu.Unlock() },
		Log: func(f string, a ...any) {
			cl.mu.Lock()
			cl.logs = append(cl.logs, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(f, a...))
			cl.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- link.Client.Do(func() error { return c.Run(ctx) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
		if t.Failed() {
			cl.mu.Lock()
			t.Logf("client log:\n%s", strings.Join(cl.logs, "\n"))
			cl.mu.Unlock()
		}
	})
	return cl
}

// wait waits until the n-th update (counting from 1) arrives and
// returns it.
func (cl *client) wait(n int, timeout time.Duration) *Lease {
	cl.t.Helper()
	end := time.Now().Add(timeout)
	for {
		cl.mu.Lock()
		if len(cl.updates) >= n {
			l := cl.updates[n-1]
			cl.mu.Unlock()
			return l
		}
		cl.mu.Unlock()
		if time.Now().After(end) {
			cl.t.Fatalf("update %d did not come within %v", n, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var pool1 = netip.MustParsePrefix("2001:db8:100::/56")

// TestDHCPv6PrefixDelegation: dhcpd -6 delegates a /60 and an address
// with its resolver and search domain; the client renews at T1 and keeps
// the prefix in the store; once the server is gone the prefix is
// withdrawn when its valid lifetime runs out.
func TestDHCPv6PrefixDelegation(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 55 s (a renewal at T1 10 s, then the 40 s lease runs out)")
	}
	link := realclient.NewLink(t, wanServer)
	srv := dhcpd(t, link, dhcpdConf("2001:db8:100::", "2001:db8:100:f0::"))
	store := &memStore{}
	cl := runClient(t, link, store, true)
	first := cl.wait(1, 60*time.Second)
	if first == nil || first.Prefix.Bits() != 60 || !pool1.Contains(first.Prefix.Addr()) {
		t.Fatalf("first lease %+v: want a /60 of %s", first, pool1)
	}
	if !netip.MustParsePrefix(wanServer).Masked().Contains(first.Address) {
		t.Errorf("address %v outside the WAN's /64", first.Address)
	}
	if first.PrefixValid != 40*time.Second || first.PrefixPreferred != 20*time.Second || first.T1 != 10*time.Second || first.T2 != 16*time.Second {
		t.Errorf("lifetimes: valid %v preferred %v T1 %v T2 %v; want 40s 20s 10s 16s", first.PrefixValid, first.PrefixPreferred, first.T1, first.T2)
	}
	if fmt.Sprint(first.DNS) != "[2001:db8:ffff::53]" || fmt.Sprint(first.Domains) != "[isp.example]" {
		t.Errorf("DNS %v, domains %v", first.DNS, first.Domains)
	}
	// RFC 7084 WAA-5: the SNTP servers option, asked for and kept.
	if fmt.Sprint(first.NTP) != "[2001:db8:ffff::123]" {
		t.Errorf("time servers %v, want the server's 2001:db8:ffff::123", first.NTP)
	}
	// The renewal, at T1: the same prefix, later.
	renewed := cl.wait(2, 60*time.Second)
	if renewed == nil || renewed.Prefix != first.Prefix || !renewed.Obtained.After(first.Obtained.Add(5*time.Second)) {
		t.Errorf("renewal %+v after %+v", renewed, first)
	}
	if !srv.WaitFor(regexp.MustCompile(`(?i)Reply NA: address|Renew message from`), 1, 5*time.Second) {
		t.Errorf("dhcpd logged no renewal:\n%s", srv.Output())
	}
	if store.l == nil || store.l.Prefix != first.Prefix {
		t.Errorf("the store keeps %+v", store.l)
	}
	// The server goes away: no renewal, no rebind answered; when the
	// lease's valid lifetime (40 s) runs out the prefix is withdrawn
	// (nil), not before.
	srv.Kill(t)
	n := 3
	for ; ; n++ {
		l := cl.wait(n, 90*time.Second)
		if l == nil {
			break
		}
		renewed = l // a renewal that crossed the kill
	}
	cl.mu.Lock()
	at := time.Now()
	cl.mu.Unlock()
	if end := renewed.Expires(); at.Before(end.Add(-time.Second)) || at.After(end.Add(10*time.Second)) {
		t.Errorf("withdrawn at %v, the lease ran out at %v", at.Format("15:04:05.000"), end.Format("15:04:05.000"))
	}
}

// TestDHCPv6PrefixDelegationKept: a box that reboots with its kept
// lease asks for that prefix (the hint in its Solicit) and a server that
// never saw it (a fresh lease file) gives it.
func TestDHCPv6PrefixDelegationKept(t *testing.T) {
	if testing.Short() {
		t.Skip("runs dhcpd -6: a few seconds")
	}
	link := realclient.NewLink(t, wanServer)
	srv := dhcpd(t, link, dhcpdConf("2001:db8:100::", "2001:db8:100:f0::"))
	kept := netip.MustParsePrefix("2001:db8:100:b0::/60")
	store := &memStore{l: &Lease{Prefix: kept, PrefixValid: time.Hour}}
	cl := runClient(t, link, store, false)
	l := cl.wait(1, 60*time.Second)
	if l == nil || l.Prefix != kept {
		t.Errorf("got %+v, want the kept %s\ndhcpd:\n%s", l, kept, srv.Output())
	}
}

// TestDHCPv6PrefixDelegationChange: the ISP renumbers: the server is
// restarted with another pool and its leases forgotten (a new DUID too,
// so it ignores the Renew and answers the Rebind at T2). The client
// reports the new prefix, and never the old one after it.
func TestDHCPv6PrefixDelegationChange(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 30 s (the rebind at T2 16 s)")
	}
	link := realclient.NewLink(t, wanServer)
	srv := dhcpd(t, link, dhcpdConf("2001:db8:100::", "2001:db8:100:f0::"))
	cl := runClient(t, link, &memStore{}, false)
	first := cl.wait(1, 60*time.Second)
	if first == nil || !pool1.Contains(first.Prefix.Addr()) {
		t.Fatalf("first lease %+v", first)
	}
	srv.Kill(t)
	pool2 := netip.MustParsePrefix("2001:db8:200::/56")
	srv = dhcpd(t, link, dhcpdConf("2001:db8:200::", "2001:db8:200:f0::"))
	var got *Lease
	n := 2
	for ; n < 6; n++ {
		got = cl.wait(n, 90*time.Second)
		if got != nil && pool2.Contains(got.Prefix.Addr()) {
			break
		}
		if got != nil && got.Prefix != first.Prefix {
			t.Fatalf("update %d: %+v, neither the old nor the new pool's", n, got)
		}
	}
	if got == nil || !pool2.Contains(got.Prefix.Addr()) || got.Prefix.Bits() != 60 {
		t.Fatalf("no prefix from the new pool: last %+v\ndhcpd:\n%s", got, srv.Output())
	}
	// It keeps the new one: the renewal after brings no old prefix back.
	if l := cl.wait(n+1, 60*time.Second); l == nil || l.Prefix != got.Prefix {
		t.Errorf("after the change: %+v, want %s kept", l, got.Prefix)
	}
}

// TestDHCPv6PrefixDelegationSameIdentity: RFC 7084 W-5 and RFC 9096
// WPD-9/WPD-10 against dhcpd -6: a client stopped and started again
// with nothing kept (no hint, as after a reboot that lost the store)
// is known again by its DUID and IAID alone and gets the prefix it had
// (a client the server did not know would get another one of the pool:
// that prefix is still bound), and stopping sent no Release (dhcpd's
// log shows none).
func TestDHCPv6PrefixDelegationSameIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs dhcpd -6: a few seconds")
	}
	link := realclient.NewLink(t, wanServer)
	srv := dhcpd(t, link, dhcpdConf("2001:db8:100::", "2001:db8:100:f0::"))
	run := func() (*Lease, func()) {
		t.Helper()
		got := make(chan *Lease, 8)
		c, err := New(Config{Interface: link.ClientIf, PDLength: 60, Store: &memStore{},
			Update: func(l *Lease) {
				select {
				case got <- l:
				default:
				}
			},
			Log: func(string, ...any) {}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- link.Client.Do(func() error { return c.Run(ctx) }) }()
		stop := func() { cancel(); <-done }
		select {
		case l := <-got:
			return l, stop
		case <-time.After(60 * time.Second):
			stop()
			t.Fatalf("no lease within 60 s\ndhcpd:\n%s", srv.Output())
			return nil, nil
		}
	}
	first, stop := run()
	stop()
	second, stop := run()
	defer stop()
	if first == nil || second == nil || !first.Prefix.IsValid() || second.Prefix != first.Prefix {
		t.Errorf("restarted with nothing kept: %+v, want the prefix of %+v\ndhcpd:\n%s", second, first, srv.Output())
	}
	if strings.Contains(srv.Output(), "Release") {
		t.Errorf("dhcpd saw a Release:\n%s", srv.Output())
	}
}
