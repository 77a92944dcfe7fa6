package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
)

// ack is an ACK from server for ip with the given lease time and DNS.
func ack(server, ip string, lease time.Duration, dns ...string) *dhcpv4.DHCPv4 {
	var d []net.IP
	for _, s := range dns {
		d = append(d, net.ParseIP(s))
	}
	m := must(dhcpv4.New(
		dhcpv4.WithMessageType(dhcpv4.MessageTypeAck),
		dhcpv4.WithHwAddr(hw(macA)),
		dhcpv4.WithYourIP(net.ParseIP(ip)),
		dhcpv4.WithOption(dhcpv4.OptSubnetMask(net.CIDRMask(24, 32))),
		dhcpv4.WithOption(dhcpv4.OptRouter(net.ParseIP("198.51.100.1"))),
		dhcpv4.WithOption(dhcpv4.OptDNS(d...)),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(server))),
		dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(lease)),
	))
	m.OpCode = dhcpv4.OpcodeBootReply
	return m
}

func nak(server string) *dhcpv4.DHCPv4 {
	m := must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(server)))))
	m.OpCode = dhcpv4.OpcodeBootReply
	return m
}

// fakeWAN scripts the DHCP exchanges of a Client on a fake clock: each
// pause advances the clock at once, so the schedule is checked exactly
// without waiting. When the script runs out, the run ends.
type fakeWAN struct {
	start    time.Time
	clock    time.Time
	discover []*dhcpv4.DHCPv4 // nil: no answer
	renew    []*dhcpv4.DHCPv4
	events   []string
	cancel   context.CancelFunc
	// unanswered is how long an exchange without an answer takes on the
	// fake clock (nclient4 gives up after 2+4+8 s), unless its context's
	// deadline comes first.
	unanswered time.Duration
}

func (f *fakeWAN) at() string { return "+" + f.clock.Sub(f.start).String() }

func (f *fakeWAN) Request(ctx context.Context, _ ...dhcpv4.Modifier) (*nclient4.Lease, error) {
	if len(f.discover) == 0 {
		f.cancel()
		return nil, ctx.Err()
	}
	r := f.discover[0]
	f.discover = f.discover[1:]
	f.events = append(f.events, "discover "+f.at())
	if r == nil {
		return nil, nclient4.ErrNoResponse
	}
	return &nclient4.Lease{ACK: r}, nil
}

func (f *fakeWAN) SendAndRead(ctx context.Context, _ *net.UDPAddr, p *dhcpv4.DHCPv4, match nclient4.Matcher) (*dhcpv4.DHCPv4, error) {
	if len(f.renew) == 0 {
		f.cancel()
		return nil, ctx.Err()
	}
	r := f.renew[0]
	f.renew = f.renew[1:]
	f.events = append(f.events, fmt.Sprintf("renew %s ciaddr %s", f.at(), p.ClientIPAddr))
	if r == nil || !match(r) {
		d := f.unanswered
		if dl, ok := ctx.Deadline(); ok {
			// The deadline is on the real clock, set a moment ago from a
			// duration of the fake one.
			if left := time.Until(dl).Round(time.Millisecond); left < d {
				f.clock = f.clock.Add(left)
				return nil, context.DeadlineExceeded
			}
		}
		f.clock = f.clock.Add(d)
		return nil, nclient4.ErrNoResponse
	}
	return r, nil
}

func (f *fakeWAN) Close() error { return nil }

func runFake(t *testing.T, f *fakeWAN) (updates []string, pauses []time.Duration) {
	t.Helper()
	f.start = time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	f.clock = f.start
	c := NewClient(ClientConfig{Interface: "wan0", Update: func(prev, next *WANLease) {
		updates = append(updates, fmt.Sprintf("%s: %v -> %v", f.at(), prev, next))
	}})
	c.open = func() (exchanger, error) { return f, nil }
	c.now = func() time.Time { return f.clock }
	c.sleep = func(ctx context.Context, d time.Duration) bool {
		pauses = append(pauses, d)
		f.clock = f.clock.Add(d)
		return ctx.Err() == nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	if err := c.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	return updates, pauses
}

func TestClientBacksOffThenBinds(t *testing.T) {
	f := &fakeWAN{discover: []*dhcpv4.DHCPv4{nil, nil, nil, ack("198.51.100.1", "198.51.100.7", time.Hour, "9.9.9.9")}}
	updates, pauses := runFake(t, f)
	if len(pauses) < 3 {
		t.Fatalf("pauses %v", pauses)
	}
	for i, want := range []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second} {
		if p := pauses[i]; p < want*3/4 || p > want*5/4 {
			t.Errorf("pause %d after no answer: %v, want %v ±25%%", i, p, want)
		}
	}
	if len(updates) != 1 || !strings.Contains(updates[0], "no lease -> 198.51.100.7/24 router 198.51.100.1 DNS [9.9.9.9]") {
		t.Errorf("updates %q", updates)
	}
}

