package site

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestWANAddress(t *testing.T) {
	for _, tc := range []struct {
		in     WANAddress
		dhcp   bool
		prefix string // "" when Prefix errs
	}{
		{"dhcp", true, ""},
		{"198.51.100.2/24", false, "198.51.100.2/24"},
		{"", false, ""},
		{"198.51.100.2", false, ""}, // no prefix
		{"2001:db8::2/64", false, ""},
		{"DHCP", false, ""}, // the keyword is lower case, as Validate has always read it
	} {
		p, err := tc.in.Prefix()
		got := ""
		if err == nil {
			got = p.String()
		} else if !strings.Contains(err.Error(), "want dhcp or an IPv4 address with its prefix") {
			t.Errorf("%q: error %q does not say what is valid", tc.in, err)
		}
		if tc.in.IsDHCP() != tc.dhcp || got != tc.prefix {
			t.Errorf("%q: IsDHCP %v, Prefix %q; want %v, %q", tc.in, tc.in.IsDHCP(), got, tc.dhcp, tc.prefix)
		}
	}
}

func TestLANAddress(t *testing.T) {
	for _, tc := range []struct {
		in      LANAddress
		network string // "" when Prefix errs
	}{
		{"192.168.1.1/24", "192.168.1.0/24"},
		{"10.0.0.1/30", "10.0.0.0/30"},
		{"10.0.0.1/31", ""}, // no room for a host beside the router
		{"10.0.0.2/30", "10.0.0.0/30"},
		{"10.0.0.3/30", ""},      // the broadcast
		{"192.168.1.0/24", ""},   // the network
		{"192.168.1.255/24", ""}, // the broadcast
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"10.1.2.3/7", ""},
		{"192.168.1.1/0", ""}, // the whole internet
		{"192.168.1.1", ""},
		{"fd00::1/64", ""},
		{"", ""},
	} {
		_, err := tc.in.Prefix()
		if got := tc.in.Network(); (tc.network == "" && (err == nil || got.IsValid())) || (tc.network != "" && got.String() != tc.network) {
			t.Errorf("%q: network %v, error %v; want %q", tc.in, got, err, tc.network)
		}
	}
}

func TestIsHostAddr(t *testing.T) {
	for _, tc := range []struct {
		p, a string
		want bool
	}{
		{"192.168.1.1/24", "192.168.1.10", true},
		{"192.168.1.1/24", "192.168.1.0", false},
		{"192.168.1.1/24", "192.168.1.255", false},
		{"192.168.1.1/24", "192.168.2.1", false},
		{"10.0.0.1/30", "10.0.0.3", false},
		{"10.0.0.1/30", "10.0.0.2", true},
		{"172.16.0.1/12", "172.31.255.255", false},
		{"172.16.0.1/12", "172.31.255.254", true},
		{"198.51.100.0/31", "198.51.100.0", true}, // point to point: no broadcast
		{"198.51.100.2/32", "198.51.100.2", true},
		{"192.168.1.1/24", "::1", false},
	} {
		p := netip.MustParsePrefix(tc.p)
		a := netip.MustParseAddr(tc.a)
		if got := IsHostAddr(p, a); got != tc.want {
			t.Errorf("IsHostAddr(%s, %s) = %v, want %v", p, a, got, tc.want)
		}
	}
	if b := Broadcast(netip.MustParsePrefix("10.1.2.3/8")); b.String() != "10.255.255.255" {
		t.Errorf("broadcast of 10.0.0.0/8: %v", b)
	}
}

func TestParseLease(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", DefaultLease, true},
		{"90m", 90 * time.Minute, true},
		{"1m", time.Minute, true},
		{"30s", DefaultLease, false},
		{"12", DefaultLease, false},
	} {
		d := DHCP{Lease: tc.in}
		got, err := d.ParseLease()
		if got != tc.want || (err == nil) != tc.ok || d.LeaseTime() != tc.want {
			t.Errorf("%q: %v, %v (LeaseTime %v); want %v, ok %v", tc.in, got, err, d.LeaseTime(), tc.want, tc.ok)
		}
	}
}

// The typed addresses are the same strings in the JSON the board reads.
func TestAddressJSONUnchanged(t *testing.T) {
	s := Site{WAN: WAN{Address: DHCPAddress}, LAN: LAN{Address: "192.168.1.1/24"}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"wan":{"port":"","address":"dhcp"}`) || !strings.Contains(string(b), `"address":"192.168.1.1/24"`) {
		t.Errorf("JSON %s", b)
	}
	_, errs := Read("site.json", []byte(strings.Replace(goodSite, `"address": "dhcp"`, `"address": 5`, 1)), alixPorts)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "wan.address: want string, got number") {
		t.Errorf("a number for the address: %v", errs)
	}
}
