package dns

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"golang.org/x/net/dns/dnsmessage"
)

// These tests drive ISC dig (bind9-dnsutils) against the forwarder on
// 127.0.0.1 at an ephemeral port, with a scripted upstream on another.

// scripted is an upstream resolver on 127.0.0.1, UDP and TCP on one
// port. It honours the asker's UDP size (TC beyond it) except for
// oversize.test, which it sends whole over UDP whatever was offered.
type scripted struct {
	port               int
	udpAsked, tcpAsked atomic.Int32
	sawDO, sawCD       atomic.Int32
	ttl                uint32
}

// listenBoth listens on UDP and TCP at one ephemeral port of 127.0.0.1.
func listenBoth(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.ListenPacket("udp4", l.Addr().String())
		if err != nil {
			l.Close()
			continue // the UDP port is taken: another one
		}
		t.Cleanup(func() { c.Close(); l.Close() })
		return c, l
	}
	t.Fatal("no port free on 127.0.0.1 for both UDP and TCP")
	return nil, nil
}

func txts(n int) []dnsmessage.Resource {
	var rs []dnsmessage.Resource
	for i := range n {
		rs = append(rs, dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassINET, TTL: 300},
			Body: &dnsmessage.TXTResource{TXT: []string{fmt.Sprintf("%03d%s", i, strings.Repeat("x", 247))}}})
	}
	return rs
}

// zone is the scripted upstream's data.
func (s *scripted) zone(q dnsmessage.Question) (dnsmessage.RCode, []dnsmessage.Resource, []dnsmessage.Resource) {
	name := strings.ToLower(q.Name.String())
	h := func(typ dnsmessage.Type) dnsmessage.ResourceHeader {
		return dnsmessage.ResourceHeader{Name: q.Name, Type: typ, Class: dnsmessage.ClassINET, TTL: s.ttl}
	}
	soa := []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName("test."), Type: dnsmessage.TypeSOA, Class: dnsmessage.ClassINET, TTL: 30},
		Body: &dnsmessage.SOAResource{NS: dnsmessage.MustNewName("ns.test."), MBox: dnsmessage.MustNewName("h.test."), Serial: 1, Refresh: 1, Retry: 1, Expire: 1, MinTTL: 30}}}
	switch {
	case name == "nx.test.":
		return dnsmessage.RCodeNameError, nil, soa
	case name == "big.test." && q.Type == dnsmessage.TypeTXT:
		return 0, txts(6), nil // 1,6xx bytes: more than 1232
	case (name == "huge.test." || name == "oversize.test.") && q.Type == dnsmessage.TypeTXT:
		return 0, txts(26), nil // 6.6 KB
	}
	switch q.Type {
	case dnsmessage.TypeA:
		return 0, []dnsmessage.Resource{{Header: h(q.Type), Body: &dnsmessage.AResource{A: [4]byte{198, 51, 100, 7}}}}, nil
	case dnsmessage.TypeAAAA:
		return 0, []dnsmessage.Resource{{Header: h(q.Type), Body: &dnsmessage.AAAAResource{AAAA: netip.MustParseAddr("2001:db8::7").As16()}}}, nil
	case dnsmessage.TypeMX:
		return 0, []dnsmessage.Resource{{Header: h(q.Type), Body: &dnsmessage.MXResource{Pref: 10, MX: dnsmessage.MustNewName("mail.example.test.")}}}, nil
	case dnsmessage.TypeTXT:
		return 0, []dnsmessage.Resource{{Header: h(q.Type), Body: &dnsmessage.TXTResource{TXT: []string{"hello world"}}}}, nil
	}
	return 0, nil, soa
}

