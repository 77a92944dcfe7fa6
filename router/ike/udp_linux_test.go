package ike

import (
	"net"
	"syscall"
	"testing"
)

// ESPInUDP sets UDP_ENCAP to ESP-in-UDP on the socket itself (the kernel
// reads the option back as set), so the world's NAT test's 4500 socket
// and the board's are the same call.
func TestESPInUDP(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := ESPInUDP(c); err != nil {
		t.Fatalf("ESPInUDP: %v", err)
	}
	rc, _ := c.SyscallConn()
	var v int
	var gerr error
	rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), solUDP, udpEncap) })
	if gerr != nil || v != udpEncapESPIn {
		t.Errorf("UDP_ENCAP reads %d (%v), want %d", v, gerr, udpEncapESPIn)
	}
}
