package ike

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

type lockedSink struct {
	mu sync.Mutex
	fakeSink
}

func (s *lockedSink) Install(c ChildSA) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fakeSink.Install(c)
}
func (s *lockedSink) Delete(c ChildSA) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fakeSink.Delete(c)
}

func listen(t *testing.T) *net.UDPConn {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEndpointUDP runs two endpoints over real UDP sockets on 127.0.0.1
// with the real clock and Run: the IKE SA and its CHILD SA come up.
func TestEndpointUDP(t *testing.T) {
	ua, ub := listen(t), listen(t)
	ta, tb := UDPConn(ua), UDPConn(ub)
	pa := peerCfg("b", "127.0.0.1", "127.0.0.1", "10.1.0.0/24", "10.2.0.0/24")
	pa.Remote = tb.LocalAddr()
	pa.Initiate = true
	pb := peerCfg("a", "127.0.0.1", "127.0.0.1", "10.2.0.0/24", "10.1.0.0/24")
	pb.Remote = ta.LocalAddr()
	sa, sb := &lockedSink{}, &lockedSink{}
	a, err := New(Config{Peers: []Peer{pa}, Conn: ta, Sink: sa})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Peers: []Peer{pb}, Conn: tb, Sink: sb})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- a.Run() }()
	go func() { done <- b.Run() }()
	t.Cleanup(func() {
		a.Close()
		b.Close()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sa.mu.Lock()
		sb.mu.Lock()
		n, m := len(sa.installed), len(sb.installed)
		var ca, cb ChildSA
		if n == 1 && m == 1 {
			ca, cb = sa.installed[0], sb.installed[0]
		}
		sb.mu.Unlock()
		sa.mu.Unlock()
		if n == 1 && m == 1 {
			if ca.InSPI != cb.OutSPI || ca.Encap != nil || ca.Remote != netip.MustParseAddr("127.0.0.1") {
				t.Errorf("CHILD SAs do not pair: %s / %s", ca, cb)
			}
			if st := a.Status()[0]; len(st.SAs) != 1 || st.SAs[0].State != "established" || st.SAs[0].PeerID != "127.0.0.1" {
				t.Errorf("A's status %+v", st)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no CHILD SA over UDP: A %+v, B %+v", a.Status(), b.Status())
}
