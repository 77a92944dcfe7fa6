// Package router is the board's router, driven by the site config
// (site.Site): it names the ports' interfaces, bridges the LAN ports,
// sets addresses and routes, turns on forwarding, programs NAT and the
// firewall (router/firewall), runs the DHCP client on the WAN and the DHCP
// server and DNS forwarder on the LAN (router/dhcp, router/dns), SSH for
// management (router/sshd), sets the clock (router/ntp), and logs what it
// does to the console and the data partition's log. All of it runs in the
// one long-running firmware process: one Go runtime, which matters on a
// 32 MB NSLU2.
//
// It is board-side code: it imports no host package.
package router

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ocfw/ocfw/site"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router/firewall"
	"github.com/ocfw/ocfw/router/sshd"
	"github.com/ocfw/ocfw/store"
)

// Values keeps named documents across reboots (the board's power-safe
// store): SSH host keys, DHCP leases.
type Values interface {
	SetValue(name string, v any) error
	Value(name string, v any) (bool, error)
}

// Config says what to run.
type Config struct {
	Site  *site.Site
	Ports []plan.Port
	// Values may be nil (no data partition): host keys and leases then
	// live in RAM only, and the log says so.
	Values Values
	// Log gets one line per event (the console and the store's log).
	Log func(format string, args ...any)
	// EventLog, when set, gets the events of Log that clients cause
	// (per packet, per connection), already rate-limited and
	// summarised, which the board's log may batch; nil means Log.
	EventLog func(format string, args ...any)
	// QuietLog, when set, gets repeated failures (NTP's retries) instead
	// of Log: the store's log only, not the console, where they broke
	// into the prompt.
	QuietLog func(format string, args ...any)
	// Root prefixes /proc (tests); "" is the real root.
	Root string
	// Shell is what SSH sessions run; "" means /bbin/ocfsh.
	Shell string
	// FilesView is what SSH's sftp shows read-only (the card's reports,
	// log, site config...), asked at each request with the site config
	// the router runs at that moment (a push replaces it); StagingDir
	// backs its writable /staging/ (a RAM directory; "" means none). See
	// sshd.Config.
	FilesView  func(current *site.Site) []sshd.ViewFile
	StagingDir string
	// LinkWait bounds the wait for the ports' interfaces; 0 means 10 s.
	LinkWait time.Duration
	// Files reads the tunnels' key files from the card's ocfw folder;
	// nil (no data partition) leaves every tunnel down.
	Files Files
	// TunnelCheck is how often the tunnels' counters are looked at; 0
	// means DefaultTunnelCheck.
	TunnelCheck time.Duration
	// WaitForCrypto holds the tunnels back until CryptoSettled is called
	// (or CryptoWait has passed): an SA binds its cipher and HMAC to the
	// kernel's choice of engine when it is installed and keeps them, so
	// tunnels installed while unproven engines are demoted would never
	// use the engines the self-test proves afterwards.
	WaitForCrypto bool
	// CryptoWait bounds that wait; 0 means DefaultCryptoWait.
	CryptoWait time.Duration
	// TestWANDown (test images only: plan.TestBreakNoWAN) leaves the
	// WAN port down, so the WAN never gets an address.
	TestWANDown bool
}

// Router is the running router.
type Router struct {
	// cfg is the Config the router started with, without Site and Files:
	// those are in live, which Reconfigure replaces while services,
	// status and the DNS forwarder read it (Site, files).
	cfg    Config
	live   atomic.Pointer[liveConfig]
	links  *links
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	wanIf   string
	lanIf   string
	wan     wanState
	events  []string // recent log lines, newest last, bounded
	started time.Time
	svc     services
	svcCtx  context.Context

	eventsOnce sync.Once
	limiter    *eventLimiter // of eventf, made at its first use

	// inNS runs the services' bodies that open sockets on the WAN or
	// the LAN (the DHCP and DHCPv6 clients and servers, the RA server)
	// where their sockets belong; nil runs them as they are.
	// Tests put them in a network namespace.
	inNS func(func() error) error
	// applyRules installs a ruleset; nil means firewall.Apply. Tests in
	// host namespaces record it instead: the host's netfilter is never
	// touched outside the kernel guest.
	applyRules func(*firewall.Ruleset) error

	cryptoOnce    sync.Once
	cryptoSettled chan struct{}  // closed by CryptoSettled
	drivers       []CipherDriver // the boot's engine choice (SetCipherDrivers)
}

// liveConfig is the part of the Config a push replaces at run time, one
// value swapped whole so that a reader sees the old or the new config,
// never half of each.
type liveConfig struct {
	site  *site.Site
	files Files
}

// newRouter is a Router for cfg with its site and key files made live
// (Start's first step; tests build routers with it too).
func newRouter(cfg Config) *Router {
	r := &Router{cryptoSettled: make(chan struct{})}
	r.live.Store(&liveConfig{site: cfg.Site, files: cfg.Files})
	// Cleared so that nothing reads the boot's copies by mistake.
	cfg.Site, cfg.Files = nil, nil
	r.cfg = cfg
	return r
}

