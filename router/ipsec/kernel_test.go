package ipsec

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/cabi"
	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

// TestKernelInTheLoop boots Debian's 686 kernel (i386, so the test
// binary is GOARCH=386 and the kernel wants the 220-byte
// xfrm_usersa_info) in QEMU with Modules and veth, and runs the TestGuest*
// tests there.
func TestKernelInTheLoop(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("inside the guest: this test only starts it")
	}
	res := kerneltest.Run(t, kerneltest.Options{
		Modules: append(append([]string(nil), Modules...), "veth"),
		Run:     "TestGuest",
	})
	if res == nil {
		return
	}
	for _, name := range []string{"TestGuestTunnel", "TestGuestTunnelIPv6", "TestGuestInstallIsIdempotent", "TestGuestTamperedKey", "TestGuestKernelWantsThisLayout",
		"TestGuestRestartKeepsSeqs"} {
		if !strings.Contains(res.Output, "--- PASS: "+name) {
			t.Errorf("the guest did not pass %s", name)
		}
	}
}

const (
	wanAddrA = "198.51.100.1"
	wanAddrB = "198.51.100.2"
	lanHostB = "10.2.0.2"
	echoPort = 7000
	marker   = "OCFW-CLEARTEXT-MARKER"
)

// sites is two LANs joined by two gateways over a WAN link, each LAN
// host and gateway in its own network namespace:
//
//	lanA 10.1.0.2 -- 10.1.0.1 gwA 198.51.100.1 -- 198.51.100.2 gwB 10.2.0.1 -- 10.2.0.2 lanB
//
// testTunnel's tunnel is gwA's side, its mirror gwB's.
type sites struct {
	lanA, gwA, gwB, lanB *netNS
	hA, hB               *Handle
}

func newSites(t *testing.T) *sites {
	t.Helper()
	s := &sites{lanA: newNetNS(t, "lanA"), gwA: newNetNS(t, "gwA"), gwB: newNetNS(t, "gwB"), lanB: newNetNS(t, "lanB")}
	link(t, s.lanA, "eth0", "10.1.0.2/24", s.gwA, "lan0", "10.1.0.1/24")
	link(t, s.gwA, "wan0", wanAddrA+"/24", s.gwB, "wan1", wanAddrB+"/24")
	link(t, s.gwB, "lan0", "10.2.0.1/24", s.lanB, "eth0", lanHostB+"/24")
	s.lanA.route(t, "default", "10.1.0.1")
	s.lanB.route(t, "default", "10.2.0.1")
	s.gwA.route(t, "10.2.0.0/24", wanAddrB)
	s.gwB.route(t, "10.1.0.0/24", wanAddrA)
	for _, gw := range []*netNS{s.gwA, s.gwB} {
		gw.sysctl(t, "net/ipv4/ip_forward", "1")
	}
	var err error
	for _, h := range []struct {
		ns *netNS
		h  **Handle
	}{{s.gwA, &s.hA}, {s.gwB, &s.hB}} {
		if *h.h, err = OpenInNetNS(h.ns.fd); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*h.h).Close() })
	}
	s.echo(t)
	return s
}

// echo answers every UDP datagram to lanB:echoPort with the same bytes.
func (s *sites) echo(t *testing.T) {
	var c net.PacketConn
	err := s.lanB.do(func() (err error) {
		c, err = net.ListenPacket("udp4", fmt.Sprintf("%s:%d", lanHostB, echoPort))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			c.WriteTo(buf[:n], from)
		}
	}()
}

// exchange sends n datagrams of size bytes from lanA to lanB's echo and
// returns how many came back intact, each waited for up to wait.
func (s *sites) exchange(t *testing.T, n, size int, wait time.Duration) int {
	t.Helper()
	var c *net.UDPConn
	err := s.lanA.do(func() (err error) {
		c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(lanHostB), Port: echoPort})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok := 0
	buf := make([]byte, 2048)
	for i := 0; i < n; i++ {
		msg := []byte(fmt.Sprintf("%s %d ", marker, i))
		msg = append(msg, bytes.Repeat([]byte{byte('a' + i%26)}, size-len(msg))...)
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		c.SetReadDeadline(time.Now().Add(wait))
		for {
			k, err := c.Read(buf)
			if err != nil {
				break // lost: the next one is sent
			}
			if bytes.Equal(buf[:k], msg) {
				ok++
				break
			}
		}
	}
	return ok
}