// respond answers one query; size is the UDP limit, 0 over TCP.
func (s *scripted) respond(b []byte, tcp bool) []byte {
	var q dnsmessage.Message
	if q.Unpack(b) != nil || len(q.Questions) != 1 {
		return nil
	}
	size, edns := 512, false
	var opt []dnsmessage.Resource
	for _, r := range q.Additionals {
		if r.Header.Type == dnsmessage.TypeOPT {
			size, edns = int(r.Header.Class), true
			if r.Header.DNSSECAllowed() {
				s.sawDO.Add(1)
			}
			var rh dnsmessage.ResourceHeader
			rh.Name = dnsmessage.MustNewName(".")
			rh.SetEDNS0(4096, 0, r.Header.DNSSECAllowed())
			opt = []dnsmessage.Resource{{Header: rh, Body: &dnsmessage.OPTResource{}}}
		}
	}
	_ = edns
	if q.CheckingDisabled {
		s.sawCD.Add(1)
	}
	rc, ans, auth := s.zone(q.Questions[0])
	for i := range ans {
		ans[i].Header.Name = q.Questions[0].Name
	}
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, RecursionDesired: q.RecursionDesired, RecursionAvailable: true, RCode: rc},
		Questions: q.Questions, Answers: ans, Authorities: auth, Additionals: opt}
	out, err := m.Pack()
	if err != nil {
		panic(err)
	}
	if !tcp && len(out) > size && q.Questions[0].Name.String() != "oversize.test." {
		m.Answers, m.Authorities, m.Truncated = nil, nil, true
		out, _ = m.Pack()
	}
	return out
}

func newScripted(t testing.TB, ttl uint32) *scripted {
	s := &scripted{ttl: ttl}
	uc, l := listenBoth(t)
	s.port = l.Addr().(*net.TCPAddr).Port
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := uc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.udpAsked.Add(1)
			if out := s.respond(buf[:n], false); out != nil {
				uc.WriteTo(out, from)
			}
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					q, err := readTCP(c)
					if err != nil {
						return
					}
					s.tcpAsked.Add(1)
					writeTCP(c, s.respond(q, true))
				}
			}()
		}
	}()
	return s
}

func (s *scripted) addr() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(s.port))
}

func readTCP(c net.Conn) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	_, err := io.ReadFull(c, b)
	return b, err
}

func writeTCP(c net.Conn, m []byte) error {
	_, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(m))), m...))
	return err
}

// loopback makes 127.0.0.1 the LAN.
func loopback() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} }

// serveLocal runs f on UDP and TCP at an ephemeral port of 127.0.0.1
// until the test ends; it returns the port.
func serveLocal(t *testing.T, f *Forwarder) int {
	uc, l := listenBoth(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); f.Serve(ctx, uc) }()
	go func() { defer wg.Done(); f.ServeTCP(ctx, l) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return l.Addr().(*net.TCPAddr).Port
}

type rr struct {
	name string
	ttl  int
	typ  string
	data string
}

type digResult struct {
	out, status string
	flags       map[string]bool
	answers     []rr
	size        int
}

var (
	statusRE = regexp.MustCompile(`status: ([A-Z]+)`)
	flagsRE  = regexp.MustCompile(`;; flags:([^;]*);`)
	sizeRE   = regexp.MustCompile(`MSG SIZE\s+rcvd: (\d+)`)
)

// dig runs dig against port on 127.0.0.1 and parses its (last) reply.
func dig(t *testing.T, port int, args ...string) digResult {
	t.Helper()
	if _, err := exec.LookPath("dig"); err != nil {
		labtest.SkipOrFail(t, "dig is not installed (Debian: bind9-dnsutils)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := append([]string{"-p", strconv.Itoa(port), "@127.0.0.1", "+tries=1", "+time=4"}, args...)
	b, err := exec.CommandContext(ctx, "dig", all...).CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("dig %s: %v\n%s", strings.Join(all, " "), err, out)
	}
	r := digResult{out: out, flags: map[string]bool{}}
	if m := statusRE.FindAllStringSubmatch(out, -1); len(m) > 0 {
		r.status = m[len(m)-1][1]
	}
	if m := flagsRE.FindAllStringSubmatch(out, -1); len(m) > 0 {
		for _, f := range strings.Fields(m[len(m)-1][1]) {
			r.flags[f] = true
		}
	}
	if m := sizeRE.FindAllStringSubmatch(out, -1); len(m) > 0 {
		r.size, _ = strconv.Atoi(m[len(m)-1][1])
	}
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, ";; ANSWER SECTION:"):
			in, r.answers = true, nil
		case in && (line == "" || strings.HasPrefix(line, ";")):
			in = false
		case in:
			f := strings.Fields(line)
			if len(f) >= 5 {
				ttl, _ := strconv.Atoi(f[1])
				r.answers = append(r.answers, rr{name: f[0], ttl: ttl, typ: f[3], data: strings.Join(f[4:], " ")})
			}
		}
	}
	if r.status == "" {
		t.Fatalf("dig %s: no reply parsed from\n%s", strings.Join(all, " "), out)
	}
	return r
}

