package ra

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// RFC 4861 section 6.2.1 and 10's router constants.
const (
	DefaultMaxInterval = 600 * time.Second
	// MaxInitialInterval and maxInitialAdverts: the first few
	// advertisements after start come faster.
	MaxInitialInterval = 16 * time.Second
	maxInitialAdverts  = 3
	// minDelayBetweenRAs bounds multicast advertisements sent in answer
	// to solicitations; maxRADelay spreads answers of several routers.
	minDelayBetweenRAs = 3 * time.Second
	maxRADelay         = 500 * time.Millisecond
	// sendRetry is the wait after a failed send: mostly the link-local
	// address still in duplicate address detection (1-2 s after the
	// link comes up), and an advertisement a delegation asked for
	// should leave as soon as DAD ends, not up to a second later
	// (bench/run's v6time section measures that path).
	sendRetry = 100 * time.Millisecond
	// unicastPerSecond bounds unicast answers: a host flooding
	// solicitations gets no more than this many a second in all.
	unicastPerSecond = 10
)

// Lifetimes RFC 9096 section 3.2 wants of a CE router's prefixes (its
// ND_PREFERRED_LIMIT and ND_VALID_LIMIT), so that hosts drop a prefix
// that went away without a word (a reboot with a new delegation) within
// 90 minutes: the defaults and the caps for a prefix's lifetimes.
const (
	PreferredLimit = 2700 * time.Second
	ValidLimit     = 5400 * time.Second
)

// Config is a Server's interface and timing.
type Config struct {
	// Interface is the LAN's interface (the bridge when it has several
	// ports).
	Interface string
	// MaxInterval is the most time between unsolicited advertisements
	// (default DefaultMaxInterval); the least is a third of it.
	MaxInterval time.Duration
	// Log reports what the server does; nil for none.
	Log func(format string, args ...any)
	// Store, when set, keeps the prefixes hosts were told of (value
	// AdvertisedValue), so that a new server, after a reboot, deprecates
	// the ones it does not announce again (RFC 9096 section 3.3).
	Store ValueStore
}

// AdvertisedValue is the store's name for the prefixes the LAN's hosts
// may hold addresses in: those announced and those still announced
// deprecated.
const AdvertisedValue = "ipv6-advertised"

// Stats count what the server did and ignored.
type Stats struct {
	Sent        uint64 // advertisements sent (multicast and unicast)
	Solicited   uint64 // valid solicitations answered
	BadRS       uint64 // solicitations ignored as invalid (RFC 4861 6.1.1)
	ForeignRAs  uint64 // advertisements from another router, ignored
	SendErrors  uint64
	Deprecating int // old prefixes still announced with preferred lifetime 0
}

// Server sends a LAN's router advertisements.
type Server struct {
	cfg  Config
	kick chan struct{}

	mu      sync.Mutex
	adv     Advert
	stale   []stalePrefix
	stats   Stats
	lastMC  time.Time // last multicast advertisement
	ucount  int       // unicast answers in ucStart's second
	ucStart time.Time

	// goneRoutes are routes withdrawn: announced with lifetime 0 until
	// the lifetime hosts were last given would have run out.
	goneRoutes []staleRoute

	// keepMu orders keep's writes; kept is what the store holds.
	keepMu sync.Mutex
	kept   []string
}

// stalePrefix is a prefix taken out of the advertisements: announced
// with preferred lifetime 0 and its valid lifetime counting down to
// until, so hosts stop making new connections from it at once and drop
// it when it runs out (RFC 7084 L-13, RFC 9096 section 3.5).
type stalePrefix struct {
	p     Prefix
	until time.Time
	// zero: announced with valid lifetime 0 too. A prefix from before a
	// reboot: what hosts have left of it is not known here, and a
	// valid lifetime above that would lengthen it (RFC 4862 5.5.3 e);
	// 0 never does (RFC 7084 L-13 allows either).
	zero bool
}

type staleRoute struct {
	p     netip.Prefix
	until time.Time
}

