package site

import (
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/jsonfile"
)

// An IKEv2 tunnel's PSK file holds the pre-shared key both ends
// authenticate with. Like the key file it is kept on the card, in the
// ocfw folder beside site.json, under the name the tunnel's psk gives,
// and never built into an image; both ends hold the same file.
const (
	TunnelPSKKind    = "tunnel-psk"
	TunnelPSKVersion = 1
	// MaxTunnelPSKSize bounds the reader: a PSK file is a few hundred
	// bytes.
	MaxTunnelPSKSize = 16 << 10
	// MinPSKBytes is the shortest PSK taken: 32 bytes, the 256 bits the
	// generator draws. A PSK is the whole of the tunnel's authentication,
	// and anyone who captures one IKE_AUTH can guess at it offline.
	MinPSKBytes = 32
	// MinPSKPhrase is the shortest passphrase (a PSK with spaces, or of
	// letters only): words carry about 2 bits a character, so 64 give
	// the 128 bits a random 32-byte key has with room to spare.
	MinPSKPhrase = 64
	// MaxPSKBytes: longer buys nothing and peers' fields cap it.
	MaxPSKBytes = 256
	// PSKGenBytes is how many random bytes ocfw tunnel psk draws.
	PSKGenBytes = 32
)

// TunnelPSK is one tunnel's PSK file.
//
// Secret is written as strongSwan's secrets are: "0x" and hex or "0s"
// and base64 give the octets; anything else is the octets of the text
// itself (printable ASCII), which is how pfSense, MikroTik and OpenWrt
// take a PSK typed into their forms. The generator writes text, so the
// same string can be pasted into any peer.
type TunnelPSK struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	// Tunnel is the tunnel's name in both sites' configs.
	Tunnel  string `json:"tunnel"`
	Created string `json:"created,omitempty"`
	Secret  string `json:"secret"`
}

// String and GoString keep the secret out of any log line or error a
// %v of the file would make.
func (p TunnelPSK) String() string {
	return fmt.Sprintf("tunnel-psk for %s (%d bytes)", p.Tunnel, len(p.Secret))
}

// GoString: see String.
func (p TunnelPSK) GoString() string { return p.String() }

// NewTunnelPSK makes a PSK file for tunnel name from PSKGenBytes bytes of
// rand (crypto/rand.Reader; tests give their own), as text: base64url
// without padding, 43 characters, which every peer's PSK field takes as
// it is.
func NewTunnelPSK(rand io.Reader, name string, created time.Time) (*TunnelPSK, error) {
	b := make([]byte, PSKGenBytes)
	// A draw that looks like a pattern or starts like strongSwan's 0x/0s
	// is drawn again; with a working source it never happens twice.
	for range 16 {
		if _, err := io.ReadFull(rand, b); err != nil {
			return nil, fmt.Errorf("random PSK: %w", err)
		}
		p := &TunnelPSK{Kind: TunnelPSKKind, Version: TunnelPSKVersion, Tunnel: name,
			Created: created.UTC().Format(time.RFC3339), Secret: base64.RawURLEncoding.EncodeToString(b)}
		if len(p.Check()) == 0 {
			return p, nil
		}
	}
	return nil, fmt.Errorf("random PSK: the random source gives patterns, not random bytes")
}

// JSON renders the PSK file as the board reads it.
func (p *TunnelPSK) JSON() ([]byte, error) { return jsonfile.Indent(p) }

// ReadTunnelPSK decodes a PSK file and checks it on its own, the secret's
// strength included. Every problem is returned, each naming the file and
// never quoting the secret; the file is nil unless there are none.
func ReadTunnelPSK(name string, data []byte) (*TunnelPSK, []error) {
	var p TunnelPSK
	if errs := readJSON(name, data, MaxTunnelPSKSize, "a tunnel PSK file", &p, p.Check); errs != nil {
		return nil, errs
	}
	return &p, nil
}

// TunnelPSKFor reads tunnel t's PSK file (named t.PSK, in the card's
// ocfw folder on the board, beside the site config on the host), checks
// it on its own and that it is for t: what the router needs before the
// key is used. Every problem is returned, each naming the file.
func TunnelPSKFor(t Tunnel, data []byte) (*TunnelPSK, []error) {
	if t.Mode() != KeyingIKEv2 {
		return nil, []error{fmt.Errorf("tunnel %s has manual keys, no PSK file", t.Name)}
	}
	p, errs := ReadTunnelPSK(t.PSK, data)
	if errs != nil {
		return nil, errs
	}
	if p.Tunnel != t.Name {
		return nil, []error{fmt.Errorf("%s: the PSK file is for tunnel %q, this is %s: each tunnel has its own (make it with ocfw tunnel psk)", t.PSK, p.Tunnel, t.Name)}
	}
	return p, nil
}

// Octets is the PSK as IKEv2's AUTH uses it (RFC 7296 2.15). The file
// must have passed Check.
func (p *TunnelPSK) Octets() []byte {
	b, _, _ := pskOctets(p.Secret)
	return b
}

// SamePSK says, in constant time, whether two PSK files hold the same
// key (as octets: the same key written in hex and in base64 is the same).
func SamePSK(a, b *TunnelPSK) bool {
	return subtle.ConstantTimeCompare(a.Octets(), b.Octets()) == 1
}