func TestDigForwarded(t *testing.T) {
	up := newScripted(t, 60)
	port := serveLocal(t, New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}}))
	for _, c := range []struct{ typ, want string }{
		{"A", "198.51.100.7"}, {"AAAA", "2001:db8::7"}, {"MX", "10 mail.example.test."}, {"TXT", `"hello world"`},
	} {
		for _, transport := range []string{"+notcp", "+tcp"} {
			r := dig(t, port, transport, "example.test", c.typ)
			if r.status != "NOERROR" || len(r.answers) != 1 || r.answers[0].typ != c.typ || r.answers[0].data != c.want || !r.flags["ra"] {
				t.Errorf("dig %s example.test %s: %s %v %v, want %s\n%s", transport, c.typ, r.status, r.flags, r.answers, c.want, r.out)
			}
		}
	}
	if r := dig(t, port, "nx.test", "A"); r.status != "NXDOMAIN" || len(r.answers) != 0 {
		t.Errorf("dig nx.test: %s %v\n%s", r.status, r.answers, r.out)
	}
	if up.tcpAsked.Load() != 0 {
		t.Errorf("small answers went upstream over TCP %d times", up.tcpAsked.Load())
	}
}

// RFC 7766: a UDP answer too big for the client comes with TC set, and
// dig's retry over TCP gets it whole (before: connection refused).
func TestDigTruncatedRetriesOverTCP(t *testing.T) {
	up := newScripted(t, 60)
	f := New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}})
	port := serveLocal(t, f)
	r := dig(t, port, "big.test", "TXT")
	if !strings.Contains(r.out, "Truncated, retrying in TCP mode") {
		t.Errorf("the UDP answer was not truncated:\n%s", r.out)
	}
	if r.status != "NOERROR" || len(r.answers) != 6 || r.size < 1500 {
		t.Errorf("over TCP: %s, %d answers, %d bytes; want 6 TXT records\n%s", r.status, len(r.answers), r.size, r.out)
	}
	if r := dig(t, port, "+tcp", "+keepopen", "example.test", "A", "example.test", "MX"); r.status != "NOERROR" || len(r.answers) != 1 || r.answers[0].typ != "MX" {
		t.Errorf("two queries on one TCP connection: %s %v\n%s", r.status, r.answers, r.out)
	}
}

// The upstream's UDP answer is truncated: the forwarder asks it again
// over TCP and relays the whole answer (before: the truncated one).
func TestUpstreamTruncatedOverTCP(t *testing.T) {
	up := newScripted(t, 60)
	f := New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}})
	port := serveLocal(t, f)
	r := dig(t, port, "+tcp", "huge.test", "TXT")
	if r.status != "NOERROR" || len(r.answers) != 26 || r.flags["tc"] {
		t.Errorf("huge.test: %s %v, %d answers, want 26\n%s", r.status, r.flags, len(r.answers), r.out)
	}
	if up.tcpAsked.Load() != 1 || f.Stats().UpstreamTCP != 1 {
		t.Errorf("upstream asked over TCP %d times (stats %+v), want 1", up.tcpAsked.Load(), f.Stats())
	}
}

// An upstream sending 6.6 KB over UDP whatever was offered: the answer is
// not read cut short into a malformed one (before: into 4096 bytes, then
// SERVFAIL); it is fetched whole over TCP.
func TestUpstreamOversizeUDP(t *testing.T) {
	up := newScripted(t, 60)
	f := New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}})
	port := serveLocal(t, f)
	r := dig(t, port, "+tcp", "oversize.test", "TXT")
	if r.status != "NOERROR" || len(r.answers) != 26 || r.size < 6400 {
		t.Errorf("oversize.test: %s, %d answers, %d bytes; want 26, over 6.4 KB\n%s", r.status, len(r.answers), r.size, r.out)
	}
	for i, a := range r.answers {
		if want := fmt.Sprintf(`"%03d`, i); !strings.HasPrefix(a.data, want) || len(a.data) != 252 {
			t.Errorf("record %d: %.20q... (%d bytes)", i, a.data, len(a.data))
			break
		}
	}
}

