package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// fakeConn is a raw ICMP socket: each request written queues what the
// network answers it with (answer decides), read back in order.
type fakeConn struct {
	net.PacketConn
	queue  []packet
	answer func(seq int) []packet
}

type packet struct {
	b    []byte
	from net.Addr
}

type timeout struct{}

func (timeout) Error() string   { return "i/o timeout" }
func (timeout) Timeout() bool   { return true }
func (timeout) Temporary() bool { return true }

func (c *fakeConn) SetReadDeadline(time.Time) error { return nil }
func (c *fakeConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	m, err := icmp.ParseMessage(1, b)
	if err != nil {
		return 0, err
	}
	c.queue = append(c.queue, c.answer(m.Body.(*icmp.Echo).Seq)...)
	return len(b), nil
}
func (c *fakeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	if len(c.queue) == 0 {
		return 0, nil, timeout{}
	}
	p := c.queue[0]
	c.queue = c.queue[1:]
	return copy(b, p.b), p.from, nil
}

var (
	router = &net.IPAddr{IP: net.IPv4(192, 168, 1, 1)}
	other  = &net.IPAddr{IP: net.IPv4(192, 168, 1, 7)}
)

func echo(t *testing.T, typ ipv4.ICMPType, id, seq int, from net.Addr) packet {
	b, err := (&icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("x")}}).Marshal(nil)
	if err != nil {
		t.Fatal(err)
	}
	return packet{b, from}
}

// Every round waits for its own reply: its own request read back (a
// ping of the router's own address), a late reply to the round before,
// another ping's reply and a reply from another host are skipped, and a
// round without a reply is a loss, not the end. u-root's ping stopped
// with "got seq 1; want 2".
func TestRounds(t *testing.T) {
	const id = 4242
	for _, tc := range []struct {
		name      string
		answer    func(t *testing.T, seq int) []packet
		count     int
		sent, got int
		want      []string
	}{
		{"own address: the request comes back too", func(t *testing.T, seq int) []packet {
			return []packet{echo(t, ipv4.ICMPTypeEcho, id, seq, router), echo(t, ipv4.ICMPTypeEchoReply, id, seq, router)}
		}, 3, 3, 3, []string{"icmp_seq=1 ", "icmp_seq=2 ", "icmp_seq=3 "}},
		{"a reply late by a round, and strangers", func(t *testing.T, seq int) []packet {
			if seq == 1 {
				return []packet{echo(t, ipv4.ICMPTypeEcho, id, 1, router)}
			}
			return []packet{echo(t, ipv4.ICMPTypeEchoReply, id, seq-1, router), echo(t, ipv4.ICMPTypeEchoReply, id+1, seq, router),
				echo(t, ipv4.ICMPTypeEchoReply, id, seq, other), echo(t, ipv4.ICMPTypeEchoReply, id, seq, router)}
		}, 2, 2, 1, []string{"no reply from 192.168.1.1 for icmp_seq=1", "64 bytes from 192.168.1.1: icmp_seq=2 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			c := &fakeConn{answer: func(seq int) []packet { return tc.answer(t, seq) }}
			p := &pinger{conn: c, dst: router, id: id, size: 56, wait: time.Second, out: &out}
			sent, got := p.loop(context.Background(), tc.count, 0)
			if sent != tc.sent || got != tc.got {
				t.Errorf("sent %d, got %d; want %d, %d\n%s", sent, got, tc.sent, tc.got, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"-c", "-1", "192.168.1.1"}, {"-W", "0", "192.168.1.1"}, {"a", "b"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("ping %q: exit %d, stderr %q; want 2 and why", args, code, errb.String())
		}
	}
}

// On the loopback, where the raw socket reads its own request before the
// reply (the case u-root's ping failed), two rounds get two replies.
// Without a raw socket (not root) it says why and is skipped.
func TestLoopback(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-c", "2", "-i", "0.1", "-W", "5", "127.0.0.1"}, &out, &errb)
	if code == 2 && strings.Contains(errb.String(), "needs root") {
		t.Skipf("no raw ICMP socket here: %s", errb.String())
	}
	if code != 0 || !strings.Contains(out.String(), "2 packets transmitted, 2 received, 0% packet loss") {
		t.Errorf("ping -c 2 127.0.0.1: exit %d\n%s%s", code, out.String(), errb.String())
	}
}