// A lease that is never renewed: RENEWING from T1 with pauses of half the
// time left (at least a minute), REBINDING from T2, lost at expiry, then
// discovery again.
func TestClientRenewRebindExpire(t *testing.T) {
	f := &fakeWAN{discover: []*dhcpv4.DHCPv4{ack("198.51.100.1", "198.51.100.7", time.Hour, "9.9.9.9"), nil}}
	for i := 0; i < 10; i++ {
		f.renew = append(f.renew, nil)
	}
	updates, _ := runFake(t, f)
	want := []string{
		"discover +0s",
		"renew +30m0s ciaddr 198.51.100.7",     // T1
		"renew +41m15s ciaddr 198.51.100.7",    // half of 22m30s to T2
		"renew +46m52.5s ciaddr 198.51.100.7",  //
		"renew +49m41.25s ciaddr 198.51.100.7", //
		"renew +51m5.625s ciaddr 198.51.100.7", //
		"renew +52m5.625s ciaddr 198.51.100.7", // a minute at least
		"renew +52m30s ciaddr 198.51.100.7",    // T2: rebinding
		"renew +56m15s ciaddr 198.51.100.7",    //
		"renew +58m7.5s ciaddr 198.51.100.7",   //
		"renew +59m7.5s ciaddr 198.51.100.7",   //
		"discover +1h0m0s",                     // expired
	}
	if got := strings.Join(f.events, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if len(updates) != 2 || !strings.HasSuffix(updates[1], "+1h0m0s: 198.51.100.7/24 router 198.51.100.1 DNS [9.9.9.9] from 198.51.100.1 for 1h -> no lease") {
		t.Errorf("updates %q, want the lease, then its loss at expiry", updates)
	}
}

// TestClientDropsAtExpiry: unanswered renewals that each take 14 s
// (nclient4's 2+4+8 s) must neither push the next attempt back by their
// length nor keep the address past expiry. Found with dnsmasq as the
// WAN's server: the address was dropped 14-15 s after expiry.
func TestClientDropsAtExpiry(t *testing.T) {
	f := &fakeWAN{discover: []*dhcpv4.DHCPv4{ack("198.51.100.1", "198.51.100.7", time.Hour, "9.9.9.9"), nil}, unanswered: 14 * time.Second}
	for i := 0; i < 20; i++ {
		f.renew = append(f.renew, nil)
	}
	updates, _ := runFake(t, f)
	want := []string{
		"discover +0s",
		"renew +30m0s ciaddr 198.51.100.7",  // T1; no answer by +30m14s
		"renew +41m22s ciaddr 198.51.100.7", // half of the 22m16s then left to T2
		"renew +47m3s ciaddr 198.51.100.7",
		"renew +49m53.5s ciaddr 198.51.100.7",
		"renew +51m18.75s ciaddr 198.51.100.7", // 57.25 s left after it: the wait ends at T2
		"renew +52m30s ciaddr 198.51.100.7",    // T2: rebinding
		"renew +56m22s ciaddr 198.51.100.7",
		"renew +58m18s ciaddr 198.51.100.7",
		"renew +59m32s ciaddr 198.51.100.7", // cut short at expiry, 28 s in
		"discover +1h0m0s",                  // expired, on time
	}
	if got := strings.Join(f.events, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if len(updates) != 2 || !strings.HasPrefix(updates[1], "+1h0m0s: ") || !strings.HasSuffix(updates[1], "-> no lease") {
		t.Errorf("updates %q, want the lease, then its loss at expiry (+1h0m0s)", updates)
	}
}

func TestClientRenewals(t *testing.T) {
	f := &fakeWAN{
		discover: []*dhcpv4.DHCPv4{ack("198.51.100.1", "198.51.100.7", time.Hour, "9.9.9.9")},
		renew: []*dhcpv4.DHCPv4{
			ack("198.51.100.1", "198.51.100.7", time.Hour, "9.9.9.9"),  // same: no update
			ack("198.51.100.1", "198.51.100.7", time.Hour, "1.1.1.1"),  // DNS changed: update
			ack("198.51.100.99", "198.51.100.7", time.Hour, "1.1.1.1"), // another server while RENEWING: ignored
			nil, nil, nil, nil, nil,
			ack("198.51.100.99", "198.51.100.7", time.Hour, "1.1.1.1"), // REBINDING: any server
			nak("198.51.100.99"),
		},
	}
	updates, _ := runFake(t, f)
	got := strings.Join(updates, "\n")
	for _, want := range []string{
		"+0s: no lease -> 198.51.100.7/24",
		"+1h0m0s: 198.51.100.7/24 router 198.51.100.1 DNS [9.9.9.9] from 198.51.100.1 for 1h -> 198.51.100.7/24 router 198.51.100.1 DNS [1.1.1.1]",
		// The other server's ACK at +1h30m was ignored (RENEWING asks
		// the lease's server); at T2, +1h52m30s, REBINDING took it, so
		// the next T1 with its NAK came at +2h22m30s.
		"+2h22m30s: 198.51.100.7/24 router 198.51.100.1 DNS [1.1.1.1] from 198.51.100.99 for 1h -> no lease",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("updates lack %q:\n%s", want, got)
		}
	}
	if len(updates) != 3 {
		t.Errorf("%d updates, want 3 (the unchanged renewal and the rebinding to the same address update nothing):\n%s", len(updates), got)
	}
	if n := len(f.discover); n != 0 || !strings.HasPrefix(f.events[len(f.events)-1], "renew") {
		t.Errorf("events %q", f.events)
	}
}

func TestParseLease(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	a := ack("10.0.0.1", "10.0.0.9", 2*time.Hour, "10.0.0.1", "10.0.0.2")
	a.UpdateOption(dhcpv4.OptSubnetMask(net.CIDRMask(29, 32)))
	l, err := parseLease(a, now)
	if err != nil {
		t.Fatal(err)
	}
	if l.Address.String() != "10.0.0.9/29" || l.Router.String() != "198.51.100.1" || fmt.Sprint(l.DNS) != "[10.0.0.1 10.0.0.2]" ||
		l.T1 != time.Hour || l.T2 != 105*time.Minute || !l.Expires().Equal(now.Add(2*time.Hour)) {
		t.Errorf("lease %+v", l)
	}
	a.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionRenewTimeValue, []byte{0, 0, 0x1c, 0x20})) // T1 2h: not before the lease ends
	if l, _ := parseLease(a, now); l.T1 != time.Hour {
		t.Errorf("T1 of 2h in a 2h lease taken as %v, want the default 1h", l.T1)
	}
	a.YourIPAddr = net.IPv4zero
	if _, err := parseLease(a, now); err == nil {
		t.Error("a lease on 0.0.0.0 accepted")
	}
}

