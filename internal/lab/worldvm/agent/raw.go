package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

var sysctlKey = regexp.MustCompile(`^net(\.[a-z0-9_-]+)+$`)

// cmdSysctl sets a network sysctl in a namespace, e.g. net.ipv4.ip_forward
// to make it a router: /proc/sys/net is the namespace of the thread that
// opens it.
func cmdSysctl(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	if !sysctlKey.MatchString(args[1]) {
		return "", kinded("usage", fmt.Errorf("key %q: want a network sysctl such as net.ipv4.ip_forward", args[1]))
	}
	p := "/proc/sys/" + strings.ReplaceAll(args[1], ".", "/")
	if err := n.run(func() error { return os.WriteFile(p, []byte(args[2]+"\n"), 0o644) }); err != nil {
		return "", err
	}
	return args[1] + " = " + args[2], nil
}

// cmdESP sends one ESP packet (IP protocol 50) from any source address,
// with the given SPI and sequence number and 64 bytes of random payload
// in place of IV, ciphertext and ICV: what a forger or a stranger sends.
// The IP header is the agent's own (IP_HDRINCL), so SRC need not be an
// address of the namespace.
func cmdESP(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	src, err1 := netip.ParseAddr(args[1])
	dst, err2 := netip.ParseAddr(args[2])
	spi, err3 := strconv.ParseUint(args[3], 0, 32)
	seq, err4 := strconv.ParseUint(args[4], 0, 32)
	if err1 != nil || err2 != nil || !src.Is4() || !dst.Is4() || err3 != nil || err4 != nil {
		return "", kinded("usage", fmt.Errorf("esp %s: want SRC DST (IPv4) SPI SEQ (numbers, 0x... for hex)", strings.Join(args, " ")))
	}
	pkt := make([]byte, 20+8+64)
	pkt[0] = 0x45                                         // IPv4, 20-byte header
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt))) // the kernel fills it in too
	pkt[8], pkt[9] = 64, unix.IPPROTO_ESP                 // TTL, protocol
	copy(pkt[12:16], src.AsSlice())                       // checksum and id: the kernel's
	copy(pkt[16:20], dst.AsSlice())
	binary.BigEndian.PutUint32(pkt[20:], uint32(spi))
	binary.BigEndian.PutUint32(pkt[24:], uint32(seq))
	if _, err := rand.Read(pkt[28:]); err != nil {
		return "", err
	}
	err = n.run(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: dst.As4()})
	})
	if err != nil {
		return "", kinded(netKind(err, "failed"), fmt.Errorf("sending ESP to %s: %w", dst, err))
	}
	return fmt.Sprintf("esp %s -> %s spi 0x%08x seq %d, %d bytes", src, dst, spi, seq, len(pkt)), nil
}
