package router

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/sshd"
	"github.com/ocfw/ocfw/site"
	"golang.org/x/crypto/ssh"
)

// Each part restarts only the services it concerns; SSH only when it
// listens elsewhere or its keys go from none to some or back (new keys
// are taken live, keeping the sessions).
func TestRestartsOnlyWhatAPartConcerns(t *testing.T) {
	base := func() *site.Site {
		return &site.Site{LAN: site.LAN{Address: "192.168.1.1/24"}, SSH: site.SSH{AuthorizedKeys: []string{"ssh-ed25519 AAAA1 a"}}}
	}
	with := func(f func(s *site.Site)) *site.Site {
		s := base()
		f(s)
		return s
	}
	withSSH := with(func(s *site.Site) { s.Firewall.WANServices = []string{"ssh"} })
	for _, c := range []struct {
		name     string
		parts    []string
		to       *site.Site
		want     []string
		firewall bool
	}{
		{"hostname", []string{PartHostname}, base(), nil, false},
		{"a port forward", []string{PartFirewall}, base(), nil, true},
		{"ssh opened on the WAN", []string{PartFirewall}, withSSH, []string{"ssh"}, true},
		{"a DNS name (static lease)", []string{PartDHCP}, base(), []string{"dhcp"}, false},
		{"the domain", []string{PartDNS}, base(), []string{"dns", "ipv6"}, false},
		{"the LAN address", []string{PartLAN}, with(func(s *site.Site) { s.LAN.Address = "192.168.2.1/24" }),
			[]string{"dhcp", "dns", "ipv6", "ntp-server", "ssh"}, true},
		{"the LAN's MTU", []string{PartLAN}, with(func(s *site.Site) { s.LAN.MTU = 1400 }), []string{"dhcp", "dns", "ipv6", "ntp-server"}, true},
		{"the WAN", []string{PartWAN}, base(), []string{"dhcp-client", "ipsec"}, true},
		{"other keys", []string{PartSSH}, with(func(s *site.Site) { s.SSH.AuthorizedKeys = []string{"ssh-ed25519 AAAA2 b"} }), nil, false},
		{"the login name", []string{PartSSH}, with(func(s *site.Site) { s.SSH.User = "admin" }), nil, false},
		{"the SSH port", []string{PartSSH, PartFirewall}, with(func(s *site.Site) { s.SSH.Port = 2222 }), []string{"ssh"}, true},
		{"no RSA host key", []string{PartSSH}, with(func(s *site.Site) { off := false; s.SSH.RSAHostKey = &off }), []string{"ssh"}, false},
		{"no keys left", []string{PartSSH}, with(func(s *site.Site) { s.SSH.AuthorizedKeys = nil }), []string{"ssh"}, false},
		{"tunnels", []string{PartTunnels}, base(), []string{"ipsec"}, true},
		{"ntp", []string{PartNTP}, base(), []string{"ntp"}, false},
		{"the LAN's IPv6 subnet", []string{PartIPv6}, with(func(s *site.Site) { s.IPv6.LAN.SubnetID = 5 }), []string{"ipv6"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			has := map[string]bool{}
			for _, p := range c.parts {
				has[p] = true
			}
			r, fw := restarts(base(), c.to, has)
			var got []string
			for n, ok := range r {
				if ok {
					got = append(got, n)
				}
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, c.want) || fw != c.firewall {
				t.Errorf("restarts %v, firewall %v; want %v, %v", got, fw, c.want, c.firewall)
			}
		})
	}
}

// liveSites are two configs a push swaps between: the host name and the
// named static lease move together, so a reader that mixed the two
// would be seen.
func liveSites() (a, b *site.Site) {
	a, b = siteA(), siteA()
	a.Hostname, b.Hostname = "gw-a", "gw-b"
	a.LAN.DHCP.Static = []site.StaticLease{{MAC: "02:00:00:00:00:0a", IP: "192.168.1.10", Name: "printer-a"}}
	b.LAN.DHCP.Static = []site.StaticLease{{MAC: "02:00:00:00:00:0b", IP: "192.168.1.11", Name: "printer-b"}}
	return a, b
}

// siteJSONView is a FilesView with the running config only.
func siteJSONView(sc *site.Site) []sshd.ViewFile {
	return []sshd.ViewFile{{Path: "site.json", Read: sc.JSON}}
}

// readSiteJSON reads site.json from the router's sftp view.
func readSiteJSON(t *testing.T, r *Router) string {
	for _, v := range r.sftpView() {
		if v.Path == "site.json" {
			b, err := v.Read()
			if err != nil {
				t.Error(err)
			}
			return string(b)
		}
	}
	t.Error("no site.json in the sftp view")
	return ""
}

