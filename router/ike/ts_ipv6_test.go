package ike

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// A tunnel's IPv6 prefix becomes one TS_IPV6_ADDR_RANGE (RFC 7296
// 3.13.1: type 8, 40 bytes) covering the prefix, and reads back the same.
func TestTrafficSelectorsIPv6(t *testing.T) {
	ss := selectors([]netip.Prefix{netip.MustParsePrefix("2001:db8:1:ff00::1/56")})
	b, err := ss.append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 4+40 || b[0] != 1 || TSType(b[4]) != TS_IPV6_ADDR_RANGE || binary.BigEndian.Uint16(b[6:]) != 40 {
		t.Fatalf("encoded %x: want one selector of type %d, 40 bytes", b, TS_IPV6_ADDR_RANGE)
	}
	if binary.BigEndian.Uint16(b[8:]) != 0 || binary.BigEndian.Uint16(b[10:]) != 0xffff {
		t.Errorf("ports %x: want 0-65535", b[8:12])
	}
	start, _ := netip.AddrFromSlice(b[12:28])
	end, _ := netip.AddrFromSlice(b[28:44])
	if start != netip.MustParseAddr("2001:db8:1:ff00::") || end != netip.MustParseAddr("2001:db8:1:ffff:ffff:ffff:ffff:ffff") {
		t.Errorf("range %s-%s, want the /56's first and last address", start, end)
	}
	back, err := decodeTS(PayloadTSi, b)
	if err != nil {
		t.Fatal(err)
	}
	if !sameSelectors(back, ss) {
		t.Errorf("decoded %v, want %v", back, ss)
	}
	// A v4 offer does not match a v6 tunnel (TS_UNACCEPTABLE).
	if sameSelectors(selectors([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}), ss) {
		t.Error("an IPv4 selector matched an IPv6 tunnel's")
	}
	// A selector mixing families is not encoded; a short v6 one not decoded.
	mixed := Selectors{{EndPort: 0xffff, Start: netip.MustParseAddr("10.0.0.0"), End: netip.MustParseAddr("2001:db8::")}}
	if _, err := mixed.append(nil); err == nil {
		t.Error("a selector from an IPv4 to an IPv6 address encoded")
	}
	b[7] = 16 // length 16 with type 8
	if _, err := decodeTS(PayloadTSi, b); err == nil {
		t.Error("an IPv6 selector of 16 bytes decoded")
	}
}
