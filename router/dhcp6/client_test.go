package dhcp6

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// TestDHCPv6Parse: what a reply's IA_PD and IA_NA make of the lease:
// prefixes taken back (valid 0) are skipped, a reply that only takes
// back says so, NoBinding is told apart, T1/T2 default from the
// preferred lifetime.
func TestDHCPv6Parse(t *testing.T) {
	c, err := New(Config{Interface: "wan", PDLength: 60, Address: true})
	if err != nil {
		t.Fatal(err)
	}
	sid := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	prefix := func(p string, pref, valid time.Duration) *dhcpv6.OptIAPrefix {
		n := netip.MustParsePrefix(p)
		return &dhcpv6.OptIAPrefix{Prefix: &net.IPNet{IP: n.Addr().AsSlice(), Mask: net.CIDRMask(n.Bits(), 128)}, PreferredLifetime: pref, ValidLifetime: valid}
	}
	reply := func(t1, t2 time.Duration, opts ...dhcpv6.Option) *dhcpv6.Message {
		m, _ := dhcpv6.NewMessage()
		m.MessageType = dhcpv6.MessageTypeReply
		m.AddOption(dhcpv6.OptServerID(sid))
		pd := &dhcpv6.OptIAPD{IaId: c.iaid, T1: t1, T2: t2}
		for _, o := range opts {
			pd.Options.Add(o)
		}
		m.AddOption(pd)
		return m
	}
	for _, tc := range []struct {
		name   string
		m      *dhcpv6.Message
		prefix string
		t1, t2 time.Duration
		err    string
	}{
		{"one", reply(100*time.Second, 160*time.Second, prefix("2001:db8:1:10::/60", 200*time.Second, 400*time.Second)), "2001:db8:1:10::/60", 100 * time.Second, 160 * time.Second, ""},
		{"T1 left to the client", reply(0, 0, prefix("2001:db8:1:10::/60", 200*time.Second, 400*time.Second)), "2001:db8:1:10::/60", 100 * time.Second, 160 * time.Second, ""},
		{"old taken back, new given", reply(0, 0, prefix("2001:db8:1:10::/60", 0, 0), prefix("2001:db8:2:20::/60", 200*time.Second, 400*time.Second)), "2001:db8:2:20::/60", 100 * time.Second, 160 * time.Second, ""},
		{"only taken back", reply(0, 0, prefix("2001:db8:1:10::/60", 0, 0)), "", 0, 0, "taken back"},
		{"a /72 no LAN can use", reply(0, 0, prefix("2001:db8:1:10::/72", 200*time.Second, 400*time.Second)), "", 0, 0, "no prefix"},
		{"no binding", reply(0, 0, &dhcpv6.OptStatusCode{StatusCode: iana.StatusNoBinding}), "", 0, 0, "NoBinding"},
		{"top-level failure", func() *dhcpv6.Message {
			m := reply(0, 0)
			m.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusUnspecFail, StatusMessage: "busy"})
			return m
		}(), "", 0, 0, "busy"},
	} {
		l, err := c.parse(tc.m)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %+v, %v; want an error with %q", tc.name, l, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case l.Prefix.String() != tc.prefix || l.T1 != tc.t1 || l.T2 != tc.t2:
			t.Errorf("%s: prefix %s T1 %v T2 %v; want %s %v %v", tc.name, l.Prefix, l.T1, l.T2, tc.prefix, tc.t1, tc.t2)
		}
	}
}

