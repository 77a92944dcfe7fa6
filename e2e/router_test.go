package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/internal/lab/isp6"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
	"github.com/ocfw/ocfw/plan"
)

// MACs of the router VM's ports; the world's ends are derived by worldvm.
const (
	routerWANMAC = "52:54:00:0a:00:01"
	routerLANMAC = "52:54:00:0a:00:02"
	routerLAN2   = "52:54:00:0a:00:03"
)

var (
	hostRe = regexp.MustCompile(`hostkey (SHA256:[A-Za-z0-9+/]{43})`)
)

// routerSite is the site config of the end-to-end test: WAN by DHCP,
// LAN 192.168.1.1/24 with a DHCP server whose range is one address (so
// the one LAN client's address, and the port forward's target, are
// known), SSH by key and without the RSA host key (TestRunKeepsCard
// turns it on: making it is 13 s of a guest's CPU at a first boot),
// one port forward.
func routerSite(authorizedKey string) string {
	return `kind: site
board: alix2d13
hostname: e2e-gw
wan:
  port: wan
  address: dhcp
lan:
  ports: [lan1, lan2]
  address: 192.168.1.1/24
  dhcp:
    range: [192.168.1.100, 192.168.1.100]
    lease: 1h
firewall:
  port_forwards:
    - {proto: tcp, port: 8080, to: 192.168.1.100, to_port: 80}
ssh:
  authorized_keys:
    - ` + authorizedKey + `
  rsa_host_key: false
ntp:
  servers: [198.51.100.1]
`
}

// testKey is the test binary's SSH key pair (e2eKey): the
// authorized_keys line and the private key in OpenSSH PEM form.
func testKey(t *testing.T) (string, []byte) {
	e2eKey.once.Do(func() {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			e2eKey.err = err
			return
		}
		sp, err := ssh.NewPublicKey(pub)
		if err != nil {
			e2eKey.err = err
			return
		}
		blk, err := ssh.MarshalPrivateKey(priv, "e2e")
		if err != nil {
			e2eKey.err = err
			return
		}
		e2eKey.pub, e2eKey.priv = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))+" e2e@test", pem.EncodeToMemory(blk)
	})
	if e2eKey.err != nil {
		t.Fatal(e2eKey.err)
	}
	return e2eKey.pub, e2eKey.priv
}

// e2eKey is the one key pair of this test binary: the site configs that
// name it are the same text in every test, so tests that build the same
// site with the same flags share one build (buildImage).
var e2eKey struct {
	once sync.Once
	pub  string
	priv []byte
	err  error
}

// routerArgs are the router image's build flags, the site config to
// follow: the router test and the upgrade tests' old system build the
// same image (buildImage builds it once). No ESP run (--esp-budget 0s):
// none of them looks at it, and they boot it about 35 times, 8 s each.
var routerArgs = []string{"--board", "alix2d13", "--cipher", "aes-128-cbc", "--speed-budget", "1s", "--esp-budget", "0s", "--site"}

