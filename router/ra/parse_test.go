package ra

import (
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRouterAdvertParse: what Marshal writes, Parse reads back (the
// flags the WAN's address mode follows, lifetimes, MTU, prefixes with
// their A and L flags, RDNSS, DNSSL); what RFC 4861 6.1.2 says to
// discard is refused with the reason.
func TestRouterAdvertParse(t *testing.T) {
	ll := netip.MustParseAddr("fe80::1")
	for _, a := range []Advert{
		{},
		{Managed: true, Other: true, RouterLifetime: 1800 * time.Second},
		{Other: true, RouterLifetime: 30 * time.Second, MTU: 1492,
			SourceMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
			Prefixes: []Prefix{
				{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Valid: time.Hour, Preferred: 30 * time.Minute},
				{Prefix: netip.MustParsePrefix("2001:db8:2::/64"), Valid: time.Hour, Preferred: time.Hour, NoSLAAC: true, NotOnLink: true},
			},
			RDNSS:       []netip.Addr{netip.MustParseAddr("2001:db8::53"), netip.MustParseAddr("2001:db8::54")},
			DNSSL:       []string{"isp.example", "example"},
			DNSLifetime: 600 * time.Second},
	} {
		m, err := a.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(m, ll, 255)
		if err != nil {
			t.Fatalf("%+v: %v", a, err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("parsed\n%+v\nwant\n%+v", got, a)
		}
	}

	good, _ := Advert{Managed: true}.Marshal()
	badOpt := append(append([]byte(nil), good...), optMTU, 0, 0, 0, 0, 0, 0, 0)
	shortRDNSS := append(append([]byte(nil), good...), optRDNSS, 1, 0, 0, 0, 0, 0, 0)
	code1 := append([]byte(nil), good...)
	code1[1] = 1
	for _, c := range []struct {
		name string
		m    []byte
		src  netip.Addr
		hop  int
		want string
	}{
		{"routed", good, ll, 64, "hop limit 64"},
		{"global source", good, netip.MustParseAddr("2001:db8::1"), 255, "not link-local"},
		{"short", good[:12], ll, 255, "shorter than 16"},
		{"a solicitation", []byte{typeRS, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ll, 255, "not a router advertisement"},
		{"code", code1, ll, 255, "code 1"},
		{"option of length 0", badOpt, ll, 255, "bad length"},
		{"RDNSS without an address", shortRDNSS, ll, 255, "RDNSS option of bad length"},
	} {
		if _, err := Parse(c.m, c.src, c.hop); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
