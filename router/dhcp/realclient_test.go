package dhcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/site"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The real clients run on this host, each in a network namespace of its
// own joined by a veth pair to the server's (package realclient): the
// server is this package's Server, in-process, on its real sockets.

// lab is a running server and the link its clients join.
type lab struct {
	t     *testing.T
	link  *realclient.Link
	srv   *Server
	store *memStore
	mu    sync.Mutex
	logs  []string
}

const labNet = "192.168.7"

// labSite is the site of the real-client tests: range .100-.150, a
// static lease for macS at .50, lan.mtu 1400, domain home.example.
func labSite() *site.Site {
	return &site.Site{Kind: "site", Hostname: "gw", LAN: site.LAN{
		Ports: []string{"lan1"}, Address: labNet + ".1/24", MTU: 1400, Domain: "home.example",
		DHCP: site.DHCP{
			Range:  []string{labNet + ".100", labNet + ".150"},
			Lease:  "1h",
			Static: []site.StaticLease{{MAC: macS, IP: labNet + ".50"}},
		},
	}}
}

// newLab starts the server of s (labSite when nil) in the link's
// server namespace; it stops when t ends.
func newLab(t *testing.T, s *site.Site, store *memStore) *lab {
	t.Helper()
	if s == nil {
		s = labSite()
	}
	if store == nil {
		store = &memStore{}
	}
	l := &lab{t: t, link: realclient.NewLink(t, string(s.LAN.Address)), store: store}
	l.start(s)
	return l
}

func (l *lab) start(s *site.Site) {
	t := l.t
	cfg, err := ServerConfigFromSite(s, l.link.ServerIf)
	if err != nil {
		t.Fatal(err)
	}
	cfg.NTP = []netip.Addr{cfg.Address.Addr()}
	cfg.Store = l.store
	cfg.Log = func(f string, a ...any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.logs = append(l.logs, fmt.Sprintf(f, a...))
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.link.Server.Do(func() error { return srv.Serve(ctx) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve returned %v, want context.Canceled", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", l.log())
		}
	})
}

func (l *lab) log() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.logs, "\n")
}

// recorder is a client script that appends the environment it is run
// with (after a "== <reason>" line) to a file, and puts a bound address
// on the client's interface inside its namespace, as a real script
// would, so that unicast renewals reach the client.
type recorder struct{ script, file string }

func newRecorder(t *testing.T, name, configure string) recorder {
	dir := t.TempDir()
	r := recorder{file: filepath.Join(dir, "env")}
	// One file per run, renamed into place complete; named by the time
	// so that they sort in order.
	r.script = realclient.Script(t, name, fmt.Sprintf("REC=%q\nf=\"$REC.$(date +%%s%%N).$$\"\n{ echo \"== $1 $reason\"; env | sort; } > \"$f.tmp\"\nmv \"$f.tmp\" \"$f.ev\"\n%s\nexit 0\n", r.file, configure))
	return r
}

// events are the recorded runs: each the reason line and its variables.
func (r recorder) events() []map[string]string {
	var out []map[string]string
	for _, line := range strings.Split(r.all(), "\n") {
		if strings.HasPrefix(line, "== ") {
			out = append(out, map[string]string{"": strings.TrimSpace(line[3:])})
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && len(out) > 0 {
			out[len(out)-1][k] = v
		}
	}
	return out
}

// all is every recorded run, oldest first.
func (r recorder) all() string {
	files, _ := filepath.Glob(r.file + ".*.ev")
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.Write(data)
	}
	return b.String()
}