// TestRouterEndToEnd builds the ALIX firmware with a site config and
// boots it between two network namespaces of a world VM: the internet on
// its WAN port (a DHCP server, a resolver, an echo server) and a client
// on its LAN port.
//
// It runs in parallel with the one-guest tests: the world idles between
// commands, so the router is its one busy guest.
func TestRouterEndToEnd(t *testing.T) {
	needEndToEnd(t)
	parallel(t, 1)
	ctx := context.Background()
	dir := t.TempDir()
	pub, priv := testKey(t)
	site := filepath.Join(dir, "site.yaml")
	must(t, os.WriteFile(site, []byte(routerSite(pub)), 0o644))
	img := filepath.Join(dir, "gw.img")
	buildImage(t, img, append(append([]string{}, routerArgs...), site)...)
	built, err := os.ReadFile(img)
	must(t, err)

	// The ISP's IPv6 side: Debian's dhcpd -6 and radvd in the world.
	ispTree, err := isp6.Fetch(ctx, "", t.Logf)
	must(t, err)
	sock := t.TempDir()
	w := worldvm.StartTest(t, worldvm.Config{Name: "world", NICs: []qemu.NIC{
		{Listen: true, Socket: filepath.Join(sock, "wan.sock"), MAC: "52:54:00:0b:00:01"},
		{Listen: true, Socket: filepath.Join(sock, "lan.sock"), MAC: "52:54:00:0b:00:02"}},
		Files: map[string][]byte{"/key": priv}, Trees: []string{ispTree.Dir}})
	do := func(cmd string) string { t.Helper(); return w.MustDo(t, cmd) }
	fails := func(cmd string) error { t.Helper(); return w.MustFail(t, cmd) }
	if _, err := w.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	do("ns wan eth0")
	do("ns lan eth1")
	do("addr wan eth0 198.51.100.1/24")
	do("up wan eth0")
	do("dhcp-server wan eth0 198.51.100.10 198.51.100.20 198.51.100.1 198.51.100.1 1h")
	do("dns-server wan example.test=198.51.100.7")
	do("echo-server wan 7")
	do("ntp-server wan")
	isp.Start(do)
	// The ISP routes the delegated prefixes to the router's WAN (dhcpd
	// installs no routes): via its link-local address, EUI-64 from the MAC.
	do("route wan " + isp.Pool.String() + " " + eui64LinkLocal(t, routerWANMAC) + "%eth0")

	boot := func(name, image string) *qemu.VM {
		t.Helper()
		return vmtest.Start(t, image, vmtest.Options{Name: name,
			NICs: []qemu.NIC{w.Peer(0, routerWANMAC), w.Peer(1, routerLANMAC), {MAC: routerLAN2, Unplugged: true}}})
	}
	vm := boot("router", img)
	start := time.Now()

	// The router's WAN gets its address from the world's DHCP server (read
	// from the world's side: the router's console interleaves kernel
	// messages with its own lines).
	var wanAddr string
	leaseRe := regexp.MustCompile(regexp.QuoteMeta(routerWANMAC) + ` (198\.51\.100\.\d+) acked`)
	for deadline := time.Now().Add(3 * time.Minute); wanAddr == ""; time.Sleep(time.Second) {
		if m := leaseRe.FindStringSubmatch(do("leases wan")); m != nil {
			wanAddr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("the router's WAN got no address from the world's DHCP server:\n%s", vm.Tail(30))
		}
	}
	// The LAN client gets its lease from the router.
	do("up lan eth1")
	lease := do("dhcp-client lan eth1")
	if !strings.Contains(lease, "addr 192.168.1.100/24 router 192.168.1.1 dns 192.168.1.1") {
		t.Fatalf("LAN lease: %q", lease)
	}
	// NAT: the server on the WAN sees the router's WAN address.
	echo := do("tcp lan 198.51.100.1:7 hello")
	forwarded := time.Since(start)
	if !strings.Contains(echo, "from "+wanAddr+":") || !strings.Contains(echo, "hello") {
		t.Errorf("through the router: %q; want the echo server to see %s", echo, wanAddr)
	}
	// The firewall: nothing from the WAN reaches the LAN or the router's
	// SSH; the port forward does.
	if err := fails("timeout=5s tcp wan 192.168.1.100:7 x"); !strings.Contains(worldvm.ErrorKind(err), "no-route") && worldvm.ErrorKind(err) != "timeout" {
		t.Errorf("WAN to a LAN address: %v", err)
	}
	if err := fails("timeout=5s tcp wan " + wanAddr + ":22 x"); worldvm.ErrorKind(err) != "timeout" && worldvm.ErrorKind(err) != "refused" {
		t.Errorf("WAN to the router's SSH: %v", err)
	}
	do("echo-server lan 80")
	if fw := do("tcp wan " + wanAddr + ":8080 forwarded"); !strings.Contains(fw, "from 198.51.100.1:") || !strings.Contains(fw, "forwarded") {
		t.Errorf("port forward: %q", fw)
	}
	// SSH from the LAN with the key; a password is refused.
	out := do("ssh lan 192.168.1.1:22 root /key cat /proc/sys/kernel/hostname")
	if !strings.HasPrefix(out, "exit 0") || !strings.Contains(out, "e2e-gw") {
		t.Errorf("ssh with the key: %q", out)
	}
	hm := hostRe.FindStringSubmatch(out) // the host key the client saw
	if hm == nil {
		t.Fatalf("no host key in the ssh reply %q", out)
	}
	// Strict reverse-path filtering, set by the router before it
	// forwards (firewall.ReversePathSysctls).
	rp := do("ssh lan 192.168.1.1:22 root /key cat /proc/sys/net/ipv4/conf/all/rp_filter")
	if _, body, _ := strings.Cut(rp, "\n"); !strings.HasPrefix(rp, "exit 0") || strings.TrimSpace(body) != "1" {
		t.Errorf("rp_filter: %q, want 1 (strict)", rp)
	}
	if err := fails("ssh lan 192.168.1.1:22 root password=hunter2 hostname"); worldvm.ErrorKind(err) != "auth" {
		t.Errorf("password login: %v, want an auth failure", err)
	}
	// ocf net, over SSH: the router's own view, memory included.
	st := do("ssh lan 192.168.1.1:22 root /key ocf net")
	t.Logf("ocf net on the router:\n%s", st)
	for _, want := range []string{"WAN eth0: " + wanAddr + "/24 via 198.51.100.1", "lease 192.168.1.100 52:54:00:0b:00:02", "SSH host key " + hm[1], "memory: firmware process"} {
		if !strings.Contains(st, want) {
			t.Errorf("ocf net lacks %q", want)
		}
	}
	checkIPv6(t, do, fails, st)
	// The DNS forwarder answers from the WAN's resolver.
	if a := do("dns lan 192.168.1.1 example.test"); a != "198.51.100.7" {
		t.Errorf("DNS through the forwarder: %q", a)
	}
	// The crypto report is still written.
	if err := vm.WaitFor(ctx, plan.MarkDone); err != nil {
		t.Fatal(err)
	}
	report := time.Since(start)
	if !strings.Contains(vm.Console(), plan.MarkReportWritten) {
		t.Errorf("no crypto report written:\n%s", vm.Tail(30))
	}
	t.Logf("power-on to the first forwarded packet %v, to the report %v", forwarded.Round(100*time.Millisecond), report.Round(100*time.Millisecond))

	// The leases survive a reboot: the store on the card holds them.
	vmtest.PowerOff(t, vm)
	if c := cardStore(t, img); c.State.Values["dhcp_leases"] == nil {
		t.Fatalf("no leases kept on the card: %+v", c.State)
	}
	// The second boot also has its second LAN port on this host, for
	// the admin's OpenSSH session; it ends with the admin's reboot.
	sshPort := freePort(t)
	vm = vmtest.Start(t, img, vmtest.Options{Name: "router after reboot",
		NICs: []qemu.NIC{w.Peer(0, routerWANMAC), w.Peer(1, routerLANMAC), adminNIC(sshPort)}})
	if err := vm.WaitFor(ctx, plan.MarkDone); err != nil {
		t.Fatal(err)
	}
	// The site says rsa_host_key: false: OpenSSH's ssh-keyscan gets the
	// ed25519 key (once SSH answers) and no RSA one (a key the first boot
	// made would be served from the store at once; the card's log below
	// says none was made). Before the admin's session, which ends with a
	// reboot.
	keyscan := func(typ string) string {
		out, _ := exec.Command(realclient.Need(t, "ssh-keyscan"), "-t", typ, "-p", strconv.Itoa(sshPort), "127.0.0.1").Output()
		return string(out)
	}
	ed := keyscan("ed25519")
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(ed, "ssh-ed25519 ") && time.Now().Before(deadline); ed = keyscan("ed25519") {
		time.Sleep(2 * time.Second)
	}
	if rsa := keyscan("rsa"); !strings.Contains(ed, "ssh-ed25519 ") || strings.Contains(rsa, "ssh-rsa ") {
		t.Errorf("ssh-keyscan with rsa_host_key: false: ed25519 %q, rsa %q; want the ed25519 key only", ed, rsa)
	}
	adminOverSSH(t, vm, sshPort, priv)
	// The router's own log, kept on the card, says what the second boot
	// found: the lease kept, the same host key.
	log := cardLog(t, img)
	if !strings.Contains(log, "ssh: made a new host key") || strings.Contains(log, "ssh: made an RSA host key") {
		t.Errorf("the log on the card: want the ed25519 host key made and no RSA one (rsa_host_key: false)")
	}
	if !strings.Contains(log, "lease 192.168.1.100 to 52:54:00:0b:00:02") || !strings.Contains(log, "1 lease(s) kept from before") {
		t.Errorf("the log on the card does not show the lease given and kept across the reboot:\n%s", log)
	}
	if !strings.Contains(log, "ocfw: terminated: stopping the router") {
		t.Errorf("the admin's reboot did not stop the router cleanly (no line of it on the card):\n%s", log)
	}
	if n := strings.Count(log, "ssh: host key "+hm[1]); n != 2 {
		t.Errorf("the host key %s is in the log of %d boots, want both:\n%s", hm[1], n, log)
	}

	// Another box from the same image makes its own host key.
	other := filepath.Join(dir, "other.img")
	must(t, os.WriteFile(other, built, 0o644))
	vm = boot("second router", other)
	if err := vm.WaitFor(ctx, plan.MarkDone); err != nil {
		t.Fatal(err)
	}
	vmtest.PowerOff(t, vm)
	olog := cardLog(t, other)
	if !strings.Contains(olog, "ssh: made a new host key SHA256:") || strings.Contains(olog, hm[1]) {
		t.Errorf("a second box from the same image must make its own host key, not %s:\n%s", hm[1], olog)
	}

	// The same inputs give the same image bytes.
	again := filepath.Join(dir, "again.img")
	buildImageUncached(t, again, append(append([]string{}, routerArgs...), site)...)
	b2, err := os.ReadFile(again)
	must(t, err)
	if string(b2) != string(built) {
		t.Error("two builds from the same inputs differ")
	}
}