// Site is the site config the router runs now: the boot's, or the one a
// push applied last (Reconfigure). Safe to call from any goroutine; the
// value must not be modified.
func (r *Router) Site() *site.Site { return r.live.Load().site }

// files is where the tunnels' key files are read from now; nil when the
// box has no data partition.
func (r *Router) files() Files { return r.live.Load().files }

// wanState is what the WAN has now.
type wanState struct {
	Addr    netip.Prefix
	Gateway netip.Addr
	DNS     []netip.Addr
	Source  string // "static" or "dhcp"
	Since   time.Time
}

const maxEvents = 64

// logf logs a line for a rare event: the console, the card (promptly)
// and the recent events. Control characters are escaped first: host
// names and errors come from the network (store.Printable).
func (r *Router) logf(format string, args ...any) {
	line := store.Printable(fmt.Sprintf(format, args...))
	r.addEvent(line)
	if r.cfg.Log != nil {
		r.cfg.Log("%s", line)
	}
}

// addEvent keeps line among the recent events `ocf net` shows.
func (r *Router) addEvent(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, time.Now().UTC().Format(time.RFC3339)+" "+store.Printable(line))
	if len(r.events) > maxEvents {
		r.events = r.events[len(r.events)-maxEvents:]
	}
}

// iface maps a site port name to its kernel interface.
func (r *Router) iface(port string) string { return portIface(r.cfg.Ports, port) }

