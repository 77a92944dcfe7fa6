package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/router/netns"
)

// TestKernelInTheLoop boots Debian's 686 kernel in QEMU and runs the
// TestGuest* tests there, where they may create network namespaces and
// veth pairs (never on this host).
func TestKernelInTheLoop(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("inside the guest: this test only starts it")
	}
	res := kerneltest.Run(t, kerneltest.Options{Modules: []string{"veth"}, Run: "TestGuest"})
	if res != nil && !strings.Contains(res.Output, "--- PASS: TestGuestServerAndClient") {
		t.Errorf("the guest did not run TestGuestServerAndClient")
	}
}

// TestGuestServerAndClient runs the server on one end of a veth pair and
// clients on the other end, each end in a network namespace of its own
// (package router/netns), with the real sockets: server4's UDP socket
// bound to the interface, nclient4's raw packet socket.
func TestGuestServerAndClient(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("needs network namespaces and veth: runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	srvNS, err := netns.New("dhcp-server")
	if err != nil {
		t.Fatal(err)
	}
	defer srvNS.Close()
	cliNS, err := netns.New("dhcp-client")
	if err != nil {
		t.Fatal(err)
	}
	defer cliNS.Close()
	// The client's end has no address: it asks for one.
	if err := netns.Veth(srvNS, "dhcps", "192.168.7.1/24", cliNS, "dhcpc", ""); err != nil {
		t.Fatal(err)
	}
	site := &site.Site{Kind: "site", Hostname: "gw", LAN: site.LAN{
		Ports: []string{"lan1"}, Address: "192.168.7.1/24",
		DHCP: site.DHCP{
			Range:  []string{"192.168.7.100", "192.168.7.150"},
			Lease:  "1h",
			Static: []site.StaticLease{{MAC: macS, IP: "192.168.7.50"}},
		},
	}}
	store := &memStore{}
	var logMu sync.Mutex
	var logs []string
	logf := func(f string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, fmt.Sprintf(f, a...))
		t.Logf("server: "+f, a...)
	}
	start := func() (*Server, func()) {
		cfg, err := ServerConfigFromSite(site, "dhcps")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Store, cfg.Log = store, logf
		s, err := NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srvNS.Do(func() error { return s.Serve(ctx) }) }()
		return s, func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Serve returned %v, want context.Canceled", err)
			}
		}
	}

	// lease runs a client with mac in the namespace until its first
	// lease reaches Update, and returns the lease and the client.
	lease := func(mac string) (*WANLease, *Client) {
		t.Helper()
		updates := make(chan *WANLease, 4)
		c := NewClient(ClientConfig{
			Interface: "dhcpc", HWAddr: hw(mac), Hostname: "host-" + mac[len(mac)-2:],
			Update: func(_, next *WANLease) { updates <- next },
			Log:    func(f string, a ...any) { t.Logf("client "+mac+": "+f, a...) },
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Run opens its sockets anew after errors: all of them in
			// the client's namespace.
			if err := cliNS.Do(func() error { c.Run(ctx); return nil }); err != nil {
				t.Errorf("client %s: %v", mac, err)
			}
		}()
		defer func() { cancel(); <-done }()
		select {
		case l := <-updates:
			if l == nil {
				t.Fatalf("client %s: Update with no lease first", mac)
			}
			return l, c
		case <-time.After(60 * time.Second):
			t.Fatalf("client %s: no lease within a minute", mac)
		}
		return nil, nil
	}

	_, stop := start()
	a, ca := lease(macA)
	if !inRange(a.Address.Addr(), "192.168.7.100", "192.168.7.150") || a.Address.Bits() != 24 {
		t.Errorf("A got %v, want an address of the range with /24", a.Address)
	}
	if a.Router.String() != "192.168.7.1" || fmt.Sprint(a.DNS) != "[192.168.7.1]" || a.LeaseTime != time.Hour || a.Server.String() != "192.168.7.1" {
		t.Errorf("A's options: %v", a)
	}
	b, _ := lease(macB)
	if b.Address == a.Address || !inRange(b.Address.Addr(), "192.168.7.100", "192.168.7.150") {
		t.Errorf("B got %v, A has %v", b.Address, a.Address)
	}
	s, _ := lease(macS)
	if s.Address.Addr().String() != "192.168.7.50" {
		t.Errorf("the static MAC got %v, want 192.168.7.50", s.Address)
	}
	logMu.Lock()
	joined := strings.Join(logs, "\n")
	logMu.Unlock()
	if want := fmt.Sprintf("lease %s to %s (host-0a) for 1h", a.Address.Addr(), macA); !strings.Contains(joined, want) {
		t.Errorf("server log lacks %q:\n%s", want, joined)
	}

	// A renewal over the real sockets is ACKed and writes nothing.
	saves := store.writes()
	var nc exchanger
	if err := cliNS.Do(func() (err error) { nc, err = ca.open(); return }); err != nil {
		t.Fatal(err)
	}
	before := ca.Lease()
	ca.now = func() time.Time { return before.Acquired.Add(before.T1) }
	ca.renew(context.Background(), nc, before)
	nc.Close()
	if after := ca.Lease(); after == nil || !after.Acquired.After(before.Acquired) || after.Address != before.Address {
		t.Errorf("renewal: %v -> %v", before, after)
	}
	if n := store.writes(); n != saves {
		t.Errorf("the renewal wrote the store (%d -> %d writes)", saves, n)
	}
	if saves != 2 {
		t.Errorf("%d writes for two dynamic leases and a static one, want 2", saves)
	}
	stop()

	// A restarted server with the same store: B asks first, and still
	// gets its own address rather than the range's first.
	_, stop = start()
	defer stop()
	if b2, _ := lease(macB); b2.Address != b.Address {
		t.Errorf("after the restart B got %v, want %v", b2.Address, b.Address)
	}
	if a2, _ := lease(macA); a2.Address != a.Address {
		t.Errorf("after the restart A got %v, want %v", a2.Address, a.Address)
	}
}

func inRange(ip netip.Addr, first, last string) bool {
	return !ip.Less(netip.MustParseAddr(first)) && !netip.MustParseAddr(last).Less(ip)
}