// lan6Re finds the LAN's v6 addresses in ocf net's IPv6 line.
var lan6Re = regexp.MustCompile(`(?m)^IPv6 \S+: LAN ([^,\n]*)`)

// isp is the world's IPv6 ISP on the router's WAN link: radvd
// advertising the link's /64 and a default route, dhcpd -6 delegating
// /60s. It names no v6 resolver: the world's DNS server answers v4 only.
var isp = isp6.ISP{NS: "wan", Interface: "eth0",
	Link: netip.MustParsePrefix("2001:db8:0:1::/64"), Addr: netip.MustParseAddr("2001:db8:0:1::1"),
	Pool: netip.MustParsePrefix("2001:db8:1::/48"), PDLength: 60}

// eui64LinkLocal is the link-local address the kernel gives an
// interface with this MAC (isp6.LinkLocal).
func eui64LinkLocal(t *testing.T, mac string) string {
	t.Helper()
	a, err := isp6.LinkLocal(mac)
	if err != nil {
		t.Fatal(err)
	}
	return a.String()
}

// delegatedRe finds the delegated prefix in ocf net's IPv6 line.
var delegatedRe = regexp.MustCompile(`(?m)^IPv6 .*, delegated ([0-9a-f:]+/\d+)`)

// lanHost6 waits for the world's LAN host to hold an address of its own
// (DAD done) in p and returns it, or "" with the test failed.
func lanHost6(t *testing.T, do func(string) string, p netip.Prefix, what string) netip.Addr {
	t.Helper()
	var seen string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Second) {
		seen = do("show6 lan")
		for _, line := range strings.Split(seen, "\n") {
			f := strings.Fields(line)
			if len(f) != 2 || f[0] != "eth1" {
				continue // another link, a route, or tentative/deprecated
			}
			if a, err := netip.ParsePrefix(f[1]); err == nil && a.Bits() == 64 && p.Contains(a.Addr()) {
				return a.Addr()
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("the LAN host got no SLAAC address in %s (%s) from the router's advertisements; its IPv6 view:\n%s", p, what, seen)
			return netip.Addr{}
		}
	}
}

