package main

import (
	"fmt"
	"strconv"
	"strings"
)

// opensslArgs are the `openssl speed` arguments that select a catalog
// cipher; des-cbc lives in OpenSSL 3's legacy provider.
var opensslArgs = map[string][]string{
	"aes-128-cbc":  {"-evp", "aes-128-cbc"},
	"aes-256-cbc":  {"-evp", "aes-256-cbc"},
	"des-ede3-cbc": {"-evp", "des-ede3-cbc"},
	"des-cbc":      {"-provider", "legacy", "-provider", "default", "-evp", "des-cbc"},
	"hmac-sha1":    {"-hmac", "sha1"},
}

// speedArgs is a whole `openssl speed` run over the standard sizes
// (16 to 16384 bytes), wall-clock time, machine-readable output.
func speedArgs(cipher string) ([]string, error) {
	a, ok := opensslArgs[cipher]
	if !ok {
		return nil, fmt.Errorf("no openssl speed arguments for %s", cipher)
	}
	return append([]string{"speed", "-mr", "-elapsed", "-seconds", "1"}, a...), nil
}

// parseIA32Cap reads the capability vector `openssl version -a` prints
// ("CPUINFO: OPENSSL_ia32cap=0x...:0x..."; with the environment variable
// set, "... env:..." follows): the first 64-bit word is CPUID.1 EDX (low
// half) and ECX (high half) as OpenSSL uses them.
func parseIA32Cap(out string) (uint64, error) {
	_, after, ok := strings.Cut(out, "OPENSSL_ia32cap=")
	if !ok {
		return 0, fmt.Errorf("no OPENSSL_ia32cap in `openssl version -a` output")
	}
	word, _, _ := strings.Cut(after, ":")
	return strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(word), "0x"), 16, 64)
}

// Capability bits OpenSSL's x86 code paths test (CPUID.1 EDX bits 0-31,
// ECX bits 32-63).
const (
	capSSE   = 1 << 25
	capSSE2  = 1 << 26
	capSSSE3 = 1 << (32 + 9)
	capAESNI = 1 << (32 + 25)
)

// geodeCapCheck says what, of what a Geode LX lacks, OpenSSL would use.
func geodeCapCheck(c uint64) error {
	var bad []string
	for _, b := range []struct {
		bit  uint64
		name string
	}{{capSSE, "SSE"}, {capSSE2, "SSE2"}, {capSSSE3, "SSSE3"}, {capAESNI, "AES-NI"}} {
		if c&b.bit != 0 {
			bad = append(bad, b.name)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("OpenSSL sees %s (ia32cap %#x): not a Geode LX code path", strings.Join(bad, ", "), c)
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