// Start brings the network up and starts the services; it returns once
// the links, addresses, forwarding and firewall are in place (a DHCP WAN
// keeps trying in the background), so the boot goes on while the router
// already routes. Problems that leave part of the router down are logged
// and returned together; the router runs what it can.
func Start(ctx context.Context, cfg Config) (*Router, error) {
	if cfg.Site == nil {
		return nil, fmt.Errorf("router: no site config")
	}
	if cfg.LinkWait == 0 {
		cfg.LinkWait = 10 * time.Second
	}
	if cfg.Shell == "" {
		cfg.Shell = "/bbin/ocfsh"
	}
	ctx, cancel := context.WithCancel(ctx)
	r := newRouter(cfg)
	r.cancel, r.started = cancel, time.Now()
	if !cfg.WaitForCrypto {
		close(r.cryptoSettled)
	}
	var problems []error
	fail := func(err error) {
		if err != nil {
			problems = append(problems, err)
			r.logf("network: %v", err)
		}
	}
	s := cfg.Site
	// One blocking read of the kernel's random pool: right after boot
	// it may not be ready, and u-root's uio/rand, which the DHCP client
	// takes its transaction ids from, polls it without blocking and can
	// then stall. crypto/rand blocks until the pool is ready (about a
	// second after power-on under QEMU).
	if _, err := io.ReadFull(rand.Reader, make([]byte, 1)); err != nil {
		fail(fmt.Errorf("random pool: %w", err))
	}
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		fail(fmt.Errorf("hostname %s: %w", s.Hostname, err))
	}
	l, err := newLinks()
	if err != nil {
		cancel()
		return nil, err
	}
	r.links = l
	fail(l.up("lo", 0))

	r.wanIf = r.iface(s.WAN.Port)
	var lanPorts []string
	for _, p := range s.LAN.Ports {
		lanPorts = append(lanPorts, r.iface(p))
	}
	want := append([]string{r.wanIf}, lanPorts...)
	if err := l.wait(want, cfg.LinkWait); err != nil {
		fail(err)
	}

	// LAN first: the clients' side is up before the WAN is.
	if s.LAN.HasLAN() {
		r.lanIf = lanPorts[0]
		if len(lanPorts) > 1 {
			r.lanIf = LANBridge
			fail(l.bridge(LANBridge, lanPorts, s.LAN.MTU))
		} else {
			fail(l.up(r.lanIf, s.LAN.MTU))
		}
		if lan, err := s.LAN.Address.Prefix(); err != nil {
			fail(fmt.Errorf("network: LAN address: %w", err))
		} else if err := l.setAddr(r.lanIf, lan); err != nil {
			fail(err)
		} else {
			r.logf("network: LAN %s on %s (ports %v)", lan, r.lanIf, s.LAN.Ports)
		}
	}
	// The firewall before the WAN comes up and before forwarding: there
	// is never a moment the WAN is up unfiltered.
	if err := r.applyFirewall(); err != nil {
		fail(err)
		// Routing without the firewall would open the LAN to the WAN.
		r.logf("network: forwarding stays off: there is no firewall")
	} else {
		fail(enableForwarding(cfg.Root, r.wanIf, r.lanIf))
	}
	if cfg.TestWANDown {
		r.logf("network: TEST IMAGE: the WAN port %s stays down (%s)", r.wanIf, plan.TestBreakNoWAN)
	} else {
		fail(l.up(r.wanIf, s.WAN.MTU))
	}
	if !s.WAN.Address.IsDHCP() {
		if p, err := s.WAN.Address.Prefix(); err != nil {
			fail(fmt.Errorf("network: WAN address: %w", err))
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
	for _, err := range r.startServices(ctx) {
		fail(err)
	}
	if len(problems) > 0 {
		return r, fmt.Errorf("router: %d problem(s), the first: %w", len(problems), problems[0])
	}
	return r, nil
}

// setWAN applies a WAN address, gateway and resolvers (static, or from a
// DHCP lease).
func (r *Router) setWAN(p netip.Prefix, gw netip.Addr, dns []netip.Addr, source string) error {
	if err := r.links.setAddr(r.wanIf, p); err != nil {
		return err
	}
	if gw.IsValid() {
		if err := r.links.defaultRoute(r.wanIf, gw); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.wan = wanState{Addr: p, Gateway: gw, DNS: dns, Source: source, Since: time.Now()}
	r.mu.Unlock()
	gwText := "no gateway"
	if gw.IsValid() {
		gwText = "gateway " + gw.String()
	}
	r.logf("network: WAN %s on %s, %s, DNS %v (%s)", p, r.wanIf, gwText, dns, source)
	r.wanChanged()
	return nil
}

// Close stops the services.
func (r *Router) Close() {
	r.cancel()
	r.wg.Wait()
	r.flushEvents()
}

// Status is what `ocf net` shows.
type Status struct {
	Hostname string      `json:"hostname"`
	Uptime   string      `json:"uptime"`
	Links    []LinkState `json:"links"`
	WAN      struct {
		Interface string   `json:"interface"`
		Address   string   `json:"address,omitempty"`
		Gateway   string   `json:"gateway,omitempty"`
		DNS       []string `json:"dns,omitempty"`
		Source    string   `json:"source,omitempty"`
	} `json:"wan"`
	LAN      string            `json:"lan_interface,omitempty"`
	Services map[string]string `json:"services"`
	Tunnels  []TunnelState     `json:"tunnels,omitempty"`
	Leases   []string          `json:"leases,omitempty"`
	Counters map[string]uint64 `json:"counters,omitempty"`
	SSH      string            `json:"ssh_host_key,omitempty"`
	Memory   Memory            `json:"memory"`
	Events   []string          `json:"events,omitempty"`
	IPv6     *IPv6Status       `json:"ipv6,omitempty"`
	Views                      // ocf clients and ocf firewall (views.go)
}

// Memory is the board's memory as /proc tells it, in KiB: the firmware
// process (one Go runtime for every service) and the whole system (the
// unpacked initramfs counts as shared memory: it lives in RAM).
type Memory struct {
	ProcessRSS  uint64 `json:"process_rss_kib"`
	ProcessPeak uint64 `json:"process_peak_kib"`
	Total       uint64 `json:"total_kib"`
	Available   uint64 `json:"available_kib"`
	Shared      uint64 `json:"shared_kib"`
}

// readMemory reads /proc/self/status and /proc/meminfo under root.
func readMemory(root string) Memory {
	var m Memory
	field := func(file string, fields map[string]*uint64) {
		b, err := os.ReadFile(root + file)
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if p, want := fields[k]; ok && want {
				f := strings.Fields(v)
				if len(f) > 0 {
					*p, _ = strconv.ParseUint(f[0], 10, 64)
				}
			}
		}
	}
	field("/proc/self/status", map[string]*uint64{"VmRSS": &m.ProcessRSS, "VmHWM": &m.ProcessPeak})
	field("/proc/meminfo", map[string]*uint64{"MemTotal": &m.Total, "MemAvailable": &m.Available, "Shmem": &m.Shared})
	return m
}

// Status reports the router's state now.
func (r *Router) Status() Status {
	var st Status
	sc := r.Site()
	st.Hostname = sc.Hostname
	st.Uptime = time.Since(r.started).Round(time.Second).String()
	names := []string{r.wanIf}
	if r.lanIf != "" {
		names = append(names, r.lanIf)
		if r.lanIf == LANBridge {
			for _, p := range sc.LAN.Ports {
				names = append(names, r.iface(p))
			}
		}
	}
	for _, n := range names {
		ls, _ := r.links.state(n)
		st.Links = append(st.Links, ls)
	}
	r.mu.Lock()
	st.WAN.Interface = r.wanIf
	if r.wan.Addr.IsValid() {
		st.WAN.Address = r.wan.Addr.String()
		if r.wan.Gateway.IsValid() {
			st.WAN.Gateway = r.wan.Gateway.String()
		}
		for _, d := range r.wan.DNS {
			st.WAN.DNS = append(st.WAN.DNS, d.String())
		}
		st.WAN.Source = r.wan.Source
	}
	st.LAN = r.lanIf
	st.Events = append([]string(nil), r.events...)
	r.mu.Unlock()
	st.Services = map[string]string{}
	st.Memory = readMemory(r.cfg.Root)
	r.svc.mu.Lock()
	ts := r.svc.tunnels
	r.svc.mu.Unlock()
	if ts != nil {
		// The IKEv2 tunnels' states as of now, not of the last
		// watch (up to ikeWatch old): the SAs shown below are read
		// now, and a state that lags them contradicts them.
		r.watchIKELocked(ts)
	}
	r.serviceStatus(&st)
	st.IPv6 = r.ipv6Status()
	if ts != nil {
		st.Tunnels = ts.status(r.driverOf)
	}
	sort.Strings(st.Leases)
	return st
}
