package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// What an attacker on the path does with ESP: record it, and send it
// again later. capture-end keeps the ESP of each ended capture (and ESP
// in UDP 4500), replay sends it again as it was, and xfrm-stat reads the
// kernel's XFRM counters, which say what became of it.

// keptESP holds, per ended capture ("NS/IF"), its ESP packets in order.
var (
	keptMu  sync.Mutex
	keptESP = map[string][][]byte{}
)

// maxKept bounds the ESP kept per capture.
const maxKept = 2000

// keepESP keeps the ESP packets among pkts for key.
func keepESP(key string, pkts [][]byte) {
	var esp [][]byte
	for _, p := range pkts {
		if _, _, ok := espHeader(p); ok && len(esp) < maxKept {
			esp = append(esp, p)
		}
	}
	keptMu.Lock()
	keptESP[key] = esp
	keptMu.Unlock()
}

// espHeader is the SPI and sequence number of an IPv4 packet carrying
// ESP, directly (protocol 50) or in UDP on port 4500 (RFC 3948; not a
// keepalive, not IKE's non-ESP marker).
func espHeader(p []byte) (spi, seq uint32, ok bool) {
	if len(p) < 20 || p[0]>>4 != 4 {
		return 0, 0, false
	}
	hl := int(p[0]&0xf) * 4
	switch p[9] {
	case unix.IPPROTO_ESP:
		if len(p) < hl+8 {
			return 0, 0, false
		}
		return binary.BigEndian.Uint32(p[hl:]), binary.BigEndian.Uint32(p[hl+4:]), true
	case unix.IPPROTO_UDP:
		if len(p) < hl+16 || (binary.BigEndian.Uint16(p[hl:]) != 4500 && binary.BigEndian.Uint16(p[hl+2:]) != 4500) {
			return 0, 0, false
		}
		spi = binary.BigEndian.Uint32(p[hl+8:])
		if spi == 0 {
			return 0, 0, false // IKE after the non-ESP marker
		}
		return spi, binary.BigEndian.Uint32(p[hl+12:]), true
	}
	return 0, 0, false
}

// cmdReplay sends again, from NS, up to MAX of the ESP packets from SRC
// to DST that the ended capture CAPTURE ("NS/IF") kept — the last ones,
// byte for byte as captured (the IP header is the capture's, sent with
// IP_HDRINCL, so SRC need not be NS's) — and says which:
// "replayed N: spi 0x... seq A-B, ...".
func cmdReplay(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	src, err1 := netip.ParseAddr(args[2])
	dst, err2 := netip.ParseAddr(args[3])
	most, err3 := strconv.Atoi(args[4])
	if err1 != nil || err2 != nil || !src.Is4() || !dst.Is4() || err3 != nil || most <= 0 {
		return "", kinded("usage", fmt.Errorf("replay %s: want NS CAPTURE SRC DST (IPv4) MAX (a count above 0)", strings.Join(args, " ")))
	}
	keptMu.Lock()
	all, ok := keptESP[args[1]]
	keptMu.Unlock()
	if !ok {
		return "", kinded("usage", fmt.Errorf("no ended capture %s (capture, then capture-end)", args[1]))
	}
	var pick [][]byte
	for _, p := range all {
		if netip.AddrFrom4([4]byte(p[12:16])) == src && netip.AddrFrom4([4]byte(p[16:20])) == dst {
			pick = append(pick, p)
		}
	}
	if len(pick) > most {
		pick = pick[len(pick)-most:]
	}
	if len(pick) == 0 {
		return "", kinded("failed", fmt.Errorf("capture %s holds no ESP from %s to %s (%d ESP packets in all)", args[1], src, dst, len(all)))
	}
	// Per SPI, the sequence numbers sent, in order of first sight.
	type run struct {
		spi      uint32
		min, max uint32
	}
	var runs []*run
	err = n.run(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, p := range pick {
			if err := unix.Sendto(fd, p, 0, &unix.SockaddrInet4{Addr: dst.As4()}); err != nil {
				return err
			}
			spi, seq, _ := espHeader(p)
			var r *run
			for _, x := range runs {
				if x.spi == spi {
					r = x
				}
			}
			if r == nil {
				r = &run{spi: spi, min: seq, max: seq}
				runs = append(runs, r)
			}
			r.min, r.max = min(r.min, seq), max(r.max, seq)
		}
		return nil
	})
	if err != nil {
		return "", kinded(netKind(err, "failed"), fmt.Errorf("replaying to %s: %w", dst, err))
	}
	var parts []string
	for _, r := range runs {
		parts = append(parts, fmt.Sprintf("spi 0x%08x seq %d-%d", r.spi, r.min, r.max))
	}
	return fmt.Sprintf("replayed %d: %s", len(pick), strings.Join(parts, ", ")), nil
}

// cmdXfrmStat is NS's /proc/net/xfrm_stat (the kernel's XFRM counters:
// XfrmInNoStates, XfrmInStateSeqError, ...), one "Name N" a line.
func cmdXfrmStat(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	var b []byte
	// /proc/net follows the namespace of the process's leader;
	// thread-self's, that of the thread n.run runs in.
	if err := n.run(func() (err error) { b, err = os.ReadFile("/proc/thread-self/net/xfrm_stat"); return err }); err != nil {
		return "", fmt.Errorf("xfrm_stat in %s (needs CONFIG_XFRM_STATISTICS): %w", args[0], err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, strings.Join(f, " "))
		}
	}
	return strings.Join(lines, "\n"), nil
}