func TestRetryWait(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for left, want := range map[time.Duration]time.Duration{
		time.Hour:        30 * time.Minute,
		90 * time.Second: time.Minute,
		30 * time.Second: 30 * time.Second,
		-time.Second:     0,
	} {
		if got := retryWait(now, now.Add(left)); got != want {
			t.Errorf("%v left: wait %v, want %v", left, got, want)
		}
	}
}

// TestClientWaitsForCarrier: no DISCOVER goes out before the WAN link
// runs (one sent into a link without carrier is lost and costs the first
// exchange's 2 s); the client looks again every linkPoll, says so once,
// and discovers as soon as the link runs.
func TestClientWaitsForCarrier(t *testing.T) {
	f := &fakeWAN{discover: []*dhcpv4.DHCPv4{ack("198.51.100.1", "198.51.100.7", time.Hour)}}
	f.start = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	f.clock = f.start
	var logs []string
	c := NewClient(ClientConfig{Interface: "wan0", Log: func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }})
	c.open = func() (exchanger, error) { return f, nil }
	c.now = func() time.Time { return f.clock }
	var pauses []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) bool {
		pauses = append(pauses, d)
		f.clock = f.clock.Add(d)
		return ctx.Err() == nil
	}
	checks := 0
	c.running = func() bool { checks++; return checks > 3 }
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	c.Run(ctx)
	if len(pauses) < 3 || pauses[0] != linkPoll || pauses[1] != linkPoll || pauses[2] != linkPoll {
		t.Fatalf("pauses %v, want three of %v first", pauses, linkPoll)
	}
	if len(f.events) == 0 || f.events[0] != "discover +150ms" {
		t.Errorf("exchanges %v, want the first DISCOVER at +150ms, when the link ran", f.events)
	}
	waiting := 0
	for _, l := range logs {
		if strings.Contains(l, "no carrier yet") {
			waiting++
		}
	}
	if waiting != 1 {
		t.Errorf("%d waiting lines in %q, want one", waiting, logs)
	}

	// A link without carrier for long is looked at once a second.
	f = &fakeWAN{discover: []*dhcpv4.DHCPv4{ack("198.51.100.1", "198.51.100.7", time.Hour)}}
	f.start, f.clock = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	c = NewClient(ClientConfig{Interface: "wan0"})
	c.open = func() (exchanger, error) { return f, nil }
	c.now = func() time.Time { return f.clock }
	c.sleep = func(ctx context.Context, d time.Duration) bool {
		pauses = append(pauses, d)
		f.clock = f.clock.Add(d)
		return ctx.Err() == nil
	}
	pauses, checks = nil, 0
	c.running = func() bool { checks++; return checks > 300 }
	ctx, cancel = context.WithCancel(context.Background())
	f.cancel = cancel
	c.Run(ctx)
	fast, slow := 0, 0
	for _, p := range pauses {
		switch p {
		case linkPoll:
			fast++
		case linkPollSlow:
			slow++
		}
	}
	if fast != int(linkPollFast/linkPoll) || slow != 300-fast {
		t.Errorf("%d pauses of %v and %d of %v, want %d and %d", fast, linkPoll, slow, linkPollSlow, linkPollFast/linkPoll, 300-int(linkPollFast/linkPoll))
	}
}
