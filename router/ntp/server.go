package ntp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Server answers SNTP (RFC 4330) on the LAN with the router's clock, once
// that clock has been set from upstream: the DHCP server names the
// router as the LAN's NTP server (option 42).
//
// Until then it answers "not synchronised" (leap indicator 3, stratum 16,
// reference "INIT", as ntpd does) rather than nothing: clients (chrony,
// tested) refuse such an answer at once and try their other servers,
// where silence would cost them timeouts and still leave them asking. Stratum 16 and not 0 because some clients
// take stratum 0 for a kiss-o'-death and back off for a long time.
type Server struct {
	cfg ServerConfig

	mu      sync.Mutex
	synced  bool
	stratum uint8
	refID   [4]byte
	refTime time.Time
	delay   time.Duration // root delay
	disp    time.Duration // root dispersion at refTime
	window  time.Time     // start of the rate window
	counts  map[netip.Addr]int
	total   int
}

// ServerConfig says whom a Server answers.
type ServerConfig struct {
	// Allowed are the sources answered (the LAN); others are ignored,
	// so the router is no reflector for the WAN.
	Allowed []netip.Prefix
	// PerSource and Total bound the answers per second, to one source
	// and to all; 0 means 4 and 200. Requests over them get no answer
	// (a flood gets no amplification and costs no log lines).
	PerSource, Total int
	// Now is the clock read (tests); nil means time.Now.
	Now func() time.Time
}

// phi is RFC 5905's dispersion growth: the clock is trusted a bit less
// every second since it was set (15 ppm).
const phi = 15e-6

// NewServer returns a server that answers "not synchronised" until
// Synced is called.
func NewServer(cfg ServerConfig) *Server {
	if cfg.PerSource == 0 {
		cfg.PerSource = 4
	}
	if cfg.Total == 0 {
		cfg.Total = 200
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{cfg: cfg, counts: map[netip.Addr]int{}}
}

// Synced records a setting of the router's clock from upstream: from now
// on the server answers with stratum upstream+1 and the upstream's
// address as its reference.
func (s *Server) Synced(r Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced = true
	s.stratum = min(r.Stratum+1, 15)
	s.refID = [4]byte{}
	if r.Addr.Is4() {
		s.refID = r.Addr.As4()
	}
	s.refTime = r.Time
	s.delay, s.disp = r.RootDelay, r.RootDispersion
}

// SetAllowed replaces the sources answered: the LAN's IPv6 prefixes
// change with the ISP's delegation.
func (s *Server) SetAllowed(ps []netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Allowed = append([]netip.Prefix(nil), ps...)
}

// ListenAndServe answers on addr ("192.168.1.1:123") until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	c, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, c)
}

// Serve answers on c until ctx ends; it closes c.
func (s *Server) Serve(ctx context.Context, c net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	buf := make([]byte, 512)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		rx := s.cfg.Now()
		ua, ok := from.(*net.UDPAddr)
		if !ok {
			continue
		}
		src, _ := netip.AddrFromSlice(ua.IP)
		if r := s.answer(buf[:n], src.Unmap(), rx); r != nil {
			c.WriteTo(r, from)
		}
	}
}

// answer is the reply to req from src, received at rx; nil for none.
func (s *Server) answer(req []byte, src netip.Addr, rx time.Time) []byte {
	if len(req) < 48 || req[0]&7 != 3 || !s.allowed(src) {
		return nil // not a client's request, or not from the LAN
	}
	vn := req[0] >> 3 & 7
	if vn < 1 || vn > 4 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.admit(src, rx) {
		return nil
	}
	r := make([]byte, 48)
	r[0] = vn<<3 | 4
	r[2] = req[2]              // poll: echoed
	r[3] = 0xec                // precision: 2^-20 s
	copy(r[24:32], req[40:48]) // origin: the client's transmit time
	putTime(r[32:40], rx)      // receive
	if !s.synced {
		r[0] |= 3 << 6
		r[1] = 16
		copy(r[12:16], "INIT")
	} else {
		r[1] = s.stratum
		putShort(r[4:8], s.delay)
		age := max(rx.Sub(s.refTime), 0)
		putShort(r[8:12], s.disp+time.Duration(float64(age)*phi))
		copy(r[12:16], s.refID[:])
		putTime(r[16:24], s.refTime)
	}
	putTime(r[40:48], s.cfg.Now()) // transmit, as late as can be
	return r
}

func (s *Server) allowed(a netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.cfg.Allowed {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// admit counts an answer to src in the current one-second window.
func (s *Server) admit(src netip.Addr, now time.Time) bool {
	if d := now.Sub(s.window); d >= time.Second || d < 0 {
		s.window = now
		s.total = 0
		clear(s.counts) // holds at most Total sources
	}
	if s.total >= s.cfg.Total || s.counts[src] >= s.cfg.PerSource {
		return false
	}
	s.total++
	s.counts[src]++
	return true
}
