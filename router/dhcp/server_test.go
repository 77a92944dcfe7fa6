package dhcp

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/site"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

func testSite() *site.Site {
	return &site.Site{
		Kind: "site", Hostname: "gw",
		LAN: site.LAN{Ports: []string{"lan1"}, Address: "192.168.1.1/24", DHCP: site.DHCP{
			Range:  []string{"192.168.1.100", "192.168.1.199"},
			Static: []site.StaticLease{{MAC: "52:54:00:00:00:5e", IP: "192.168.1.50", Name: "printer"}},
		}},
	}
}

type testServer struct {
	*Server
	store *memStore
	log   []string
	clock time.Time
}

func newTestServer(t *testing.T, store *memStore) *testServer {
	t.Helper()
	cfg, err := ServerConfigFromSite(testSite(), "lan0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{store: store, clock: t0}
	cfg.Store = store
	cfg.Log = func(f string, a ...any) { ts.log = append(ts.log, fmt.Sprintf(f, a...)) }
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return ts.clock }
	ts.Server = s
	return ts
}

func hw(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

var zeroPeer = &net.UDPAddr{IP: net.IPv4zero, Port: 68}

func must(m *dhcpv4.DHCPv4, err error) *dhcpv4.DHCPv4 {
	if err != nil {
		panic(err)
	}
	return m
}

// handshake runs DISCOVER/OFFER/REQUEST/ACK for mac and returns the ACK.
func (ts *testServer) handshake(t *testing.T, mac string, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	disc := must(dhcpv4.NewDiscovery(hw(mac), mods...))
	offer, dst := ts.handle(disc, zeroPeer)
	if offer == nil || offer.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("DISCOVER from %s: got %v", mac, offer)
	}
	if !dst.IP.Equal(net.IPv4bcast) {
		t.Errorf("OFFER to a client without an address sent to %v, want broadcast", dst)
	}
	req := must(dhcpv4.NewRequestFromOffer(offer, mods...))
	ack, _ := ts.handle(req, zeroPeer)
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("REQUEST from %s: got %v", mac, ack)
	}
	return ack
}

func TestServerHandshakeOptions(t *testing.T) {
	ts := newTestServer(t, &memStore{})
	ack := ts.handshake(t, macA, dhcpv4.WithOption(dhcpv4.OptHostName("laptop")))
	if got := ack.YourIPAddr.String(); got != "192.168.1.100" {
		t.Errorf("yiaddr %s, want the range's first, 192.168.1.100", got)
	}
	checks := map[string][2]string{
		"subnet mask": {net.IP(ack.SubnetMask()).String(), "255.255.255.0"},
		"router":      {fmt.Sprint(ack.Router()), "[192.168.1.1]"},
		"dns":         {fmt.Sprint(ack.DNS()), "[192.168.1.1]"},
		"server id":   {ack.ServerIdentifier().String(), "192.168.1.1"},
		"lease time":  {ack.IPAddressLeaseTime(0).String(), (12 * time.Hour).String()},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s: %s, want %s", name, c[0], c[1])
		}
	}
	if want := "lease 192.168.1.100 to 52:54:00:00:00:0a (laptop) for 12h"; len(ts.log) != 1 || ts.log[0] != want {
		t.Errorf("log %q, want [%q]", ts.log, want)
	}
	if ts.store.saves != 1 || len(ts.store.leases) != 1 || ts.store.leases[0].Hostname != "laptop" {
		t.Errorf("store: %d saves, %+v; want one save with the lease", ts.store.saves, ts.store.leases)
	}

	// A renewal (RENEWING: ciaddr set, unicast from the client's address)
	// is ACKed to that address and writes nothing.
	ts.clock = t0.Add(6 * time.Hour)
	renew := must(dhcpv4.NewRenewFromAck(ack))
	got, dst := ts.handle(renew, &net.UDPAddr{IP: ack.YourIPAddr, Port: 68})
	if got == nil || got.MessageType() != dhcpv4.MessageTypeAck || !got.YourIPAddr.Equal(ack.YourIPAddr) {
		t.Fatalf("renewal: %v", got)
	}
	if !dst.IP.Equal(ack.YourIPAddr) {
		t.Errorf("renewal ACK sent to %v, want the client's %v", dst, ack.YourIPAddr)
	}
	if ts.store.saves != 1 || len(ts.log) != 1 {
		t.Errorf("renewal wrote the store (%d saves) or logged %q", ts.store.saves, ts.log)
	}
	if ls := ts.Leases(); len(ls) != 1 || !ls[0].Expires.Equal(t0.Add(18*time.Hour)) {
		t.Errorf("after the renewal the lease is %+v, want it to run to +18h", ls)
	}
}

