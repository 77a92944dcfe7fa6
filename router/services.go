package router

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ocfw/ocfw/site"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/router/dhcp"
	"github.com/ocfw/ocfw/router/dhcp6"
	"github.com/ocfw/ocfw/router/dns"
	"github.com/ocfw/ocfw/router/firewall"
	"github.com/ocfw/ocfw/router/ntp"
	"github.com/ocfw/ocfw/router/sshd"
)

// Names of the documents the router keeps in the board's store.
const (
	valueHostKey  = "ssh_host_key"
	valueLeaseDoc = "dhcp_leases"
)

// DefaultNTP is asked when the site names no time servers.
var DefaultNTP = []string{"pool.ntp.org"}

// services are the router's running services.
type services struct {
	mu      sync.Mutex
	ssh     *sshd.Server
	dns     *dns.Forwarder
	dhcp    *dhcp.Server
	tunnels *tunnelSet          // nil without tunnels
	ntpOnce *sync.Once          // sets the clock once; nil until the WAN is up, renewed by Reconfigure
	ntpLAN  *ntp.Server         // the LAN's SNTP server; nil without a LAN
	state   map[string]string   // service -> "running", "off: why"...
	running map[string]*running // by name, so Reconfigure can stop one
	rsaMu   sync.Mutex          // held while the RSA host key is loaded or made
	fw      *firewall.Ruleset   // as last applied, for the rules' counters

	// IPv6 (wan6.go): the LAN's numbering, the WAN's current lease, the
	// WAN's mode ("" when v6 is off) and the LAN's /64s the firewall's
	// v6 rules know.
	lan6         *lan6
	lease6       *dhcp6.Lease
	v6mode       string
	lan6Prefixes []netip.Prefix
	// lan6Invalid are the /64s the LAN is told are deprecated (RFC 7084
	// L-14's ICMPv6 error for sources in them).
	lan6Invalid []netip.Prefix
	// unreach6 are the unreachable routes in place for the prefixes the
	// router numbers from (setUnreachable6, under unreach6Mu).
	unreach6   []netip.Prefix
	unreach6Mu sync.Mutex
	// wanRA is the ISP's last advertisement (nil: none heard);
	// dhcp6Want what the WAN's DHCPv6 client asks for, restarted under
	// dhcp6Mu when that changes; upstreams the forwarder's resolvers
	// as last set.
	wanRA     *heardRA
	dhcp6Want wan6Want
	dhcp6Mu   sync.Mutex
	upstreams []netip.AddrPort
	// listen6Mu serialises moving ssh6 and ntp6 (listenLAN6).
	listen6Mu sync.Mutex
}

func (s *services) set(name, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		s.state = map[string]string{}
	}
	s.state[name] = state
}

// startServices starts what the site asks for. The services run in the
// background; problems starting them are returned (and logged), the rest
// keeps running.
func (r *Router) startServices(ctx context.Context) []error {
	var errs []error
	s := r.Site()
	lan, _ := s.LAN.Address.Prefix() // invalid when there is no LAN

	r.startSSH(ctx)
	errs = append(errs, r.startDHCP(ctx)...)

	r.startDNS(ctx)
	r.startNTPServer(ctx, lan)
	r.startTunnels(ctx)
	if err := r.startIPv6(ctx); err != nil {
		errs = append(errs, err)
	}
	r.svcCtx = ctx
	r.mu.Lock()
	static := r.wan.Addr.IsValid()
	r.mu.Unlock()
	if static {
		r.wanChanged() // a static WAN is up already: set the clock now
	}
	return errs
}

