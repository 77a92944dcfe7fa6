package worldvm

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/internal/lab/qemu"
)

const (
	macA = "52:54:00:a0:00:01"
	macB = "52:54:00:b0:00:01"
)

// TestTwoWorlds boots two worlds wired eth0 to eth0 over a unix socket:
// A plays the WAN (DHCP, DNS, TCP echo, SNTP and SSH servers), B a LAN
// client. Then B is replaced by a fresh VM on the same socket.
func TestTwoWorlds(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "ab.sock")
	authorized, private := sshKeys(t)
	link := qemu.NIC{Socket: sock, Listen: true, MAC: macA}
	cfgB := Config{Name: "b", NICs: []qemu.NIC{link.Peer(macB)},
		Files: map[string][]byte{"/etc/worldvm/id_ed25519": private}}

	a := StartTest(t, Config{Name: "a", NICs: []qemu.NIC{link},
		Files: map[string][]byte{"/etc/worldvm/authorized_keys": authorized}})
	b := StartTest(t, cfgB) // after A: its socket exists now
	for _, w := range []*World{a, b} {
		checkIsolatedArgs(t, w)
	}
	ready(t, a, b)

	for _, cmd := range []string{
		"ns wan eth0",
		"addr wan eth0 10.99.0.1/24",
		"up wan eth0",
		"dhcp-server wan eth0 10.99.0.100 10.99.0.150 10.99.0.1 10.99.0.1 10m",
		"dns-server wan example.test=10.99.0.7,10.99.0.8 router.test=10.99.0.1",
		"echo-server wan 7777",
		"ntp-server wan",
		"ssh-server wan 2222 /etc/worldvm/authorized_keys",
	} {
		do(t, a, cmd)
	}
	do(t, b, "ns lan eth0")

	t.Run("dhcp", func(t *testing.T) {
		match(t, do(t, b, "dhcp-client lan eth0"), `^addr 10\.99\.0\.100/24 router 10\.99\.0\.1 dns 10\.99\.0\.1 server 10\.99\.0\.1 lease 10m0s$`)
		match(t, do(t, a, "leases wan"), `^`+macB+` 10\.99\.0\.100 acked$`)
		match(t, do(t, b, "show lan"), `(?m)^route default via 10\.99\.0\.1 dev eth0$`)
	})
	t.Run("tcp", func(t *testing.T) {
		match(t, do(t, b, "tcp lan 10.99.0.1:7777 "+Quote("hello, world")), `^from 10\.99\.0\.100:\d+\nhello, world$`)
		match(t, do(t, a, "events wan"), `(?m)^echo 7777 from 10\.99\.0\.100:\d+ line "hello, world"$`)
		fails(t, b, "tcp lan 10.99.0.1:7778 x", "refused")
		fails(t, b, "timeout=8s tcp lan 10.99.0.9:7777 x", "unreachable") // nobody answers ARP (3 s)
	})
	t.Run("dns", func(t *testing.T) {
		match(t, do(t, b, "dns lan - example.test"), `^10\.99\.0\.7 10\.99\.0\.8$`)
		match(t, do(t, b, "dns lan 10.99.0.1 nope.test"), `^NXDOMAIN$`)
		match(t, do(t, a, "events wan"), `(?m)^dns A example\.test\. from 10\.99\.0\.100:\d+$`)
		fails(t, b, "timeout=4s dns lan 10.99.0.100 example.test", "refused") // B itself: no server
	})
	t.Run("ntp", func(t *testing.T) {
		match(t, do(t, b, "ntp lan 10.99.0.1"), `^time 20\d\d-\d\d-\d\dT[0-9:.]+Z stratum 1 offset -?[0-9.]+[mµn]?s$`)
	})
	t.Run("ssh", func(t *testing.T) {
		const key = "/etc/worldvm/id_ed25519"
		fails(t, b, "ssh lan 10.99.0.1:22 root "+key+" true", "refused")
		fails(t, b, "ssh lan 10.99.0.1:22 root password true", "refused")
		match(t, do(t, b, "ssh lan 10.99.0.1:2222 tester "+key+" echo hi there"), `^exit 0 hostkey SHA256:\S+\nhi there\n$`)
		match(t, do(t, b, "ssh lan 10.99.0.1:2222 tester "+key+" exit 3"), `^exit 3 hostkey `)
		fails(t, b, "ssh lan 10.99.0.1:2222 tester password echo x", "auth")
		fails(t, b, "ssh lan 10.99.0.1:2222 tester password=secret echo x", "auth")
	})
	t.Run("isolation", func(t *testing.T) {
		hosts := []string{"10.0.2.2"} // QEMU's user-network host, were there one
		hosts = append(hosts, hostAddrs(t)...)
		// The root namespaces have lo and nothing else; A's WAN side has
		// no default route.
		for _, w := range []*World{a, b} {
			if got := do(t, w, "show root"); got != "lo UP 127.0.0.1/8" {
				t.Errorf("%s: root namespace: %q", w.name, got)
			}
		}
		if got := do(t, a, "show wan"); strings.Contains(got, "default") {
			t.Errorf("a: wan has a default route:\n%s", got)
		}
		for _, h := range hosts {
			fails(t, a, "tcp root "+h+":22 x", "no-route")
			fails(t, b, "tcp root "+h+":22 x", "no-route")
			fails(t, a, "tcp wan "+h+":22 x", "no-route")
			// B's LAN side routes via A, which forwards nothing.
			fails(t, b, "timeout=4s tcp lan "+h+":22 x", "timeout", "unreachable")
		}
	})
	if t.Failed() {
		return
	}

	// B goes away; a new VM connects to the same socket (a router VM
	// that reboots) and gets the same lease for the same MAC.
	b.Kill()
	b2 := StartTest(t, Config{Name: "b2", NICs: cfgB.NICs, Files: cfgB.Files})
	ready(t, b2)
	do(t, b2, "ns lan eth0")
	match(t, do(t, b2, "dhcp-client lan eth0"), `^addr 10\.99\.0\.100/24 `)
	match(t, do(t, b2, "tcp lan 10.99.0.1:7777 again"), `^from 10\.99\.0\.100:\d+\nagain$`)
	do(t, b2, "poweroff")
	if err := b2.Wait(); err != nil {
		t.Errorf("b2 after poweroff: %v", err)
	}
}