// Cached answers' TTLs count down (before: 60, 60, 60).
func TestDigTTLCountsDown(t *testing.T) {
	up := newScripted(t, 60)
	clk := &clock{now: time.Unix(1700000000, 0)}
	port := serveLocal(t, New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}, Now: clk.Now}))
	var ttls []int
	for range 3 {
		r := dig(t, port, "example.test", "A")
		if len(r.answers) != 1 {
			t.Fatalf("no answer:\n%s", r.out)
		}
		ttls = append(ttls, r.answers[0].ttl)
		clk.add(7 * time.Second)
	}
	if ttls[0] != 60 || ttls[1] != 53 || ttls[2] != 46 {
		t.Errorf("TTLs %v 7 s apart, want [60 53 46]", ttls)
	}
	nx := dig(t, port, "nx.test", "A")
	clk.add(12 * time.Second)
	nx2 := dig(t, port, "nx.test", "A")
	if soa := func(r digResult) string { return r.out }; !strings.Contains(soa(nx), "\t30\tIN\tSOA") || !strings.Contains(soa(nx2), "\t18\tIN\tSOA") {
		t.Errorf("the NXDOMAIN's SOA TTL does not count down 30 -> 18:\n%s\n%s", nx.out, nx2.out)
	}
	if n := up.udpAsked.Load(); n != 2 {
		t.Errorf("upstream asked %d times, want 2 (one per name)", n)
	}
}

// A client without EDNS never gets more than 512 bytes over UDP, even
// when a client with a 4096-byte EDNS size filled the cache (before: the
// 1,5xx-byte answer); the cache keeps DO and CD answers apart.
func TestDigClientSizeAndCacheKey(t *testing.T) {
	up := newScripted(t, 60)
	port := serveLocal(t, New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}}))
	dig(t, port, "+bufsize=4096", "+ignore", "big.test", "TXT") // fills the cache
	asked := up.udpAsked.Load() + up.tcpAsked.Load()
	r := dig(t, port, "+noedns", "+ignore", "big.test", "TXT")
	if !r.flags["tc"] || r.size > 512 || len(r.answers) != 0 {
		t.Errorf("without EDNS: flags %v, %d bytes, %d answers; want TC and at most 512 bytes\n%s", r.flags, r.size, len(r.answers), r.out)
	}
	r = dig(t, port, "+bufsize=4096", "+ignore", "big.test", "TXT")
	if !r.flags["tc"] || r.size > ednsSize {
		t.Errorf("EDNS 4096: flags %v, %d bytes; want TC within the forwarder's %d\n%s", r.flags, r.size, ednsSize, r.out)
	}
	r = dig(t, port, "+noedns", "+tcp", "big.test", "TXT")
	if len(r.answers) != 6 {
		t.Errorf("over TCP without EDNS: %d answers, want 6\n%s", len(r.answers), r.out)
	}
	if n := up.udpAsked.Load() + up.tcpAsked.Load(); n != asked {
		t.Errorf("the upstream was asked again (%d -> %d) for a cached answer", asked, n)
	}

	dig(t, port, "example.test", "A")
	dig(t, port, "EXAMPLE.test", "A")
	if up.sawDO.Load() != 0 || up.sawCD.Load() != 0 {
		t.Fatalf("DO %d, CD %d seen upstream before any client set them", up.sawDO.Load(), up.sawCD.Load())
	}
	before := up.udpAsked.Load()
	dig(t, port, "+dnssec", "example.test", "A")
	dig(t, port, "+cd", "example.test", "A")
	if up.udpAsked.Load() != before+2 || up.sawDO.Load() != 1 || up.sawCD.Load() != 1 {
		t.Errorf("DO and CD queries: upstream asked %d more times (DO %d, CD %d), want 2 (1, 1)", up.udpAsked.Load()-before, up.sawDO.Load(), up.sawCD.Load())
	}
	if r := dig(t, port, "+dnssec", "example.test", "A"); !strings.Contains(r.out, "flags: do;") {
		t.Errorf("the DO bit is not echoed to the client:\n%s", r.out)
	}
	if up.udpAsked.Load() != before+2 {
		t.Errorf("the DO answer was not cached")
	}
}