// startSSH runs the SSH server as the site asks (Start, and Reconfigure
// when its part changed).
func (r *Router) startSSH(ctx context.Context) {
	svcCtx := ctx // ssh6 runs beside ssh, stopped with it by Reconfigure
	s := r.Site()
	keys := r.sshKeys(s)
	sshAddrs := sshListen(s)
	switch {
	case len(keys) == 0:
		r.svc.set("ssh", "off: no authorized keys in the site config")
	case len(sshAddrs) == 0:
		r.svc.set("ssh", "off: no LAN, and ssh is not among the WAN services")
	default:
		r.svc.set("ssh", "starting")
		r.goService("ssh", ctx, func(ctx context.Context) error {
			// Making a host key may wait for the kernel's random pool:
			// here, not on the boot path. The RSA key (for clients
			// without ed25519) is made once per box, seconds to a
			// minute on a slow board: the server listens with ed25519
			// meanwhile and offers RSA from when it is ready.
			ks := r.keyStore()
			hk, err := sshd.LoadEd25519HostKey(ks, r.logf)
			if err != nil {
				r.svc.set("ssh", "off: "+err.Error())
				return err
			}
			r.logf("ssh: host key %s", sshd.Fingerprint(hk.PublicKey()))
			srv, err := sshd.New(sshd.Config{HostKey: hk, AuthorizedKeys: keys, Shell: r.cfg.Shell, Logf: r.serviceLog(),
				User: s.SSH.LoginName(), View: r.sftpView, StagingDir: r.cfg.StagingDir})
			if err != nil {
				r.svc.set("ssh", "off: "+err.Error())
				return err
			}
			r.svc.mu.Lock()
			r.svc.ssh = srv
			r.svc.mu.Unlock()
			r.svc.set("ssh", sshStatus(sshAddrs, len(keys), r.cfg.Values, sshd.Fingerprint(hk.PublicKey())))
			if s.SSH.RSAHostKeyOn() {
				go r.addRSAHostKey(ks, srv)
			}
			r.listenLAN6(svcCtx, r.lan6Addrs())
			return srv.ListenAndServe(ctx, sshAddrs)
		})
	}

}

// sftpView is SSH's read-only sftp tree: the FilesView given the site
// config the router runs now, so that site.json shows a pushed config
// from the moment it is applied (provisional or confirmed), not the
// boot's.
func (r *Router) sftpView() []sshd.ViewFile {
	if r.cfg.FilesView == nil {
		return nil
	}
	return r.cfg.FilesView(r.Site())
}

// sshListen is where SSH listens for s: everywhere on its port when the
// WAN may reach it (the firewall decides too: this is the second lock),
// else on the LAN address; nowhere without either.
func sshListen(s *site.Site) []string {
	lan, _ := s.LAN.Address.Prefix() // invalid when there is no LAN
	switch {
	case contains(s.Firewall.WANServices, "ssh"):
		return []string{fmt.Sprintf(":%d", s.SSH.SSHPort())}
	case lan.IsValid():
		return []string{netip.AddrPortFrom(lan.Addr(), uint16(s.SSH.SSHPort())).String()}
	}
	return nil
}

// sshKeys are s's authorized keys that parse; the others are logged.
func (r *Router) sshKeys(s *site.Site) []sshd.AuthorizedKey {
	keys, bad := sshd.ParseAuthorizedKeys(s.SSH.AuthorizedKeys)
	for _, err := range bad {
		r.logf("ssh: %v", err)
	}
	return keys
}

// startDNS runs the LAN's DNS forwarder when the site has one.
func (r *Router) startDNS(ctx context.Context) {
	s := r.Site()
	lan, _ := s.LAN.Address.Prefix()
	if lan.IsValid() && s.LAN.ForwarderOn() {
		ups := r.upstreams()
		fwd := dns.New(dns.Config{Allowed: []netip.Prefix{lan.Masked()}, Upstreams: ups, Logf: r.serviceLog(),
			Domain: s.LAN.LocalDomain(), Hosts: r.lanHosts, Dial: r.dialUpstream})
		r.svc.mu.Lock()
		r.svc.dns, r.svc.upstreams = fwd, ups
		r.svc.mu.Unlock()
		addr := netip.AddrPortFrom(lan.Addr(), 53).String()
		r.svc.set("dns", "forwarding on "+addr+" (UDP, TCP), local names in "+s.LAN.LocalDomain())
		r.goService("dns", ctx, func(ctx context.Context) error { return fwd.ListenAndServe(ctx, []string{addr}) })
	} else {
		r.svc.set("dns", "off")
	}
}