// TestDHCPv6TimeOptions: RFC 7084 WAA-5, WAA-10, WAA-11. Every client
// message asks for the SNTP and NTP server options and SOL_MAX_RT; a
// reply's time servers (both options, each address once) are the
// lease's NTP; SOL_MAX_RT is taken within RFC 8415's 60-86400 s and
// ignored outside it.
func TestDHCPv6TimeOptions(t *testing.T) {
	c, err := New(Config{Interface: "wan", PDLength: 60})
	if err != nil {
		t.Fatal(err)
	}
	c.duid = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	sol, err := c.message(dhcpv6.MessageTypeSolicit, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	oro := sol.Options.RequestedOptions()
	for _, want := range []dhcpv6.OptionCode{dhcpv6.OptionSNTPServerList, dhcpv6.OptionNTPServer, dhcpv6.OptionSolMaxRT, dhcpv6.OptionDNSRecursiveNameServer} {
		if !slices.Contains(oro, want) {
			t.Errorf("the Solicit's ORO %v lacks %v", oro, want)
		}
	}

	m, _ := dhcpv6.NewMessage()
	sntp, ntp1 := net.ParseIP("2001:db8:ffff::123"), net.ParseIP("2001:db8:ffff::124")
	m.AddOption(dhcpv6.OptSNTP(sntp, ntp1))
	a := dhcpv6.NTPSuboptionSrvAddr(ntp1)
	m.AddOption(&dhcpv6.OptNTPServer{Suboptions: dhcpv6.Options{&a}})
	if got := fmt.Sprint(ntpServers(m)); got != "[2001:db8:ffff::123 2001:db8:ffff::124]" {
		t.Errorf("time servers %s", got)
	}
	if _, ok := solMaxRT(m); ok {
		t.Error("SOL_MAX_RT found in a message without one")
	}
	for _, tc := range []struct {
		secs uint32
		want time.Duration
		ok   bool
	}{{600, 600 * time.Second, true}, {60, time.Minute, true}, {86400, 24 * time.Hour, true}, {59, 0, false}, {86401, 0, false}} {
		m, _ := dhcpv6.NewMessage()
		b := make([]byte, 4)
		binary.BigEndian.PutUint32(b, tc.secs)
		m.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionSolMaxRT, OptionData: b})
		if d, ok := solMaxRT(m); d != tc.want || ok != tc.ok {
			t.Errorf("SOL_MAX_RT %d s: %v %v, want %v %v", tc.secs, d, ok, tc.want, tc.ok)
		}
		c.maxWait = solMaxRTDefault
		c.noteSolMaxRT(m)
		if want := map[bool]time.Duration{true: tc.want, false: solMaxRTDefault}[tc.ok]; c.maxWait != want {
			t.Errorf("SOL_MAX_RT %d s: the client waits up to %v, want %v", tc.secs, c.maxWait, want)
		}
	}
}

// TestDHCPv6PrefixExclude: RFC 6603's option inside the IA prefix is
// decoded into the lease's Exclude (the subnet ID's bits after the
// delegated prefix's length, left-aligned); a malformed one is ignored.
func TestDHCPv6PrefixExclude(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		data         []byte
		want         string // "" for none
	}{
		{"a /64 of a /56", "2001:db8:1:100::/56", []byte{64, 0x05}, "2001:db8:1:105::/64"},
		{"a /64 of a /60", "2001:db8:1:10::/60", []byte{64, 0xf0}, "2001:db8:1:1f::/64"},
		{"a /64 of a /48", "2001:db8:1::/48", []byte{64, 0x12, 0x34}, "2001:db8:1:1234::/64"},
		{"a /62 of a /56", "2001:db8:1:100::/56", []byte{62, 0xfc}, "2001:db8:1:1fc::/62"},
		{"no longer than the prefix", "2001:db8:1:100::/56", []byte{56, 0}, ""},
		{"too many octets", "2001:db8:1:100::/56", []byte{64, 0x05, 0}, ""},
		{"too few", "2001:db8:1::/48", []byte{64, 0x12}, ""},
		{"empty", "2001:db8:1::/48", []byte{64}, ""},
	} {
		got, ok := pdExclude(netip.MustParsePrefix(tc.prefix), tc.data)
		if (tc.want == "") == ok || (ok && got.String() != tc.want) {
			t.Errorf("%s: %v %v, want %q", tc.name, got, ok, tc.want)
		}
	}
	// In a reply: the lease carries it.
	c, err := New(Config{Interface: "wan", PDLength: 56})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := dhcpv6.NewMessage()
	m.MessageType = dhcpv6.MessageTypeReply
	m.AddOption(dhcpv6.OptServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}))
	n := netip.MustParsePrefix("2001:db8:1:100::/56")
	p := &dhcpv6.OptIAPrefix{Prefix: &net.IPNet{IP: n.Addr().AsSlice(), Mask: net.CIDRMask(56, 128)}, PreferredLifetime: time.Hour, ValidLifetime: 2 * time.Hour}
	p.Options.Add(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionPDExclude, OptionData: []byte{64, 0x05}})
	pd := &dhcpv6.OptIAPD{IaId: c.iaid}
	pd.Options.Add(p)
	m.AddOption(pd)
	l, err := c.parse(m)
	if err != nil || l.Exclude.String() != "2001:db8:1:105::/64" {
		t.Errorf("lease %+v, %v: want Exclude 2001:db8:1:105::/64", l, err)
	}
	sol, _ := c.message(dhcpv6.MessageTypeSolicit, nil, nil)
	if !slices.Contains(sol.Options.RequestedOptions(), dhcpv6.OptionPDExclude) {
		t.Error("the Solicit does not ask for the prefix exclude option")
	}
}