// capture counts the frames ns sends out of its interface ifname until
// stop is called: ESP packets, and frames that carry marker in the clear.
// Only outgoing frames are what goes on the wire: a tunnel-mode packet
// decapsulated on arrival is passed to the packet taps again as if it
// came in on the same interface.
type capture struct {
	stop       func()
	mu         sync.Mutex
	esp, clear int
	lastESP    []byte // the last ESP frame, Ethernet header included
	ifindex    int
	fd         int
}

func (s *sites) capture(t *testing.T, ns *netNS, ifname string) *capture {
	t.Helper()
	var fd, ifindex int
	err := ns.do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		ifindex = ifi.Index
		const ethPAll = 0x0300 // htons(ETH_P_ALL)
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, ethPAll)
		if err != nil {
			return err
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: ethPAll, Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("capture on %s: %v", ifname, err)
	}
	c := &capture{fd: fd, ifindex: ifindex}
	done := make(chan struct{})
	var quit sync.WaitGroup
	quit.Add(1)
	go func() {
		defer quit.Done()
		buf := make([]byte, 4096)
		for {
			// Once stopped, what the kernel has queued is still read
			// (without waiting), so no frame of the exchange goes
			// uncounted (seen in CI: 39 of 40).
			stopping := false
			select {
			case <-done:
				stopping = true
			default:
			}
			flags := 0
			if stopping {
				flags = unix.MSG_DONTWAIT
			}
			n, from, err := unix.Recvfrom(fd, buf, flags)
			if err != nil {
				if stopping {
					return
				}
				continue // timeout: look at done again
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_OUTGOING {
				continue
			}
			f := buf[:n]
			c.mu.Lock()
			// Ethernet II, IPv4 (0x0800) with the protocol byte at
			// 14+9, or IPv6 (0x86dd) with the next header at 14+6.
			v4ESP := n > 14+20 && f[12] == 0x08 && f[13] == 0x00 && f[14+9] == unix.IPPROTO_ESP
			v6ESP := n > 14+40 && f[12] == 0x86 && f[13] == 0xdd && f[14+6] == unix.IPPROTO_ESP
			if v4ESP || v6ESP {
				c.esp++
				c.lastESP = append(c.lastESP[:0], f...)
			}
			if bytes.Contains(f, []byte(marker)) {
				c.clear++
			}
			c.mu.Unlock()
		}
	}()
	var once sync.Once
	c.stop = func() {
		once.Do(func() {
			close(done)
			quit.Wait()
			unix.Close(fd)
		})
	}
	t.Cleanup(c.stop)
	return c
}

// counts is what the capture has counted so far: ESP frames, and frames
// with the marker in the clear.
func (c *capture) counts() (esp, inClear int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.esp, c.clear
}

// resend puts the last ESP frame captured on the wire again, as an
// attacker on the WAN could. Call it before stop.
func (c *capture) resend(t *testing.T) {
	t.Helper()
	c.resendFrame(t, c.frame())
}

// frame is a copy of the last ESP frame captured.
func (c *capture) frame() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.lastESP...)
}

// resendFrame puts f (an ESP frame captured earlier) on the wire again.
// Call it before stop.
func (c *capture) resendFrame(t *testing.T, f []byte) {
	t.Helper()
	if len(f) == 0 {
		t.Fatal("no ESP frame captured to resend")
	}
	to := &unix.SockaddrLinklayer{Protocol: 0x0008, Ifindex: c.ifindex, Halen: 6} // htons(ETH_P_IP)
	copy(to.Addr[:], f[:6])
	if err := unix.Sendto(c.fd, f, 0, to); err != nil {
		t.Fatalf("resending an ESP frame: %v", err)
	}
}