// waitEvent waits for a recorded run whose reason line matches re and
// returns its variables.
func (r recorder) waitEvent(t *testing.T, re string, n int, timeout time.Duration) map[string]string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		var hits []map[string]string
		for _, e := range r.events() {
			if rx.MatchString(e[""]) {
				hits = append(hits, e)
			}
		}
		if len(hits) >= n {
			return hits[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d× %q from the client script within %v; it recorded:\n%s", n, re, timeout, r.all())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// (replace, not flush and add: removing the last address flushes the
// interface's neighbour entries, and the renewal test sets one.)
const udhcpcScript = `case "$1" in bound|renew) ip addr replace "$ip/$mask" dev "$interface";; esac`

// udhcpc runs busybox's DHCP client in the client namespace; extra are
// added flags (-q to quit once bound).
func (l *lab) udhcpc(mac string, extra ...string) (*realclient.Proc, recorder) {
	t := l.t
	bin := realclient.Need(t, "udhcpc")
	rec := newRecorder(t, "udhcpc.script", udhcpcScript)
	l.setMAC(mac)
	args := append([]string{bin, "-f", "-n", "-i", l.link.ClientIf, "-s", rec.script, "-t", "5", "-T", "1", "-A", "1"}, extra...)
	return realclient.Start(t, l.link.Client, realclient.Options{}, args...), rec
}

// dhclient runs ISC dhclient with its lease, pid and config files in
// dir (a fresh one when ""), so that a second run finds the first's
// lease (INIT-REBOOT).
func (l *lab) dhclient(mac, dir, conf string) (*realclient.Proc, recorder, string) {
	t := l.t
	bin := realclient.Need(t, "dhclient")
	if dir == "" {
		dir = t.TempDir()
	}
	cf := filepath.Join(dir, "dhclient.conf")
	if err := os.WriteFile(cf, []byte("request subnet-mask, routers, domain-name, domain-name-servers, interface-mtu, ntp-servers;\n"+conf), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t, "dhclient-script", `case "$reason" in BOUND|RENEW|REBOOT) ip addr flush dev "$interface"; ip addr add "$new_ip_address/24" dev "$interface";; esac`)
	l.setMAC(mac)
	p := realclient.Start(t, l.link.Client, realclient.Options{}, bin, "-d", "-1", "-v",
		"-cf", cf, "-sf", rec.script, "-lf", filepath.Join(dir, "leases"), "-pf", filepath.Join(dir, "pid"), l.link.ClientIf)
	return p, rec, dir
}

// dhcpcd runs dhcpcd in the foreground with a config of its own, the
// recorder as its only hook, and tmpfs over the directories it writes.
func (l *lab) dhcpcd(mac string, extra ...string) (*realclient.Proc, recorder) {
	t := l.t
	bin := realclient.Need(t, "dhcpcd")
	conf := filepath.Join(t.TempDir(), "dhcpcd.conf")
	if err := os.WriteFile(conf, []byte("noarp\nnoipv4ll\nipv4only\noption domain_name, interface_mtu, ntp_servers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t, "dhcpcd.hook", "")
	l.setMAC(mac)
	args := append([]string{bin, "-f", conf, "-c", rec.script, "-4", "-B", "-1", "-d", "-t", "8"}, extra...)
	args = append(args, l.link.ClientIf)
	return realclient.Start(t, l.link.Client, realclient.Options{Tmpfs: []string{"/run", "/var/lib/dhcpcd"}}, args...), rec
}

// waitAddr waits until the client script has put addr on the client's
// interface (it records its run first, then configures).
func (l *lab) waitAddr(addr string) {
	t := l.t
	link, err := l.link.Client.Netlink().LinkByName(l.link.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		as, _ := l.link.Client.Netlink().AddrList(link, unix.AF_INET)
		for _, a := range as {
			if a.IP.String() == addr {
				return
			}
		}
	}
	t.Fatalf("the client script did not configure %s", addr)
}

// setMAC gives the client's end the hardware address mac (clients
// send it as chaddr) and clears its addresses.
func (l *lab) setMAC(mac string) {
	t := l.t
	nl := l.link.Client.Netlink()
	link, err := nl.LinkByName(l.link.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	if link.Attrs().HardwareAddr.String() == mac {
		return
	}
	if err := nl.LinkSetDown(link); err != nil {
		t.Fatal(err)
	}
	if err := nl.LinkSetHardwareAddr(link, hw(mac)); err != nil {
		t.Fatal(err)
	}
	if err := nl.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
}

// udhcpc and dhclient get a lease of the range with the options a LAN
// needs: router, DNS, domain (15), MTU (26, lan.mtu set), NTP (42).
func TestRealClientsOptions(t *testing.T) {
	l := newLab(t, nil, nil)
	p, rec := l.udhcpc(macA, "-q")
	if err := p.Wait(20 * time.Second); err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, p.Output())
	}
	e := rec.waitEvent(t, "^bound", 1, time.Second)
	want := map[string]string{"router": labNet + ".1", "dns": labNet + ".1", "domain": "home.example",
		"mtu": "1400", "ntpsrv": labNet + ".1", "subnet": "255.255.255.0", "serverid": labNet + ".1", "lease": "3600"}
	for k, v := range want {
		if strings.TrimSpace(e[k]) != v {
			t.Errorf("udhcpc: %s=%q, want %q", k, e[k], v)
		}
	}
	if !inRange(netip.MustParseAddr(e["ip"]), labNet+".100", labNet+".150") {
		t.Errorf("udhcpc got %q, want an address of the range", e["ip"])
	}

	p2, rec2, _ := l.dhclient(macB, "", "")
	e2 := rec2.waitEvent(t, "BOUND", 1, 20*time.Second)
	want2 := map[string]string{"new_routers": labNet + ".1", "new_domain_name_servers": labNet + ".1",
		"new_domain_name": "home.example", "new_interface_mtu": "1400", "new_ntp_servers": labNet + ".1",
		"new_subnet_mask": "255.255.255.0", "new_dhcp_lease_time": "3600"}
	for k, v := range want2 {
		if e2[k] != v {
			t.Errorf("dhclient: %s=%q, want %q", k, e2[k], v)
		}
	}
	if e2["new_ip_address"] == e["ip"] || !inRange(netip.MustParseAddr(e2["new_ip_address"]), labNet+".100", labNet+".150") {
		t.Errorf("dhclient got %q (udhcpc has %s)", e2["new_ip_address"], e["ip"])
	}
	_ = p2
}

// A unicast renewal is answered to the client's hardware address even
// when the server's kernel still points the address at another MAC (its
// previous owner): udhcpc renews (SIGUSR1) and gets its ACK. The client
// knows the server's MAC already (as after earlier traffic), so no ARP
// of its own corrects the stale entry.
func TestRealRenewPastStaleNeighbour(t *testing.T) {
	l := newLab(t, nil, nil)
	p, rec := l.udhcpc(macA)
	e := rec.waitEvent(t, "^bound", 1, 20*time.Second)
	addr := e["ip"]
	l.waitAddr(addr)
	srvLink, err := l.link.Server.Netlink().LinkByName(l.link.ServerIf)
	if err != nil {
		t.Fatal(err)
	}
	cliLink, err := l.link.Client.Netlink().LinkByName(l.link.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	// udhcpc sends its renewal from a socket bound to its address and
	// port 68 and closes it after sending; an ACK quicker than that (a
	// veth answers within a millisecond) lands on it and is lost. So a
	// few tries: without the fix every one goes unanswered.
	renewed := false
	for try := 0; try < 5 && !renewed; try++ {
		if err := l.link.Client.Netlink().NeighSet(&netlink.Neigh{LinkIndex: cliLink.Attrs().Index, Family: unix.AF_INET,
			State: netlink.NUD_PERMANENT, IP: net.ParseIP(labNet + ".1"), HardwareAddr: srvLink.Attrs().HardwareAddr}); err != nil {
			t.Fatal(err)
		}
		// The previous owner of the address, gone from the LAN.
		if err := l.link.Server.Netlink().NeighSet(&netlink.Neigh{LinkIndex: srvLink.Attrs().Index, Family: unix.AF_INET,
			State: netlink.NUD_REACHABLE, IP: net.ParseIP(addr), HardwareAddr: hw("02:00:00:00:00:99")}); err != nil {
			t.Fatal(err)
		}
		before := len(p.Output())
		if err := p.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		renew := regexp.MustCompile(`lease of ` + regexp.QuoteMeta(addr) + ` obtained`)
		if !p.WaitFor(renew, try+2, 5*time.Second) {
			t.Fatalf("udhcpc's renewal got no ACK, not even by broadcast:\n%s", p.Output())
		}
		// Unanswered, udhcpc falls back to a broadcast after a second
		// (-T 1), which gets through: that must not be how it renewed.
		out := p.Output()[before:]
		renewed = strings.Contains(out, "sending renew to server") && !strings.Contains(out, "broadcasting renew")
	}
	if !renewed {
		t.Fatalf("udhcpc's unicast renewals went unanswered:\n%s", p.Output())
	}
	ns, err := l.link.Server.Netlink().NeighList(srvLink.Attrs().Index, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.IP.String() == addr && n.HardwareAddr.String() != macA {
			t.Errorf("the server's neighbour entry for %s is %s, want %s", addr, n.HardwareAddr, macA)
		}
	}
}

// dhcpcd in INFORM mode (a host with a static address asking for the
// options) accepts the server's ACK: ciaddr echoed, no lease.
func TestRealDhcpcdInform(t *testing.T) {
	l := newLab(t, nil, nil)
	l.setMAC(macB)
	// The host's static address, configured as its owner would.
	if err := l.link.Client.AddAddr(l.link.ClientIf, labNet+".60/24"); err != nil {
		t.Fatal(err)
	}
	p, rec := l.dhcpcd(macB, "-s", labNet+".60/24")
	e := rec.waitEvent(t, "INFORM", 1, 20*time.Second)
	if e["new_ip_address"] != labNet+".60" || e["new_domain_name"] != "home.example" || e["new_routers"] != labNet+".1" {
		t.Errorf("dhcpcd's INFORM: address %q, domain %q, routers %q", e["new_ip_address"], e["new_domain_name"], e["new_routers"])
	}
	if strings.Contains(p.Output(), "reject") {
		t.Errorf("dhcpcd rejected an answer:\n%s", p.Output())
	}
	if ls := l.srv.Leases(); len(ls) != 0 {
		t.Errorf("an INFORM made leases %v", ls)
	}
}

// dhcpcd gets a lease with the options.
func TestRealDhcpcdLease(t *testing.T) {
	l := newLab(t, nil, nil)
	_, rec := l.dhcpcd(macB)
	e := rec.waitEvent(t, "BOUND", 1, 20*time.Second)
	want := map[string]string{"new_routers": labNet + ".1", "new_domain_name_servers": labNet + ".1",
		"new_domain_name": "home.example", "new_interface_mtu": "1400", "new_ntp_servers": labNet + ".1"}
	for k, v := range want {
		if e[k] != v {
			t.Errorf("dhcpcd: %s=%q, want %q", k, e[k], v)
		}
	}
	if !inRange(netip.MustParseAddr(e["new_ip_address"]), labNet+".100", labNet+".150") {
		t.Errorf("dhcpcd got %q", e["new_ip_address"])
	}
}

// evilName is the host name of issue 20's probe: a terminal title, a
// screen clear and a forged log line.
const evilName = "evil\x1b]0;PWNED\a\x1b[2J...\r\nocfw: ssh: root logged in from 6.6.6.6"

// A client whose host name carries escape sequences and a forged log
// line gets its lease, but the name reaches neither the lease list (the
// status page, `ocf net`, DNS) nor the log except quoted; a plain name
// in capitals is kept lower-cased.
func TestRealHostileHostname(t *testing.T) {
	l := newLab(t, nil, nil)
	p, _ := l.udhcpc(macA, "-q", "-x", "hostname:"+evilName)
	if err := p.Wait(20 * time.Second); err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, p.Output())
	}
	_, rec, _ := l.dhclient(macB, "", `send host-name "evil\033]0;PWNED\007\033[2J\r\nocfw: ssh: root logged in from 6.6.6.6";`+"\n")
	rec.waitEvent(t, "BOUND", 1, 20*time.Second)
	p3, _ := l.udhcpc("52:54:00:00:00:0c", "-q", "-x", "hostname:"+strings.Repeat("x", 255))
	if err := p3.Wait(20 * time.Second); err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, p3.Output())
	}
	p4, _ := l.udhcpc("52:54:00:00:00:0d", "-q", "-x", "hostname:Laptop-2")
	if err := p4.Wait(20 * time.Second); err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, p4.Output())
	}

	ls := l.srv.Leases()
	if len(ls) != 4 {
		t.Fatalf("leases %v, want 4", ls)
	}
	for _, le := range ls {
		want := ""
		if le.MAC == "52:54:00:00:00:0d" {
			want = "laptop-2"
		}
		if le.Hostname != want {
			t.Errorf("lease %s keeps host name %q, want %q", le.MAC, le.Hostname, want)
		}
	}
	log := l.log()
	if strings.ContainsAny(log, "\x1b\a\r") || strings.Contains(log, "\nocfw: ssh") {
		t.Errorf("the log carries the client's control characters or forged line:\n%q", log)
	}
	for _, mac := range []string{macA, macB} {
		// (udhcpc's -x cuts the name at its first space.)
		re := regexp.MustCompile(`lease \S+ to ` + mac + ` \(-\) for 1h; host name "evil\\x1b\]0;PWNED\\a\\x1b\[2J(\.\.\.)?\\r\\nocfw:[^"]*" dropped`)
		if !re.MatchString(log) {
			t.Errorf("the log does not say, quoted, that %s's name was dropped:\n%s", mac, log)
		}
	}
	if !strings.Contains(log, `host name "xxxxxxxx`) || strings.Contains(log, strings.Repeat("x", 65)) {
		t.Errorf("the 255-byte name is not logged cut short:\n%s", log)
	}
}