// checkIPv6 is IPv6 on the firmware image itself, in the router test's
// boot, the site config saying nothing of ipv6 (on by default, mode
// auto): the LAN's ULA /64 by router advertisements, the world's LAN
// host (a separate kernel) numbering itself by its own SLAAC from them
// and reaching the router's SSH and DNS on the ULA; then the prefix
// Debian's dhcpd -6 delegates from the world's ISP side, a /64 of it on
// the LAN, the host's global address, TCP from it to a host behind the
// ISP seen there with the LAN host's own source (no NAT66), and the v6
// firewall dropping an inbound connection to it. st is ocf net's text.
func checkIPv6(t *testing.T, do func(string) string, fails func(string) error, st string) {
	t.Helper()
	m := lan6Re.FindStringSubmatch(st)
	var router netip.Prefix
	if m != nil {
		for _, f := range strings.Fields(m[1]) {
			if p, err := netip.ParsePrefix(f); err == nil && netip.MustParsePrefix("fd00::/8").Contains(p.Addr()) {
				router = p
			}
		}
	}
	if !router.IsValid() || router.Bits() != 64 {
		t.Errorf("ocf net shows no ULA /64 on the LAN (IPv6 on by default):\n%s", st)
		return
	}
	// The host's kernel solicited when eth1 came up; the router's answers
	// and its initial advertisements come well within the minute.
	host := lanHost6(t, do, router.Masked(), "the ULA")
	if !host.IsValid() {
		return
	}
	if host == router.Addr() {
		t.Errorf("the LAN host's SLAAC address %s is the router's", host)
	}
	out := do("ssh lan [" + router.Addr().String() + "]:22 root /key cat /proc/sys/kernel/hostname")
	if !strings.HasPrefix(out, "exit 0") || !strings.Contains(out, "e2e-gw") {
		t.Errorf("ssh to the router's ULA %s from the LAN host %s: %q", router.Addr(), host, out)
	}
	// The DNS forwarder listens on the ULA too and forwards over v4 to
	// this world's resolver.
	if a := do("dns lan " + router.Addr().String() + " example.test"); a != "198.51.100.7" {
		t.Errorf("DNS to the router's ULA %s: %q, want 198.51.100.7", router.Addr(), a)
	}
	t.Logf("IPv6: the LAN host %s (SLAAC) reached the router's SSH and DNS on its ULA %s", host, router.Addr())

	// The delegation: asked for at boot whatever radvd's flags say.
	var delegated netip.Prefix
	for deadline := time.Now().Add(2 * time.Minute); !delegated.IsValid(); time.Sleep(3 * time.Second) {
		if m := delegatedRe.FindStringSubmatch(st); m != nil {
			delegated, _ = netip.ParsePrefix(m[1])
		} else if time.Now().After(deadline) {
			t.Errorf("no prefix delegated by the world's dhcpd -6 in 2 min; ocf net:\n%s", st)
			return
		} else {
			st = do("ssh lan 192.168.1.1:22 root /key ocf net")
		}
	}
	if delegated.Bits() != isp.PDLength || !isp.Pool.Contains(delegated.Addr()) {
		t.Errorf("delegated %s, want a /%d from the ISP's pool %s", delegated, isp.PDLength, isp.Pool)
	}
	// The WAN heard radvd (the world's eth0, its default route's source).
	if ra := "ISP's RA " + eui64LinkLocal(t, "52:54:00:0b:00:01") + "%eth0 M=0 O=0"; !strings.Contains(st, ra) {
		t.Errorf("ocf net lacks %q (radvd's advertisement on the WAN):\n%s", ra, st)
	}
	global := lanHost6(t, do, delegated, "the delegated prefix")
	if !global.IsValid() {
		return
	}
	if !strings.Contains(do("show6 lan"), "route6 default via fe80:") {
		t.Errorf("the LAN host has no v6 default route via the router's link-local address:\n%s", do("show6 lan"))
	}
	wanHost := "[" + isp.Addr.String() + "]:7"
	echo := do("tcp lan " + wanHost + " hello6")
	if !strings.Contains(echo, "from ["+global.String()+"]:") || !strings.Contains(echo, "hello6") {
		t.Errorf("TCP over v6 from the LAN host %s to %s: %q; want the server to see the host's own address", global, wanHost, echo)
	}
	// The v6 firewall: a connection from the WAN to the LAN host's
	// global address (its echo server on 80) is dropped.
	if err := fails("timeout=5s tcp wan [" + global.String() + "]:80 x"); worldvm.ErrorKind(err) != "timeout" {
		t.Errorf("WAN to the LAN host's global address: %v, want a timeout (dropped)", err)
	}
	t.Logf("IPv6: delegated %s; the LAN host %s reached %s through the router", delegated, global, wanHost)
}
