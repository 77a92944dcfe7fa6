package ike

import (
	"net"
	"syscall"
)

// Linux's UDP_ENCAP socket option and its ESP-in-UDP type (linux/udp.h).
const (
	solUDP        = 17
	udpEncap      = 100
	udpEncapESPIn = 2
)

// ESPInUDP makes the NAT-T socket (UDP 4500) hand ESP-in-UDP to the
// kernel's SAs (RFC 3948): without it, a CHILD SA with Encap receives
// nothing. IKE with the non-ESP marker still reaches the socket's reader.
func ESPInUDP(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), solUDP, udpEncap, udpEncapESPIn)
	}); err != nil {
		return err
	}
	return serr
}
