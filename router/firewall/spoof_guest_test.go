package firewall

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// Forged packets, as a hostile host on either side sends them, against
// the router with its firewall (issue 20, "No anti-spoofing"). They run
// twice: with the firewall alone (the guest's namespaces start with
// rp_filter 0, as the router did before), then with ReversePathSysctls
// set too, where the kernel drops some of them before the firewall and
// everything honest must still pass.

// spoofChecks runs after tunnelChecks: it uses the tunnel's remote
// network on the wan host. rpFilter says whether the sysctls are set.
func spoofChecks(t *testing.T, wan, router, lan *netNS, rpFilter bool) {
	// (a) A LAN host talks to the router; a WAN host forges that host's
	// source and ports. Before the fix conntrack called the forgery
	// "established" and the router's socket read it.
	t.Run("forged LAN source matching a flow", func(t *testing.T) {
		got := router.udpEcho(t, routerLAN+":5300")
		var c *net.UDPConn
		err := lan.Do(func() (err error) {
			c, err = net.DialUDP("udp4", udpAddr(lanHost, 5353), udpAddr(routerLAN, 5300))
			return
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		exchange(t, c, "hello") // the router answers: the flow is established
		before := counter(t, router, CounterSpoofDrop)
		wan.sendRaw(t, unix.IPPROTO_UDP, lanHost, routerLAN, udpPacket(5353, 5300, "forged"), "")
		if _, err := c.Write([]byte("after")); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"hello from " + lanHost, "after from " + lanHost} {
			if m := next(t, got); m != want {
				t.Fatalf("the router read %q, want %q: a forged packet from the WAN got in", m, want)
			}
		}
		if after := counter(t, router, CounterSpoofDrop); after <= before {
			t.Errorf("spoof_drop %d -> %d, want the forgery counted", before, after)
		}
	})

	// (a) A LAN host's flow to the tunnel's remote network, answered in
	// the clear from the WAN: the answer matches the flow but came out of
	// no SA, and must not reach the LAN.
	t.Run("tunnel reply in the clear not forwarded", func(t *testing.T) {
		got := wan.udpEcho(t, remoteHost+":9004")
		var c *net.UDPConn
		err := lan.Do(func() (err error) {
			c, err = net.DialUDP("udp4", udpAddr(lanHost, 5354), udpAddr(remoteHost, 9004))
			return
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		before := counter(t, router, CounterSpoofDrop)
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		// With no SA the flow's first packet is dropped on its way out
		// (the forward chain's rt ipsec missing): the "reply" is sent
		// to the LAN host's port as if it had gone.
		if m := next(t, got); m != "" {
			t.Fatalf("the remote host read %q in the clear with no SA", m)
		}
		if err := wan.Do(func() error {
			r, err := net.DialUDP("udp4", udpAddr(remoteHost, 9014), udpAddr(lanHost, 5354))
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = r.Write([]byte("reply"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, err := c.Read(make([]byte, 64)); err == nil {
			t.Fatalf("the LAN host got a %d-byte reply sent in the clear from the tunnel's remote network", n)
		}
		if after := counter(t, router, CounterSpoofDrop); after <= before {
			t.Errorf("spoof_drop %d -> %d, want the clear reply counted", before, after)
		}
	})

	// (b) From the WAN with a LAN host's source, pings to the router's
	// two addresses: no answer anywhere, not even to the LAN host the
	// source names (a reflection onto the LAN).
	t.Run("forged LAN source from the WAN unanswered", func(t *testing.T) {
		lanICMP, wanICMP := lan.listenICMP(t), wan.listenICMP(t)
		before := counter(t, router, CounterSpoofDrop)
		for i, dst := range []string{routerLAN, routerWAN} {
			wan.sendRaw(t, unix.IPPROTO_ICMP, lanHost, dst, echo(i), "")
		}
		for _, l := range []*icmp.PacketConn{lanICMP, wanICMP} {
			if from, ok := echoReply(l, 2*time.Second); ok {
				t.Errorf("the router answered a forged LAN source from the WAN: reply from %s", from)
			}
		}
		if after := counter(t, router, CounterSpoofDrop); after < before+2 {
			t.Errorf("spoof_drop %d -> %d, want both forgeries counted", before, after)
		}
	})

	// (b) A LAN host posing as the wan host pings the router's LAN
	// address. Before the fix the answer left by the WAN, from
	// 192.168.1.1 (conntrack's reply is not masqueraded).
	t.Run("forged WAN source from the LAN unanswered", func(t *testing.T) {
		wanICMP := wan.listenICMP(t)
		inBefore, rpBefore := counter(t, router, CounterInputDrop), netstat(t, router, "IPReversePathFilter")
		lan.sendRaw(t, unix.IPPROTO_ICMP, wanHost, routerLAN, echo(7), "")
		if from, ok := echoReply(wanICMP, 2*time.Second); ok {
			t.Fatalf("the router answered a LAN host posing as %s: reply from %s out of the WAN", wanHost, from)
		}
		inAfter, rpAfter := counter(t, router, CounterInputDrop), netstat(t, router, "IPReversePathFilter")
		if rpFilter {
			// The kernel drops it on routing, before the input chain.
			if rpAfter <= rpBefore || inAfter != inBefore {
				t.Errorf("with rp_filter: IPReversePathFilter %d -> %d, input_drop %d -> %d; want the kernel's count up, the firewall's not reached", rpBefore, rpAfter, inBefore, inAfter)
			}
		} else if inAfter <= inBefore {
			t.Errorf("input_drop %d -> %d, want the forgery counted by the firewall", inBefore, inAfter)
		}
	})

	// (c) A DHCP client without an address asks from 0.0.0.0 by
	// broadcast: the LAN's address rule must not shut it out.
	t.Run("dhcp from 0.0.0.0 on the LAN", func(t *testing.T) {
		got := router.udpEcho(t, "0.0.0.0:67")
		lan.sendFrame(t, "l0", "0.0.0.0", "255.255.255.255", udpPacket(68, 67, "discover"))
		if m := next(t, got); m != "discover from 0.0.0.0" {
			t.Errorf("the router's port 67 read %q, want the broadcast from 0.0.0.0", m)
		}
	})
}

// rpFilterChecks sets the router's reverse-path sysctls as the router
// does and checks the kernel took them (d).
func rpFilterChecks(t *testing.T, router *netNS) {
	t.Run("rp_filter set", func(t *testing.T) {
		for _, s := range ReversePathSysctls("wan0", "lan0") {
			if err := router.Sysctl(s.Path, s.Value); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{"all", "wan0", "lan0"} {
			var b []byte
			err := router.Do(func() (err error) {
				b, err = os.ReadFile("/proc/sys/net/ipv4/conf/" + p + "/rp_filter")
				return
			})
			if err != nil {
				t.Fatal(err)
			}
			if v := strings.TrimSpace(string(b)); v != "1" {
				t.Errorf("%s rp_filter = %s, want 1 (strict)", p, v)
			}
		}
	})
}

func udpAddr(ip string, port int) *net.UDPAddr {
	return &net.UDPAddr{IP: net.ParseIP(ip), Port: port}
}

// exchange sends msg on c and waits for the echo.
func exchange(t *testing.T, c *net.UDPConn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != msg {
		t.Fatalf("no echo of %q: %q, %v", msg, buf[:n], err)
	}
}

// udpEcho listens on addr in ns, answers each datagram with itself and
// tells the test what came, "PAYLOAD from SOURCE".
func (ns *netNS) udpEcho(t *testing.T, addr string) <-chan string {
	t.Helper()
	var l net.PacketConn
	if err := ns.Do(func() (err error) { l, err = net.ListenPacket("udp4", addr); return }); err != nil {
		t.Fatalf("%s: listen udp %s: %v", ns.Name, addr, err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan string, 16)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := l.ReadFrom(buf)
			if err != nil {
				return
			}
			ch <- string(buf[:n]) + " from " + from.(*net.UDPAddr).IP.String()
			l.WriteTo(buf[:n], from)
		}
	}()
	return ch
}

// next is the next datagram an udpEcho read, or "" after five seconds.
func next(t *testing.T, ch <-chan string) string {
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		return ""
	}
}

// sendRaw sends one IPv4 packet from ns with a header of the test's own
// making, so that its source can be any address. dev, when set, is the
// interface it must leave by (for a broadcast).
func (ns *netNS) sendRaw(t *testing.T, proto int, src, dst string, payload []byte, dev string) {
	t.Helper()
	var pc net.PacketConn
	if err := ns.Do(func() (err error) { pc, err = net.ListenPacket("ip4:"+strconv.Itoa(proto), "0.0.0.0"); return }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	sc, err := pc.(*net.IPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	sc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
		if serr == nil && dev != "" {
			serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, dev)
		}
	})
	if serr != nil {
		t.Fatal(serr)
	}
	rc, err := ipv4.NewRawConn(pc)
	if err != nil {
		t.Fatal(err)
	}
	h := &ipv4.Header{Version: 4, Len: ipv4.HeaderLen, TotalLen: ipv4.HeaderLen + len(payload), TTL: 64,
		Protocol: proto, Src: net.ParseIP(src).To4(), Dst: net.ParseIP(dst).To4()}
	if err := rc.WriteTo(h, payload, nil); err != nil {
		t.Fatalf("%s: raw packet %s -> %s: %v", ns.Name, src, dst, err)
	}
}

// sendFrame broadcasts one IPv4 UDP packet from src to dst out of dev in
// ns, header and all written here: a raw IP socket would put the
// interface's address in for a source of 0.0.0.0, as a DHCP client
// without an address must send.
func (ns *netNS) sendFrame(t *testing.T, dev, src, dst string, udp []byte) {
	t.Helper()
	h := make([]byte, 20)
	h[0], h[8], h[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(udp)))
	copy(h[12:], net.ParseIP(src).To4())
	copy(h[16:], net.ParseIP(dst).To4())
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
	err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifc.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
		return unix.Sendto(fd, append(h, udp...), 0, to)
	})
	if err != nil {
		t.Fatalf("%s: frame from %s on %s: %v", ns.Name, src, dev, err)
	}
}

// htons puts a protocol number in network order, as AF_PACKET wants it
// (the guest is x86: little-endian).
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// udpPacket is a UDP header and data, without a checksum (0: none, which
// IPv4 allows).
func udpPacket(sport, dport uint16, data string) []byte {
	b := make([]byte, 8+len(data))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	copy(b[8:], data)
	return b
}

const echoID = 0x5f0f

func echo(seq int) []byte {
	b, _ := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: echoID, Seq: seq, Data: []byte("forged")}}).Marshal(nil)
	return b
}

func (ns *netNS) listenICMP(t *testing.T) *icmp.PacketConn {
	t.Helper()
	var c *icmp.PacketConn
	if err := ns.Do(func() (err error) { c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0"); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echoReply waits up to d for an echo reply to echo's requests and says
// where it came from.
func echoReply(c *icmp.PacketConn, d time.Duration) (string, bool) {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return "", false
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == echoID {
			return from.String(), true
		}
	}
}

// netstat reads one counter of /proc/net/netstat in ns (TcpExt and IpExt
// lines: names, then values). thread-self: /proc/net is the main
// thread's namespace, not the one Do entered.
func netstat(t *testing.T, ns *netNS, name string) uint64 {
	t.Helper()
	var b []byte
	if err := ns.Do(func() (err error) { b, err = os.ReadFile("/proc/thread-self/net/netstat"); return }); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		names := strings.Fields(sc.Text())
		if !sc.Scan() {
			break
		}
		vals := strings.Fields(sc.Text())
		for i, n := range names {
			if n == name && i < len(vals) {
				v, err := strconv.ParseUint(vals[i], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
	}
	t.Fatal(fmt.Errorf("no %s in /proc/net/netstat", name))
	return 0
}
