package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// The cache stays within its answers and bytes bounds, and its eviction
// order does not grow, under names that keep changing and answers that
// expire and come back.
func TestCacheBytesBounded(t *testing.T) {
	up := newScripted(t, 5)
	clk := &clock{now: time.Unix(1700000000, 0)}
	f := New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}, CacheSize: 64, CacheBytes: 4096, Now: clk.Now})
	client := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}
	for i := range 600 {
		f.Answer(context.Background(), mkQuery(t, uint16(i), fmt.Sprintf("n%d.test.", i%80)), client)
		if i%50 == 0 {
			clk.add(3 * time.Second) // some expire, are asked again
		}
		f.mu.Lock()
		n, b, o := len(f.cache), f.cacheBytes, len(f.order)
		f.mu.Unlock()
		if n > 64 || b > 4096 || o > 2*64+1 {
			t.Fatalf("after %d queries: %d answers, %d bytes, %d places; bounds 64, 4096, 129", i+1, n, b, o)
		}
	}
	// The newest answer is still there: eviction took the oldest.
	before := up.udpAsked.Load()
	f.Answer(context.Background(), mkQuery(t, 1, "n79.test."), client)
	if up.udpAsked.Load() != before {
		t.Error("the newest answer was evicted")
	}
}

// BenchmarkBurst sends queries over UDP as fast as one client can, a
// tenth of them new names (through the scripted upstream), and reports
// the heap afterwards: it must not grow with b.N (bounded cache, bounded
// goroutines). Run: go test -run - -bench Burst -benchtime 10000x ./router/dns
func BenchmarkBurst(b *testing.B) {
	up := newScripted(b, 600)
	f := New(Config{Allowed: loopback(), Upstreams: []netip.AddrPort{up.addr()}})
	uc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Serve(ctx, uc)
	c, err := net.Dial("udp4", uc.LocalAddr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1500)
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("c%d.test.", i%50)
		if i%10 == 0 {
			name = fmt.Sprintf("n%d.test.", i)
		}
		c.Write(mkQuery(b, uint16(i), name))
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		c.Read(buf)
	}
	b.StopTimer()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MiB-heap")
	f.mu.Lock()
	b.ReportMetric(float64(len(f.cache)), "cached")
	b.ReportMetric(float64(f.cacheBytes)/1024, "KiB-cache")
	f.mu.Unlock()
}