// xfrmErrors sums the XfrmIn* error counters of /proc/net/xfrm_stat in
// ns (CONFIG_XFRM_STATISTICS), read per thread: /proc/net follows the
// process's first thread, not the one that entered ns.
func (ns *netNS) xfrmErrors(t *testing.T) (map[string]uint64, uint64) {
	t.Helper()
	var b []byte
	if err := ns.do(func() (err error) { b, err = os.ReadFile("/proc/thread-self/net/xfrm_stat"); return }); err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	var sum uint64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || !strings.HasPrefix(f[0], "XfrmIn") || f[0] == "XfrmInNoStates" {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		if v > 0 {
			m[f[0]] = v
			sum += v
		}
	}
	return m, sum
}

// settled reads tunnel a's counters on gwA, its mirror b's on gwB and
// gwB's xfrm_stat until done says they are what the test wants, for at
// most a few seconds, and returns the last reading: the counters are read
// after the exchange's last wait, but a packet still queued in a loaded
// guest's softirq backlog is counted a moment later.
func (s *sites) settled(t *testing.T, a, b Tunnel, done func(ca, cb TunnelCounters, sum uint64) bool) (ca, cb TunnelCounters, stat map[string]uint64, sum uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ca, cb = counters(t, s.hA, a), counters(t, s.hB, b)
		stat, sum = s.gwB.xfrmErrors(t)
		if done(ca, cb, sum) || time.Now().After(deadline) {
			return ca, cb, stat, sum
		}
	}
}

func install(t *testing.T, h *Handle, tun Tunnel) {
	t.Helper()
	if err := h.Install(tun); err != nil {
		t.Fatal(err)
	}
}