// wanChanged tells the services the WAN's address or resolvers changed:
// the forwarder gets the new resolvers, and the clock is set once the WAN
// first has an address.
func (r *Router) wanChanged() {
	r.svc.mu.Lock()
	fwd := r.svc.dns
	r.svc.mu.Unlock()
	if fwd != nil {
		r.upstreamsChanged()
	}
	r.kickTunnels()
	if r.svcCtx == nil {
		return
	}
	// The Once is taken under the lock: Reconfigure replaces it when the
	// time servers change, while a DHCP lease may call here.
	r.svc.mu.Lock()
	if r.svc.ntpOnce == nil {
		r.svc.ntpOnce = new(sync.Once)
	}
	once := r.svc.ntpOnce
	r.svc.mu.Unlock()
	once.Do(func() {
		servers := r.Site().NTP.Servers
		var first func() []string
		if len(servers) == 0 {
			// The ISP's time servers first (RFC 7084 WAA-5, WAA-10),
			// then the pool: the site named none.
			servers, first = DefaultNTP, r.ispNTP
		}
		r.svc.set("ntp", fmt.Sprintf("asking %v", append(r.ispNTP(), servers...)))
		r.goService("ntp", r.svcCtx, func(ctx context.Context) error {
			return ntp.Run(ctx, ntp.Config{Servers: servers, Logf: func(format string, args ...any) {
				r.logf(format, args...)
				r.svc.set("ntp", fmt.Sprintf(format, args...))
			}, Quietf: func(format string, args ...any) {
				r.quietf(format, args...)
				r.svc.set("ntp", fmt.Sprintf(format, args...))
			}, Set: setClock, Synced: r.ntpSynced, Resolver: r.wanResolver(), First: first})
		})
	})
}

// startNTPServer serves the router's clock to the LAN (the DHCP server
// names the router as its NTP server); it answers "not synchronised"
// until the clock is set from upstream (ntpSynced).
func (r *Router) startNTPServer(ctx context.Context, lan netip.Prefix) {
	if !lan.IsValid() {
		return
	}
	ts := ntp.NewServer(ntp.ServerConfig{Allowed: []netip.Prefix{lan.Masked()}})
	r.svc.mu.Lock()
	r.svc.ntpLAN = ts
	r.svc.mu.Unlock()
	addr := netip.AddrPortFrom(lan.Addr(), 123).String()
	r.svc.set("ntp-server", "on "+addr+", answering once the clock is set")
	r.goService("ntp-server", ctx, func(ctx context.Context) error { return ts.ListenAndServe(ctx, addr) })
	r.listenLAN6(ctx, r.lan6Addrs())
}

// ntpSynced passes a setting of the clock to the LAN's server.
func (r *Router) ntpSynced(res ntp.Result) {
	r.svc.mu.Lock()
	ts := r.svc.ntpLAN
	r.svc.mu.Unlock()
	if ts != nil {
		ts.Synced(res)
		r.svc.set("ntp-server", fmt.Sprintf("serving stratum %d on the LAN", min(res.Stratum+1, 15)))
	}
}

func setClock(t time.Time) error {
	tv := unix.NsecToTimeval(t.UnixNano())
	return unix.Settimeofday(&tv)
}

// errNoResolver says why a name cannot be looked up on the board.
var errNoResolver = errors.New("the WAN has no DNS server to look names up with (its DHCP lease gave none; a static WAN sets them in wan.dns); give NTP servers as addresses to do without")

// wanResolver looks names up for the router's own use (NTP server names)
// with the WAN's resolvers as they are at the time of the lookup: the
// board has no /etc/resolv.conf, and the LAN forwarder answers only the
// LAN.
func (r *Router) wanResolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		ups := r.upstreams()
		if len(ups) == 0 {
			return nil, errNoResolver
		}
		var d net.Dialer
		var err error
		for _, u := range ups {
			var c net.Conn
			if c, err = d.DialContext(ctx, network, u.String()); err == nil {
				return c, nil
			}
		}
		return nil, err
	}}
}

