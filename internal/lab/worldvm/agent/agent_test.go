package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/ocfw/ocfw/internal/lab/worldvm"
)

func TestPool(t *testing.T) {
	p, err := newPool(net.ParseIP("10.0.0.10"), net.ParseIP("10.0.0.11"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1e9, 0)
	p.now = func() time.Time { return now }
	ip, ok := p.offer("m1")
	if !ok || ip.String() != "10.0.0.10" {
		t.Fatalf("offer m1: %v %v", ip, ok)
	}
	if ip, _ := p.offer("m1"); ip.String() != "10.0.0.10" {
		t.Errorf("second offer to m1: %v", ip)
	}
	if ip, _ := p.offer("m2"); ip.String() != "10.0.0.11" {
		t.Errorf("offer m2: %v", ip)
	}
	if _, ok := p.offer("m3"); ok {
		t.Error("offer beyond the range")
	}
	if p.request("m2", net.ParseIP("10.0.0.10")) {
		t.Error("m2 got m1's offered address")
	}
	if !p.request("m1", net.ParseIP("10.0.0.10")) || p.request("m1", net.ParseIP("10.0.0.12")) {
		t.Error("request")
	}
	if got := strings.Join(p.list(), "; "); got != "m1 10.0.0.10 acked; m2 10.0.0.11 offered" {
		t.Errorf("list: %s", got)
	}
	// An offer not taken up lapses; a lease lasts its time.
	now = now.Add(offerHold + time.Second)
	if ip, ok := p.offer("m3"); !ok || ip.String() != "10.0.0.11" {
		t.Errorf("offer m3 after m2's lapsed: %v %v", ip, ok)
	}
	p.release("m1")
	if ip, _ := p.offer("m4"); ip.String() != "10.0.0.10" {
		t.Errorf("released address not offered again: %v", ip)
	}
	if _, err := newPool(net.ParseIP("10.0.0.2"), net.ParseIP("10.0.0.1"), time.Hour); err == nil {
		t.Error("reversed range accepted")
	}
}

func TestDHCPServerReplies(t *testing.T) {
	p, _ := newPool(net.ParseIP("10.0.0.100"), net.ParseIP("10.0.0.101"), 10*time.Minute)
	s := &dhcpServer{pool: p, serverIP: net.ParseIP("10.0.0.1").To4(), mask: net.CIDRMask(24, 32),
		router: net.ParseIP("10.0.0.1").To4(), dns: net.ParseIP("10.0.0.53").To4(), leaseTime: 10 * time.Minute,
		event: func(string, ...any) {}, ifname: "eth0"}
	mac, _ := net.ParseMAC("52:54:00:00:00:09")
	disc, err := dhcpv4.NewDiscovery(mac)
	if err != nil {
		t.Fatal(err)
	}
	offer := s.reply(disc)
	if offer == nil || offer.MessageType() != dhcpv4.MessageTypeOffer || offer.YourIPAddr.String() != "10.0.0.100" {
		t.Fatalf("offer: %v", offer)
	}
	req, err := dhcpv4.NewRequestFromOffer(offer)
	if err != nil {
		t.Fatal(err)
	}
	ack := s.reply(req)
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("ack: %v", ack)
	}
	if ack.YourIPAddr.String() != "10.0.0.100" || ack.SubnetMask().String() != "ffffff00" ||
		ack.Router()[0].String() != "10.0.0.1" || ack.DNS()[0].String() != "10.0.0.53" ||
		ack.IPAddressLeaseTime(0) != 10*time.Minute || !ack.ServerIdentifier().Equal(s.serverIP) {
		t.Errorf("ack:\n%s", ack.Summary())
	}
	// A request for an address out of the range is refused.
	bad, _ := dhcpv4.NewRequestFromOffer(offer, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.0.0.7"))))
	if r := s.reply(bad); r == nil || r.MessageType() != dhcpv4.MessageTypeNak {
		t.Errorf("out-of-range request: %v", r)
	}
	// A request to another server is not answered.
	other, _ := dhcpv4.NewRequestFromOffer(offer, dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.0.0.2"))))
	if r := s.reply(other); r != nil {
		t.Errorf("request to another server answered: %v", r)
	}
}

func TestDNSRoundTrip(t *testing.T) {
	recs, err := parseRecords([]string{"Example.Test=10.0.0.7,10.0.0.8", "b.test=10.0.0.9"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want, asked string }{
		{"example.test", "10.0.0.7 10.0.0.8", "A example.test."},
		{"EXAMPLE.test.", "10.0.0.7 10.0.0.8", "A example.test."},
		{"nope.test", "NXDOMAIN", "A nope.test."},
	} {
		q, err := buildQuery(42, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		reply, asked := recs.answer(q)
		if asked != tc.asked {
			t.Errorf("asked %q, want %q", asked, tc.asked)
		}
		if _, ok, _ := parseAnswer(reply, 43); ok {
			t.Error("a reply to another ID was taken")
		}
		got, ok, err := parseAnswer(reply, 42)
		if !ok || err != nil || got != tc.want {
			t.Errorf("%s: %q %v %v, want %q", tc.name, got, ok, err, tc.want)
		}
	}
	// Another type for a known name: no data, no error.
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 5})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("b.test."), Type: dnsmessage.TypeAAAA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	reply, _ := recs.answer(q)
	if got, ok, err := parseAnswer(reply, 5); !ok || err != nil || got != "" {
		t.Errorf("AAAA: %q %v %v", got, ok, err)
	}
	for _, bad := range []string{"x", "a.test=1.2.3", "=1.2.3.4"} {
		if _, err := parseRecords([]string{bad}); err == nil {
			t.Errorf("record %q accepted", bad)
		}
	}
}

func TestNTP(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	if got := fromNTP(ntpTime(now)); got.Sub(now).Abs() > time.Microsecond {
		t.Errorf("round trip: %v", got)
	}
	req := make([]byte, 48)
	req[0] = 4<<3 | 3
	binary.BigEndian.PutUint64(req[40:], 0x1122334455667788)
	resp := ntpReply(req, now, now.Add(time.Millisecond))
	if resp == nil || resp[0] != 4<<3|4 || resp[1] != 1 || string(resp[24:32]) != string(req[40:48]) {
		t.Fatalf("reply %x", resp)
	}
	if got := fromNTP(binary.BigEndian.Uint64(resp[40:])); got.Sub(now.Add(time.Millisecond)).Abs() > time.Microsecond {
		t.Errorf("transmit time %v", got)
	}
	req[0] = 4<<3 | 4 // a server's packet is not answered
	if ntpReply(req, now, now) != nil {
		t.Error("answered a server packet")
	}
}

func TestBuiltin(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		out  string
		code int
	}{
		{"echo hi  there", "hi there\n", 0},
		{"whoami", "tester\n", 0},
		{"exit 3", "", 3},
		{"rm -rf /", "unknown command: rm -rf /\n", 127},
	} {
		out, code := builtin("tester", tc.cmd)
		if out != tc.out || code != tc.code {
			t.Errorf("%s: %q %d", tc.cmd, out, code)
		}
	}
}

func TestNetKind(t *testing.T) {
	op := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{op(syscall.ECONNREFUSED), "refused"},
		{op(syscall.ENETUNREACH), "no-route"},
		{op(syscall.EHOSTUNREACH), "unreachable"},
		{op(syscall.ETIMEDOUT), "timeout"},
		{context.DeadlineExceeded, "timeout"},
		{os.ErrDeadlineExceeded, "timeout"},
		{errors.New("x"), "other"},
	} {
		if got := netKind(tc.err, "other"); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
	if got := withKind(kinded("auth", errors.New("no"))).Error(); got != "auth: no" {
		t.Errorf("kinded error rewrapped: %s", got)
	}
	if got := withKind(fmt.Errorf("x: %w", op(syscall.ECONNREFUSED))).Error(); !strings.HasPrefix(got, "refused: ") {
		t.Errorf("withKind: %s", got)
	}
}

// The command table and the usage checks, without a VM: commands that
// fail before touching the system.
func TestRunUsage(t *testing.T) {
	a := &agent{nss: map[string]*netNS{}}
	for _, tc := range []struct{ line, want string }{
		{"1 nosuch", "usage: unknown command"},
		{"2 addr wan", "usage: usage: addr NS IF CIDR"},
		{"3 show nowhere", "no-ns: no namespace \"nowhere\""},
		{"4 ns Bad!", "usage: namespace name"},
	} {
		req, err := worldvm.ParseRequest(tc.line)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.run(req)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.line, err, tc.want)
		}
	}
	// The last argument of tcp and ssh takes the rest of the line.
	var got []string
	commands["test-rest"] = command{"A B...", 2, -1, time.Second, func(_ context.Context, _ *agent, args []string) (string, error) {
		got = args
		return "", nil
	}}
	defer delete(commands, "test-rest")
	req, _ := worldvm.ParseRequest("5 test-rest x one two  three")
	if _, err := a.run(req); err != nil || len(got) != 2 || got[1] != "one two three" {
		t.Errorf("rest of line: %q %v", got, err)
	}
	help, _ := cmdHelp(context.Background(), a, nil)
	for _, c := range []string{"dhcp-server NS IF FIRST LAST", "poweroff\n", "ssh NS HOST:PORT USER"} {
		if !strings.Contains(help+"\n", c) {
			t.Errorf("help lacks %q", c)
		}
	}
}

