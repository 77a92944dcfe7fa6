package dhcp

import (
	"fmt"
	"strings"
)

// MaxHostname is the longest host name a lease keeps: one DNS label
// (RFC 1123).
const MaxHostname = 63

// HostLabel is a client's host name (option 12) as a lease keeps it:
// one RFC 1123 label, lower-cased, of a-z, 0-9 and '-', neither first
// nor last, at most MaxHostname bytes. Anything else (escape sequences,
// line breaks, dots, a name too long) is refused whole: ok is false and
// the lease keeps no name, so nothing a client sends reaches a terminal,
// the log or a DNS answer except a plain label. An empty name is ok.
func HostLabel(s string) (name string, ok bool) {
	if s == "" {
		return "", true
	}
	if len(s) > MaxHostname || s[0] == '-' || s[len(s)-1] == '-' {
		return "", false
	}
	s = strings.ToLower(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return "", false
		}
	}
	return s, true
}

// quoteName is a refused host name for the log: Go-quoted, so that
// escapes and line breaks show as \x1b and \r\n, and cut to 64 bytes so
// that a 255-byte name costs one short line.
func quoteName(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q...", s[:64])
	}
	return fmt.Sprintf("%q", s)
}