// ispNTP are the time servers the WAN's DHCPv6 lease names, as the NTP
// client's server names (a link-local one with the WAN's zone).
func (r *Router) ispNTP() []string {
	r.svc.mu.Lock()
	l := r.svc.lease6
	r.svc.mu.Unlock()
	if l == nil {
		return nil
	}
	var out []string
	for _, a := range l.NTP {
		if a.IsLinkLocalUnicast() {
			a = a.WithZone(r.wanIf)
		}
		if a.IsGlobalUnicast() || a.IsLinkLocalUnicast() {
			out = append(out, a.String())
		}
	}
	return out
}

// upstreams are the WAN's resolvers, port 53: the v4 WAN's, then the
// v6 WAN's (DHCPv6, the ISP's RDNSS).
func (r *Router) upstreams() []netip.AddrPort {
	r.mu.Lock()
	var out []netip.AddrPort
	for _, a := range r.wan.DNS {
		out = append(out, netip.AddrPortFrom(a, 53))
	}
	r.mu.Unlock()
	r.svc.mu.Lock()
	v6 := wan6Resolvers(r.svc.lease6, r.svc.wanRA, r.wanIf, time.Now())
	r.svc.mu.Unlock()
	for _, a := range v6 {
		out = append(out, netip.AddrPortFrom(a, 53))
	}
	return out
}