// A push replaces the site config while the services, the status and
// the DNS forwarder read it: each reader sees the old config or the new
// one, whole (run with -race: the detector fails this test when a
// reader takes the config without the accessor).
func TestReconfigureRacesReaders(t *testing.T) {
	a, b := liveSites()
	ab := keyFile(t, "a-b", "aes-128-cbc", "hmac-sha256", "203.0.113.2", "198.51.100.2")
	r := newRouter(Config{Site: a, Files: files{"a-b.keys": ab}, FilesView: siteJSONView})
	if l, err := newLinks(); err == nil {
		r.links, r.wanIf = l, "lo" // Status reads the WAN's link
	} else {
		t.Logf("no netlink here (%v): Status is not among the readers", err)
	}
	pairs := map[string]string{"gw-a": "printer-a", "gw-b": "printer-b"}

	const pushes = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < pushes; i++ {
			s := b
			if i%2 == 1 {
				s = a
			}
			if err := r.Reconfigure(s, files{"a-b.keys": ab}, nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	readers := []func() error{
		func() error {
			hs := r.lanHosts()
			if len(hs) < 2 || pairs[hs[0].Name] != hs[1].Name {
				return fmt.Errorf("lanHosts mixes two configs: %v", hs)
			}
			return nil
		},
		func() error {
			if js := readSiteJSON(t, r); !strings.Contains(js, `"hostname": "gw-`) {
				return fmt.Errorf("site.json: %s", js)
			}
			return nil
		},
		func() error {
			if x, why := r.readTunnelKeys(r.Site().Tunnels[0]); x == nil {
				return fmt.Errorf("tunnel a-b: %s", why)
			}
			return nil
		},
		func() error {
			if r.links == nil {
				return nil
			}
			if h := r.Status().Hostname; pairs[h] == "" {
				return fmt.Errorf("status host name %q", h)
			}
			return nil
		},
	}
	var wg sync.WaitGroup
	for _, read := range readers {
		wg.Add(1)
		go func(read func() error) {
			defer wg.Done()
			for {
				if err := read(); err != nil {
					t.Error(err)
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		}(read)
	}
	wg.Wait()
	// The last push (a) is what every reader sees now.
	if hs := r.lanHosts(); hs[0].Name != "gw-a" {
		t.Errorf("after the pushes, lanHosts %v", hs)
	}
	if js := readSiteJSON(t, r); !strings.Contains(js, `"hostname": "gw-a"`) {
		t.Errorf("after the pushes, site.json %s", js)
	}
}

// sftp's site.json is the config the router runs: the boot's, then a
// pushed one as soon as it is applied (provisional), then the boot's
// again after a rollback.
func TestSFTPViewShowsTheRunningConfig(t *testing.T) {
	a, b := liveSites()
	r := newRouter(Config{Site: a, FilesView: siteJSONView})
	for _, step := range []struct {
		name string
		to   *site.Site
		want string
	}{
		{"at boot", nil, "gw-a"},
		{"pushed", b, "gw-b"},
		{"rolled back", a, "gw-a"},
	} {
		if step.to != nil {
			if err := r.Reconfigure(step.to, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if js := readSiteJSON(t, r); !strings.Contains(js, `"hostname": "`+step.want+`"`) {
			t.Errorf("%s: site.json is\n%s\nwant host name %s", step.name, js, step.want)
		}
	}
}

// A push of other keys reaches the running SSH server: the session that
// applied it stays open, the new key logs in, the old one no more.
func TestReconfigureNewKeysKeepSessions(t *testing.T) {
	signer := func() (ssh.Signer, string) {
		_, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ssh.NewSignerFromKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		return s, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
	}
	oldKey, oldLine := signer()
	newKey, newLine := signer()
	a, b := liveSites()
	a.SSH.AuthorizedKeys, b.SSH.AuthorizedKeys = []string{oldLine}, []string{newLine}
	b.Hostname = a.Hostname

	hostKey, _ := signer()
	keys, _ := sshd.ParseAuthorizedKeys(a.SSH.AuthorizedKeys)
	srv, err := sshd.New(sshd.Config{HostKey: hostKey, AuthorizedKeys: keys, Shell: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	var log strings.Builder
	var logMu sync.Mutex
	r := newRouter(Config{Site: a, Log: func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(&log, format+"\n", args...)
	}})
	r.svc.ssh = srv

	dial := func(k ssh.Signer) (*ssh.Client, error) {
		return ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(k)},
			HostKeyCallback: ssh.FixedHostKey(hostKey.PublicKey()), Timeout: 10 * time.Second})
	}
	applying, err := dial(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	defer applying.Close()
	if err := r.Reconfigure(b, nil, []string{PartSSH}); err != nil {
		t.Fatal(err)
	}
	sess, err := applying.NewSession()
	if err != nil {
		t.Fatalf("the applying connection was closed: %v", err)
	}
	if out, err := sess.Output("echo kept"); err != nil || string(out) != "kept\n" {
		t.Errorf("a command on the applying connection: %q, %v", out, err)
	}
	if c, err := dial(oldKey); err == nil {
		c.Close()
		t.Error("the old key still logs in")
	}
	c, err := dial(newKey)
	if err != nil {
		t.Fatalf("the new key: %v", err)
	}
	c.Close()
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(log.String(), "restarting []") || !strings.Contains(log.String(), "1 key(s) for root from now on, sessions kept") {
		t.Errorf("the log:\n%s", log.String())
	}
}
