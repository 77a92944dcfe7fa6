package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/internal/lab/qemu"
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
// known), SSH by key, one port forward.
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

	sock := t.TempDir()
	w := worldvm.StartTest(t, worldvm.Config{Name: "world", NICs: []qemu.NIC{
		{Listen: true, Socket: filepath.Join(sock, "wan.sock"), MAC: "52:54:00:0b:00:01"},
		{Listen: true, Socket: filepath.Join(sock, "lan.sock"), MAC: "52:54:00:0b:00:02"}},
		Files: map[string][]byte{"/key": priv}})
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
	checkULA(t, do, st)
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
	adminOverSSH(t, vm, sshPort, priv)
	// The router's own log, kept on the card, says what the second boot
	// found: the lease kept, the same host key.
	log := cardLog(t, img)
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

// checkULA is IPv6 on the firmware image itself, in the router test's
// boot: this world's WAN offers no IPv6, so there is no delegation, but
// the LAN still gets the router's ULA /64 by router advertisements (the
// site config says nothing of ipv6: on by default); the world's LAN
// host, a separate kernel, numbers itself by its own SLAAC from them,
// and the router's SSH and DNS answer on the ULA. st is ocf net's text.
func checkULA(t *testing.T, do func(string) string, st string) {
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
	// The host's address: in the ULA /64, DAD done (not tentative). Its
	// kernel solicited when eth1 came up; the router's answers and its
	// initial advertisements (16 s apart) come well within the minute.
	var host netip.Addr
	var seen string
	for deadline := time.Now().Add(time.Minute); !host.IsValid(); time.Sleep(2 * time.Second) {
		seen = do("show6 lan")
		for _, line := range strings.Split(seen, "\n") {
			f := strings.Fields(line)
			if len(f) != 2 || f[0] != "eth1" {
				continue // another link, a route, or tentative/deprecated
			}
			if p, err := netip.ParsePrefix(f[1]); err == nil && p.Bits() == 64 && router.Masked().Contains(p.Addr()) {
				host = p.Addr()
			}
		}
		if !host.IsValid() && time.Now().After(deadline) {
			t.Errorf("the LAN host got no SLAAC address in %s from the router's advertisements; its IPv6 view:\n%s", router.Masked(), seen)
			return
		}
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
}
