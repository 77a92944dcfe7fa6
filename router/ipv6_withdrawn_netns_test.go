package router

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ocfw/ocfw/router/dhcp6"
	"github.com/ocfw/ocfw/router/netns"
	"github.com/ocfw/ocfw/router/ra"
)

// TestIPv6WithdrawnPrefixRunsOut: a /64 withdrawn at a renumbering is
// routed into the LAN and handed to the firewall as withdrawn (RFC 7084
// L-14: hosts still sending from it get ICMPv6 code 5) for as long as
// hosts were told it is valid, and no longer: when that runs out its
// route and its firewall rule go, with no renumbering to make them go
// (before, they stayed until the next one, which may be months away).
// The LAN side of lan6 on a veth in a namespace of this host's kernel,
// the firewall a recorder.
func TestIPv6WithdrawnPrefixRunsOut(t *testing.T) {
	if testing.Short() {
		t.Skip("a network namespace and a 4 s lease (about 5 s)")
	}
	rns, host := pfNS(t, "withdrawn6"), pfNS(t, "withdrawn6h")
	if err := netns.Veth(rns, "lan0", "", host, "h0", ""); err != nil {
		t.Fatal(err)
	}
	srv, err := ra.New(ra.Config{Interface: "lan0", Log: t.Logf}, ra.Advert{})
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		at      time.Time
		invalid []netip.Prefix
	}
	calls := make(chan call, 16)
	n := &lan6{renumbered: make(chan struct{}, 1), lanIf: "lan0", links: &links{h: rns.Netlink()}, ra: srv, logf: t.Logf,
		firewall: func(_, invalid []netip.Prefix) error {
			calls <- call{time.Now(), slices.Clone(invalid)}
			return nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.watchWithdrawn(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	next := func(what string) call {
		t.Helper()
		select {
		case c := <-calls:
			return c
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: the firewall was not told within 15 s", what)
			return call{}
		}
	}
	routed := func(p netip.Prefix) bool {
		t.Helper()
		rs, err := rns.Netlink().RouteList(nil, netlink.FAMILY_V6)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Dst != nil && r.Dst.String() == p.String() {
				return true
			}
		}
		return false
	}

	start := time.Now()
	const valid = 4 * time.Second
	oldEnd := start.Add(valid)
	if err := n.apply(&dhcp6.Lease{Prefix: netip.MustParsePrefix("2001:db8:0:10::/60"), Obtained: start,
		PrefixPreferred: valid / 2, PrefixValid: valid}); err != nil {
		t.Fatal(err)
	}
	if c := next("the first lease"); len(c.invalid) != 0 {
		t.Fatalf("first lease: withdrawn %v, want none", c.invalid)
	}
	// The ISP hands out another prefix: the old /64 is withdrawn.
	if err := n.apply(&dhcp6.Lease{Prefix: netip.MustParsePrefix("2001:db8:0:20::/60"), Obtained: time.Now(),
		PrefixPreferred: time.Hour, PrefixValid: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	old := netip.MustParsePrefix("2001:db8:0:10::/64")
	if c := next("the new prefix"); !slices.Equal(c.invalid, []netip.Prefix{old}) {
		t.Fatalf("after the new prefix: withdrawn %v, want [%v]", c.invalid, old)
	}
	if !routed(old) {
		t.Fatalf("the withdrawn %v is not routed into the LAN", old)
	}
	c := next("the old prefix's end")
	if len(c.invalid) != 0 {
		t.Errorf("after the old prefix's valid lifetime: withdrawn %v, want none", c.invalid)
	}
	if c.at.Before(oldEnd) {
		t.Errorf("the withdrawn %v left the firewall %v before its valid lifetime ended", old, oldEnd.Sub(c.at))
	}
	t.Logf("withdrawn %v dropped %v after its valid lifetime ended", old, c.at.Sub(oldEnd).Round(time.Millisecond))
	if routed(old) {
		t.Errorf("the %v still routed into the LAN after its valid lifetime", old)
	}
	if !routed(netip.MustParsePrefix("2001:db8:0:20::/64")) {
		t.Errorf("the new /64 is not on the LAN")
	}
}