// Check returns every problem of the PSK file on its own, at field paths.
// A weak secret is refused with why; no message quotes it.
func (p *TunnelPSK) Check() []Error {
	var errs []Error
	bad := func(path, format string, args ...any) {
		errs = append(errs, Error{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if p.Kind != TunnelPSKKind {
		bad("kind", "want %q, got %s: not a tunnel PSK file", TunnelPSKKind, catalog.Quote(p.Kind))
		return errs
	}
	if p.Version != TunnelPSKVersion {
		bad("version", "%d: this firmware reads version %d", p.Version, TunnelPSKVersion)
		return errs
	}
	if !tunnelNameRE.MatchString(p.Tunnel) {
		bad("tunnel", "%s: want the tunnel's name", catalog.Quote(p.Tunnel))
	}
	if p.Created != "" {
		if _, err := time.Parse(time.RFC3339, p.Created); err != nil {
			bad("created", "%s: want an RFC 3339 time", catalog.Quote(p.Created))
		}
	}
	if why := WeakPSK(p.Secret); why != "" {
		bad("secret", "%s: make a strong one with ocfw tunnel psk", why)
	}
	return errs
}

// pskOctets decodes a secret; text says it was taken as text.
func pskOctets(s string) (b []byte, text bool, err error) {
	switch {
	case strings.HasPrefix(s, "0x"):
		b, err = hex.DecodeString(s[2:])
		if err != nil {
			return nil, false, fmt.Errorf("starts with 0x but is not hex (%v)", err)
		}
		return b, false, nil
	case strings.HasPrefix(s, "0s"):
		b, err = base64.StdEncoding.DecodeString(s[2:])
		if err != nil {
			return nil, false, fmt.Errorf("starts with 0s but is not base64 (%v)", err)
		}
		return b, false, nil
	}
	return []byte(s), true, nil
}

// WeakPSK says why a secret (as the PSK file writes it) is not strong
// enough, or "" when it is. It does not prove a secret random, only
// refuses what is plainly not: too short, one byte over and over, a short
// block repeated, a counting sequence, few different bytes, a low
// estimate for its characters, or a passphrase shorter than MinPSKPhrase.
func WeakPSK(secret string) string {
	b, text, err := pskOctets(secret)
	if err != nil {
		return err.Error()
	}
	if text {
		for i := 0; i < len(secret); i++ {
			if c := secret[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				return fmt.Sprintf("byte %d is not printable ASCII (or is \" or \\): write a binary key as 0x and hex or 0s and base64", i+1)
			}
		}
		if strings.TrimSpace(secret) != secret {
			return "starts or ends with a space, which peers' forms drop"
		}
	}
	n := len(b)
	switch {
	case n < MinPSKBytes:
		return fmt.Sprintf("%d bytes: want at least %d", n, MinPSKBytes)
	case n > MaxPSKBytes:
		return fmt.Sprintf("%d bytes: want at most %d", n, MaxPSKBytes)
	case bytes.Count(b, b[:1]) == n:
		return fmt.Sprintf("one byte (0x%02x) %d times: not a key", b[0], n)
	}
	if k := period(b); k > 0 {
		return fmt.Sprintf("a %d-byte pattern repeated: not a key", k)
	}
	if d := int(b[1]) - int(b[0]); d != 0 && isSequence(b) {
		return fmt.Sprintf("a counting sequence (each byte %+d): not a key", d)
	}
	distinct := map[byte]bool{}
	for _, c := range b {
		distinct[c] = true
	}
	if len(distinct) < 10 {
		return fmt.Sprintf("only %d different bytes in %d: too little randomness", len(distinct), n)
	}
	if text {
		if phrase(secret) && n < MinPSKPhrase {
			return fmt.Sprintf("a passphrase of %d characters (words, or letters only): want at least %d, or a random key", n, MinPSKPhrase)
		}
		if bits := textBits(secret); bits < 128 {
			return fmt.Sprintf("about %.0f bits for its characters: want at least 128 (mix letters, digits and symbols, or make it longer)", bits)
		}
	}
	return ""
}

// period is the length of the shortest block b repeats (the last copy may
// be cut), 0 when it repeats none no longer than half of it.
func period(b []byte) int {
	for k := 1; k <= len(b)/2; k++ {
		if bytes.Equal(b[k:], b[:len(b)-k]) {
			return k
		}
	}
	return 0
}

func isSequence(b []byte) bool {
	d := b[1] - b[0]
	for i := 2; i < len(b); i++ {
		if b[i]-b[i-1] != d {
			return false
		}
	}
	return true
}

// phrase says whether a text secret reads like words: it has spaces, or
// it is letters only (a run of words written together).
func phrase(s string) bool {
	if strings.ContainsAny(s, " \t") {
		return true
	}
	return strings.IndexFunc(s, func(r rune) bool { return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') }) < 0
}

// textBits estimates a random text's strength from the classes of
// character it uses: length × log2 of their sizes together.
func textBits(s string) float64 {
	var lower, upper, digit, other bool
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z':
			lower = true
		case 'A' <= r && r <= 'Z':
			upper = true
		case '0' <= r && r <= '9':
			digit = true
		default:
			other = true
		}
	}
	alphabet := 0
	for _, c := range []struct {
		used bool
		n    int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}} {
		if c.used {
			alphabet += c.n
		}
	}
	return float64(len(s)) * math.Log2(float64(alphabet))
}
