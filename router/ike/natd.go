package ike

import (
	"crypto/sha1"
	"encoding/binary"
	"net/netip"
)

// NATDetectionHash is the data of NAT_DETECTION_SOURCE_IP or
// NAT_DETECTION_DESTINATION_IP (RFC 7296 2.23): SHA-1(SPIi | SPIr | IP |
// Port). In IKE_SA_INIT's request SPIr is zero.
func NATDetectionHash(spii, spir uint64, ap netip.AddrPort) []byte {
	b := spiBytes(spii, spir)
	b = append(b, ap.Addr().Unmap().AsSlice()...)
	b = binary.BigEndian.AppendUint16(b, ap.Port())
	h := sha1.Sum(b)
	return h[:]
}