// scripted is a DHCP client of this test's own, for what no real
// client does: hundreds of MACs, malformed packets. Its socket is in the
// client namespace, bound to the interface.
type scripted struct {
	t    *testing.T
	conn net.PacketConn
}

func (l *lab) scripted() *scripted {
	t := l.t
	var conn net.PacketConn
	err := l.link.Client.Do(func() (err error) {
		conn, err = server4.NewIPv4UDPConn(l.link.ClientIf, &net.UDPAddr{Port: dhcpv4.ClientPort})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &scripted{t: t, conn: conn}
}

var toServer = &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ServerPort}

func (c *scripted) send(b []byte) {
	if _, err := c.conn.WriteTo(b, toServer); err != nil {
		c.t.Fatal(err)
	}
}

// exchange sends m and returns the reply of type want with m's
// transaction ID, or nil when none comes within timeout.
func (c *scripted) exchange(m *dhcpv4.DHCPv4, want dhcpv4.MessageType, timeout time.Duration) *dhcpv4.DHCPv4 {
	c.send(m.ToBytes())
	buf := make([]byte, 1500)
	deadline := time.Now().Add(timeout)
	for {
		c.conn.SetReadDeadline(deadline)
		n, _, err := c.conn.ReadFrom(buf)
		if err != nil {
			return nil
		}
		r, err := dhcpv4.FromBytes(buf[:n])
		if err == nil && r.TransactionID == m.TransactionID && r.MessageType() == want {
			return r
		}
	}
}

// lease runs DISCOVER-OFFER-REQUEST-ACK for mac: the address, or an
// invalid one when the server offered none.
func (c *scripted) lease(mac string, hostname string) netip.Addr {
	d, err := dhcpv4.NewDiscovery(hw(mac), dhcpv4.WithBroadcast(true))
	if err != nil {
		c.t.Fatal(err)
	}
	if hostname != "" {
		d.UpdateOption(dhcpv4.OptHostName(hostname))
	}
	// One DISCOVER: a flood's clients do not retry; the veth answers in
	// well under a millisecond.
	offer := c.exchange(d, dhcpv4.MessageTypeOffer, 100*time.Millisecond)
	if offer == nil {
		return netip.Addr{}
	}
	req, err := dhcpv4.NewRequestFromOffer(offer, dhcpv4.WithBroadcast(true))
	if err != nil {
		c.t.Fatal(err)
	}
	if hostname != "" {
		req.UpdateOption(dhcpv4.OptHostName(hostname))
	}
	ack := c.exchange(req, dhcpv4.MessageTypeAck, time.Second)
	if ack == nil {
		c.t.Fatalf("%s: offered %v, no ACK", mac, offer.YourIPAddr)
	}
	a, _ := netip.AddrFromSlice(ack.YourIPAddr.To4())
	return a
}

// A flood of 250 clients (distinct MACs, 255-byte host names) exhausts
// the 51-address range without harm: each address goes to one client,
// the rest get no offer, the stored lease document stays small, and the
// server still serves a static client (dhcpcd) and a flooder's renewal.
func TestRealFloodExhaustsPool(t *testing.T) {
	if testing.Short() {
		t.Skip("about 25 s: 199 clients wait for an offer that does not come")
	}
	l := newLab(t, nil, nil)
	c := l.scripted()
	got := map[netip.Addr]string{}
	none := 0
	long := strings.Repeat("n", 255)
	for i := 0; i < 250; i++ {
		mac := fmt.Sprintf("02:f1:00:00:%02x:%02x", i>>8, i&0xff)
		a := c.lease(mac, long)
		if !a.IsValid() {
			none++
			continue
		}
		if other, dup := got[a]; dup {
			t.Errorf("%v given to %s and %s", a, other, mac)
		}
		got[a] = mac
	}
	if len(got) != 51 || none != 199 {
		t.Errorf("%d clients got addresses, %d none; want 51 and 199", len(got), none)
	}
	b, _ := json.Marshal(l.store.leases)
	if len(b) > LeaseDocBudget {
		t.Errorf("the stored leases take %d bytes, over the %d-byte budget", len(b), LeaseDocBudget)
	}
	// Still serving: the static client, and a flooder coming back.
	_, rec := l.dhcpcd(macS)
	if e := rec.waitEvent(t, "BOUND", 1, 20*time.Second); e["new_ip_address"] != labNet+".50" {
		t.Errorf("the static client got %q, want %s.50", e["new_ip_address"], labNet)
	}
	if a := c.lease("02:f1:00:00:00:07", ""); got[a] != "02:f1:00:00:00:07" {
		t.Errorf("a flooder coming back got %v, it had %v", a, got)
	}
	// A new client finds the pool full: udhcpc gives up (-n), no crash.
	p, _ := l.udhcpc(macA, "-q")
	if err := p.Wait(20 * time.Second); err == nil {
		t.Errorf("udhcpc got a lease from a full pool:\n%s", p.Output())
	}
}

// A few hundred malformed packets (random bytes, truncated and
// corrupted DHCP messages) leave the server running and answering.
func TestRealMalformedPackets(t *testing.T) {
	l := newLab(t, nil, nil)
	c := l.scripted()
	rng := rand.New(rand.NewPCG(20, 20))
	d, _ := dhcpv4.NewDiscovery(hw(macB), dhcpv4.WithOption(dhcpv4.OptHostName("bad")))
	good := d.ToBytes()
	for i := 0; i < 400; i++ {
		var b []byte
		switch i % 4 {
		case 0: // random bytes of random length
			b = make([]byte, rng.IntN(600))
			for j := range b {
				b[j] = byte(rng.UintN(256))
			}
		case 1: // a DISCOVER cut short
			b = append([]byte(nil), good[:rng.IntN(len(good))]...)
		case 2: // a DISCOVER with bytes flipped (options included)
			b = append([]byte(nil), good...)
			for k := 0; k < 8; k++ {
				b[rng.IntN(len(b))] ^= byte(1 + rng.UintN(255))
			}
		case 3: // an option claiming more bytes than there are
			b = append(append([]byte(nil), good[:240]...), 12, 255, 'x', 'y')
		}
		c.send(b)
	}
	// The server drains what its socket buffer kept of the burst.
	time.Sleep(500 * time.Millisecond)
	if a := c.lease(macB, ""); !a.IsValid() {
		t.Fatalf("no lease after the malformed packets")
	}
	p, rec := l.udhcpc(macA, "-q")
	if err := p.Wait(20 * time.Second); err != nil {
		t.Fatalf("udhcpc after the malformed packets: %v\n%s", err, p.Output())
	}
	rec.waitEvent(t, "^bound", 1, time.Second)
}

// The life of a lease with the three real clients: dhclient comes back
// after a reboot to its address (INIT-REBOOT, from its lease file),
// udhcpc renews by unicast and releases, dhcpcd on a static
// reservation gets its fixed address.
func TestRealLeaseLifecycle(t *testing.T) {
	l := newLab(t, nil, nil)
	dh, rec, dir := l.dhclient(macA, "", "")
	first := rec.waitEvent(t, "BOUND", 1, 20*time.Second)["new_ip_address"]
	// dhclient writes its lease file after the script has run.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(dir, "leases")); strings.Contains(string(b), "fixed-address "+first+";") {
			break
		}
	}
	dh.Signal(syscall.SIGKILL) // a power cut: no release
	dh.Wait(5 * time.Second)
	dh2, rec2, _ := l.dhclient(macA, dir, "")
	if e := rec2.waitEvent(t, "REBOOT", 1, 20*time.Second); e["new_ip_address"] != first {
		t.Errorf("dhclient came back to %q, had %q", e["new_ip_address"], first)
	}
	if strings.Contains(dh2.Output(), "DHCPDISCOVER") {
		t.Errorf("dhclient did not reboot into its lease:\n%s", dh2.Output())
	}
	dh2.Signal(syscall.SIGKILL)
	dh2.Wait(5 * time.Second)

	p, urec := l.udhcpc(macB)
	addr := urec.waitEvent(t, "^bound", 1, 20*time.Second)["ip"]
	l.waitAddr(addr)
	p.Signal(syscall.SIGUSR1)
	if !p.WaitFor(regexp.MustCompile(`lease of `+regexp.QuoteMeta(addr)+` obtained`), 2, 5*time.Second) {
		t.Errorf("udhcpc's renewal got no ACK:\n%s", p.Output())
	}
	p.Signal(syscall.SIGUSR2)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(l.log(), "dhcp: "+macB+" released "+addr) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(l.log(), "dhcp: "+macB+" released "+addr) {
		t.Errorf("the server did not log udhcpc's release:\n%s", l.log())
	}
	for _, le := range l.srv.Leases() {
		if le.MAC == macB {
			t.Errorf("released lease still active: %+v", le)
		}
	}
	p.Signal(syscall.SIGKILL)
	p.Wait(5 * time.Second)

	_, drec := l.dhcpcd(macS)
	if e := drec.waitEvent(t, "BOUND", 1, 20*time.Second); e["new_ip_address"] != labNet+".50" {
		t.Errorf("the static client got %q, want %s.50", e["new_ip_address"], labNet)
	}
	var st []string
	for _, le := range l.srv.Leases() {
		st = append(st, fmt.Sprintf("%s %s static=%v", le.IP, le.MAC, le.Static))
	}
	if want := []string{labNet + ".50 " + macS + " static=true", first + " " + macA + " static=false"}; fmt.Sprint(st) != fmt.Sprint(want) {
		t.Errorf("leases %v, want %v", st, want)
	}
}
