package dhcp

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/realclient"
)

// The WAN client against real DHCP servers on this host: the server
// (dnsmasq, ISC dhcpd) in one network namespace, run by package
// realclient, the client in-process in another, joined by a veth pair.
// Each test gets a lease and checks the address on the link and the
// options as the client reports them to the router, the renewal at T1,
// and, the server killed, the address dropped at expiry, not an exchange
// later (the case that was 14 s late). T1 and T2 are 10 and 20 s so that
// the unanswered exchanges after the server's death end near expiry.

const (
	wanServer = "198.51.100.1"
	wanNet    = wanServer + "/24"
	wanDNS2   = "198.51.100.53"
)

// TestWANClientWithDnsmasq: dnsmasq gives no lease shorter than 2
// minutes, so the run takes that long after the renewal: it is skipped
// under -short, where TestClientDropsAtExpiry checks the same schedule
// on a fake clock.
func TestWANClientWithDnsmasq(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("runs on the host, with the host's dnsmasq")
	}
	if testing.Short() {
		t.Skip("takes about 15 s (a lease, renewed at T1); TestClientDropsAtExpiry is the short version")
	}
	dnsmasq := realclient.Need(t, "dnsmasq")
	link := realclient.NewLink(t, wanNet)
	dir := t.TempDir()
	srv := realclient.Start(t, link.Server, realclient.Options{}, dnsmasq,
		"--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root",
		"--interface="+link.ServerIf, "--bind-interfaces", "--log-dhcp", "--log-facility=-",
		"--dhcp-range=198.51.100.50,198.51.100.60,2m",
		"--dhcp-option=option:router,"+wanServer, "--dhcp-option=option:dns-server,"+wanServer+","+wanDNS2,
		"--dhcp-option=option:T1,10", "--dhcp-option=option:T2,20",
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file="+filepath.Join(dir, "pid"))
	w := startWANClient(t, link)
	first := w.checkLease(2 * time.Minute)
	w.checkRenewal(first)
	// The drop at expiry is checked against dhcpd below (30 s lease):
	// here it would add two minutes (dnsmasq's shortest lease) to the
	// suite for the same client code.
	srv.Kill(t)
}

// TestWANClientWithDhcpd: ISC dhcpd with a 30 s lease (its min-, max-
// and default-lease-time), so the whole run takes under a minute; still
// skipped under -short, like the dnsmasq one.
func TestWANClientWithDhcpd(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("runs on the host, with the host's dhcpd")
	}
	if testing.Short() {
		t.Skip("takes about 45 s (a 30 s lease, renewed once); TestClientDropsAtExpiry is the short version")
	}
	dhcpd := realclient.Need(t, "dhcpd")
	link := realclient.NewLink(t, wanNet)
	dir := t.TempDir()
	conf := `ddns-update-style none;
authoritative;
ping-check false;
default-lease-time 30;
max-lease-time 30;
min-lease-time 30;
subnet 198.51.100.0 netmask 255.255.255.0 {
  range 198.51.100.50 198.51.100.60;
  option routers ` + wanServer + `;
  option domain-name-servers ` + wanServer + `, ` + wanDNS2 + `;
  option dhcp-renewal-time 10;
  option dhcp-rebinding-time 20;
}
`
	cf, lf, pf := filepath.Join(dir, "dhcpd.conf"), filepath.Join(dir, "leases"), filepath.Join(dir, "pid")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// dhcpd will not start without its lease file.
	if err := os.WriteFile(lf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := realclient.Start(t, link.Server, realclient.Options{}, dhcpd,
		"-4", "-f", "-d", "-cf", cf, "-lf", lf, "-pf", pf, link.ServerIf)
	w := startWANClient(t, link)
	first := w.checkLease(30 * time.Second)
	w.checkRenewal(first)
	// dhcpd saw the renewal too: a second request for the same address,
	// acknowledged.
	acks := regexp.MustCompile(`DHCPACK on ` + regexp.QuoteMeta(first.Address.Addr().String()) + ` to `)
	if !srv.WaitFor(acks, 2, time.Second) {
		t.Errorf("dhcpd logged no second DHCPACK for %s:\n%s", first.Address.Addr(), srv.Output())
	}
	w.checkDropAtExpiry(srv)
}

// wanClient is the WAN client running in a link's client namespace and
// what it reported to the router: each update, and errors putting
// addresses on the link.
type wanClient struct {
	t        *testing.T
	link     *realclient.Link
	c        *Client
	mu       sync.Mutex
	events   []wanEvent
	addrErrs []error
}

type wanEvent struct {
	at   time.Time
	next *WANLease
}

