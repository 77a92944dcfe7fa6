// Command ping is the board's ping: ICMP echo requests to a host, a line
// per reply, and the count of replies at the end, as iputils' ping.
//
// It replaces u-root's, which takes the first ICMP packet its raw socket
// reads as the reply: pinging the router's own address, that is its own
// echo request, and the real reply then arrives during the next round
// ("got seq 1; want 2"); a reply to another process's ping, or a late
// one, stops it the same way. Here a round waits for the echo reply with
// this ping's id and the round's sequence number, from the host pinged,
// skipping anything else; a round without one is a loss, not the end.
//
//	ping [-6] [-c COUNT] [-i SECONDS] [-W SECONDS] [-s SIZE] HOST
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is ping with args: exit status 0 when a reply came, 1 when none
// did, 2 on bad usage or a socket that cannot be had.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ping", flag.ContinueOnError)
	fs.SetOutput(stderr)
	count := fs.Int("c", 0, "stop after `COUNT` requests (0: until Ctrl-C)")
	interval := fs.Float64("i", 1, "`SECONDS` between requests")
	wait := fs.Float64("W", 1, "`SECONDS` to wait for each reply")
	size := fs.Int("s", 56, "data bytes in each request")
	v6 := fs.Bool("6", false, "IPv6")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ping [-6] [-c COUNT] [-i SECONDS] [-W SECONDS] [-s SIZE] HOST")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	if *count < 0 || *interval < 0 || *wait <= 0 || *size < 0 || *size > 65000 {
		fmt.Fprintln(stderr, "ping: -c, -i and -s must not be negative, -W must be positive, -s at most 65000")
		return 2
	}
	host := fs.Arg(0)
	network, listen := "ip4", "0.0.0.0"
	if *v6 {
		network, listen = "ip6", "::"
	}
	dst, err := net.ResolveIPAddr(network, host)
	if err != nil {
		fmt.Fprintf(stderr, "ping: %s: %v\n", host, err)
		return 2
	}
	proto := "ip4:icmp"
	if *v6 {
		proto = "ip6:ipv6-icmp"
	}
	conn, err := icmp.ListenPacket(proto, listen)
	if err != nil {
		fmt.Fprintf(stderr, "ping: %v (raw ICMP needs root)\n", err)
		return 2
	}
	defer conn.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	p := &pinger{conn: conn, dst: dst, v6: *v6, id: os.Getpid() & 0xffff, size: *size,
		wait: time.Duration(*wait * float64(time.Second)), out: stdout}
	fmt.Fprintf(stdout, "PING %s (%s): %d data bytes\n", host, dst, *size)
	sent, got := p.loop(ctx, *count, time.Duration(*interval*float64(time.Second)))
	fmt.Fprintf(stdout, "--- %s ping statistics ---\n%d packets transmitted, %d received, %d%% packet loss\n",
		host, sent, got, lossPercent(sent, got))
	if got == 0 {
		return 1
	}
	return 0
}

func lossPercent(sent, got int) int {
	if sent == 0 {
		return 0
	}
	return (sent - got) * 100 / sent
}

// pinger sends echo requests on conn and waits for their replies.
type pinger struct {
	conn net.PacketConn
	dst  net.Addr
	v6   bool
	id   int
	size int
	wait time.Duration
	out  io.Writer
}

// loop runs count rounds (0: until ctx ends), interval apart, and
// returns how many requests went out and how many were answered.
func (p *pinger) loop(ctx context.Context, count int, interval time.Duration) (sent, got int) {
	for seq := 1; count == 0 || seq <= count; seq++ {
		start := time.Now()
		rtt, err := p.round(seq)
		if err == nil || errors.Is(err, errNoReply) {
			sent++
		}
		switch {
		case err == nil:
			got++
			fmt.Fprintf(p.out, "%d bytes from %s: icmp_seq=%d time=%.3f ms\n", p.size+8, p.dst, seq, float64(rtt)/float64(time.Millisecond))
		case errors.Is(err, errNoReply):
			fmt.Fprintf(p.out, "no reply from %s for icmp_seq=%d within %v\n", p.dst, seq, p.wait)
		default:
			fmt.Fprintf(p.out, "ping: icmp_seq=%d: %v\n", seq, err)
		}
		if count != 0 && seq == count {
			break
		}
		select {
		case <-ctx.Done():
			return sent, got
		case <-time.After(max(0, interval-time.Since(start))):
		}
	}
	return sent, got
}

// errNoReply is a round whose reply did not come in time.
var errNoReply = errors.New("no reply")

// round sends request seq and waits for its reply, skipping every other
// packet the raw socket reads: requests (its own, when pinging a local
// address), other pings' replies, late replies to earlier rounds.
func (p *pinger) round(seq int) (time.Duration, error) {
	req, reply := icmp.Type(ipv4.ICMPTypeEcho), icmp.Type(ipv4.ICMPTypeEchoReply)
	proto := ipv4.ICMPTypeEcho.Protocol()
	if p.v6 {
		req, reply, proto = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply, ipv6.ICMPTypeEchoRequest.Protocol()
	}
	wb, err := (&icmp.Message{Type: req, Body: &icmp.Echo{ID: p.id, Seq: seq, Data: bytes.Repeat([]byte{0xa5}, p.size)}}).Marshal(nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := p.conn.SetReadDeadline(start.Add(p.wait)); err != nil {
		return 0, err
	}
	if _, err := p.conn.WriteTo(wb, p.dst); err != nil {
		return 0, err
	}
	buf := make([]byte, 65536)
	for {
		n, from, err := p.conn.ReadFrom(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, errNoReply
		}
		if err != nil {
			return 0, err
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != reply || !sameHost(from, p.dst) {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == p.id && e.Seq == seq {
			return time.Since(start), nil
		}
	}
}

// sameHost says whether a and b are the same IP address.
func sameHost(a, b net.Addr) bool {
	ip := func(x net.Addr) net.IP {
		switch v := x.(type) {
		case *net.IPAddr:
			return v.IP
		case *net.UDPAddr:
			return v.IP
		}
		return nil
	}
	return ip(a) != nil && ip(a).Equal(ip(b))
}