func TestServerStaticAndSecondClient(t *testing.T) {
	ts := newTestServer(t, &memStore{})
	a := ts.handshake(t, macA)
	b := ts.handshake(t, macB)
	if a.YourIPAddr.Equal(b.YourIPAddr) {
		t.Errorf("two clients got %v", a.YourIPAddr)
	}
	s := ts.handshake(t, macS)
	if got := s.YourIPAddr.String(); got != "192.168.1.50" {
		t.Errorf("static MAC got %s, want 192.168.1.50", got)
	}
	if ts.store.saves != 2 {
		t.Errorf("%d saves, want 2 (static leases are not stored)", ts.store.saves)
	}
	if n := len(ts.Leases()); n != 3 {
		t.Errorf("%d active leases, want 3 with the static one", n)
	}
}

func TestServerNAK(t *testing.T) {
	ts := newTestServer(t, &memStore{})
	a := ts.handshake(t, macA)
	// B claims A's address (INIT-REBOOT: option 50, no server id).
	req := must(dhcpv4.New(dhcpv4.WithHwAddr(hw(macB)), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(a.YourIPAddr))))
	nak, dst := ts.handle(req, zeroPeer)
	if nak == nil || nak.MessageType() != dhcpv4.MessageTypeNak {
		t.Fatalf("B requesting A's address: %v, want a NAK", nak)
	}
	if !dst.IP.Equal(net.IPv4bcast) {
		t.Errorf("NAK sent to %v, want broadcast", dst)
	}
	if !strings.Contains(strings.Join(ts.log, "\n"), "NAK 192.168.1.100 for 52:54:00:00:00:0b") {
		t.Errorf("log %q lacks the NAK", ts.log)
	}
	// A request naming another server's identifier is that server's.
	other := must(dhcpv4.New(dhcpv4.WithHwAddr(hw(macC)), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(192, 168, 1, 150))),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(192, 168, 1, 2)))))
	if r, _ := ts.handle(other, zeroPeer); r != nil {
		t.Errorf("answered a request for another server: %v", r)
	}
	// Relayed messages are not this link's.
	relayed := must(dhcpv4.NewDiscovery(hw(macC), dhcpv4.WithGatewayIP(net.IPv4(10, 0, 0, 1))))
	if r, _ := ts.handle(relayed, zeroPeer); r != nil {
		t.Errorf("answered a relayed DISCOVER: %v", r)
	}
}

func TestServerReleaseDecline(t *testing.T) {
	ts := newTestServer(t, &memStore{})
	a := ts.handshake(t, macA)
	rel := must(dhcpv4.NewReleaseFromACK(a))
	if r, _ := ts.handle(rel, zeroPeer); r != nil {
		t.Errorf("RELEASE answered: %v", r)
	}
	if ts.store.saves != 2 || !ts.store.leases[0].Released {
		t.Errorf("after RELEASE: %d saves, %+v", ts.store.saves, ts.store.leases)
	}

	b := ts.handshake(t, macB)
	dec := must(dhcpv4.New(dhcpv4.WithHwAddr(hw(macB)), dhcpv4.WithMessageType(dhcpv4.MessageTypeDecline),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(b.YourIPAddr))))
	ts.handle(dec, zeroPeer)
	again := ts.handshake(t, macB)
	if again.YourIPAddr.Equal(b.YourIPAddr) {
		t.Errorf("B got %v again after declining it", b.YourIPAddr)
	}
}

func TestServerRestartKeepsLeases(t *testing.T) {
	store := &memStore{}
	ts := newTestServer(t, store)
	a := ts.handshake(t, macA)
	b := ts.handshake(t, macB)

	ts2 := newTestServer(t, store)
	// B first: without the stored leases it would get A's address.
	if got := ts2.handshake(t, macB); !got.YourIPAddr.Equal(b.YourIPAddr) {
		t.Errorf("after restart B got %v, want %v", got.YourIPAddr, b.YourIPAddr)
	}
	if got := ts2.handshake(t, macA); !got.YourIPAddr.Equal(a.YourIPAddr) {
		t.Errorf("after restart A got %v, want %v", got.YourIPAddr, a.YourIPAddr)
	}
}

