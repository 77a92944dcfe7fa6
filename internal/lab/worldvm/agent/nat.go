package main

// A NAT between two namespaces (the kernel's masquerade, set up through
// router/firewall's nftables code), a capture of one link's IPv4 packets,
// and a steady stream of numbered UDP datagrams through a tunnel: what
// the IKEv2 tests need to see NAT traversal, and how many packets a
// rekey or a restart costs.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/router/firewall"
)

// cmdMasquerade turns namespace NS into a NAT router: forwarding on, and
// everything leaving through OUT-IF gets OUT-IF's address (nftables
// masquerade; the kernel's conntrack keeps the UDP mappings). With
// FORWARD-IKE-TO, UDP 500 and 4500 arriving on OUT-IF go to that inside
// address, as a home router's port forward: a peer outside can start
// IKE with the host behind the NAT.
func cmdMasquerade(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	if _, err := n.link(args[1]); err != nil {
		return "", err
	}
	if err := n.run(func() error {
		for _, p := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv4/conf/all/forwarding"} {
			if err := writeProc(p, "1"); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return "", err
	}
	rs := &firewall.Ruleset{Table: "world_nat", Chains: []firewall.Chain{{Name: "postrouting", Type: "nat",
		Hook: "postrouting", Priority: 100, Policy: "accept",
		Rules: []firewall.Rule{{OIf: args[1], IPv4: true, Verdict: "masquerade", Comment: "the world's NAT"}}}}}
	if len(args) > 2 {
		to, err := netip.ParseAddr(args[2])
		if err != nil || !to.Is4() {
			return "", kinded("usage", fmt.Errorf("forward to %q: want an IPv4 address", args[2]))
		}
		pre := firewall.Chain{Name: "prerouting", Type: "nat", Hook: "prerouting", Priority: -100, Policy: "accept"}
		for _, port := range []uint16{500, 4500} {
			pre.Rules = append(pre.Rules, firewall.Rule{IIf: args[1], IPv4: true, Proto: "udp", DPort: port,
				Verdict: "dnat", DNAT: netip.AddrPortFrom(to, port), Comment: "IKE forwarded inside"})
		}
		rs.Chains = append(rs.Chains, pre)
	}
	if err := firewall.Apply(rs, firewall.InNetNS(n.fd)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s masquerades out of %s", n.name, args[1]), nil
}

func writeProc(p, v string) error {
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(v+"\n"))
	return err
}

// capture is a running AF_PACKET capture of one interface.
type capture struct {
	fd   int
	mu   sync.Mutex
	pkts [][]byte // IPv4 packets, both directions, in order
	done chan struct{}
}

var (
	capMu    sync.Mutex
	captures = map[string]*capture{}
)

const maxCapture = 20000

// cmdCapture starts capturing IF's packets in NS (both directions).
func cmdCapture(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	l, err := n.link(args[1])
	if err != nil {
		return "", err
	}
	key := n.name + "/" + args[1]
	capMu.Lock()
	defer capMu.Unlock()
	if captures[key] != nil {
		return "", fmt.Errorf("capture on %s already runs", key)
	}
	c := &capture{done: make(chan struct{})}
	// ETH_P_ALL: a socket bound to ETH_P_IP sees only what comes in,
	// not what the interface sends; flowOf sorts out what is not IPv4.
	proto := htons(unix.ETH_P_ALL)
	if err := n.run(func() (err error) {
		c.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(proto))
		if err != nil {
			return err
		}
		return unix.Bind(c.fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: l.Attrs().Index})
	}); err != nil {
		return "", err
	}
	unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	captures[key] = c
	go func() {
		defer close(c.done)
		buf := make([]byte, 65536)
		for {
			m, _, err := unix.Recvfrom(c.fd, buf, 0)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			c.mu.Lock()
			if len(c.pkts) < maxCapture {
				c.pkts = append(c.pkts, append([]byte(nil), buf[:m]...))
			}
			c.mu.Unlock()
		}
	}()
	return "capturing " + key, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// cmdCaptureEnd stops the capture and summarizes it: one line per flow