// startWANClient runs the client on link's client end until t ends.
func startWANClient(t *testing.T, link *realclient.Link) *wanClient {
	t.Helper()
	w := &wanClient{t: t, link: link}
	ns, ifname := link.Client, link.ClientIf
	nl, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	w.c = NewClient(ClientConfig{Interface: ifname, Hostname: "gw",
		Log: func(f string, a ...any) { t.Logf("client: "+f, a...) },
		Update: func(prev, next *WANLease) {
			// As the router does: the address goes on and off the link.
			var err error
			switch {
			case next != nil:
				err = ns.AddAddr(ifname, next.Address.String())
			case prev != nil:
				a, _ := netlink.ParseAddr(prev.Address.String())
				err = ns.Netlink().AddrDel(nl, a)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.events = append(w.events, wanEvent{time.Now(), next})
			if err != nil {
				w.addrErrs = append(w.addrErrs, err)
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	// Run opens its packet socket in the client's namespace.
	go func() { ns.Do(func() error { return w.c.Run(ctx) }); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })
	return w
}

func (w *wanClient) waitFor(what string, d time.Duration, cond func() bool) {
	w.t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			w.t.Fatalf("no %s within %v", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkLease waits for the first lease and checks it: the server's
// lease time, T1 10 s and T2 20 s, the router and both DNS servers in
// the update the router got, the address on the link.
func (w *wanClient) checkLease(leaseTime time.Duration) *WANLease {
	t := w.t
	t.Helper()
	w.waitFor("lease", 30*time.Second, func() bool { return w.c.Lease() != nil })
	first := w.c.Lease()
	srv := netip.MustParseAddr(wanServer)
	if first.LeaseTime != leaseTime || first.T1 != 10*time.Second || first.T2 != 20*time.Second ||
		first.Router != srv || first.Server != srv {
		t.Fatalf("lease %v: T1 %v T2 %v, want a %v lease from %s with T1 10s, T2 20s", first, first.T1, first.T2, leaseTime, srv)
	}
	if !netip.MustParsePrefix(wanNet).Contains(first.Address.Addr()) || first.Address.Bits() != 24 {
		t.Errorf("address %v, want one in %s", first.Address, wanNet)
	}
	w.mu.Lock()
	var got *WANLease
	if len(w.events) > 0 {
		got = w.events[0].next
	}
	w.mu.Unlock()
	wantDNS := []netip.Addr{srv, netip.MustParseAddr(wanDNS2)}
	if got == nil || got.Address != first.Address || got.Router != srv || !slices.Equal(got.DNS, wantDNS) {
		t.Errorf("the router was given %v, want %v with router %s and DNS %v", got, first.Address, srv, wantDNS)
	}
	if !realclient.HasAddr(t, w.link.Client, w.link.ClientIf, first.Address.String()) {
		t.Fatalf("%s is not on %s", first.Address, w.link.ClientIf)
	}
	return first
}

// checkRenewal: renewed at T1, a newer lease, same address, no update
// (nothing the router configures changed).
func (w *wanClient) checkRenewal(first *WANLease) {
	t := w.t
	t.Helper()
	w.waitFor("renewal", first.T1+20*time.Second, func() bool { return w.c.Lease().Acquired.After(first.Acquired) })
	renewed := w.c.Lease()
	if d := renewed.Acquired.Sub(first.Acquired); d < first.T1 || d > first.T1+3*time.Second {
		t.Errorf("renewed %v after the lease, want at T1 (%v)", d, first.T1)
	}
	if renewed.Address != first.Address {
		t.Errorf("renewal gave %v, want %v", renewed.Address, first.Address)
	}
	w.mu.Lock()
	n := len(w.events)
	w.mu.Unlock()
	if n != 1 {
		t.Errorf("%d updates to the router after the renewal, want only the first lease's", n)
	}
}

// checkDropAtExpiry kills the server; the client tries at T1, rebinds
// from T2, and the address must go at expiry, within a second.
func (w *wanClient) checkDropAtExpiry(srv *realclient.Proc) {
	t := w.t
	t.Helper()
	srv.Kill(t)
	lease := w.c.Lease()
	expiry := lease.Expires()
	w.waitFor("loss of the lease", time.Until(expiry)+30*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.events[len(w.events)-1].next == nil
	})
	w.mu.Lock()
	last := w.events[len(w.events)-1]
	errs := w.addrErrs
	w.mu.Unlock()
	if late := last.at.Sub(expiry); late < 0 || late > time.Second {
		t.Errorf("address dropped %v after expiry, want within a second", late)
	} else {
		t.Logf("address dropped %v after expiry", late)
	}
	if realclient.HasAddr(t, w.link.Client, w.link.ClientIf, lease.Address.String()) {
		t.Errorf("%s still on %s after the lease expired", lease.Address, w.link.ClientIf)
	}
	if len(errs) != 0 {
		t.Errorf("setting addresses: %v", errs)
	}
}
