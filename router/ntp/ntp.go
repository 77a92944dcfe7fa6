// Package ntp sets the router's clock with SNTP (RFC 4330) once the WAN
// is up: the boards have no battery-backed clock (or one that drifts),
// and reports, logs and leases want real time. A client this small is
// not worth a library.
package ntp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// ntpEpoch is 1900-01-01, where NTP time starts.
var ntpEpoch = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)

// Config says whom to ask and how to set the clock.
type Config struct {
	// Servers are host names or addresses, port 123 unless given.
	Servers []string
	// First, when set, names servers to ask before Servers in each
	// round: the ISP's, which DHCP may give after the start.
	First func() []string
	// Set sets the clock to t (the router passes one calling
	// settimeofday; tests a fake).
	Set func(t time.Time) error
	// Logf gets one line per clock setting and per failed round.
	Logf func(format string, args ...any)
	// Quietf, when set, gets the failed rounds after the first in a row
	// instead of Logf: the router sends them to the card's log only, as
	// retries every few seconds broke into the console's prompt.
	Quietf func(format string, args ...any)
	// Timeout bounds one exchange; 0 means 3 s.
	Timeout time.Duration
	// Resync is the time between settings; 0 means 12 h.
	Resync time.Duration
	// Retry is the first wait after a failed round, doubling up to
	// Resync; 0 means 5 s.
	Retry time.Duration
	// Now is the clock read (tests); nil means time.Now.
	Now func() time.Time
	// Synced, when set, is told of every setting (the LAN's SNTP
	// server starts answering from the first).
	Synced func(Result)
	// Resolver looks up server names. The board has no /etc/resolv.conf
	// (Go's default resolver would ask [::1]:53, where nothing listens),
	// so the router passes one that asks the WAN's resolvers; nil means
	// net.DefaultResolver.
	Resolver *net.Resolver
}

// Result is one successful exchange.
type Result struct {
	Server string
	Time   time.Time     // the server's time, at the moment of the answer
	Offset time.Duration // how far the local clock was off
	// What the LAN's server (Server) passes on: the upstream's address
	// (its reference ID), stratum, and its distance from its own
	// reference plus this exchange's round trip.
	Addr           netip.Addr
	Stratum        uint8
	RootDelay      time.Duration
	RootDispersion time.Duration
}