// ("udp 198.51.100.1:4500 > 198.51.100.2:4500 packets N"), then
// "packets N" (IPv4 in all), and "marker N": the packets whose bytes contain MARKER
// (the tunnel's cleartext, which must never show outside).
func cmdCaptureEnd(_ context.Context, a *agent, args []string) (string, error) {
	key := args[0] + "/" + args[1]
	capMu.Lock()
	c := captures[key]
	delete(captures, key)
	capMu.Unlock()
	if c == nil {
		return "", kinded("usage", fmt.Errorf("no capture on %s", key))
	}
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
	unix.Close(c.fd)
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	keepESP(key, c.pkts) // for replay
	flows := map[string]int{}
	marker, ipv4, ipv6 := 0, 0, 0
	for _, p := range c.pkts {
		if f, ok := flowOf6(p); ok {
			ipv6++
			if len(args) > 2 && bytes.Contains(p, []byte(args[2])) {
				marker++
			}
			flows[f]++
			continue
		}
		if len(p) < 20 || p[0]>>4 != 4 {
			continue // ARP, IPv6's link chatter and the like (SOCK_DGRAM: no link header)
		}
		ipv4++
		if len(args) > 2 && bytes.Contains(p, []byte(args[2])) {
			marker++
		}
		flows[flowOf(p)]++
	}
	var lines []string
	for f, k := range flows {
		lines = append(lines, fmt.Sprintf("%s packets %d", f, k))
	}
	sort.Strings(lines)
	lines = append(lines, fmt.Sprintf("packets %d", ipv4))
	if ipv6 > 0 {
		lines = append(lines, fmt.Sprintf("ipv6 packets %d", ipv6))
	}
	lines = append(lines, fmt.Sprintf("marker %d", marker))
	return strings.Join(lines, "\n"), nil
}

// flowOf6 names an IPv6 packet's flow as flowOf does, for ESP, UDP and
// TCP right after the fixed header between addresses that are not
// link-local or multicast; ok false for the rest (neighbour discovery,
// MLD, DHCPv6 on the link: each link's own chatter, which captures of
// IPv4 tests must not start listing).
func flowOf6(p []byte) (string, bool) {
	if len(p) < 40 || p[0]>>4 != 6 {
		return "", false
	}
	src, dst := netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40]))
	if src.IsLinkLocalUnicast() || dst.IsLinkLocalUnicast() || dst.IsMulticast() {
		return "", false
	}
	switch nh := p[6]; nh {
	case unix.IPPROTO_UDP, unix.IPPROTO_TCP:
		if len(p) < 44 {
			return "", false
		}
		name := map[byte]string{unix.IPPROTO_UDP: "udp", unix.IPPROTO_TCP: "tcp"}[nh]
		return fmt.Sprintf("%s [%s]:%d > [%s]:%d", name, src, binary.BigEndian.Uint16(p[40:]), dst, binary.BigEndian.Uint16(p[42:])), true
	case unix.IPPROTO_ESP:
		return fmt.Sprintf("esp %s > %s", src, dst), true
	}
	return "", false
}

// flowOf names an IPv4 packet's protocol, addresses and ports.
func flowOf(p []byte) string {
	if len(p) < 20 || p[0]>>4 != 4 {
		return "non-ipv4"
	}
	hl := int(p[0]&0xf) * 4
	src, dst := netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
	switch p[9] {
	case unix.IPPROTO_UDP, unix.IPPROTO_TCP:
		if len(p) < hl+4 {
			break
		}
		name := map[byte]string{unix.IPPROTO_UDP: "udp", unix.IPPROTO_TCP: "tcp"}[p[9]]
		return fmt.Sprintf("%s %s:%d > %s:%d", name, src, binary.BigEndian.Uint16(p[hl:]), dst, binary.BigEndian.Uint16(p[hl+2:]))
	case unix.IPPROTO_ESP:
		return fmt.Sprintf("esp %s > %s", src, dst)
	case unix.IPPROTO_ICMP:
		return fmt.Sprintf("icmp %s > %s", src, dst)
	}
	return fmt.Sprintf("proto-%d %s > %s", p[9], src, dst)
}

// cmdUDPEcho answers every datagram on UDP [ADDR:]PORT with itself.
// With ADDR the answers leave from it, as a tunnel's policy may need.
func cmdUDPEcho(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	addr := args[1]
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	c, err := n.listenUDP(addr)
	if err != nil {
		return "", err
	}
	if err := n.addService("udp-echo:"+args[1], c); err != nil {
		return "", err
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			m, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			c.WriteTo(buf[:m], from)
		}
	}()
	return "udp-echo on " + args[1], nil
}

// probe sends numbered datagrams to a udp-echo at a steady interval and
// counts the answers.
type probe struct {
	conn     net.Conn
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	sent     uint32
	received map[uint32]bool
	dups     int
	// sentAt[i] is when datagram i+1 went out: an outage is timed by
	// the send times around it, not by counting ticks a loaded host
	// may have skipped. answeredAt is when each answer first came.
	sentAt     []time.Time
	answeredAt map[uint32]time.Time
	// start is when the probe began; answers the times, since start,
	// of the answers as they came.
	start   time.Time
	answers []time.Duration
}

// probePrompt is how soon an answer must come for its datagram to count
// as forwarded: while the router is down the sender's kernel queues
// datagrams waiting for ARP and sends them once it is back, answers that
// come seconds late and say nothing about the outage.
const probePrompt = time.Second

var (
	probeMu sync.Mutex
	probes  = map[string]*probe{}
)

