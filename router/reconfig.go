package router

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/router/sshd"
	"github.com/ocfw/ocfw/site"
)

// Parts of a site config that Reconfigure applies live, each restarting
// only what it concerns (router/config.Diff finds them).
const (
	PartHostname = "hostname" // the host name
	PartLAN      = "lan"      // the LAN's address or MTU
	PartWAN      = "wan"      // the WAN's addressing, gateway, resolvers, MTU
	PartFirewall = "firewall" // NAT, the firewall, port forwards, WAN services
	PartDHCP     = "dhcp"     // the LAN's DHCP server (range, static leases and their names)
	PartDNS      = "dns"      // the LAN's DNS forwarder and local domain
	PartSSH      = "ssh"      // SSH keys and port
	PartTunnels  = "tunnels"  // the IPsec tunnels and their key files
	PartNTP      = "ntp"      // the time servers asked
	PartIPv6     = "ipv6"     // the ipv6 section: WAN mode, delegation, LAN numbering, ULA, v6 hosts
)

// running is one service goroutine that Reconfigure may stop.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// track gives a service a context of its own under ctx, so that it can be
// stopped alone; done must be called when it has ended.
func (s *services) track(name string, ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	run := &running{cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	if s.running == nil {
		s.running = map[string]*running{}
	}
	s.running[name] = run
	s.mu.Unlock()
	return ctx, func() {
		cancel()
		close(run.done)
		s.mu.Lock()
		if s.running[name] == run {
			delete(s.running, name)
		}
		s.mu.Unlock()
	}
}

// stop ends the named service and waits for it; nothing when it is not
// running.
func (s *services) stop(name string) {
	s.mu.Lock()
	run := s.running[name]
	s.mu.Unlock()
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
}

// Reconfigure applies a new site config without a reboot: only the
// services the changed parts concern are stopped and started again, with
// the new config; the rest (and the links) keep running. files replaces
// where the tunnels' key files are read from when not nil. The ports and
// the board cannot change this way (router/config refuses that before).
// Every problem is returned; what could be applied is.
func (r *Router) Reconfigure(s *site.Site, files Files, parts []string) error {
	has := map[string]bool{}
	for _, p := range parts {
		has[p] = true
	}
	old := r.Site()
	if s.WAN.Port != old.WAN.Port || strings.Join(s.LAN.Ports, ",") != strings.Join(old.LAN.Ports, ",") {
		return fmt.Errorf("router: the ports changed (wan.port, lan.ports): that needs a reboot")
	}
	restart, firewallToo := restarts(old, s, has)
	// New keys or login name with SSH where it was: the running server
	// takes them for the next logins, and the sessions stay open (the
	// one applying this push among them). A server not running (yet)
	// is started instead.
	var liveSSH *sshd.Server
	if has[PartSSH] && !restart["ssh"] {
		r.svc.mu.Lock()
		liveSSH = r.svc.ssh
		r.svc.mu.Unlock()
		restart["ssh"] = liveSSH == nil
	}
	var names []string
	for n, ok := range restart {
		if ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	r.logf("config: applying %v live: restarting %v%s", parts, names, map[bool]string{true: " and the firewall"}[firewallToo])
	for _, n := range names {
		if n == "ipv6" {
			r.stopIPv6(!s.IPv6.On())
			continue
		}
		switch n {
		case "dns":
			r.svc.stop("dns6") // the v6 listeners serve the old forwarder
		case "ssh":
			r.svc.stop("ssh6") // and the old SSH server
		case "ntp-server":
			r.svc.stop("ntp6")
		}
		r.svc.stop(n)
	}
	if restart["ipsec"] {
		r.removeTunnels()
	}
	next := &liveConfig{site: s, files: r.files()}
	if files != nil {
		next.files = files
	}
	r.live.Store(next)

	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
			r.logf("config: %v", err)
		}
	}
	if has[PartHostname] {
		fail(unix.Sethostname([]byte(s.Hostname)))
	}
	if has[PartLAN] && r.lanIf != "" {
		if lan, err := s.LAN.Address.Prefix(); err != nil {
			fail(err)
		} else {
			fail(r.links.up(r.lanIf, s.LAN.MTU))
			fail(r.links.setAddr(r.lanIf, lan))
			r.logf("network: LAN %s on %s", lan, r.lanIf)
		}
	}
	if restart["ipv6"] && !s.IPv6.On() {
		r.svc.mu.Lock()
		r.svc.lan6Prefixes, r.svc.lan6Invalid = nil, nil
		r.svc.mu.Unlock()
	}
	if firewallToo {
		fail(r.applyFirewall())
	}
	if liveSSH != nil {
		keys := r.sshKeys(s)
		if err := liveSSH.SetLogins(s.SSH.LoginName(), keys); err != nil {
			fail(err)
		} else {
			r.logf("ssh: %d key(s) for %s from now on, sessions kept", len(keys), s.SSH.LoginName())
			r.svc.set("ssh", sshStatus(sshListen(s), len(keys), r.cfg.Values, liveSSH.Fingerprint()))
		}
	}
	if has[PartWAN] {
		fail(r.links.up(r.wanIf, s.WAN.MTU))
		if s.WAN.Address.IsDHCP() {
			if !old.WAN.Address.IsDHCP() {
				fail(r.links.clearAddr(r.wanIf))
				r.mu.Lock()
				r.wan = wanState{}
				r.mu.Unlock()
			}
		} else if p, err := s.WAN.Address.Prefix(); err != nil {
			fail(err)
		} else {
			gw, _ := netip.ParseAddr(s.WAN.Gateway)
			var dns []netip.Addr
			for _, d := range s.WAN.DNS {
				a, _ := netip.ParseAddr(d)
				dns = append(dns, a)
			}
			fail(r.setWAN(p, gw, dns, "static"))
		}
	}
	ctx := r.svcCtx
	if restart["ssh"] {
		r.svc.mu.Lock()
		r.svc.ssh = nil
		r.svc.mu.Unlock()
		r.startSSH(ctx)
	}
	if restart["dhcp-client"] {
		r.startDHCPClient(ctx)
	}
	if restart["dhcp"] {
		r.svc.mu.Lock()
		r.svc.dhcp = nil
		r.svc.mu.Unlock()
		for _, e := range r.startDHCPServer(ctx) {
			fail(e)
		}
	}
	if restart["dns"] {
		r.svc.mu.Lock()
		r.svc.dns = nil
		r.svc.mu.Unlock()
		r.startDNS(ctx)
		if !restart["ipv6"] {
			r.svc.mu.Lock()
			n := r.svc.lan6
			r.svc.mu.Unlock()
			if n != nil {
				addrs, _ := n.status()
				r.lan6Moved(ctx, addrs)
			}
		}
	}
	if restart["ipv6"] {
		fail(r.startIPv6(ctx))
	}
	if restart["ntp-server"] {
		lan, _ := s.LAN.Address.Prefix()
		r.startNTPServer(ctx, lan)
	}
	if restart["ipsec"] {
		r.svc.mu.Lock()
		r.svc.tunnels = nil
		r.svc.mu.Unlock()
		r.startTunnels(ctx)
	}
	if restart["ntp"] {
		r.svc.mu.Lock()
		r.svc.ntpOnce = nil // the new servers are asked once the WAN is up
		r.svc.mu.Unlock()
	}
	if restart["ntp"] || restart["ipsec"] {
		r.mu.Lock()
		up := r.wan.Addr.IsValid()
		r.mu.Unlock()
		if up {
			r.wanChanged() // the clock's servers, the tunnels' WAN address
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("router: %d problem(s) applying the new config, the first: %w", len(errs), errs[0])
	}
	return nil
}

// removeTunnels takes the running tunnels' SAs and policies out of the
// kernel (their service is stopped): the new config installs its own.
func (r *Router) removeTunnels() {
	r.svc.mu.Lock()
	ts := r.svc.tunnels
	r.svc.mu.Unlock()
	if ts == nil {
		return
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.h == nil {
		return
	}
	for _, t := range ts.list {
		if t.x != nil {
			if err := ts.h.Remove(*t.x); err != nil {
				r.logf("ipsec: removing tunnel %s: %v", t.site.Name, err)
			}
		}
	}
	ts.h.Close()
	ts.h = nil
}

// restarts are the services Reconfigure restarts from old to s for the
// parts changed, and whether the firewall is programmed again.
func restarts(old, s *site.Site, has map[string]bool) (restart map[string]bool, firewall bool) {
	// What each part restarts: a moved LAN address moves every LAN
	// service's socket; the WAN's address is in the firewall and the
	// tunnels. SSH restarts, closing its sessions, only when it listens
	// elsewhere (the LAN address, its port, the WAN services) or goes
	// from no keys to some or back, or serves the RSA host key or stops
	// (its host keys are the server's, from its start): new keys alone
	// are taken live.
	restart = map[string]bool{
		"ssh": !slices.Equal(sshListen(old), sshListen(s)) || (len(old.SSH.AuthorizedKeys) == 0) != (len(s.SSH.AuthorizedKeys) == 0) ||
			old.SSH.RSAHostKeyOn() != s.SSH.RSAHostKeyOn(),
		"dhcp":        has[PartDHCP] || has[PartLAN],
		"dns":         has[PartDNS] || has[PartLAN],
		"ntp-server":  has[PartLAN],
		"ipsec":       has[PartTunnels] || has[PartWAN],
		"dhcp-client": has[PartWAN],
		"ntp":         has[PartNTP],
		// The LAN's domain and forwarder are in the advertisements
		// (DNSSL, RDNSS) and the DHCPv6 replies; its MTU too.
		"ipv6": has[PartIPv6] || has[PartLAN] || has[PartDNS],
	}
	// The SSH port is in the firewall: a change of it is PartFirewall
	// too (router/config.Diff), keys and the login name are not.
	firewall = has[PartFirewall] || has[PartLAN] || has[PartWAN] || has[PartTunnels] || has[PartIPv6]
	return restart, firewall
}