func TestLongestOutage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(n int) []time.Time { // one datagram every 10 ms
		var ts []time.Time
		for i := range n {
			ts = append(ts, t0.Add(time.Duration(i)*10*time.Millisecond))
		}
		return ts
	}
	got := func(seqs ...uint32) map[uint32]bool {
		m := map[uint32]bool{}
		for _, s := range seqs {
			m[s] = true
		}
		return m
	}
	for _, c := range []struct {
		name     string
		sent     uint32
		received map[uint32]bool
		want     outage
	}{
		{"none lost", 4, got(1, 2, 3, 4), outage{}},
		{"one gap", 6, got(1, 2, 5, 6), outage{from: 3, lost: 2, d: 20 * time.Millisecond}},
		{"the longer of two", 10, got(1, 3, 4, 8, 9, 10), outage{from: 5, lost: 3, d: 30 * time.Millisecond}},
		{"still out at the end", 5, got(1, 2), outage{from: 3, lost: 3, d: 20 * time.Millisecond}},
		{"nothing answered", 3, got(), outage{from: 1, lost: 3, d: 20 * time.Millisecond}},
	} {
		if o := longestOutage(c.sent, func(s uint32) bool { return c.received[s] }, at(int(c.sent))); o != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, o, c.want)
		}
	}
}

func TestFamilyFor(t *testing.T) {
	for _, c := range []struct{ network, ip, want string }{
		{"tcp4", "192.0.2.1", "tcp4"},
		{"tcp4", "fd00::1", "tcp6"},
		{"udp4", "2001:db8::7", "udp6"},
		{"udp4", "::ffff:192.0.2.1", "udp4"}, // v4-mapped stays v4
		{"tcp", "fd00::1", "tcp"},            // no family asked: none forced
		{"tcp4", "", "tcp4"},
	} {
		if got := familyFor(c.network, net.ParseIP(c.ip)); got != c.want {
			t.Errorf("familyFor(%s, %s) = %s, want %s", c.network, c.ip, got, c.want)
		}
	}
}
