package dhcp6

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

var (
	nasMAC     = net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	tvMAC      = net.HardwareAddr{0x52, 0x54, 0x00, 0xab, 0xcd, 0xef}
	strangeMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x99, 0x99, 0x99}
	// tvLL is the TV's link-local source; its DUID carries no MAC.
	tvLL = netip.MustParseAddr("fe80::1234")
)

// statefulServer is a server for nas (::10) and tv (::a:b:c:d) with a
// ULA and a delegated /64; tv is found by its link-local source.
func statefulServer(t *testing.T) *InfoServer {
	t.Helper()
	s, err := NewInfoServer(InfoConfig{Interface: "lan0", DNS: []netip.Addr{netip.MustParseAddr("fd12:3456:789a:10::1")},
		Hosts: []Host{{MAC: nasMAC, ID: netip.MustParseAddr("::10")}, {MAC: tvMAC, ID: netip.MustParseAddr("::a:b:c:d")}},
		LinkAddr: func(src netip.Addr) net.HardwareAddr {
			if src == tvLL {
				return tvMAC
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	s.duid = &duidLL
	s.SetPrefixes([]AddrPrefix{
		{Prefix: netip.MustParsePrefix("fd12:3456:789a:10::/64"), Valid: 5400 * time.Second, Preferred: 2700 * time.Second},
		{Prefix: netip.MustParsePrefix("2001:db8:1:10::/64"), Valid: 3600 * time.Second, Preferred: 1200 * time.Second},
	})
	return s
}

// msg builds a client's message: its type, DUID, whether it names the
// server, and its IA_NAs (each a list of addresses it holds).
type msg struct {
	typ      dhcpv6.MessageType
	duid     dhcpv6.DUID
	sid      dhcpv6.DUID
	ias      [][]string
	pd       bool
	rapid    bool
	noClient bool
}

func (c msg) bytes() []byte {
	m, err := dhcpv6.NewMessage()
	if err != nil {
		panic(err)
	}
	m.MessageType = c.typ
	if !c.noClient {
		m.AddOption(dhcpv6.OptClientID(c.duid))
	}
	if c.sid != nil {
		m.AddOption(dhcpv6.OptServerID(c.sid))
	}
	for i, ia := range c.ias {
		o := &dhcpv6.OptIANA{IaId: [4]byte{0, 0, 0, byte(i + 1)}}
		for _, a := range ia {
			o.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP(a), PreferredLifetime: time.Hour, ValidLifetime: 2 * time.Hour})
		}
		m.AddOption(o)
	}
	if c.pd {
		m.AddOption(&dhcpv6.OptIAPD{IaId: [4]byte{0, 0, 0, 9}})
	}
	if c.rapid {
		dhcpv6.WithRapidCommit(m)
	}
	return m.ToBytes()
}

// summary is a reply in one line: its type, top-level status, rapid
// commit, and each IA with its T1/T2, addresses (preferred/valid in
// seconds) and status.
func summary(t *testing.T, b []byte) string {
	t.Helper()
	if b == nil {
		return "none"
	}
	d, err := dhcpv6.FromBytes(b)
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	m := d.(*dhcpv6.Message)
	out := []string{m.Type().String()}
	if st := m.Options.Status(); st != nil {
		out = append(out, "status="+st.StatusCode.String())
	}
	if m.GetOneOption(dhcpv6.OptionRapidCommit) != nil {
		out = append(out, "rapid")
	}
	if m.Options.ServerID() == nil || !m.Options.ServerID().Equal(&duidLL) || m.Options.ClientID() == nil {
		out = append(out, "BAD-IDS")
	}
	for _, ia := range m.Options.IANA() {
		s := fmt.Sprintf("na%d", ia.IaId[3])
		if ia.T1 != 0 || ia.T2 != 0 {
			s += fmt.Sprintf(" t=%d/%d", ia.T1/time.Second, ia.T2/time.Second)
		}
		for _, a := range ia.Options.Addresses() {
			s += fmt.Sprintf(" %s %d/%d", a.IPv6Addr, a.PreferredLifetime/time.Second, a.ValidLifetime/time.Second)
		}
		if st := ia.Options.Status(); st != nil {
			s += " " + st.StatusCode.String()
		}
		out = append(out, "["+s+"]")
	}
	for _, pd := range m.Options.IAPD() {
		s := "pd"
		if st := pd.Options.Status(); st != nil {
			s += " " + st.StatusCode.String()
		}
		out = append(out, "["+s+"]")
	}
	return strings.Join(out, " ")
}

// TestDHCPv6StatefulAnswers: what the server answers each kind of
// client and message (RFC 8415 18.3), with no kernel.
func TestDHCPv6StatefulAnswers(t *testing.T) {
	nasLL := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: nasMAC}
	nasLLT := &dhcpv6.DUIDLLT{HWType: iana.HWTypeEthernet, Time: 12345, LinkLayerAddr: nasMAC}
	strangerLL := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: strangeMAC}
	tvEN := &dhcpv6.DUIDEN{EnterpriseNumber: 9, EnterpriseIdentifier: []byte{1, 2, 3}}
	tvUUID := &dhcpv6.DUIDUUID{UUID: [16]byte{1, 2, 3}}
	other := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 9, 9, 9, 9, 9}}
	const (
		nasAddrs = "[na1 t=600/960 fd12:3456:789a:10::10 2700/5400 2001:db8:1:10::10 1200/3600]"
		tvAddrs  = "[na1 t=600/960 fd12:3456:789a:10:a:b:c:d 2700/5400 2001:db8:1:10:a:b:c:d 1200/3600]"
		oldAddr  = "2001:db8:2:10::10"
		someLL   = "fe80::5054:ff:fe99:9999"
	)
	sol, req, ren, reb := dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind
	tests := []struct {
		name string
		m    msg
		src  string
		want string
	}{
		{"solicit DUID-LL", msg{typ: sol, duid: nasLL, ias: [][]string{nil}}, someLL, "ADVERTISE " + nasAddrs},
		{"solicit DUID-LLT", msg{typ: sol, duid: nasLLT, ias: [][]string{nil}}, someLL, "ADVERTISE " + nasAddrs},
		{"request DUID-LLT", msg{typ: req, duid: nasLLT, sid: &duidLL, ias: [][]string{{"fd12:3456:789a:10::10"}}}, someLL, "REPLY " + nasAddrs},
		{"solicit rapid commit", msg{typ: sol, duid: nasLL, ias: [][]string{nil}, rapid: true}, someLL, "REPLY rapid " + nasAddrs},
		{"solicit DUID-EN by link-layer source", msg{typ: sol, duid: tvEN, ias: [][]string{nil}}, tvLL.String(), "ADVERTISE " + tvAddrs},
		{"request DUID-UUID by link-layer source", msg{typ: req, duid: tvUUID, sid: &duidLL, ias: [][]string{nil}}, tvLL.String(), "REPLY " + tvAddrs},
		{"DUID-EN, unknown source", msg{typ: sol, duid: tvEN, ias: [][]string{nil}}, someLL, "ADVERTISE [na1 NoAddrsAvail]"},
		{"unknown client solicit", msg{typ: sol, duid: strangerLL, ias: [][]string{nil}}, someLL, "ADVERTISE [na1 NoAddrsAvail]"},
		{"unknown client rapid commit", msg{typ: sol, duid: strangerLL, ias: [][]string{nil}, rapid: true}, someLL, "ADVERTISE [na1 NoAddrsAvail]"},
		{"unknown client request", msg{typ: req, duid: strangerLL, sid: &duidLL, ias: [][]string{nil}}, someLL, "REPLY [na1 NoAddrsAvail]"},
		{"second IA, prefix delegation", msg{typ: sol, duid: nasLL, ias: [][]string{nil, nil}, pd: true}, someLL,
			"ADVERTISE " + nasAddrs + " [na2 NoAddrsAvail] [pd NoPrefixAvail]"},
		{"renew", msg{typ: ren, duid: nasLL, sid: &duidLL, ias: [][]string{{"fd12:3456:789a:10::10", "2001:db8:1:10::10"}}}, someLL, "REPLY " + nasAddrs},
		{"renew from an old prefix", msg{typ: ren, duid: nasLLT, sid: &duidLL, ias: [][]string{{"fd12:3456:789a:10::10", oldAddr}}}, someLL,
			"REPLY [na1 t=600/960 fd12:3456:789a:10::10 2700/5400 2001:db8:1:10::10 1200/3600 " + oldAddr + " 0/0]"},
		{"renew, unknown client", msg{typ: ren, duid: strangerLL, sid: &duidLL, ias: [][]string{{"2001:db8:1:10::99"}}}, someLL, "REPLY [na1 NoBinding]"},
		{"rebind from an old prefix", msg{typ: reb, duid: nasLL, ias: [][]string{{oldAddr}}}, someLL,
			"REPLY [na1 t=600/960 fd12:3456:789a:10::10 2700/5400 2001:db8:1:10::10 1200/3600 " + oldAddr + " 0/0]"},
		{"rebind, unknown client", msg{typ: reb, duid: strangerLL, ias: [][]string{{"2001:db8:1:10::99"}}}, someLL, "REPLY [na1 2001:db8:1:10::99 0/0]"},
		{"release", msg{typ: dhcpv6.MessageTypeRelease, duid: nasLL, sid: &duidLL, ias: [][]string{{"2001:db8:1:10::10"}}}, someLL, "REPLY status=Success"},
		{"release, unknown client", msg{typ: dhcpv6.MessageTypeRelease, duid: strangerLL, sid: &duidLL, ias: [][]string{{"2001:db8:1:10::99"}}}, someLL,
			"REPLY status=Success [na1 NoBinding]"},
		{"decline", msg{typ: dhcpv6.MessageTypeDecline, duid: nasLL, sid: &duidLL, ias: [][]string{{"2001:db8:1:10::10"}}}, someLL, "REPLY status=Success"},
		{"confirm on link", msg{typ: dhcpv6.MessageTypeConfirm, duid: nasLL, ias: [][]string{{"2001:db8:1:10::10", "fd12:3456:789a:10::10"}}}, someLL, "REPLY status=Success"},
		{"confirm, moved", msg{typ: dhcpv6.MessageTypeConfirm, duid: strangerLL, ias: [][]string{{"2001:db8:1:10::10", oldAddr}}}, someLL, "REPLY status=NotOnLink"},
		{"confirm without addresses", msg{typ: dhcpv6.MessageTypeConfirm, duid: nasLL, ias: [][]string{nil}}, someLL, "none"},
		{"request for another server", msg{typ: req, duid: nasLL, sid: other, ias: [][]string{nil}}, someLL, "none"},
		{"request naming no server", msg{typ: req, duid: nasLL, ias: [][]string{nil}}, someLL, "none"},
		{"solicit naming a server", msg{typ: sol, duid: nasLL, sid: &duidLL, ias: [][]string{nil}}, someLL, "none"},
		{"solicit without client id", msg{typ: sol, noClient: true, ias: [][]string{nil}}, someLL, "none"},
		{"rebind naming a server", msg{typ: reb, duid: nasLL, sid: &duidLL, ias: [][]string{nil}}, someLL, "none"},
		{"reconfigure from a client", msg{typ: dhcpv6.MessageTypeReconfigure, duid: nasLL, sid: &duidLL}, someLL, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := statefulServer(t)
			if got := summary(t, s.answer(tt.m.bytes(), netip.MustParseAddr(tt.src))); got != tt.want {
				t.Errorf("answer\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestDHCPv6StatefulPrefixGone: a /64 taken away (a new delegation)
// gives the host's address in it lifetime 0 on its next Renew, and no
// prefix at all leaves even a listed host without an address.
func TestDHCPv6StatefulPrefixGone(t *testing.T) {
	s := statefulServer(t)
	nas := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: nasMAC}
	src := netip.MustParseAddr("fe80::1")
	s.SetPrefixes([]AddrPrefix{
		{Prefix: netip.MustParsePrefix("fd12:3456:789a:10::/64"), Valid: 5400 * time.Second, Preferred: 2700 * time.Second},
		{Prefix: netip.MustParsePrefix("2001:db8:7:10::/64"), Valid: 600 * time.Second, Preferred: 0},
	})
	got := summary(t, s.answer(msg{typ: dhcpv6.MessageTypeRenew, duid: nas, sid: &duidLL, ias: [][]string{{"fd12:3456:789a:10::10", "2001:db8:1:10::10"}}}.bytes(), src))
	want := "REPLY [na1 t=300/480 fd12:3456:789a:10::10 2700/5400 2001:db8:7:10::10 0/600 2001:db8:1:10::10 0/0]"
	if got != want {
		t.Errorf("renew after renumbering\n got %s\nwant %s", got, want)
	}
	s.SetPrefixes(nil)
	for _, tt := range []struct {
		typ  dhcpv6.MessageType
		sid  dhcpv6.DUID
		want string
	}{
		{dhcpv6.MessageTypeSolicit, nil, "ADVERTISE [na1 NoAddrsAvail]"},
		{dhcpv6.MessageTypeRenew, &duidLL, "REPLY [na1 fd12:3456:789a:10::10 0/0]"},
	} {
		got := summary(t, s.answer(msg{typ: tt.typ, duid: nas, sid: tt.sid, ias: [][]string{{"fd12:3456:789a:10::10"}}}.bytes(), src))
		if got != tt.want {
			t.Errorf("%s with no prefix\n got %s\nwant %s", tt.typ, got, tt.want)
		}
	}
	if st := s.Stats(); st.Replies != 3 || st.Assigned != 1 || st.Refused != 1 {
		t.Errorf("stats %+v, want 3 replies, 1 assigned, 1 refused", st)
	}
}

// TestDHCPv6StatefulCountsDown: an address's lifetimes are what is
// left of the delegation when the host asks, not what they were when the
// prefixes were set (RFC 9096: never beyond the delegation).
func TestDHCPv6StatefulCountsDown(t *testing.T) {
	s := statefulServer(t)
	nas := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: nasMAC}
	// Set 200 s ago with 600/300 s: 400/100 s are left.
	set := time.Now().Add(-200 * time.Second)
	s.SetPrefixes([]AddrPrefix{{Prefix: netip.MustParsePrefix("2001:db8:7:10::/64"), Valid: 600 * time.Second, Preferred: 300 * time.Second,
		ValidEnds: set.Add(600 * time.Second), PreferredEnds: set.Add(300 * time.Second)}})
	got := summary(t, s.answer(msg{typ: dhcpv6.MessageTypeRenew, duid: nas, sid: &duidLL, ias: [][]string{{"2001:db8:7:10::10"}}}.bytes(), netip.MustParseAddr("fe80::1")))
	// Whole seconds, down: a moment passed between setting and asking.
	if want := "REPLY [na1 t=49/79 2001:db8:7:10::10 99/399]"; got != want {
		t.Errorf("renew\n got %s\nwant %s", got, want)
	}
}

// TestDHCPv6StatelessOnly: with no hosts the server gives no address
// to anyone, DUID-LL or not.
func TestDHCPv6StatelessOnly(t *testing.T) {
	s, err := NewInfoServer(InfoConfig{Interface: "lan0"})
	if err != nil {
		t.Fatal(err)
	}
	s.duid = &duidLL
	s.SetPrefixes([]AddrPrefix{{Prefix: netip.MustParsePrefix("fd12:3456:789a:10::/64"), Valid: time.Hour, Preferred: time.Hour}})
	if s.Stateful() {
		t.Error("Stateful() with no hosts")
	}
	got := summary(t, s.answer(msg{typ: dhcpv6.MessageTypeSolicit, duid: &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: nasMAC}, ias: [][]string{nil}}.bytes(), netip.MustParseAddr("fe80::1")))
	if want := "ADVERTISE [na1 NoAddrsAvail]"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestDHCPv6LinkLayerFromEUI64: the MAC a modified EUI-64 link-local
// address was made from; none from other addresses.
func TestDHCPv6LinkLayerFromEUI64(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"fe80::5054:ff:fe12:3456", "52:54:00:12:34:56"},
		{"fe80::5054:ff:fe12:3456%cli0", "52:54:00:12:34:56"},
		{"fe80::1234:5678:9abc:def0", ""},   // RFC 7217 or privacy
		{"2001:db8::5054:ff:fe12:3456", ""}, // not link-local
		{"fe80::5154:ff:fe12:3456", ""},     // would be a group MAC
	} {
		got := ""
		if mac := eui64MAC(netip.MustParseAddr(tt.src)); mac != nil {
			got = mac.String()
		}
		if got != tt.want {
			t.Errorf("eui64MAC(%s) = %q, want %q", tt.src, got, tt.want)
		}
	}
}

// TestDHCPv6RateLimit: at most repliesPerSecond requests a second are
// looked at; the next second starts over.
func TestDHCPv6RateLimit(t *testing.T) {
	s := statefulServer(t)
	now := time.Unix(1000, 0)
	n := 0
	for range 3 * repliesPerSecond {
		if s.allow(now) {
			n++
		}
	}
	if n != repliesPerSecond || s.Stats().Limited != 2*repliesPerSecond {
		t.Errorf("allowed %d of %d in one second (stats %+v), want %d", n, 3*repliesPerSecond, s.Stats(), repliesPerSecond)
	}
	if !s.allow(now.Add(time.Second)) {
		t.Error("the next second refused")
	}
}