func TestDigLocalNames(t *testing.T) {
	up := newScripted(t, 60)
	hosts := []Host{
		{"gw", netip.MustParseAddr("127.0.0.1")},
		{"printer", netip.MustParseAddr("127.0.0.9")},
		{"Laptop", netip.MustParseAddr("127.0.0.5")},
		{"laptop", netip.MustParseAddr("127.0.0.6")}, // a second claim: the first wins
		{"evil\x1b]0;x\a", netip.MustParseAddr("127.0.0.7")},
		{"two.labels", netip.MustParseAddr("127.0.0.8")},
	}
	f := New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}, Domain: "home.arpa", Hosts: func() []Host { return hosts }})
	port := serveLocal(t, f)
	for _, c := range []struct{ name, want string }{
		{"laptop.home.arpa", "127.0.0.5"}, {"LAPTOP.Home.Arpa", "127.0.0.5"}, {"laptop", "127.0.0.5"},
		{"gw.home.arpa", "127.0.0.1"}, {"printer", "127.0.0.9"},
	} {
		for _, transport := range []string{"+notcp", "+tcp"} {
			r := dig(t, port, transport, c.name, "A")
			if r.status != "NOERROR" || !r.flags["aa"] || len(r.answers) != 1 || r.answers[0].data != c.want {
				t.Errorf("dig %s %s: %s %v %v, want %s authoritatively\n%s", transport, c.name, r.status, r.flags, r.answers, c.want, r.out)
			}
		}
	}
	for _, name := range []string{"nobody.home.arpa", `evil\027]0\;x\007.home.arpa`, "two.labels.home.arpa", "a.laptop.home.arpa"} {
		if r := dig(t, port, name, "A"); r.status != "NXDOMAIN" || !r.flags["aa"] || len(r.answers) != 0 {
			t.Errorf("dig %s: %s %v %v, want NXDOMAIN\n%s", name, r.status, r.flags, r.answers, r.out)
		}
	}
	if r := dig(t, port, "laptop.home.arpa", "AAAA"); r.status != "NOERROR" || len(r.answers) != 0 || !strings.Contains(r.out, "home.arpa.\t\t10\tIN\tSOA") {
		t.Errorf("AAAA of a local name: %s %v, want no data with the zone's SOA\n%s", r.status, r.answers, r.out)
	}
	if r := dig(t, port, "laptop", "AAAA"); r.status != "NOERROR" || len(r.answers) != 0 || strings.Contains(r.out, "SOA") {
		t.Errorf("AAAA of a bare local name: %s %v, want no data, no SOA\n%s", r.status, r.answers, r.out)
	}
	if r := dig(t, port, "-x", "127.0.0.5"); r.status != "NOERROR" || len(r.answers) != 1 || r.answers[0].data != "laptop.home.arpa." {
		t.Errorf("dig -x 127.0.0.5: %s %v\n%s", r.status, r.answers, r.out)
	}
	if r := dig(t, port, "-x", "127.0.0.7"); r.status != "NXDOMAIN" {
		t.Errorf("dig -x of the badly named host: %s %v, want NXDOMAIN", r.status, r.answers)
	}
	if n := up.udpAsked.Load() + up.tcpAsked.Load(); n != 0 {
		t.Errorf("local names went upstream %d times", n)
	}
	// An unknown bare name is the world's.
	if r := dig(t, port, "unknown", "A"); r.status != "NOERROR" || r.flags["aa"] || up.udpAsked.Load() != 1 {
		t.Errorf("an unknown bare name: %s %v, upstream asked %d times; want it forwarded", r.status, r.flags, up.udpAsked.Load())
	}
}

func TestDigRefusedOutsideLAN(t *testing.T) {
	up := newScripted(t, 60)
	f := New(Config{Allowed: lan(), Upstreams: []netip.AddrPort{up.addr()}, Domain: "lan", Hosts: func() []Host {
		return []Host{{"gw", netip.MustParseAddr("192.168.1.1")}}
	}})
	port := serveLocal(t, f)
	for _, args := range [][]string{{"example.test"}, {"+tcp", "example.test"}, {"gw.lan"}} {
		if r := dig(t, port, args...); r.status != "REFUSED" || len(r.answers) != 0 {
			t.Errorf("dig %v from outside the LAN: %s %v, want REFUSED", args, r.status, r.answers)
		}
	}
	if n := up.udpAsked.Load() + up.tcpAsked.Load(); n != 0 {
		t.Errorf("refused queries went upstream %d times", n)
	}
}