// do runs cmd, which must succeed, and returns the reply.
func do(t *testing.T, w *World, cmd string) string {
	t.Helper()
	r := w.MustDo(t, cmd)
	t.Logf("%s: %s -> %q", w.name, cmd, r)
	return r
}

// fails runs cmd, which must fail with one of the kinds.
func fails(t *testing.T, w *World, cmd string, kinds ...string) {
	t.Helper()
	r, err := w.Do(context.Background(), cmd)
	t.Logf("%s: %s -> %q, %v", w.name, cmd, r, err)
	k := ErrorKind(err)
	for _, want := range kinds {
		if k == want {
			return
		}
	}
	t.Errorf("%s: %s: got %q, %v; want an error of kind %s", w.name, cmd, r, err, strings.Join(kinds, " or "))
}

func match(t *testing.T, got, re string) {
	t.Helper()
	if !regexp.MustCompile(re).MatchString(got) {
		t.Errorf("reply %q does not match %s", got, re)
	}
}

// ready waits for the worlds' agents together and logs the boot times.
func ready(t *testing.T, ws ...*World) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var d time.Duration
			d, errs[i] = w.WaitReady(ctx)
			if errs[i] == nil {
				t.Logf("%s: QEMU start to agent ready %v (kernel uptime %s s; %d VMs booting together)", w.name, d.Round(time.Millisecond), w.GuestUptime(), len(ws))
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkIsolatedArgs: the only netdevs are stream sockets over unix
// paths.
func checkIsolatedArgs(t *testing.T, w *World) {
	t.Helper()
	args := w.CommandLine()
	n := 0
	for i, a := range args {
		if a != "-netdev" && a != "-net" && a != "-nic" {
			continue
		}
		n++
		if a != "-netdev" || i+1 == len(args) || !strings.HasPrefix(args[i+1], "stream,") || !strings.Contains(args[i+1], ",addr.type=unix,") {
			t.Errorf("%s: network argument %s %s is not a unix stream socket", w.name, a, args[i+1])
		}
	}
	if n != len(w.nics) {
		t.Errorf("%s: %d network back-ends for %d NICs", w.name, n, len(w.nics))
	}
}

// hostAddrs are this host's own IPv4 addresses, loopback excepted.
func hostAddrs(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

// sshKeys makes an ed25519 key: authorized_keys line and private PEM.
func sshKeys(t *testing.T) (authorized, private []byte) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "worldvm test")
	if err != nil {
		t.Fatal(err)
	}
	return ssh.MarshalAuthorizedKey(sp), pem.EncodeToMemory(block)
}

// Start refuses a connecting card whose listener is not there: QEMU 7.2
// would start cut off, silently.
func TestStartRefusesConnectBeforeListen(t *testing.T) {
	_, err := Start(context.Background(), Config{NICs: []qemu.NIC{{Socket: filepath.Join(t.TempDir(), "none.sock")}}})
	if err == nil || !strings.Contains(err.Error(), "start the listening VM first") {
		t.Fatalf("err = %v", err)
	}
}

func TestStartChecksFiles(t *testing.T) {
	for _, p := range []string{"etc/x", "/tmp/key", "/init", "/a/../b"} {
		_, err := Start(context.Background(), Config{Files: map[string][]byte{p: nil}})
		if err == nil || !strings.Contains(err.Error(), "file") {
			t.Errorf("%s: err = %v", p, err)
		}
	}
}
