package ntp

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// server is a fake NTP server on 127.0.0.1 answering with its time t
// (its answer's fields mangled by edit when set).
func server(t *testing.T, at time.Time, edit func(b []byte)) string {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 128)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil || n < 48 {
				return
			}
			r := make([]byte, 48)
			r[0] = 0<<6 | 4<<3 | 4
			r[1] = 2
			copy(r[24:32], buf[40:48]) // origin = the client's transmit time
			putTime(r[32:40], at)
			putTime(r[40:48], at)
			if edit != nil {
				edit(r)
			}
			c.WriteTo(r, from)
		}
	}()
	return c.LocalAddr().String()
}

func TestSyncSetsTheClock(t *testing.T) {
	want := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var set time.Time
	res, err := SyncOnce(context.Background(), Config{Servers: []string{server(t, want, nil)},
		Set: func(t time.Time) error { set = t; return nil }, Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	// The fake's clock is fixed; with the exchange's round trip the set
	// time is within a second of it.
	if d := set.Sub(want); d < -time.Second || d > time.Second || !res.Time.Equal(set) {
		t.Errorf("clock set to %v, want about %v", set, want)
	}
}

func TestBadAnswersAreSkipped(t *testing.T) {
	want := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		edit func(b []byte)
	}{
		{"kiss-o'-death", func(b []byte) { b[1] = 0; copy(b[12:16], "RATE") }},
		{"unsynchronised", func(b []byte) { b[0] |= 3 << 6 }},
		{"client mode", func(b []byte) { b[0] = b[0]&^7 | 3 }},
		{"no transmit time", func(b []byte) { copy(b[40:48], make([]byte, 8)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := server(t, time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC), tc.edit)
			good := server(t, want, nil)
			var set time.Time
			res, err := SyncOnce(context.Background(), Config{Servers: []string{bad, good}, Timeout: time.Second,
				Set: func(t time.Time) error { set = t; return nil }})
			if err != nil || res.Server != good || set.Year() != 2026 {
				t.Errorf("got %+v, %v (set %v); want the second server's time", res, err, set)
			}
		})
	}
	// An answer to another request (wrong origin) is not taken: with no
	// other answer the exchange times out.
	wrong := server(t, want, func(b []byte) { b[24] ^= 0xff })
	if _, err := Query(context.Background(), wrong, 300*time.Millisecond, nil); err == nil {
		t.Error("an answer with the wrong origin timestamp was taken")
	}
}

func TestTimeRoundTrip(t *testing.T) {
	for _, tt := range []time.Time{time.Unix(0, 0), time.Date(2026, 12, 2, 1, 2, 3, 456789000, time.UTC)} {
		b := make([]byte, 8)
		putTime(b, tt)
		if d := getTime(b).Sub(tt); d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%v came back as %v", tt, getTime(b))
		}
	}
}

func TestRunRetriesThenStops(t *testing.T) {
	dead, _ := net.ListenPacket("udp4", "127.0.0.1:0")
	defer dead.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var lines []string
	done := make(chan struct{})
	go func() {
		Run(ctx, Config{Servers: []string{dead.LocalAddr().String()}, Timeout: 100 * time.Millisecond, Retry: 50 * time.Millisecond,
			Logf: func(f string, a ...any) { lines = append(lines, f) }})
		close(done)
	}()
	time.Sleep(500 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if len(lines) < 2 {
		t.Errorf("%d failed rounds logged, want retries", len(lines))
	}
}

// TestResolverUsed: server names go to the Config's resolver (the board
// has no /etc/resolv.conf, so the default one would ask [::1]:53).
func TestResolverUsed(t *testing.T) {
	sentinel := errors.New("asked the WAN's resolvers")
	res := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, sentinel
	}}
	_, err := SyncOnce(context.Background(), Config{Servers: []string{"ntp.invalid-name.example"}, Timeout: time.Second, Resolver: res})
	if err == nil || !strings.Contains(err.Error(), sentinel.Error()) {
		t.Errorf("got %v; want the lookup to go through the given resolver (%v)", err, sentinel)
	}
}

// Only the first failed round in a row goes to Logf (the console); the
// retries go to Quietf, so they do not break into the console's prompt.
func TestRetriesGoQuiet(t *testing.T) {
	dead, _ := net.ListenPacket("udp4", "127.0.0.1:0")
	defer dead.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var loud, quiet int
	done := make(chan struct{})
	go func() {
		Run(ctx, Config{Servers: []string{dead.LocalAddr().String()}, Timeout: 50 * time.Millisecond, Retry: 20 * time.Millisecond,
			Logf:   func(string, ...any) { mu.Lock(); loud++; mu.Unlock() },
			Quietf: func(string, ...any) { mu.Lock(); quiet++; mu.Unlock() }})
		close(done)
	}()
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if loud != 1 || quiet < 1 {
		t.Errorf("%d failed rounds to Logf and %d to Quietf; want 1 and the rest", loud, quiet)
	}
}

// TestRefusalWording: an unsynchronised server (chronyd's leap indicator
// 3, stratum 0, zero reference) is said to be so; real kiss codes stay
// kiss-o'-death.
func TestRefusalWording(t *testing.T) {
	for _, tc := range []struct {
		edit func(b []byte)
		want string
	}{
		{func(b []byte) { b[0] |= 3 << 6; b[1] = 0 }, "the server is not synchronised (leap indicator 3, stratum 0, no reference)"},
		{func(b []byte) { b[1] = 16; copy(b[12:16], "INIT") }, "the server is not synchronised (stratum 16)"},
		{func(b []byte) { b[1] = 0; copy(b[12:16], "RATE") }, `kiss-o'-death "RATE": the server asks us to slow down`},
		{func(b []byte) { b[1] = 0; copy(b[12:16], "DENY") }, `kiss-o'-death "DENY": the server refuses us`},
	} {
		addr := server(t, time.Now(), tc.edit)
		_, err := Query(context.Background(), addr, time.Second, nil)
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// TestFirstAskedFirst: the servers First names (the ISP's, from DHCP)
// are asked before Servers, with what First says at each round.
func TestFirstAskedFirst(t *testing.T) {
	isp, pool := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ispAddr, poolAddr := server(t, isp, nil), server(t, pool, nil)
	var first []string
	cfg := Config{Servers: []string{poolAddr}, First: func() []string { return first }, Timeout: time.Second}
	res, err := SyncOnce(context.Background(), cfg)
	if err != nil || res.Server != poolAddr {
		t.Fatalf("with no ISP server: %+v, %v; want the pool's", res, err)
	}
	first = []string{ispAddr}
	res, err = SyncOnce(context.Background(), cfg)
	if err != nil || res.Server != ispAddr || res.Time.Sub(isp).Abs() > time.Second {
		t.Fatalf("with the ISP's server: %+v, %v; want the ISP's time", res, err)
	}
	// One that does not answer: the pool still does.
	first = []string{"127.0.0.1:9"}
	if res, err := SyncOnce(context.Background(), cfg); err != nil || res.Server != poolAddr {
		t.Errorf("with a dead ISP server: %+v, %v; want the pool's", res, err)
	}
}