// cmdProbe starts probe NAME: from NS to HOST:PORT every INTERVAL (a Go
// duration).
func cmdProbe(ctx context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[1])
	if err != nil {
		return "", err
	}
	every, err := time.ParseDuration(args[3])
	if err != nil || every <= 0 {
		return "", kinded("usage", fmt.Errorf("interval %q: want a Go duration such as 50ms", args[3]))
	}
	c, err := n.dial(ctx, "udp", args[2])
	if err != nil {
		return "", err
	}
	p := &probe{conn: c, stop: make(chan struct{}), done: make(chan struct{}), received: map[uint32]bool{}, answeredAt: map[uint32]time.Time{}, start: time.Now()}
	probeMu.Lock()
	if probes[args[0]] != nil {
		probeMu.Unlock()
		c.Close()
		return "", fmt.Errorf("probe %s already runs", args[0])
	}
	probes[args[0]] = p
	probeMu.Unlock()
	go func() {
		buf := make([]byte, 64)
		for {
			m, err := c.Read(buf)
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue
				}
				select {
				case <-p.stop:
					return
				default:
				}
				time.Sleep(10 * time.Millisecond) // ICMP errors while no route: keep reading
				continue
			}
			if m >= 4 {
				p.mu.Lock()
				seq := binary.BigEndian.Uint32(buf)
				if p.received[seq] {
					p.dups++
				}
				p.received[seq] = true
				if _, ok := p.answeredAt[seq]; !ok {
					p.answeredAt[seq] = time.Now()
				}
				p.answers = append(p.answers, time.Since(p.start))
				p.mu.Unlock()
			}
		}
	}()
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		msg := make([]byte, 32)
		copy(msg[4:], "probe through the tunnel")
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			p.mu.Lock()
			p.sent++
			p.sentAt = append(p.sentAt, time.Now())
			binary.BigEndian.PutUint32(msg, p.sent)
			p.mu.Unlock()
			c.Write(msg)
		}
	}()
	return "probe " + args[0] + " to " + args[2] + " every " + every.String(), nil
}

// cmdProbeEnd stops the probe after a last second for late answers:
// "sent N received M lost L dups D last-lost S outage-ms O outage-lost K
// outage-from F late X gap G resumed R" (S: the highest sequence number
// without an answer, 0 for none; X: datagrams answered, but more than
// probePrompt after they were sent; O: the longest outage, a run of
// datagrams lost or answered late, from the sending of its first (F) to
// that of the next one answered promptly, in milliseconds, K datagrams in
// it; an outage still on at the end runs to the last datagram sent; G:
// the longest time without an answer, the start and the end included; R:
// when, after the probe started, the answer that ended that gap came, 0s
// if none did).
func cmdProbeEnd(_ context.Context, _ *agent, args []string) (string, error) {
	probeMu.Lock()
	p := probes[args[0]]
	delete(probes, args[0])
	probeMu.Unlock()
	if p == nil {
		return "", kinded("usage", fmt.Errorf("no probe %q", args[0]))
	}
	close(p.stop)
	<-p.done
	time.Sleep(time.Second)
	p.conn.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	var lost, last, late uint32
	prompt := func(s uint32) bool {
		at, ok := p.answeredAt[s]
		return ok && int(s) <= len(p.sentAt) && at.Sub(p.sentAt[s-1]) <= probePrompt
	}
	for s := uint32(1); s <= p.sent; s++ {
		if !p.received[s] {
			lost++
			last = s
		} else if !prompt(s) {
			late++
		}
	}
	o := longestOutage(p.sent, prompt, p.sentAt)
	var gap, resumed, prev time.Duration
	for _, at := range p.answers {
		if at-prev > gap {
			gap, resumed = at-prev, at
		}
		prev = at
	}
	if end := time.Since(p.start) - time.Second; end-prev > gap {
		gap, resumed = end-prev, 0
	}
	return "sent " + strconv.Itoa(int(p.sent)) + fmt.Sprintf(" received %d lost %d dups %d last-lost %d outage-ms %d outage-lost %d outage-from %d late %d gap %s resumed %s",
		len(p.received), lost, p.dups, last, o.d.Milliseconds(), o.lost, o.from, late, gap.Round(time.Millisecond), resumed.Round(time.Millisecond)), nil
}

type outage struct {
	from, lost uint32
	d          time.Duration
}

// longestOutage finds the longest run of datagrams among 1..sent that
// were not forwarded (ok false), timed by their send times.
func longestOutage(sent uint32, ok func(uint32) bool, sentAt []time.Time) outage {
	var best outage
	for s := uint32(1); s <= sent; {
		if ok(s) {
			s++
			continue
		}
		e := s
		for e <= sent && !ok(e) {
			e++
		}
		// e is the first forwarded datagram after the run, or sent+1.
		end := e
		if end > sent {
			end = sent
		}
		o := outage{from: s, lost: e - s}
		if int(end) <= len(sentAt) && int(s) <= len(sentAt) {
			o.d = sentAt[end-1].Sub(sentAt[s-1])
		}
		if o.d > best.d || o.d == best.d && o.lost > best.lost {
			best = o
		}
		s = e
	}
	return best
}
