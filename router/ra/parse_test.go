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
	dotLabel := append(append([]byte(nil), good...), optDNSSL, 2, 0, 0, 0, 0, 0, 60, 3, 'a', '.', 'b', 0, 0, 0, 0)
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
		{"a search domain label with a dot", dotLabel, ll, 255, "label with a dot"},
	} {
		if _, err := Parse(c.m, c.src, c.hop); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// FuzzParse: whatever the ISP's link carries, Parse returns an
// advertisement or an error and never panics; what it returns holds
// masked prefixes and search domains made of non-empty labels without
// dots in them (a name is never read as another).
func FuzzParse(f *testing.F) {
	ll := netip.MustParseAddr("fe80::1")
	for _, a := range []Advert{
		{Managed: true, Other: true, RouterLifetime: time.Hour, MTU: 1500},
		{Prefixes: []Prefix{{Prefix: netip.MustParsePrefix("2001:db8::/64"), Valid: time.Hour, Preferred: time.Minute}},
			RDNSS: []netip.Addr{netip.MustParseAddr("2001:db8::53")}, DNSSL: []string{"example", "isp.example"}, DNSLifetime: time.Minute},
	} {
		m, err := a.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, m []byte) {
		a, err := Parse(m, ll, 255)
		if err != nil {
			return
		}
		for _, p := range a.Prefixes {
			if p.Prefix != p.Prefix.Masked() {
				t.Fatalf("prefix %v not masked", p.Prefix)
			}
		}
		for _, d := range a.DNSSL {
			if d == "" || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") || strings.Contains(d, "..") {
				t.Fatalf("domain %q parsed", d)
			}
		}
	})
}