// New makes a server for cfg that announces a; Serve runs it.
func New(cfg Config, a Advert) (*Server, error) {
	if cfg.Interface == "" {
		return nil, errors.New("ra: no interface")
	}
	if cfg.MaxInterval == 0 {
		cfg.MaxInterval = DefaultMaxInterval
	}
	// RFC 4861 section 6.2.1: MaxRtrAdvInterval is 4 to 1800 s.
	if cfg.MaxInterval < 4*time.Second || cfg.MaxInterval > 1800*time.Second {
		return nil, fmt.Errorf("ra: interval %v: want 4s-30m", cfg.MaxInterval)
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if _, err := a.Marshal(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, adv: a, kick: make(chan struct{}, 1)}
	if cfg.Store != nil {
		s.staleFromStore(time.Now())
		s.keep(time.Now())
	}
	return s, nil
}

// staleFromStore deprecates the prefixes hosts were told of before this
// server started (the last boot, or the server a push replaced) that a
// does not announce: with both lifetimes 0, for as long as any host may
// still hold one (ValidLimit, the most any advertisement gave).
func (s *Server) staleFromStore(now time.Time) {
	var kept []string
	ok, err := s.cfg.Store.Value(AdvertisedValue, &kept)
	if err != nil {
		s.cfg.Log("ra: the prefixes advertised before: %v", err)
		return
	}
	if !ok {
		return
	}
	s.kept = kept
	announced := map[netip.Prefix]bool{}
	for _, p := range s.adv.Prefixes {
		announced[p.Prefix.Masked()] = true
	}
	for _, k := range kept {
		p, err := netip.ParsePrefix(k)
		if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || announced[p.Masked()] {
			continue
		}
		announced[p.Masked()] = true
		s.stale = append(s.stale, stalePrefix{p: Prefix{Prefix: p.Masked()}, until: now.Add(ValidLimit), zero: true})
		s.cfg.Log("ra: %s advertised on %s before the restart and not now: announced deprecated", p, s.cfg.Interface)
	}
}

// keep writes the prefixes hosts may hold addresses in to the store
// when they changed: written before the advertisement that names a new
// one goes out, so a power cut right after it still finds it kept.
func (s *Server) keep(now time.Time) {
	if s.cfg.Store == nil {
		return
	}
	s.keepMu.Lock()
	defer s.keepMu.Unlock()
	s.mu.Lock()
	var set []string
	for _, p := range s.adv.At(now).Prefixes {
		if p.Valid > 0 {
			set = append(set, p.Prefix.Masked().String())
		}
	}
	for _, st := range s.stale {
		if st.until.After(now) {
			set = append(set, st.p.Prefix.Masked().String())
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)
	same := slices.Equal(set, s.kept)
	s.mu.Unlock()
	if same {
		return
	}
	if err := s.cfg.Store.SetValue(AdvertisedValue, set); err != nil {
		s.cfg.Log("ra: keeping the advertised prefixes: %v", err)
		return
	}
	s.kept = set
}

// Update replaces what the advertisements say and sends one at once. A
// prefix in the old advertisement but not in a is announced from now on
// with preferred lifetime 0 (deprecated) and the rest of its valid
// lifetime, until that runs out.
func (s *Server) Update(a Advert) error {
	if _, err := a.Marshal(); err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	keep := map[netip.Prefix]bool{}
	for _, p := range a.Prefixes {
		keep[p.Prefix.Masked()] = true
	}
	var stale []stalePrefix
	for _, st := range s.stale {
		if !keep[st.p.Prefix.Masked()] && st.until.After(now) {
			stale = append(stale, st)
		}
	}
	was := s.adv.At(now) // what hosts were told, as of now
	for _, p := range was.Prefixes {
		if !keep[p.Prefix.Masked()] && p.Valid > 0 {
			stale = append(stale, stalePrefix{p: p, until: now.Add(p.Valid)})
			s.cfg.Log("ra: %s withdrawn from %s: announced deprecated for %v", p.Prefix, s.cfg.Interface, p.Valid)
		}
	}
	keepRoute := map[netip.Prefix]bool{}
	for _, r := range a.Routes {
		keepRoute[r.Prefix.Masked()] = true
	}
	var gone []staleRoute
	for _, g := range s.goneRoutes {
		if !keepRoute[g.p] && g.until.After(now) {
			gone = append(gone, g)
		}
	}
	for _, r := range was.Routes {
		if !keepRoute[r.Prefix.Masked()] && r.Lifetime > 0 {
			gone = append(gone, staleRoute{p: r.Prefix.Masked(), until: now.Add(r.Lifetime)})
		}
	}
	s.adv, s.stale, s.goneRoutes = a, stale, gone
	s.mu.Unlock()
	s.keep(now)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// Withdrawn are the /64s hosts would be told are deprecated once a is
// announced: those announced now and not in a, and those already
// deprecating and not in a, until their time runs out. The router
// answers sources in them with RFC 7084 L-14's ICMPv6 error.
func (s *Server) Withdrawn(a Advert, now time.Time) []netip.Prefix {
	keep := map[netip.Prefix]bool{}
	for _, p := range a.Prefixes {
		keep[p.Prefix.Masked()] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []netip.Prefix
	for _, p := range s.adv.At(now).Prefixes {
		if q := p.Prefix.Masked(); !keep[q] && p.Valid > 0 {
			out = append(out, q)
		}
	}
	for _, st := range s.stale {
		if q := st.p.Prefix.Masked(); !keep[q] && st.until.After(now) {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, netip.Prefix.Compare)
	return slices.Compact(out)
}

// WithdrawnEnd is when the next of the deprecating prefixes runs out
// (what Withdrawn returns then lacks it), or the zero time for none.
func (s *Server) WithdrawnEnd(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var end time.Time
	for _, st := range s.stale {
		if st.until.After(now) && (end.IsZero() || st.until.Before(end)) {
			end = st.until
		}
	}
	return end
}

// Stats is what the server did so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Deprecating = len(s.stale)
	return st
}

// current is the advertisement to send now: the prefixes, and the
// stale ones with preferred lifetime 0 and what is left of their valid
// lifetime.
func (s *Server) current(now time.Time, mac net.HardwareAddr) Advert {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.adv.At(now) // copies the slices
	if a.SourceMAC == nil {
		a.SourceMAC = mac
	}
	live := s.stale[:0]
	for _, st := range s.stale {
		left := st.until.Sub(now)
		if left <= 0 {
			s.cfg.Log("ra: %s no longer announced on %s", st.p.Prefix, s.cfg.Interface)
			continue
		}
		live = append(live, st)
		p := st.p
		p.Preferred, p.Valid = 0, left.Truncate(time.Second)
		if st.zero {
			p.Valid = 0
		}
		a.Prefixes = append(a.Prefixes, p)
	}
	s.stale = live
	gone := s.goneRoutes[:0]
	for _, g := range s.goneRoutes {
		if g.until.After(now) {
			gone = append(gone, g)
			a.Routes = append(a.Routes, Route{Prefix: g.p})
		}
	}
	s.goneRoutes = gone
	return a
}

var (
	allNodes   = net.ParseIP("ff02::1")
	allRouters = net.ParseIP("ff02::2")
)

// Serve sends advertisements on the interface and answers solicitations
// until ctx ends, then sends a last one with router lifetime 0 (RFC
// 4861 section 6.2.5: hosts stop using the router at once). It must
// run in the LAN interface's network namespace.
func (s *Server) Serve(ctx context.Context) error {
	ifi, err := net.InterfaceByName(s.cfg.Interface)
	if err != nil {
		return fmt.Errorf("ra: %w", err)
	}
	pc, err := listen(ctx, ifi)
	if err != nil {
		return err
	}
	defer pc.Close()

	answers := make(chan netip.Addr, 16) // solicitors to answer; :: for multicast
	readDone := make(chan error, 1)
	go func() { readDone <- s.read(pc, answers) }()

	send := func(dst net.IP, a Advert) error {
		b, err := a.Marshal()
		var src net.IP
		if err == nil {
			src, err = linkLocal(ifi)
		}
		if err == nil {
			// The source is set, not left to the kernel: to a solicitor
			// with a global address it would pick a global one, and
			// hosts drop advertisements not from a link-local address
			// (RFC 4861 section 6.1.2).
			cm := &ipv6.ControlMessage{IfIndex: ifi.Index, HopLimit: 255, Src: src}
			_, err = pc.WriteTo(b, cm, &net.IPAddr{IP: dst, Zone: ifi.Name})
		}
		s.mu.Lock()
		if err != nil {
			s.stats.SendErrors++
		} else {
			s.stats.Sent++
			if dst.IsMulticast() {
				s.lastMC = time.Now()
			}
		}
		s.mu.Unlock()
		return err
	}

	initial := 0
	next := time.Duration(0) // the first at once
	timer := time.NewTimer(next)
	defer timer.Stop()
	var lastErr error
	for {
		multicast := false
		select {
		case <-ctx.Done():
			a := s.current(time.Now(), ifi.HardwareAddr)
			a.RouterLifetime = 0
			send(allNodes, a)
			pc.Close()
			<-readDone
			return ctx.Err()
		case err := <-readDone:
			return fmt.Errorf("ra: reading on %s: %w", ifi.Name, err)
		case <-s.kick:
			multicast = true
		case <-timer.C:
			multicast = true
			initial++
		case src := <-answers:
			if src.IsUnspecified() {
				// A multicast answer, but not sooner than
				// minDelayBetweenRAs after the last one.
				s.mu.Lock()
				wait := time.Until(s.lastMC.Add(minDelayBetweenRAs))
				s.mu.Unlock()
				if d := rand.N(maxRADelay); d > wait {
					wait = d
				}
				timer.Reset(max(wait, 0))
				continue
			}
			if err := send(src.AsSlice(), s.current(time.Now(), ifi.HardwareAddr)); err != nil {
				s.cfg.Log("ra: answering %s on %s: %v", src, ifi.Name, err)
			}
			continue
		}
		if multicast {
			s.keep(time.Now()) // a deprecated prefix that ran out leaves the store
			err := send(allNodes, s.current(time.Now(), ifi.HardwareAddr))
			switch {
			case err != nil && (lastErr == nil || lastErr.Error() != err.Error()):
				// Most often the interface's link-local address is
				// still tentative (duplicate address detection):
				// try again soon.
				s.cfg.Log("ra: sending on %s: %v (trying again)", ifi.Name, err)
				next = sendRetry
			case err != nil:
				next = sendRetry
			case initial < maxInitialAdverts:
				next = min(MaxInitialInterval, s.interval())
			default:
				next = s.interval()
			}
			lastErr = err
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(next)
		}
	}
}

// linkLocal is ifi's link-local address, the source of every
// advertisement.
func linkLocal(ifi *net.Interface) (net.IP, error) {
	as, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil && n.IP.IsLinkLocalUnicast() {
			return n.IP, nil
		}
	}
	return nil, fmt.Errorf("%s has no link-local address yet", ifi.Name)
}

// interval is a random time between MinRtrAdvInterval (a third of the
// most) and MaxRtrAdvInterval, as RFC 4861 section 6.2.4 wants.
func (s *Server) interval() time.Duration {
	lo := s.cfg.MaxInterval / 3
	return lo + rand.N(s.cfg.MaxInterval-lo)
}

// read takes solicitations and other routers' advertisements off pc
// until it is closed; a valid solicitation goes to answers after a
// random delay (RFC 4861 section 6.2.6).
func (s *Server) read(pc *ipv6.PacketConn, answers chan<- netip.Addr) error {
	buf := make([]byte, 1500)
	for {
		n, cm, src, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		from, _ := netip.AddrFromSlice(src.(*net.IPAddr).IP)
		hop := -1
		if cm != nil {
			hop = cm.HopLimit
		}
		m := buf[:n]
		switch {
		case n > 0 && m[0] == typeRA:
			s.mu.Lock()
			s.stats.ForeignRAs++
			first := s.stats.ForeignRAs == 1
			s.mu.Unlock()
			if first {
				s.cfg.Log("ra: a router advertisement from %s on %s ignored: this router is the LAN's router", from, s.cfg.Interface)
			}
		case n > 0 && m[0] == typeRS:
			if err := checkRS(m, from, hop); err != nil {
				s.mu.Lock()
				s.stats.BadRS++
				s.mu.Unlock()
				continue
			}
			if !from.IsUnspecified() && !s.unicastAllowed() {
				from = netip.IPv6Unspecified() // over the limit: a multicast answer
			}
			s.mu.Lock()
			s.stats.Solicited++
			s.mu.Unlock()
			to := from.WithZone("")
			time.AfterFunc(rand.N(maxRADelay), func() {
				select {
				case answers <- to:
				default: // answers pending already: this one is covered
				}
			})
		}
	}
}

// unicastAllowed says whether one more unicast answer fits this
// second's budget.
func (s *Server) unicastAllowed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.ucStart) >= time.Second {
		s.ucStart, s.ucount = now, 0
	}
	s.ucount++
	return s.ucount <= unicastPerSecond
}

// listen opens a raw ICMPv6 socket on ifi only, taking in router
// solicitations and advertisements (the kernel filters the rest out),
// sending with hop limit 255 as neighbour discovery requires, and not
// hearing its own multicast.
func listen(ctx context.Context, ifi *net.Interface) (*ipv6.PacketConn, error) {
	pc, err := rawICMPv6(ctx, ifi)
	if err != nil {
		return nil, err
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterSolicitation)
	f.Accept(ipv6.ICMPTypeRouterAdvertisement)
	for _, step := range []struct {
		what string
		err  error
	}{
		{"ICMPv6 filter", pc.SetICMPFilter(&f)},
		{"control messages", pc.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagInterface, true)},
		{"multicast hop limit", pc.SetMulticastHopLimit(255)},
		{"hop limit", pc.SetHopLimit(255)},
		{"multicast loopback", pc.SetMulticastLoopback(false)},
		{"all-routers group", pc.JoinGroup(ifi, &net.IPAddr{IP: allRouters})},
	} {
		if step.err != nil {
			pc.Close()
			return nil, fmt.Errorf("ra: %s on %s: %w", step.what, ifi.Name, step.err)
		}
	}
	return pc, nil
}

// rawICMPv6 opens a raw ICMPv6 socket bound to ifi: the LAN's server
// and the WAN's listener each hear their own link only.
func rawICMPv6(ctx context.Context, ifi *net.Interface) (*ipv6.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.BindToDevice(int(fd), ifi.Name)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := lc.ListenPacket(ctx, "ip6:ipv6-icmp", "::")
	if err != nil {
		return nil, fmt.Errorf("ra: raw ICMPv6 socket on %s: %w", ifi.Name, err)
	}
	return ipv6.NewPacketConn(c), nil
}