func TestServerConfigFromSite(t *testing.T) {
	site := testSite()
	site.LAN.DHCP.DNS = []string{"9.9.9.9"}
	site.LAN.DHCP.Router = "192.168.1.254"
	site.LAN.DHCP.Lease = "90m"
	cfg, err := ServerConfigFromSite(site, "br0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Router != netip.MustParseAddr("192.168.1.254") || fmt.Sprint(cfg.DNS) != "[9.9.9.9]" ||
		cfg.Pool.LeaseTime != 90*time.Minute || cfg.Pool.Static["52:54:00:00:00:5e"] != netip.MustParseAddr("192.168.1.50") {
		t.Errorf("config %+v", cfg)
	}
	site.LAN.DHCP.Range = nil
	if _, err := ServerConfigFromSite(site, "br0"); err == nil {
		t.Error("no range: the server should be off")
	}
	site.LAN.DHCP.Range = []string{"10.0.0.1", "10.0.0.9"}
	if _, err := ServerConfigFromSite(site, "br0"); err == nil {
		t.Error("a range outside the LAN accepted")
	}
}

// INFORM (a host with a static address) gets the options in an ACK
// that echoes its ciaddr, unicast to it, with no yiaddr, no lease time
// and no lease; an INFORM from outside the LAN gets nothing.
func TestServerInform(t *testing.T) {
	ts := newTestServer(t, &memStore{})
	inf := must(dhcpv4.New(dhcpv4.WithHwAddr(hw(macB)), dhcpv4.WithMessageType(dhcpv4.MessageTypeInform),
		dhcpv4.WithClientIP(net.ParseIP("192.168.1.60"))))
	ack, dst := ts.handle(inf, &net.UDPAddr{IP: net.ParseIP("192.168.1.60"), Port: 68})
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("INFORM: got %v", ack)
	}
	if !ack.ClientIPAddr.Equal(net.ParseIP("192.168.1.60")) || !ack.YourIPAddr.IsUnspecified() ||
		ack.Options.Has(dhcpv4.OptionIPAddressLeaseTime) || dst.String() != "192.168.1.60:68" {
		t.Errorf("INFORM's ACK: ciaddr %v, yiaddr %v, lease time %v, to %v", ack.ClientIPAddr, ack.YourIPAddr,
			ack.Options.Has(dhcpv4.OptionIPAddressLeaseTime), dst)
	}
	if ack.DomainName() != "lan" || fmt.Sprint(ack.Router()) != "[192.168.1.1]" {
		t.Errorf("INFORM's options: domain %q, router %v", ack.DomainName(), ack.Router())
	}
	if len(ts.Leases()) != 0 {
		t.Errorf("an INFORM made a lease: %v", ts.Leases())
	}
	inf.ClientIPAddr = net.ParseIP("10.9.9.9")
	if r, _ := ts.handle(inf, &net.UDPAddr{IP: inf.ClientIPAddr, Port: 68}); r != nil {
		t.Errorf("INFORM from outside the LAN answered: %v", r)
	}
}

// The domain (15) always, the MTU (26) only when lan.mtu is set, and
// the NTP servers (42) when configured.
func TestServerExtraOptions(t *testing.T) {
	s := testSite()
	cfg, err := ServerConfigFromSite(s, "lan0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Domain != "lan" || cfg.MTU != 0 || len(cfg.NTP) != 0 {
		t.Errorf("config from the site: domain %q, MTU %d, NTP %v", cfg.Domain, cfg.MTU, cfg.NTP)
	}
	ack := newTestServer(t, &memStore{}).handshake(t, macA)
	if ack.Options.Has(dhcpv4.OptionInterfaceMTU) || ack.Options.Has(dhcpv4.OptionNTPServers) {
		t.Errorf("MTU or NTP sent unset: %v", ack.Options)
	}
	s.LAN.MTU, s.LAN.Domain = 1400, "home.example"
	cfg, _ = ServerConfigFromSite(s, "lan0")
	cfg.NTP = []netip.Addr{netip.MustParseAddr("192.168.1.1")}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, store: &memStore{}}
	srv.now = func() time.Time { return t0 }
	ack = ts.handshake(t, macA)
	if mtu := ack.Options.Get(dhcpv4.OptionInterfaceMTU); fmt.Sprint(mtu) != "[5 120]" {
		t.Errorf("MTU option %v, want 1400", mtu)
	}
	if ack.DomainName() != "home.example" || fmt.Sprint(ack.NTPServers()) != "[192.168.1.1]" {
		t.Errorf("domain %q, NTP %v", ack.DomainName(), ack.NTPServers())
	}
}
