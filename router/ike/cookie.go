package ike

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"net/netip"
)

// cookieLen is a COOKIE's data: a secret version byte and 16 bytes of
// HMAC-SHA-256 (RFC 7296 2.6 suggests Hash(Ni | IPi | SPIi | secret)).
const cookieLen = 17

// makeCookie binds a cookie to the initiator's nonce, address and SPI, so
// the responder keeps no state until the initiator proves its address.
func (e *Endpoint) makeCookie(spii uint64, ni []byte, from netip.AddrPort) []byte {
	m := hmac.New(sha256.New, e.secret[:])
	m.Write(ni)
	m.Write(from.Addr().Unmap().AsSlice())
	m.Write(binary.BigEndian.AppendUint64(nil, spii))
	return append([]byte{e.secretV}, m.Sum(nil)[:cookieLen-1]...)
}

func (e *Endpoint) validCookie(c []byte, spii uint64, ni []byte, from netip.AddrPort) bool {
	return len(c) == cookieLen && subtle.ConstantTimeCompare(c, e.makeCookie(spii, ni, from)) == 1
}