// TCP connections: several queries each, closed when idle, and no more
// than MaxTCP at once.
func TestTCPLimits(t *testing.T) {
	up := newScripted(t, 60)
	f := New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}, MaxTCP: 2, TCPIdle: 300 * time.Millisecond})
	port := serveLocal(t, f)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dial := func() net.Conn {
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return c
	}
	c1 := dial()
	// Two queries written at once, answered in order.
	q := append(binary.BigEndian.AppendUint16(nil, uint16(len(mkQuery(t, 1, "a.test.")))), mkQuery(t, 1, "a.test.")...)
	q = append(q, binary.BigEndian.AppendUint16(nil, uint16(len(mkQuery(t, 2, "b.test."))))...)
	q = append(q, mkQuery(t, 2, "b.test.")...)
	c1.Write(q)
	for want := uint16(1); want <= 2; want++ {
		m, err := readTCP(c1)
		if err != nil {
			t.Fatalf("reply %d: %v", want, err)
		}
		if id, rc, as := answer(t, m); id != want || rc != dnsmessage.RCodeSuccess || len(as) != 1 {
			t.Errorf("reply %d: id %d %v %v", want, id, rc, as)
		}
	}
	// c1 idle: closed by the server after 300 ms.
	start := time.Now()
	if _, err := readTCP(c1); err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("an idle connection: %v after %v, want closed after ~300 ms", err, time.Since(start))
	}
	time.Sleep(200 * time.Millisecond) // c1's slot is given back just after its close
	c2, c3 := dial(), dial()
	time.Sleep(50 * time.Millisecond)
	c4 := dial() // a third at once: closed at once
	if _, err := readTCP(c4); err == nil {
		t.Error("a connection over MaxTCP was served")
	}
	if f.Stats().TCPRejected != 1 {
		t.Errorf("stats %+v, want 1 TCP connection rejected", f.Stats())
	}
	c2.Close()
	c3.Close()
	time.Sleep(50 * time.Millisecond)
	if r := dig(t, port, "+tcp", "example.test"); r.status != "NOERROR" {
		t.Errorf("after the connections closed, dig +tcp: %s", r.status)
	}
}

// TestDigLocalNamesIPv6: a local name's IPv6 entries (one per LAN
// prefix) answer AAAA together, its IPv4 one A; a name with only IPv6
// has no A data; the first IPv4 claim of a name still wins.
func TestDigLocalNamesIPv6(t *testing.T) {
	up := newScripted(t, 60)
	hosts := []Host{
		{"gw", netip.MustParseAddr("127.0.0.1")},
		{"gw", netip.MustParseAddr("fd12:3456:789a:3::1")},
		{"gw", netip.MustParseAddr("2001:db8:100:f3::1")},
		{"nas", netip.MustParseAddr("fd12:3456:789a:3::10")},
		{"gw", netip.MustParseAddr("127.0.0.9")}, // a later claim: not answered for A
	}
	f := New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}, Domain: "home.arpa", Hosts: func() []Host { return hosts }})
	port := serveLocal(t, f)
	tests := []struct {
		name, typ, status string
		want              []string
	}{
		{"gw.home.arpa", "AAAA", "NOERROR", []string{"fd12:3456:789a:3::1", "2001:db8:100:f3::1"}},
		{"gw", "AAAA", "NOERROR", []string{"fd12:3456:789a:3::1", "2001:db8:100:f3::1"}},
		{"gw.home.arpa", "A", "NOERROR", []string{"127.0.0.1"}},
		{"nas.home.arpa", "AAAA", "NOERROR", []string{"fd12:3456:789a:3::10"}},
		{"nas.home.arpa", "A", "NOERROR", nil},
		{"nobody.home.arpa", "AAAA", "NXDOMAIN", nil},
	}
	for _, tt := range tests {
		r := dig(t, port, tt.name, tt.typ)
		var got []string
		for _, a := range r.answers {
			got = append(got, a.data)
		}
		if r.status != tt.status || !r.flags["aa"] || strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("dig %s %s: %s %v %v, want %s %v authoritatively\n%s", tt.name, tt.typ, r.status, r.flags, got, tt.status, tt.want, r.out)
		}
	}
	if n := up.udpAsked.Load() + up.tcpAsked.Load(); n != 0 {
		t.Errorf("local names went upstream %d times", n)
	}
}
