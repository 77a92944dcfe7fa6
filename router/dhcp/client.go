package dhcp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
)

// WANLease is what the WAN's DHCP server gave the router.
type WANLease struct {
	Address   netip.Prefix // the router's WAN address with its prefix
	Router    netip.Addr   // the default gateway; invalid when the server gave none
	DNS       []netip.Addr
	Server    netip.Addr    // the DHCP server that gave the lease
	LeaseTime time.Duration // from Acquired
	T1, T2    time.Duration // renew and rebind, from Acquired
	Acquired  time.Time

	ack *dhcpv4.DHCPv4 // what a renewal is built from
}

// Expires is when the lease runs out unless renewed.
func (l *WANLease) Expires() time.Time { return l.Acquired.Add(l.LeaseTime) }

// sameConfig: nothing the router configures differs.
func (l *WANLease) sameConfig(o *WANLease) bool {
	return l.Address == o.Address && l.Router == o.Router && slices.Equal(l.DNS, o.DNS)
}

// ClientConfig is the WAN's DHCP client.
type ClientConfig struct {
	Interface string
	// Hostname is sent to the server (option 12); "" sends none.
	Hostname string
	// HWAddr is the client's MAC; nil uses the interface's.
	HWAddr net.HardwareAddr
	// Update applies a lease: prev is what was applied before (nil at
	// first), next what to apply now, nil when the lease is lost and its
	// address must no longer be used. It is called from Run's goroutine,
	// after a new lease and after a renewal that changed the address,
	// router or DNS servers; Run waits for it.
	Update func(prev, next *WANLease)
	// Log gets one line per lease, loss and failed attempt; nil
	// discards them.
	Log func(format string, args ...any)
}

// Client keeps a lease on the WAN: it discovers a server, renews at T1,
// rebinds at T2, starts over when the lease is lost, and while no server
// answers retries with a growing pause. Run it in its own goroutine.
type Client struct {
	cfg ClientConfig

	// Seams for the host tests: the DHCP exchanges, the clock and the
	// pauses.
	open  func() (exchanger, error)
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool
	// running says whether the WAN link can send (IFF_RUNNING); nil
	// does not wait.
	running func() bool

	mu    sync.Mutex
	lease *WANLease
}

// exchanger is the part of nclient4.Client the client uses.
type exchanger interface {
	Request(ctx context.Context, modifiers ...dhcpv4.Modifier) (*nclient4.Lease, error)
	SendAndRead(ctx context.Context, dest *net.UDPAddr, p *dhcpv4.DHCPv4, match nclient4.Matcher) (*dhcpv4.DHCPv4, error)
	Close() error
}

// Each DHCP exchange waits exchangeTimeout for an answer, doubling it
// over exchangeTries sends (2+4+8 s), before the client pauses.
const (
	exchangeTimeout = 2 * time.Second
	exchangeTries   = 3
	// Pauses between failed discoveries grow from minBackoff to
	// maxBackoff, with some jitter so that many routers behind one
	// rebooted ISP box do not ask in step.
	minBackoff = 4 * time.Second
	maxBackoff = 64 * time.Second
	// minRetry is RFC 2131 4.4.5's least pause between renewal attempts.
	minRetry = 60 * time.Second
)

// NewClient returns a client; nothing happens until Run.
func NewClient(cfg ClientConfig) *Client {
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if cfg.Update == nil {
		cfg.Update = func(_, _ *WANLease) {}
	}
	c := &Client{cfg: cfg, now: time.Now, sleep: sleepCtx}
	c.running = func() bool {
		// An interface it cannot see is open's to report.
		ifi, err := net.InterfaceByName(cfg.Interface)
		return err != nil || ifi.Flags&net.FlagRunning != 0
	}
	c.open = func() (exchanger, error) {
		opts := []nclient4.ClientOpt{nclient4.WithTimeout(exchangeTimeout), nclient4.WithRetry(exchangeTries)}
		if cfg.HWAddr != nil {
			opts = append(opts, nclient4.WithHWAddr(cfg.HWAddr))
		}
		return nclient4.New(cfg.Interface, opts...)
	}
	return c
}

// Lease is the lease held now, nil when none (for the status page).
func (c *Client) Lease() *WANLease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease == nil {
		return nil
	}
	l := *c.lease
	l.DNS = slices.Clone(l.DNS)
	return &l
}

