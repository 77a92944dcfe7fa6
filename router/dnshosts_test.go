package router

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/ocfw/ocfw/router/dhcp"
	"github.com/ocfw/ocfw/router/dns"
	"github.com/ocfw/ocfw/site"
)

type storedLeases []dhcp.Lease

func (s storedLeases) Load() ([]dhcp.Lease, error) { return s, nil }
func (storedLeases) Save([]dhcp.Lease) error       { return nil }

// The forwarder as startServices wires it answers the router's name, the
// static leases' names and the DHCP clients' names in lan.domain; a
// client cannot take the router's name, and a bad name is not answered.
func TestLANHostsResolve(t *testing.T) {
	s := &site.Site{Hostname: "gw", LAN: site.LAN{Address: "192.168.1.1/24", Domain: "home.arpa",
		DHCP: site.DHCP{Range: []string{"192.168.1.100", "192.168.1.200"},
			Static: []site.StaticLease{{MAC: "02:00:00:00:00:10", IP: "192.168.1.10", Name: "printer"}}}}}
	cfg, err := dhcp.ServerConfigFromSite(s, "lan0")
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	cfg.Store = storedLeases{
		{MAC: "02:00:00:00:01:00", IP: netip.MustParseAddr("192.168.1.100"), Hostname: "Laptop", Expires: exp},
		{MAC: "02:00:00:00:01:01", IP: netip.MustParseAddr("192.168.1.101"), Hostname: "evil\x1b[2J", Expires: exp},
		{MAC: "02:00:00:00:01:03", IP: netip.MustParseAddr("192.168.1.103"), Hostname: "gw", Expires: exp},
		{MAC: "02:00:00:00:01:04", IP: netip.MustParseAddr("192.168.1.104"), Hostname: "printer", Expires: exp},
	}
	srv, err := dhcp.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := newRouter(Config{Site: s})
	r.svc.dhcp = srv
	fwd := dns.New(dns.Config{Allowed: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}, Domain: s.LAN.LocalDomain(), Hosts: r.lanHosts})
	client := &net.UDPAddr{IP: net.IPv4(192, 168, 1, 100), Port: 5353}
	ask := func(name string) (dnsmessage.RCode, []netip.Addr) {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 9, RecursionDesired: true})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		q, _ := b.Finish()
		var m dnsmessage.Message
		if err := m.Unpack(fwd.Answer(context.Background(), q, client)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var as []netip.Addr
		for _, a := range m.Answers {
			if r, ok := a.Body.(*dnsmessage.AResource); ok {
				as = append(as, netip.AddrFrom4(r.A))
			}
		}
		return m.RCode, as
	}
	for name, want := range map[string]string{
		"gw.home.arpa.": "192.168.1.1", "laptop.home.arpa.": "192.168.1.100", "laptop.": "192.168.1.100", "printer.home.arpa.": "192.168.1.10",
	} {
		if rc, as := ask(name); rc != dnsmessage.RCodeSuccess || len(as) != 1 || as[0].String() != want {
			t.Errorf("%s: %v %v, want %s", name, rc, as, want)
		}
	}
	if rc, as := ask("nobody.home.arpa."); rc != dnsmessage.RCodeNameError {
		t.Errorf("an unknown local name: %v %v, want NXDOMAIN", rc, as)
	}
	if st := fwd.Stats(); st.Upstream != 0 || st.Local != 5 {
		t.Errorf("stats %+v: want 5 local answers, none forwarded", st)
	}
}