// dialUpstream dials a WAN resolver from the router's network
// namespace: tests run the router's code in one of their own (inNS);
// on the board there is only the one.
func (r *Router) dialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	if r.inNS == nil {
		return d.DialContext(ctx, network, addr)
	}
	var c net.Conn
	err := r.inNS(func() (err error) {
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// serviceStatus adds the services' state to st.
func (r *Router) serviceStatus(st *Status) {
	r.svc.mu.Lock()
	defer r.svc.mu.Unlock()
	for k, v := range r.svc.state {
		st.Services[k] = v
	}
	if r.svc.ssh != nil {
		st.SSH = r.svc.ssh.Fingerprint()
	}
	if st.Counters == nil {
		st.Counters = map[string]uint64{}
	}
	if r.svc.dhcp != nil {
		for _, l := range r.svc.dhcp.Leases() {
			state := "until " + l.Expires.UTC().Format(time.RFC3339)
			switch {
			case l.Static:
				state = "static"
			case l.Released:
				state = "released"
			}
			st.Leases = append(st.Leases, fmt.Sprintf("%s %s %s %s", l.IP, l.MAC, l.Hostname, state))
			st.Clients = append(st.Clients, l)
		}
	}
	if r.svc.fw != nil {
		if ls, err := firewall.Listing(r.svc.fw); err == nil {
			st.Firewall = ls
		}
	}
	if cs, err := firewall.Counters(); err == nil {
		for _, c := range cs {
			st.Counters["firewall_"+c.Name+"_packets"] = c.Packets
		}
	}
	if r.svc.dns != nil {
		d := r.svc.dns.Stats()
		st.Counters["dns_queries"] = d.Queries
		st.Counters["dns_cache_hits"] = d.CacheHits
		st.Counters["dns_upstream_failures"] = d.UpstreamFailures
		st.Counters["dns_refused"] = d.Refused
		st.Counters["dns_local"] = d.Local
	}
}

// goService runs fn until the router stops, logging a failure.
func (r *Router) goService(name string, ctx context.Context, fn func(ctx context.Context) error) {
	ctx, done := r.svc.track(name, ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer done()
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			r.logf("%s stopped: %v", name, err)
			r.svc.set(name, "stopped: "+err.Error())
		}
	}()
}

// keyStore keeps the SSH host key in the board's store, or in RAM when
// there is no data partition (a new key every boot, which the log says).
func (r *Router) keyStore() sshd.KeyStore {
	if r.cfg.Values == nil {
		r.logf("ssh: no data partition: the host key lives in RAM and changes at every boot")
		return &memKeys{}
	}
	return valueKeys{r.cfg.Values}
}

type valueKeys struct{ v Values }

func (k valueKeys) Load() ([]byte, bool, error) {
	var s string
	ok, err := k.v.Value(valueHostKey, &s)
	if err == nil && !ok && stateLost(k.v) {
		return nil, false, sshd.ErrStoreLost // not a first boot: say so
	}
	if err != nil || !ok {
		return nil, ok, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		// A damaged record: LoadHostKey replaces it, loudly.
		return []byte(s), true, nil
	}
	return b, true, nil
}

func (k valueKeys) Save(b []byte) error {
	return k.v.SetValue(valueHostKey, base64.StdEncoding.EncodeToString(b))
}

// addRSAHostKey loads or makes the second host key and offers it.
func (r *Router) addRSAHostKey(ks sshd.KeyStore, srv *sshd.Server) {
	// One at a time: an SSH restart (Reconfigure) while the first RSA
	// key is still being made must load that key, not make another.
	r.svc.rsaMu.Lock()
	k, err := sshd.LoadRSAHostKey(ks, r.logf)
	r.svc.rsaMu.Unlock()
	if err == nil && k != nil {
		err = srv.AddHostKey(k)
	}
	switch {
	case err != nil:
		r.logf("ssh: WARNING: no RSA host key (%v): ed25519 only", err)
	case k != nil:
		r.logf("ssh: %s host key %s (for clients without ed25519)", k.PublicKey().Type(), sshd.Fingerprint(k.PublicKey()))
	}
}

// sshStatus is the ssh line of ocf net: after a lost store the host key
// is new this boot, and the owner must hear why clients complain.
func sshStatus(addrs []string, keys int, v Values, fingerprint string) string {
	status := fmt.Sprintf("listening on %v, %d key(s)", addrs, keys)
	if stateLost(v) {
		status += "; " + sshd.LostKeyMessage(fingerprint)
	}
	return status
}

// stateLost says the store was found lost at this boot (store.Store's
// StateLost), so what it held was not there to load.
func stateLost(v Values) bool {
	l, ok := v.(interface{ StateLost() bool })
	return ok && l.StateLost()
}

type memKeys struct{ b []byte }

func (m *memKeys) Load() ([]byte, bool, error) { return m.b, m.b != nil, nil }
func (m *memKeys) Save(b []byte) error         { m.b = b; return nil }

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// applyFirewall programs NAT and the firewall (router/firewall).
func (r *Router) applyFirewall() error {
	sc := r.Site()
	rs, err := firewall.Build(sc, r.wanIf, r.lanIf, firewallLAN(sc, r.lanIf))
	if err != nil {
		return err
	}
	if sc.IPv6.On() {
		// Before the LAN is numbered the LAN has no v6 prefix: no v6
		// source from it is forwarded until lan6 says which are its.
		r.svc.mu.Lock()
		lans, invalid := r.svc.lan6Prefixes, r.svc.lan6Invalid
		r.svc.mu.Unlock()
		// The v6 port forwards do not depend on the prefixes: they
		// are in place before the delegation and stay through a
		// change of it.
		fwds, errs := sc.IPv6Forwards()
		if len(errs) > 0 {
			return fmt.Errorf("firewall: %v", errs[0])
		}
		if err := firewall.AddIPv6(rs, r.wanIf, r.lanIf, firewall.IPv6{LANPrefixes: lans, Forwards: fwds, Invalidated: invalid}); err != nil {
			return err
		}
	}
	apply := r.applyRules
	if apply == nil {
		apply = func(rs *firewall.Ruleset) error { return firewall.Apply(rs) }
	}
	if err := apply(rs); err != nil {
		return fmt.Errorf("firewall: %w (are the nftables modules loaded?)", err)
	}
	n := 0
	for _, c := range rs.Chains {
		n += len(c.Rules)
	}
	r.logf("firewall: %d rules in table %s: inbound on the WAN dropped but replies, DHCP, pings%s", n, firewall.TableName, wanOpen(sc))
	r.svc.mu.Lock()
	r.svc.fw = rs
	r.svc.mu.Unlock()
	r.svc.set("firewall", "applied")
	return nil
}

func wanOpen(s *site.Site) string {
	out := ""
	if contains(s.Firewall.WANServices, "ssh") {
		out += fmt.Sprintf(", SSH (%d)", s.SSH.SSHPort())
	}
	for _, f := range s.Firewall.PortForwards {
		to := f.ToPort
		if to == 0 {
			to = f.Port
		}
		switch {
		case f.To == "":
			out += fmt.Sprintf(", %s %d over v6 only to %s", f.Proto, f.Port, f.IPv6Host)
		default:
			out += fmt.Sprintf(", %s %d to %s:%d", f.Proto, f.Port, f.To, to)
			if f.IPv6Host != "" && s.IPv6.On() {
				out += " and over v6 to " + f.IPv6Host
			}
		}
	}
	return out
}

// startDHCP runs the WAN's DHCP client and the LAN's DHCP server as the
// site asks.
func (r *Router) startDHCP(ctx context.Context) []error {
	r.startDHCPClient(ctx)
	return r.startDHCPServer(ctx)
}

// startDHCPClient runs the WAN's DHCP client when the site asks for one.
func (r *Router) startDHCPClient(ctx context.Context) {
	s := r.Site()
	if s.WAN.Address.IsDHCP() {
		c := dhcp.NewClient(dhcp.ClientConfig{Interface: r.wanIf, Hostname: s.Hostname, Log: r.logf,
			Update: func(prev, next *dhcp.WANLease) {
				r.svc.set("dhcp-client", dhcpClientState(r.wanIf, next))
				if next == nil {
					r.lostWAN()
					return
				}
				if err := r.setWAN(next.Address, next.Router, next.DNS, "dhcp"); err != nil {
					r.logf("network: applying the WAN lease %s: %v", next, err)
				}
			}})
		r.svc.set("dhcp-client", dhcpClientState(r.wanIf, nil))
		r.goService("dhcp-client", ctx, r.inNS6(c.Run))
	}
}

// startDHCPServer runs the LAN's DHCP server when the site has a range.
func (r *Router) startDHCPServer(ctx context.Context) []error {
	var errs []error
	s := r.Site()
	if len(s.LAN.DHCP.Range) == 0 || r.lanIf == "" {
		r.svc.set("dhcp", "off: no LAN range in the site config")
		return errs
	}
	cfg, err := dhcp.ServerConfigFromSite(s, r.lanIf)
	if err != nil {
		return append(errs, err)
	}
	cfg.Log = r.serviceLog()
	// The router answers SNTP on its LAN address (router/ntp).
	cfg.NTP = []netip.Addr{cfg.Address.Addr()}
	if r.cfg.Values != nil {
		cfg.Store = valueLeases{r.cfg.Values}
	} else {
		r.logf("dhcp: no data partition: leases live in RAM only")
	}
	srv, err := dhcp.NewServer(cfg)
	if err != nil {
		return append(errs, err)
	}
	r.svc.mu.Lock()
	r.svc.dhcp = srv
	r.svc.mu.Unlock()
	r.logf("dhcp: serving %s-%s on %s, %d lease(s) kept from before", cfg.Pool.First, cfg.Pool.Last, r.lanIf, len(srv.Leases()))
	r.svc.set("dhcp", fmt.Sprintf("serving %s-%s on %s", cfg.Pool.First, cfg.Pool.Last, r.lanIf))
	r.goService("dhcp", ctx, r.inNS6(srv.Serve))
	return errs
}

// lostWAN is the WAN's lease running out: no address until the client
// gets another.
func (r *Router) lostWAN() {
	if err := r.links.clearAddr(r.wanIf); err != nil {
		r.logf("network: clearing the WAN address: %v", err)
	}
	r.mu.Lock()
	r.wan = wanState{}
	r.mu.Unlock()
	r.logf("network: WAN lease lost on %s: no address until a DHCP server answers", r.wanIf)
	r.wanChanged()
}

// valueLeases keeps the DHCP leases in the board's store.
type valueLeases struct{ v Values }

func (l valueLeases) Load() ([]dhcp.Lease, error) {
	var ls []dhcp.Lease
	_, err := l.v.Value(valueLeaseDoc, &ls)
	return ls, err
}

func (l valueLeases) Save(ls []dhcp.Lease) error { return l.v.SetValue(valueLeaseDoc, ls) }