func counters(t *testing.T, h *Handle, tun Tunnel) TunnelCounters {
	t.Helper()
	c, err := h.Counters(tun)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGuestTunnel carries traffic between the LANs through the tunnel
// with each cipher and HMAC pair, and checks the bytes, that the WAN link
// saw only ESP, and the SA counters on both gateways.
func TestGuestTunnel(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("needs XFRM, network namespaces and veth: runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	const n, size = 20, 1000
	for _, c := range []struct {
		cipher, auth string
		esn          bool
		window       uint32
	}{
		{"aes-128-cbc", "hmac-sha1", true, 128},
		{"aes-192-cbc", "hmac-sha256", false, 64}, // anti-replay without ESN
		{"aes-256-cbc", "hmac-sha256", true, 1024},
		{"des-ede3-cbc", "hmac-sha1", false, 0}, // no anti-replay check
	} {
		t.Run(c.cipher+"+"+c.auth, func(t *testing.T) {
			s := newSites(t)
			a := testTunnel(c.cipher, c.auth, c.esn)
			a.Out.ReplayWindow, a.In.ReplayWindow = c.window, c.window
			b := mirror(a, "site-a")
			install(t, s.hA, a)
			install(t, s.hB, b)
			wanA, wanB := s.capture(t, s.gwA, "wan0"), s.capture(t, s.gwB, "wan1")
			start := time.Now()
			if got := s.exchange(t, n, size, 3*time.Second); got != n {
				t.Fatalf("%d of %d datagrams came back through the tunnel", got, n)
			}
			took := time.Since(start)
			wanB.stop()
			// wanA stays open for the replay below: its reader may lag
			// the wire by a frame, so wait (briefly) for the count.
			esp, inClear := 0, 0
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				ea, ca := wanA.counts()
				esp, inClear = ea+wanB.esp, ca+wanB.clear
				if esp >= 2*n || time.Now().After(deadline) {
					break
				}
			}
			if esp != 2*n || inClear != 0 {
				t.Errorf("the WAN link carried %d ESP packets (want %d) and %d with the marker in the clear (want 0)", esp, 2*n, inClear)
			}
			ca, cb := counters(t, s.hA, a), counters(t, s.hB, b)
			t.Logf("%d round trips in %v; gwA %+v; gwB %+v", n, took.Round(time.Millisecond), ca, cb)
			for _, p := range []struct {
				what string
				x, y SACounters
			}{{"A out / B in", ca.Out, cb.In}, {"B out / A in", cb.Out, ca.In}} {
				if p.x.Packets != n || p.y.Packets != n {
					t.Errorf("%s: %d / %d packets, want %d on both", p.what, p.x.Packets, p.y.Packets, n)
				}
				// The SAs count the inner IP packets: payload, UDP
				// and IPv4 headers.
				if p.x.Bytes != n*(size+28) || p.y.Bytes != p.x.Bytes {
					t.Errorf("%s: %d / %d bytes, want %d on both", p.what, p.x.Bytes, p.y.Bytes, n*(size+28))
				}
				if p.x.Errors() != 0 || p.y.Errors() != 0 {
					t.Errorf("%s: errors counted: %+v / %+v", p.what, p.x, p.y)
				}
			}
			if ca.Out.SPI != a.Out.SPI || cb.In.SPI != a.Out.SPI {
				t.Errorf("SPIs %#x / %#x, want %#x", ca.Out.SPI, cb.In.SPI, a.Out.SPI)
			}

			// A replayed ESP packet: dropped and counted with a
			// window, accepted without one (and then maybe followed
			// by lanA's ICMP port unreachable for the echo, as the
			// client socket is closed: hence "at least").
			wanA.resend(t)
			wanA.stop()
			wantDrops, wantPackets := uint32(1), uint64(n)
			if c.window == 0 {
				wantDrops, wantPackets = 0, n+1
			}
			deadline := time.Now().Add(3 * time.Second)
			var in SACounters
			for {
				in = counters(t, s.hB, b).In
				if in.ReplayDrops+in.WindowDrops == wantDrops && in.Packets >= wantPackets || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if in.ReplayDrops != wantDrops || in.Packets < wantPackets || c.window > 0 && in.Packets != wantPackets {
				t.Errorf("after a replayed packet with window %d: B in %+v, want %d replay drops and %d packets", c.window, in, wantDrops, wantPackets)
			}
		})
	}
}

// TestGuestInstallIsIdempotent installs the same tunnel twice (the SAs
// and their counters stay), rolls the keys (the SAs are replaced), and
// removes it twice.
func TestGuestInstallIsIdempotent(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	s := newSites(t)
	a := testTunnel("aes-128-cbc", "hmac-sha1", true)
	b := mirror(a, "site-a")
	install(t, s.hA, a)
	install(t, s.hB, b)
	if got := s.exchange(t, 5, 200, 3*time.Second); got != 5 {
		t.Fatalf("%d of 5 datagrams came back", got)
	}
	install(t, s.hA, a)
	install(t, s.hB, b)
	if c := counters(t, s.hA, a); c.Out.Packets != 5 || c.In.Packets != 5 {
		t.Errorf("after installing the same tunnel again: %+v, want the SAs kept (5 packets each way)", c)
	}
	if got := s.exchange(t, 5, 200, 3*time.Second); got != 5 {
		t.Fatalf("after the second Install, %d of 5 datagrams came back", got)
	}

	// A key roll: new keys on both ends replace the SAs.
	a.Out.EncKey, a.In.AuthKey = key(9, 16), key(10, 20)
	b = mirror(a, "site-a")
	install(t, s.hA, a)
	install(t, s.hB, b)
	if c := counters(t, s.hA, a); c.Out.Packets != 0 || c.In.Packets != 0 {
		t.Errorf("after a key roll: %+v, want new SAs", c)
	}
	if got := s.exchange(t, 5, 200, 3*time.Second); got != 5 {
		t.Fatalf("with the new keys, %d of 5 datagrams came back", got)
	}

	for i := 0; i < 2; i++ {
		if err := s.hA.Remove(a); err != nil {
			t.Fatalf("Remove #%d: %v", i+1, err)
		}
	}
	_, err := s.hA.Counters(a)
	if !errors.Is(err, unix.ESRCH) || !strings.Contains(err.Error(), "tunnel site-b: read SA out (spi 0xcf0a001)") {
		t.Errorf("Counters after Remove: %v, want ESRCH naming the tunnel and SA", err)
	}
}

// TestGuestTamperedKey installs gwB's receiving SA with a wrong key: no
// datagram arrives, and the kernel counts why.
func TestGuestTamperedKey(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	const n = 10
	t.Run("auth key", func(t *testing.T) {
		s := newSites(t)
		a := testTunnel("aes-128-cbc", "hmac-sha1", true)
		b := mirror(a, "site-a")
		b.In.AuthKey = bytes.Clone(b.In.AuthKey)
		b.In.AuthKey[0] ^= 1
		install(t, s.hA, a)
		install(t, s.hB, b)
		if got := s.exchange(t, n, 300, 500*time.Millisecond); got != 0 {
			t.Fatalf("%d datagrams came back through an SA with the wrong key", got)
		}
		ca, cb, stat, sum := s.settled(t, a, b, func(ca, cb TunnelCounters, sum uint64) bool {
			return ca.Out.Packets == n && cb.In.IntegrityFailed == n && sum >= n
		})
		t.Logf("gwA %+v; gwB %+v", ca, cb)
		if ca.Out.Packets != n || cb.In.IntegrityFailed != n || cb.In.Packets != 0 {
			t.Errorf("A sent %d, B counted %d integrity failures and %d packets; want %d, %d, 0",
				ca.Out.Packets, cb.In.IntegrityFailed, cb.In.Packets, n, n)
		}
		if sum < n {
			t.Errorf("gwB xfrm_stat errors %v, want at least %d", stat, n)
		}
	})
	t.Run("cipher key", func(t *testing.T) {
		s := newSites(t)
		a := testTunnel("des-ede3-cbc", "hmac-sha256", false)
		b := mirror(a, "site-a")
		b.In.EncKey = bytes.Clone(b.In.EncKey)
		b.In.EncKey[5] ^= 0x80
		install(t, s.hA, a)
		install(t, s.hB, b)
		if got := s.exchange(t, n, 300, 500*time.Millisecond); got != 0 {
			t.Fatalf("%d datagrams came back through an SA with the wrong key", got)
		}
		// The ICV is right, so every packet is taken in and decrypts to
		// garbage that fails ESP's padding or the inner header check,
		// which the netns's xfrm_stat counts — all but the one in 256
		// whose garbage next-header byte reads IPIP: that one dies in the
		// inner IP input, uncounted there (seen in CI: 9 of 10). Two are
		// allowed: three in ten is a 1-in-100000 run.
		ca, cb, stat, sum := s.settled(t, a, b, func(_, cb TunnelCounters, sum uint64) bool {
			return cb.In.Packets == n && sum >= n-2
		})
		t.Logf("gwA %+v; gwB %+v; xfrm_stat %v", ca, cb, stat)
		if cb.In.Packets != n || sum < n-2 {
			t.Errorf("A sent %d; gwB took in %d packets with %d xfrm_stat errors %v; want %d and at least %d",
				ca.Out.Packets, cb.In.Packets, sum, stat, n, n-2)
		}
	})
}

// TestGuestKernelWantsThisLayout sends the kernel the same SA laid out
// for amd64, as github.com/vishvananda/netlink does on every GOARCH: the
// i386 kernel refuses it (the attributes start 4 bytes early for it),
// and takes the i386 layout.
func TestGuestKernelWantsThisLayout(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("runs in the kerneltest guest (TestKernelInTheLoop)")
	}
	if h, _ := HostArch(); h != cabi.Arch386 {
		t.Skipf("the guest kernel is not i386 but %s", h.Name)
	}
	s := newSites(t)
	a := testTunnel("aes-128-cbc", "hmac-sha1", false)
	s.hA.arch = cabi.ArchAMD64
	err := s.hA.Install(a)
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "tunnel site-b: add SA out (spi 0xcf0a001, 198.51.100.1 -> 198.51.100.2)") {
		t.Errorf("Install with amd64 structs on the i386 kernel: %v, want EINVAL naming the tunnel and SA", err)
	}
	t.Logf("amd64 layout on the i386 kernel: %v", err)
	s.hA.arch = cabi.Arch386
	install(t, s.hA, a)
}