// Run sets the clock from the first server that answers well, then again
// every Resync, retrying with backoff while none does, until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	wait := cfg.Retry
	failed := 0 // rounds failed in a row
	for {
		res, err := SyncOnce(ctx, cfg)
		switch {
		case err == nil:
			wait, failed = cfg.Resync, 0
			if cfg.Logf != nil {
				cfg.Logf("ntp: clock set to %s (it was off by %v) from %s", res.Time.UTC().Format(time.RFC3339), res.Offset.Round(time.Millisecond), res.Server)
			}
		case ctx.Err() != nil:
			return nil
		default:
			failed++
			logf := cfg.Logf
			if failed > 1 && cfg.Quietf != nil {
				logf = cfg.Quietf
			}
			if logf != nil {
				logf("ntp: %v; trying again in %v", err, wait)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if err != nil {
			wait = min(2*wait, cfg.Resync)
		}
	}
}

func (c *Config) defaults() {
	if c.Timeout == 0 {
		c.Timeout = 3 * time.Second
	}
	if c.Resync == 0 {
		c.Resync = 12 * time.Hour
	}
	if c.Retry == 0 {
		c.Retry = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// SyncOnce asks the servers in turn and sets the clock from the first
// good answer.
func SyncOnce(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	var errs []error
	servers := cfg.Servers
	if cfg.First != nil {
		servers = append(cfg.First(), cfg.Servers...)
	}
	for _, s := range servers {
		res, err := query(ctx, s, cfg.Timeout, cfg.Now, cfg.Resolver)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
			continue
		}
		if cfg.Set != nil {
			if err := cfg.Set(res.Time); err != nil {
				return nil, fmt.Errorf("setting the clock: %w", err)
			}
		}
		if cfg.Synced != nil {
			cfg.Synced(*res)
		}
		return res, nil
	}
	if len(errs) == 0 {
		return nil, errors.New("no NTP servers")
	}
	return nil, errors.Join(errs...)
}

// Query asks one server, looking its name up with net.DefaultResolver.
func Query(ctx context.Context, server string, timeout time.Duration, now func() time.Time) (*Result, error) {
	return query(ctx, server, timeout, now, nil)
}

func query(ctx context.Context, server string, timeout time.Duration, now func() time.Time, res *net.Resolver) (*Result, error) {
	if now == nil {
		now = time.Now
	}
	addr := server
	if _, _, err := net.SplitHostPort(server); err != nil {
		addr = net.JoinHostPort(server, "123")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := net.Dialer{Resolver: res}
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	req := make([]byte, 48)
	req[0] = 0<<6 | 4<<3 | 3 // no leap warning, version 4, mode 3 (client)
	t1 := now()
	// Our transmit time, which the server echoes as the origin: it ties
	// the answer to this request.
	putTime(req[40:], t1)
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	buf := make([]byte, 128)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		t4 := now()
		res, err := parse(buf[:n], req[40:48], t1, t4)
		if errors.Is(err, errNotOurs) {
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Server = server
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			res.Addr = ap.Addr().Unmap()
		}
		return res, nil
	}
}

var errNotOurs = errors.New("an answer to another request")

// parse checks an answer and computes the offset: ((t2-t1)+(t3-t4))/2.
func parse(b, origin []byte, t1, t4 time.Time) (*Result, error) {
	if len(b) < 48 {
		return nil, fmt.Errorf("answer of %d bytes, want 48", len(b))
	}
	if string(b[24:32]) != string(origin) {
		return nil, errNotOurs
	}
	li, mode, stratum := b[0]>>6, b[0]&7, b[1]
	switch {
	case mode != 4:
		return nil, fmt.Errorf("mode %d, want 4 (server)", mode)
	case stratum == 0 && isKissCode(b[12:16]):
		return nil, fmt.Errorf("kiss-o'-death %q: %s", string(b[12:16]), kissMeaning(string(b[12:16])))
	case stratum == 0, li == 3:
		// chronyd without a reference answers so (leap indicator 3,
		// stratum 0, reference ID zero): no kiss, just no time to give.
		return nil, fmt.Errorf("the server is not synchronised (leap indicator %d, stratum %d, %s)", li, stratum, refName(b[12:16]))
	case stratum > 15:
		return nil, fmt.Errorf("the server is not synchronised (stratum %d)", stratum)
	}
	t2, t3 := getTime(b[32:40]), getTime(b[40:48])
	if binary.BigEndian.Uint64(b[40:48]) == 0 {
		return nil, errors.New("no transmit time")
	}
	offset := (t2.Sub(t1) + t3.Sub(t4)) / 2
	delay := max(t4.Sub(t1)-t3.Sub(t2), 0)
	return &Result{Time: t4.Add(offset), Offset: offset, Stratum: stratum,
		RootDelay:      getShort(b[4:8]) + delay,
		RootDispersion: getShort(b[8:12]) + delay/2}, nil
}

// isKissCode: a kiss-o'-death carries four ASCII letters (RFC 5905
// 7.4), not the zeros of an unsynchronised server.
func isKissCode(b []byte) bool {
	for _, c := range b {
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && c != ' ' && c != 0 {
			return false
		}
	}
	return b[0] >= 'A' && b[0] <= 'Z'
}

func kissMeaning(code string) string {
	switch code {
	case "RATE":
		return "the server asks us to slow down"
	case "DENY", "RSTR":
		return "the server refuses us"
	}
	return "the server will not serve us"
}

// refName shows a reference ID.
func refName(b []byte) string {
	if binary.BigEndian.Uint32(b) == 0 {
		return "no reference"
	}
	return fmt.Sprintf("reference %q", string(b))
}

// getShort reads NTP's 16.16 fixed-point seconds.
func getShort(b []byte) time.Duration {
	return time.Duration(uint64(binary.BigEndian.Uint32(b)) * uint64(time.Second) >> 16)
}

func putShort(b []byte, d time.Duration) {
	binary.BigEndian.PutUint32(b, uint32(min(uint64(max(d, 0))<<16/uint64(time.Second), 0xffffffff)))
}

func putTime(b []byte, t time.Time) {
	d := t.Sub(ntpEpoch)
	sec := uint64(d / time.Second)
	frac := uint64(d%time.Second) << 32 / uint64(time.Second)
	binary.BigEndian.PutUint64(b, sec<<32|frac)
}

func getTime(b []byte) time.Time {
	v := binary.BigEndian.Uint64(b)
	sec, frac := v>>32, v&0xffffffff
	return ntpEpoch.Add(time.Duration(sec)*time.Second + time.Duration(frac*uint64(time.Second)>>32))
}