func (c *Client) set(next *WANLease) {
	c.mu.Lock()
	prev := c.lease
	c.lease = next
	c.mu.Unlock()
	if next == nil || prev == nil || !prev.sameConfig(next) {
		c.cfg.Update(prev, next)
	}
}

// Run keeps a lease until ctx ends, then returns ctx.Err(). It neither
// releases the lease nor reports a loss when it stops: the router keeps
// using the address while it restarts the client.
func (c *Client) Run(ctx context.Context) error {
	if err := waitEntropy(ctx); err != nil {
		return err
	}
	var nc exchanger
	defer func() {
		if nc != nil {
			nc.Close()
		}
	}()
	pause := minBackoff
	failed := func(format string, args ...any) {
		d := jitter(pause)
		c.cfg.Log(format+"; again in %s", append(args, d.Round(time.Second))...)
		c.sleep(ctx, d)
		pause = min(2*pause, maxBackoff)
	}
	for ctx.Err() == nil {
		if nc == nil {
			var err error
			if nc, err = c.open(); err != nil {
				nc = nil
				failed("dhcp client: %s: %v", c.cfg.Interface, err)
				continue
			}
		}
		if c.Lease() == nil {
			c.waitRunning(ctx)
			l, err := c.discover(ctx, nc)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				// A fresh socket next time: cheap, and it recovers from an
				// interface that went away and came back.
				nc.Close()
				nc = nil
				failed("dhcp client: %s: no lease: %v", c.cfg.Interface, err)
				continue
			}
			pause = minBackoff
			c.cfg.Log("dhcp client: %s: %s", c.cfg.Interface, l)
			c.set(l)
		}
		l := c.Lease()
		if !c.sleep(ctx, l.Acquired.Add(l.T1).Sub(c.now())) {
			break
		}
		c.renew(ctx, nc, l)
	}
	return ctx.Err()
}

// linkPoll is how often waitRunning looks at the link, for its first
// linkPollFast; then every linkPollSlow (a WAN without a cable costs a
// board next to nothing, and a cable plugged in later waits a second).
const (
	linkPoll     = 50 * time.Millisecond
	linkPollFast = 10 * time.Second
	linkPollSlow = time.Second
)

// waitRunning holds a DISCOVER until the WAN link runs: one sent before
// it has carrier (a PHY still negotiating, or just after the kernel
// brought the link up, before its queue is attached) is lost and costs
// the exchange's first timeout, 2 s (bench/run's v6time section saw it
// in a third of its runs).
func (c *Client) waitRunning(ctx context.Context) {
	if c.running == nil {
		return
	}
	logged := false
	start := c.now()
	for !c.running() {
		if !logged {
			c.cfg.Log("dhcp client: %s: no carrier yet (waiting)", c.cfg.Interface)
			logged = true
		}
		d := linkPoll
		if c.now().Sub(start) >= linkPollFast {
			d = linkPollSlow
		}
		if !c.sleep(ctx, d) {
			return
		}
	}
}

func (c *Client) modifiers() []dhcpv4.Modifier {
	if c.cfg.Hostname == "" {
		return nil
	}
	return []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptHostName(c.cfg.Hostname))}
}

// discover is DISCOVER, OFFER, REQUEST, ACK.
func (c *Client) discover(ctx context.Context, nc exchanger) (*WANLease, error) {
	l, err := nc.Request(ctx, c.modifiers()...)
	if err != nil {
		return nil, err
	}
	return parseLease(l.ACK, c.now())
}

