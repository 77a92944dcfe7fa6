package firewall

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/ocfw/ocfw/router/netns"
)

// netNS is a network namespace made for a guest test (package
// router/netns) with the test's own traffic helpers. Only used inside the
// kerneltest guest: the host's namespaces are never touched.
type netNS struct{ *netns.NS }

func newNetNS(t *testing.T, name string) *netNS {
	t.Helper()
	ns, err := netns.New(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return &netNS{ns}
}

// link joins a and b with a veth pair, gives each end its address and
// brings both up.
func link(t *testing.T, a *netNS, aName, aAddr string, b *netNS, bName, bAddr string) {
	t.Helper()
	if err := netns.Veth(a.NS, aName, aAddr, b.NS, bName, bAddr); err != nil {
		t.Fatal(err)
	}
}

// settle waits until the IPv6 addresses of every namespace are usable:
// with accept_dad 0 an address is still tentative for a moment when added
// before the kernel has seen its link's carrier, and a bind to it then
// fails (a CI run under load).
func settle(t *testing.T, nss ...*netNS) {
	t.Helper()
	for _, ns := range nss {
		if err := ns.Settle(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// serveTCP listens on addr in ns and answers every connection with the
// address it came from, one line, then closes it.
func (ns *netNS) serveTCP(t *testing.T, addr string) {
	t.Helper()
	var l net.Listener
	if err := ns.Do(func() (err error) { l, err = net.Listen("tcp4", addr); return }); err != nil {
		t.Fatalf("%s: listen %s: %v", ns.Name, addr, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, c.RemoteAddr().(*net.TCPAddr).IP)
			c.Close()
		}
	}()
}

// dialTCP connects from ns to addr and returns the source address the
// server saw, or an error when no connection came about within timeout.
func (ns *netNS) dialTCP(addr string, timeout time.Duration) (netip.Addr, error) {
	var seen netip.Addr
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp4", addr, timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading the server's answer: %w", err)
		}
		seen, err = netip.ParseAddr(line[:len(line)-1])
		return err
	})
	return seen, err
}

// ping sends n ICMP echo requests from ns to addr as fast as it can and
// counts the replies that come back within two seconds of the last.
func (ns *netNS) ping(addr string, n int) (int, error) {
	var c *icmp.PacketConn
	if err := ns.Do(func() (err error) { c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0"); return }); err != nil {
		return 0, err
	}
	defer c.Close()
	dst := &net.IPAddr{IP: net.ParseIP(addr)}
	for i := 0; i < n; i++ {
		m := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 0x0cf, Seq: i, Data: []byte("ocfw")}}
		b, err := m.Marshal(nil)
		if err != nil {
			return 0, err
		}
		if _, err := c.WriteTo(b, dst); err != nil {
			return 0, err
		}
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	seen := map[int]bool{}
	buf := make([]byte, 1500)
	for {
		k, _, err := c.ReadFrom(buf)
		if err != nil {
			break // deadline: all that will come has come
		}
		m, err := icmp.ParseMessage(1, buf[:k])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == 0x0cf {
			seen[e.Seq] = true
		}
	}
	return len(seen), nil
}
