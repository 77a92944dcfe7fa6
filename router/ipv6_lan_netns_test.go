package router

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/ntp"
	"github.com/ocfw/ocfw/router/sshd"
	"github.com/ocfw/ocfw/site"
)

// delegatedLab is a v6 lab with dhcpd -6 delegating /60s from 2001:db8:100::/56
// (routed by the ISP to the router) and the LAN host's SLAAC address in
// the LAN's /64 of it, which it returns with that /64.
func delegatedLab(t *testing.T, o v6LabOptions) (*v6Lab, netip.Prefix, netip.Addr) {
	t.Helper()
	o.staticWAN = true
	l := newV6LabWith(t, o)
	pool := netip.MustParsePrefix("2001:db8:100::/56")
	if err := l.link.Server.Route(pool.String(), netip.MustParseAddr(wan6), netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	startDhcpd6(t, l.link, ispConf(""))
	var lan netip.Prefix
	if !waitUntil(90*time.Second, func() bool { var ok bool; lan, ok = l.delegated(pool); return ok }) {
		t.Fatalf("no LAN prefix from the delegation: status %+v", l.r.ipv6Status())
	}
	if !waitUntil(60*time.Second, func() bool { return len(l.hostAddrs(lan)) > 0 }) {
		t.Fatalf("the LAN host made no SLAAC address in %v", lan)
	}
	host, _ := netip.AddrFromSlice(l.hostAddrs(lan)[0].IP)
	return l, lan, host
}

// TestIPv6LANSSHAndNTP: SSH and the LAN's NTP server listen on the
// router's v6 LAN addresses (the ULA's and the delegated prefix's, as
// listenLAN6 moves them): OpenSSH from the LAN host's namespace logs in
// at both and runs a command; an SNTP query over v6 from the LAN host
// gets the router's time at its stratum; ocf net's text names both
// listeners.
func TestIPv6LANSSHAndNTP(t *testing.T) {
	if testing.Short() {
		t.Skip("dhcpd -6, SLAAC and OpenSSH in network namespaces (about 10 s)")
	}
	sshBin := realclient.Need(t, "ssh")
	_, hostPriv, _ := ed25519.GenerateKey(nil)
	hostKey, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, userPriv, _ := ed25519.GenerateKey(nil)
	userKey, _ := ssh.NewSignerFromKey(userPriv)
	block, err := ssh.MarshalPrivateKey(userPriv, "test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "id")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, bad := sshd.ParseAuthorizedKeys([]string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(userKey.PublicKey())))})
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	srv, err := sshd.New(sshd.Config{HostKey: hostKey, AuthorizedKeys: keys, Shell: "/bin/sh", User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	ts := ntp.NewServer(ntp.ServerConfig{})
	ts.Synced(ntp.Result{Stratum: 2, Time: time.Now(), Addr: netip.MustParseAddr("192.0.2.123")})
	// The servers as startSSH and startNTPServer leave them (their v4
	// listeners on 192.168.1.1 are not needed: the LAN host asks over
	// v6).
	l, lan, _ := delegatedLab(t, v6LabOptions{beforeStart: func(r *Router) {
		r.svc.ssh, r.svc.ntpLAN = srv, ts
	}})
	ula := netip.MustParseAddr("fd12:3456:789a::1")
	for _, addr := range []netip.Addr{ula, site.WithID(lan, routerID)} {
		p := realclient.Start(t, l.host, realclient.Options{}, sshBin, "-F", "/dev/null",
			"-o", "UserKnownHostsFile="+filepath.Join(dir, "known_hosts"), "-o", "StrictHostKeyChecking=accept-new",
			"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "ConnectTimeout=20",
			"-i", keyPath, "-p", "22", "root@"+addr.String(), "echo", "logged-in-over-v6")
		if err := p.Wait(90 * time.Second); err != nil || !strings.Contains(p.Output(), "logged-in-over-v6") {
			t.Errorf("ssh root@%s from the LAN host: %v\n%s", addr, err, p.Output())
		}
		var res *ntp.Result
		err := l.host.Do(func() (err error) {
			res, err = ntp.Query(context.Background(), netip.AddrPortFrom(addr, 123).String(), 10*time.Second, nil)
			return err
		})
		if err != nil || res.Stratum != 3 {
			t.Errorf("SNTP from the LAN host to %s: %+v %v, want stratum 3", addr, res, err)
		}
	}
	var text strings.Builder
	st := l.r.Status()
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"service ssh6: on [[" + ula.String() + "]:22", "service ntp6: on [[" + ula.String() + "]:123"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("ocf net does not say %q:\n%s", want, text.String())
		}
	}
}

// TestIPv6DHCPv6StatefulLAN: with ipv6.hosts' nas listed by the LAN
// host's MAC, the router's advertisements carry M (and A: the host
// still has SLAAC), and Debian's dhclient -6 on the host gets nas's ::10
// in the delegated /64 and in the ULA's from the router's DHCPv6 server.
func TestIPv6DHCPv6StatefulLAN(t *testing.T) {
	if testing.Short() {
		t.Skip("dhcpd -6, SLAAC and dhclient -6 in network namespaces (about 15 s)")
	}
	bin := realclient.Need(t, "dhclient")
	realclient.Need(t, "ip")
	pool := netip.MustParsePrefix("2001:db8:100::/56")
	ula64 := netip.MustParsePrefix("fd12:3456:789a:3::/64")
	l := newV6LabWith(t, v6LabOptions{subnetID: 3, staticWAN: true, hostMAC: true})
	if err := l.link.Server.Route(pool.String(), netip.MustParseAddr(wan6), netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	srv := startDhcpd6(t, l.link, dhcpd6Conf("2001:db8:100::", "2001:db8:100:f0::"))
	var lan1 netip.Prefix
	if !waitUntil(90*time.Second, func() bool { var ok bool; lan1, ok = l.delegated(pool); return ok }) {
		t.Fatalf("no LAN prefix from the delegation: status %+v\ndhcpd:\n%s", l.r.ipv6Status(), srv.Output())
	}
	if adv := l.r.svc.lan6.advert(); !adv.Managed || !adv.Other {
		t.Errorf("advertisement M=%v O=%v, want both with a host's MAC listed", adv.Managed, adv.Other)
	}
	// SLAAC first (the A flag), which also means the link-local
	// address dhclient binds to is usable.
	if !waitUntil(60*time.Second, func() bool { return len(l.hostAddrs(lan1)) > 0 && len(l.hostAddrs(ula64)) > 0 }) {
		t.Fatalf("the LAN host made no SLAAC address in %v and %v", lan1, ula64)
	}
	dir := t.TempDir()
	script := realclient.Script(t, "dhclient-script", `case "$reason" in
BOUND6|RENEW6|REBIND6) [ -n "$new_ip6_address" ] && ip -6 addr replace "$new_ip6_address/128" dev "$interface" valid_lft "$new_max_life" preferred_lft "$new_preferred_life" ;;
esac
exit 0
`)
	p := realclient.Start(t, l.host, realclient.Options{}, bin, "-6", "-d", "-v", "-lf", filepath.Join(dir, "leases"), "-pf", filepath.Join(dir, "pid"), "-sf", script, "eth0")
	want := []netip.Addr{site.WithID(lan1, netip.MustParseAddr("::10")), site.WithID(ula64, netip.MustParseAddr("::10"))}
	has := func(a netip.Addr) bool {
		for _, x := range l.hostAddrs(netip.PrefixFrom(a, 128)) {
			if ones, _ := x.Mask.Size(); ones == 128 {
				return true
			}
		}
		return false
	}
	if !waitUntil(45*time.Second, func() bool { return has(want[0]) && has(want[1]) }) {
		t.Fatalf("the LAN host has not %v by DHCPv6: %v %v\ndhclient:\n%s", want, l.hostAddrs(lan1), l.hostAddrs(ula64), p.Output())
	}
}
