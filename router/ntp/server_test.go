package ntp

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

func request(t time.Time) []byte {
	b := make([]byte, 48)
	b[0] = 4<<3 | 3
	b[2] = 6
	putTime(b[40:], t)
	return b
}

// TestServerAnswers: "not synchronised" until Synced, then stratum
// upstream+1 with the upstream's address as reference; nothing for
// sources outside the LAN or requests that are not a client's.
func TestServerAnswers(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	s := NewServer(ServerConfig{Allowed: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}, Now: func() time.Time { return now }})
	lan := netip.MustParseAddr("192.168.1.20")
	req := request(now.Add(-time.Second))

	r := s.answer(req, lan, now)
	if r == nil || r[0]>>6 != 3 || r[1] != 16 || string(r[12:16]) != "INIT" || r[0]&7 != 4 {
		t.Fatalf("unsynchronised answer % x; want leap indicator 3, stratum 16, INIT", r)
	}
	if _, err := parse(r, req[40:48], now, now); err == nil {
		t.Error("our own client takes the unsynchronised answer")
	}

	s.Synced(Result{Time: now.Add(-time.Hour), Addr: netip.MustParseAddr("192.0.2.123"), Stratum: 2,
		RootDelay: 30 * time.Millisecond, RootDispersion: 10 * time.Millisecond})
	r = s.answer(req, lan, now)
	res, err := parse(r, req[40:48], now.Add(-time.Second), now)
	if err != nil {
		t.Fatal(err)
	}
	if r[1] != 3 || netip.AddrFrom4([4]byte(r[12:16])).String() != "192.0.2.123" || r[0]>>6 != 0 || r[0]>>3&7 != 4 || r[2] != 6 {
		t.Errorf("answer % x: want stratum 3, reference 192.0.2.123, no leap warning, version and poll echoed", r)
	}
	if !getTime(r[16:24]).Equal(now.Add(-time.Hour)) || !getTime(r[40:48]).Equal(now) {
		t.Errorf("reference time %v, transmit %v", getTime(r[16:24]), getTime(r[40:48]))
	}
	// Dispersion: 10 ms at the setting plus 15 ppm of the hour since.
	if d := getShort(r[8:12]); d < 63*time.Millisecond || d > 65*time.Millisecond {
		t.Errorf("root dispersion %v, want 64 ms", d)
	}
	if res.Stratum != 3 {
		t.Errorf("parsed %+v", res)
	}

	for name, tc := range map[string]struct {
		src netip.Addr
		req []byte
	}{
		"from the WAN": {netip.MustParseAddr("203.0.113.9"), req},
		"server mode":  {lan, func() []byte { b := request(now); b[0] = 4<<3 | 4; return b }()},
		"short":        {lan, req[:47]},
		"version 0":    {lan, func() []byte { b := request(now); b[0] = 3; return b }()},
	} {
		if r := s.answer(tc.req, tc.src, now); r != nil {
			t.Errorf("%s: answered", name)
		}
	}
}

// TestServerRateBound: at most PerSource answers a second to one source
// and Total to all; the next second is answered again.
func TestServerRateBound(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	s := NewServer(ServerConfig{Allowed: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, PerSource: 4, Total: 10})
	a := netip.MustParseAddr("10.0.0.1")
	n := 0
	for i := 0; i < 100; i++ {
		if s.answer(request(now), a, now.Add(time.Duration(i)*time.Millisecond)) != nil {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d answers to one source in 100 ms, want 4", n)
	}
	n = 0
	for i := 0; i < 100; i++ {
		src := netip.AddrFrom4([4]byte{10, 1, 0, byte(i)})
		if s.answer(request(now), src, now.Add(100*time.Millisecond)) != nil {
			n++
		}
	}
	if n != 6 {
		t.Errorf("%d answers to 100 sources in the same second, want the 6 left of 10", n)
	}
	if s.answer(request(now), a, now.Add(1100*time.Millisecond)) == nil {
		t.Error("no answer in the next second")
	}
}

// TestServeOverUDP: Serve answers a real socket and stops with ctx.
func TestServeOverUDP(t *testing.T) {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerConfig{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	s.Synced(Result{Time: time.Now(), Addr: netip.MustParseAddr("192.0.2.1"), Stratum: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, c) }()
	res, err := Query(context.Background(), c.LocalAddr().String(), time.Second, nil)
	if err != nil || res.Stratum != 2 {
		t.Errorf("query: %+v, %v; want stratum 2", res, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not stop with its context")
	}
}
