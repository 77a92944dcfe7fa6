// Command ikemem is bench/run's IKE daemon memory probe (section
// ikemem): the router's IKEv2 endpoint (router/ike) as the board runs it,
// built for the NSLU2 (GOARCH=arm GOARM=5) and run under qemu-arm, with
// peers over loopback.
//
//	ikemem daemon -peers N -port P   the measured endpoint: responder for N
//	                                 peers at 127.0.0.2..N+1; prints "ready",
//	                                 samples its Go memory until stdin closes,
//	                                 then prints one JSON line (Report)
//	ikemem peers -peers N -port P -rounds R
//	                                 N initiators (run natively): each brings
//	                                 its IKE SA up with the daemon, then R
//	                                 rounds of a CHILD SA rekey and an IKE SA
//	                                 rekey; prints "done" and the time taken
//
// Both listen on port P (IKE) and P+1 (NAT-T) of their own loopback
// addresses, so no privileged port is needed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ocfw/ocfw/router/ike"
)

// psk is the probe's pre-shared key: loopback only, not a secret.
const psk = "ikemem loopback probe, not a secret 8f2c"

// Report is the daemon's JSON line.
type Report struct {
	GOARCH string `json:"goarch"`
	Peers  int    `json:"peers"`
	// Established IKE SAs and CHILD SAs installed over the run.
	Established int   `json:"established"`
	Installs    int64 `json:"child_installs"`
	// Peak figures sampled every 20 ms; the others at the end after a GC.
	PeakHeapInuse uint64 `json:"peak_heap_inuse"`
	PeakSys       uint64 `json:"peak_sys"`
	HeapInuse     uint64 `json:"heap_inuse"`
	Sys           uint64 `json:"sys"`
	StackInuse    uint64 `json:"stack_inuse"`
	Goroutines    int    `json:"goroutines"`
	// Baseline is HeapInuse before the endpoint was made (the runtime's
	// own), for the endpoint's share.
	Baseline uint64 `json:"baseline_heap_inuse"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ikemem daemon|peers [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	peers := fs.Int("peers", 4, "peers")
	port := fs.Int("port", 15500, "IKE port (NAT-T is port+1)")
	rounds := fs.Int("rounds", 3, "peers: rekey rounds after the first handshake")
	fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "daemon":
		err = daemon(*peers, *port)
	case "peers":
		err = runPeers(*peers, *port, *rounds)
	default:
		err = fmt.Errorf("unknown mode %q: want daemon or peers", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ikemem:", err)
		os.Exit(1)
	}
}

func proposals() (ikeP, esp []ike.Proposal) {
	ikeP = []ike.Proposal{{Protocol: ike.ProtoIKE, Transforms: []ike.Transform{
		ike.T(ike.TransformENCR, ike.ENCR_AES_CBC, 128), ike.T(ike.TransformINTEG, ike.AUTH_HMAC_SHA2_256_128, 0),
		ike.T(ike.TransformPRF, ike.PRF_HMAC_SHA2_256, 0), ike.T(ike.TransformDH, uint16(ike.MODP2048), 0)}}}
	esp = []ike.Proposal{{Protocol: ike.ProtoESP, Transforms: []ike.Transform{
		ike.T(ike.TransformENCR, ike.ENCR_AES_CBC, 128), ike.T(ike.TransformINTEG, ike.AUTH_HMAC_SHA2_256_128, 0),
		ike.T(ike.TransformESN, ike.ESN_YES, 0)}}}
	return ikeP, esp
}

func peerAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 2)}) }

var daemonAddr = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// peerConfig is one side of peer i: from the daemon's (daemon true) or
// the peer's point of view.
func peerConfig(i, port int, daemon bool) ike.Peer {
	ikeP, esp := proposals()
	local, remote := daemonAddr, peerAddr(i)
	lts, rts := netip.MustParsePrefix("10.0.0.0/24"), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i), 0}), 24)
	if !daemon {
		local, remote, lts, rts = remote, local, rts, lts
	}
	return ike.Peer{Name: fmt.Sprintf("peer%d", i), Local: netip.AddrPortFrom(local, uint16(port)),
		Remote: netip.AddrPortFrom(remote, uint16(port)), RemoteNATTPort: uint16(port + 1),
		PSK: []byte(psk), IKE: ikeP, Child: esp, LocalTS: []netip.Prefix{lts}, RemoteTS: []netip.Prefix{rts},
		Initiate: !daemon}
}

// sink counts CHILD SAs; the daemon keeps no kernel state here.
type sink struct{ installs, deletes atomic.Int64 }

func (s *sink) Install(ike.ChildSA) error { s.installs.Add(1); return nil }
func (s *sink) Delete(ike.ChildSA) error  { s.deletes.Add(1); return nil }

func endpoint(addr netip.Addr, port int, peers []ike.Peer, s *sink) (*ike.Endpoint, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(port))))
	if err != nil {
		return nil, err
	}
	n, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(port+1))))
	if err != nil {
		c.Close()
		return nil, err
	}
	ep, err := ike.New(ike.Config{Peers: peers, Conn: ike.UDPConn(c), NATT: ike.UDPConn(n), Sink: s})
	if err != nil {
		return nil, err
	}
	go ep.Run()
	return ep, nil
}

func daemon(n, port int) error {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep := Report{GOARCH: runtime.GOARCH, Peers: n, Baseline: ms.HeapInuse}
	var peers []ike.Peer
	for i := range n {
		peers = append(peers, peerConfig(i, port, true))
	}
	s := &sink{}
	ep, err := endpoint(daemonAddr, port, peers, s)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			mu.Lock()
			rep.PeakHeapInuse = max(rep.PeakHeapInuse, m.HeapInuse)
			rep.PeakSys = max(rep.PeakSys, m.Sys)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	fmt.Println("ready")
	io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	close(stop)
	<-done
	for _, p := range ep.Status() {
		if !p.LastEstablished.IsZero() {
			rep.Established++
		}
	}
	rep.Installs = s.installs.Load()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&ms)
	rep.HeapInuse, rep.Sys, rep.StackInuse, rep.Goroutines = ms.HeapInuse, ms.Sys, ms.StackInuse, runtime.NumGoroutine()
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return ep.Close()
}

// runPeers brings every peer's IKE SA up and rekeys it rounds times,
// waiting for each step to complete.
func runPeers(n, port, rounds int) error {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := onePeer(i, port, rounds); err != nil {
				errs <- fmt.Errorf("peer%d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	fmt.Printf("done %d peers, %d rounds in %v\n", n, rounds, time.Since(start).Round(time.Millisecond))
	return nil
}

func onePeer(i, port, rounds int) error {
	s := &sink{}
	p := peerConfig(i, port, false)
	ep, err := endpoint(peerAddr(i), port, []ike.Peer{p}, s)
	if err != nil {
		return err
	}
	defer ep.Close()
	// wait until cond holds on the peer's status (2 minutes at most:
	// the daemon is emulated).
	wait := func(what string, cond func(ike.PeerStatus) bool) error {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if st := ep.Status(); len(st) == 1 && cond(st[0]) {
				return nil
			}
		}
		return fmt.Errorf("%s: not within 2 minutes: %+v", what, ep.Status())
	}
	established := func(ps ike.PeerStatus) (ike.SAStatus, bool) {
		for _, sa := range ps.SAs {
			if sa.State == "established" {
				return sa, true
			}
		}
		return ike.SAStatus{}, false
	}
	if err := wait("the first handshake", func(ps ike.PeerStatus) bool { _, ok := established(ps); return ok }); err != nil {
		return err
	}
	for r := range rounds {
		want := int64(r + 2)
		if err := ep.RekeyChild(p.Name); err != nil {
			return err
		}
		if err := wait("a CHILD SA rekey", func(ike.PeerStatus) bool { return s.installs.Load() >= want }); err != nil {
			return err
		}
		sa, _ := established(ep.Status()[0])
		if err := ep.RekeyIKE(p.Name); err != nil {
			return err
		}
		if err := wait("an IKE SA rekey", func(ps ike.PeerStatus) bool {
			now, ok := established(ps)
			return ok && now.SPIi != sa.SPIi && len(ps.SAs) == 1
		}); err != nil {
			return err
		}
	}
	return nil
}