// renew keeps l going: RENEWING with l's server from T1, REBINDING with
// any server from T2, after each unanswered attempt waiting half the time
// left to the next step (at least a minute, RFC 2131 4.4.5). It returns
// with a renewed lease set, or with none after a NAK or at expiry.
//
// No exchange runs past the next step: an unanswered one (2+4+8 s) that
// started just before expiry would otherwise keep the expired address in
// use until it gave up. The pause after it is measured from when it
// ended, not from when it began.
func (c *Client) renew(ctx context.Context, nc exchanger, l *WANLease) {
	for ctx.Err() == nil {
		now := c.now()
		if !now.Before(l.Expires()) {
			c.cfg.Log("dhcp client: %s: lease on %s expired unrenewed; discovering again", c.cfg.Interface, l.Address)
			c.set(nil)
			return
		}
		rebinding := !now.Before(l.Acquired.Add(l.T2))
		next := l.Acquired.Add(l.T2)
		if rebinding {
			next = l.Expires()
		}
		req, err := dhcpv4.NewRenewFromAck(l.ack, c.modifiers()...)
		if err != nil {
			c.cfg.Log("dhcp client: building a renewal: %v", err)
			c.set(nil)
			return
		}
		match := nclient4.IsMessageType(dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak)
		if !rebinding {
			match = nclient4.IsAll(nclient4.IsCorrectServer(l.Server.AsSlice()), match)
		}
		// To the broadcast address in both states: the exchange goes out
		// of a raw socket without the leased address as its source, and a
		// rebinding client must reach any server.
		xctx, cancel := context.WithTimeout(ctx, next.Sub(now))
		resp, err := nc.SendAndRead(xctx, nclient4.DefaultServers, req, match)
		cancel()
		switch {
		case err == nil && resp.MessageType() == dhcpv4.MessageTypeAck:
			next, perr := parseLease(resp, c.now())
			if perr == nil && next.Address.Addr() == l.Address.Addr() {
				c.set(next)
				return
			}
			// An ACK for another address is not a renewal: start over.
			c.cfg.Log("dhcp client: %s: renewal answered with %v (%v); discovering again", c.cfg.Interface, next, perr)
			c.set(nil)
			return
		case err == nil: // NAK
			c.cfg.Log("dhcp client: %s: server refused to renew %s; discovering again", c.cfg.Interface, l.Address)
			c.set(nil)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = nclient4.ErrNoResponse // cut short at the next step
		}
		d := retryWait(c.now(), next)
		if d == 0 {
			// At T2 (rebinding next) or expiry (the loop drops the lease
			// and says so).
			if !rebinding {
				c.cfg.Log("dhcp client: %s: no answer to renew %s (%v); rebinding with any server", c.cfg.Interface, l.Address, err)
			}
			continue
		}
		c.cfg.Log("dhcp client: %s: no answer to renew %s (%v); again in %s", c.cfg.Interface, l.Address, err, d.Round(time.Second))
		if !c.sleep(ctx, d) {
			return
		}
	}
}

// retryWait is the pause after an unanswered renewal at now, with the
// next step (rebinding or expiry) at next: half the time left, at least
// minRetry, but never past next.
func retryWait(now, next time.Time) time.Duration {
	left := next.Sub(now)
	if left <= 0 {
		return 0
	}
	return min(max(left/2, minRetry), left)
}

// parseLease reads a lease from an ACK.
func parseLease(ack *dhcpv4.DHCPv4, now time.Time) (*WANLease, error) {
	ip, ok := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if !ok || !ip.IsGlobalUnicast() {
		return nil, fmt.Errorf("dhcp client: the server gave no usable address (%v)", ack.YourIPAddr)
	}
	bits := 0
	if m := ack.SubnetMask(); m != nil {
		ones, size := m.Size()
		if size != 32 {
			return nil, fmt.Errorf("dhcp client: subnet mask %v is not contiguous", net.IP(m))
		}
		bits = ones
	} else {
		ones, _ := net.IP(ip.AsSlice()).DefaultMask().Size() // RFC 2131 leaves it to the class
		bits = ones
	}
	l := &WANLease{Address: netip.PrefixFrom(ip, bits), Acquired: now, ack: ack}
	for _, r := range ack.Router() {
		if a, ok := netip.AddrFromSlice(r.To4()); ok && !a.IsUnspecified() {
			l.Router = a
			break
		}
	}
	for _, d := range ack.DNS() {
		if a, ok := netip.AddrFromSlice(d.To4()); ok && !a.IsUnspecified() {
			l.DNS = append(l.DNS, a)
		}
	}
	if s, ok := netip.AddrFromSlice(ack.ServerIdentifier().To4()); ok {
		l.Server = s
	}
	l.LeaseTime = ack.IPAddressLeaseTime(time.Hour) // required in an ACK; an hour if a server forgets it
	if l.LeaseTime < 10*time.Second {
		l.LeaseTime = 10 * time.Second // renewing faster than that is a storm, not a lease
	}
	l.T1 = ack.IPAddressRenewalTime(l.LeaseTime / 2)
	l.T2 = ack.IPAddressRebindingTime(l.LeaseTime * 7 / 8)
	if l.T1 <= 0 || l.T2 <= l.T1 || l.LeaseTime <= l.T2 {
		l.T1, l.T2 = l.LeaseTime/2, l.LeaseTime*7/8 // RFC 2131 4.4.5 defaults for nonsense
	}
	return l, nil
}

// jitter spreads d by ±25%.
func jitter(d time.Duration) time.Duration {
	return d*3/4 + rand.N(d/2+1)
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
