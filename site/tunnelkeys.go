package site

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/ocfw/ocfw/internal/jsonfile"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// A tunnel's key file holds the manual keys of both its directions, so
// both ends get the same file and each takes the direction leaving its own
// address as outbound: A's out is B's in. The host writes it (ocfw tunnel
// keys); the board reads it from the data partition's ocfw folder under
// the name the tunnel's Keys gives. It is JSON like the other contract
// files, so the board reads it without YAML.
const (
	TunnelKeysKind    = "tunnel-keys"
	TunnelKeysVersion = 1
	// MaxTunnelKeysSize bounds the reader: a key file is under 1 KiB.
	MaxTunnelKeysSize = 64 << 10
	// DefaultReplayWindow is the anti-replay window in packets the
	// generator writes; the kernel takes up to MaxReplayWindow with
	// extended sequence numbers.
	DefaultReplayWindow = 128
	MinReplayWindow     = 32
	MaxReplayWindow     = 4096
	// MinSPI: SPIs 1-255 are reserved by IANA (RFC 4303), 0 means none.
	MinSPI = 256
)

// TunnelKeys is one tunnel's key file.
type TunnelKeys struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	// Tunnel is the tunnel's name in both sites' configs.
	Tunnel string `json:"tunnel"`
	// Created is when the keys were made (RFC 3339), to tell a rolled
	// file from the one before.
	Created string `json:"created,omitempty"`
	Cipher  string `json:"cipher"`
	Auth    string `json:"auth"`
	// ESN turns on 64-bit extended sequence numbers (RFC 4304): with
	// manual keys nothing rekeys, and a 32-bit counter would run out.
	ESN          bool `json:"esn"`
	ReplayWindow int  `json:"replay_window"`
	// SAs are the two directions, one leaving each end.
	SAs []TunnelSA `json:"sas"`
}

// TunnelSA is one direction: the packets From sends to To.
type TunnelSA struct {
	From string `json:"from"`
	To   string `json:"to"`
	// SPI in hex (0x…), as `ip xfrm state` shows it.
	SPI string `json:"spi"`
	// EncKey and AuthKey are hex.
	EncKey  string `json:"enc_key"`
	AuthKey string `json:"auth_key"`
}

// TunnelKeySizes gives the key sizes in bytes for a tunnel cipher and
// MAC: the cipher's key (16, 24 or 32 for AES, 24 for 3DES) and the HMAC
// key, as long as the hash's output (20 for SHA-1, 32 for SHA-256, what
// RFC 2404 and 4868 use).
func TunnelKeySizes(cipher, auth string) (enc, mac int, err error) {
	c, ok := catalog.LookupCipher(cipher)
	if !ok || !contains(TunnelCiphers, cipher) {
		return 0, 0, fmt.Errorf("cipher %s: want one of %v", catalog.Quote(cipher), TunnelCiphers)
	}
	a, ok := catalog.LookupCipher(auth)
	if !ok || !contains(TunnelAuths, auth) {
		return 0, 0, fmt.Errorf("auth %s: want one of %v", catalog.Quote(auth), TunnelAuths)
	}
	return c.KeySize, a.DigestSize, nil
}

// NewTunnelKeys makes fresh keys for tunnel name between the WAN
// addresses a and b, reading randomness from rand (crypto/rand.Reader;
// tests give their own).
func NewTunnelKeys(rand io.Reader, name, cipher, auth string, a, b netip.Addr, created time.Time) (*TunnelKeys, error) {
	encSize, macSize, err := TunnelKeySizes(cipher, auth)
	if err != nil {
		return nil, err
	}
	if !a.IsValid() || a.Is4() != b.Is4() || a == b || a.Zone() != "" || b.Zone() != "" || a.Is4In6() || b.Is4In6() {
		return nil, fmt.Errorf("tunnel %s: ends %v and %v: want two different addresses of one family (IPv4 or IPv6)", name, a, b)
	}
	k := &TunnelKeys{
		Kind: TunnelKeysKind, Version: TunnelKeysVersion, Tunnel: name,
		Created: created.UTC().Format(time.RFC3339),
		Cipher:  cipher, Auth: auth, ESN: true, ReplayWindow: DefaultReplayWindow,
	}
	var spis []uint32
	for _, dir := range [][2]netip.Addr{{a, b}, {b, a}} {
		spi, err := randomSPI(rand, spis)
		if err != nil {
			return nil, err
		}
		spis = append(spis, spi)
		enc, err := randomKey(rand, encSize, cipher == "des-ede3-cbc")
		if err != nil {
			return nil, err
		}
		mac, err := randomKey(rand, macSize, false)
		if err != nil {
			return nil, err
		}
		k.SAs = append(k.SAs, TunnelSA{
			From: dir[0].String(), To: dir[1].String(), SPI: fmt.Sprintf("0x%08x", spi),
			EncKey: hex.EncodeToString(enc), AuthKey: hex.EncodeToString(mac),
		})
	}
	if errs := k.Check(); len(errs) > 0 {
		return nil, fmt.Errorf("internal: generated keys do not check: %v", errs[0])
	}
	return k, nil
}

// randomSPI draws an SPI outside the reserved range and unlike taken.
func randomSPI(rand io.Reader, taken []uint32) (uint32, error) {
	var b [4]byte
	for {
		if _, err := io.ReadFull(rand, b[:]); err != nil {
			return 0, fmt.Errorf("random SPI: %w", err)
		}
		spi := binary.BigEndian.Uint32(b[:])
		if spi >= MinSPI && !containsSPI(taken, spi) {
			return spi, nil
		}
	}
}

func containsSPI(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// randomKey draws n random bytes. A 3DES key whose first and second or
// second and third thirds are equal degenerates to single DES and the
// kernel refuses it: drawn again (it never happens by chance).
func randomKey(rand io.Reader, n int, des3 bool) ([]byte, error) {
	k := make([]byte, n)
	for {
		if _, err := io.ReadFull(rand, k); err != nil {
			return nil, fmt.Errorf("random key: %w", err)
		}
		if !des3 || !weak3DES(k) {
			return k, nil
		}
	}
}

func weak3DES(k []byte) bool {
	return len(k) == 24 && (bytes.Equal(k[:8], k[8:16]) || bytes.Equal(k[8:16], k[16:]))
}

// JSON renders the key file as the board reads it.
func (k *TunnelKeys) JSON() ([]byte, error) { return jsonfile.Indent(k) }

// ReadTunnelKeys decodes a key file and checks it on its own (sizes,
// SPIs, the two directions); Setup checks it against a site's tunnel.
// Every problem is returned, each naming the file; the keys are nil
// unless there are none.
func ReadTunnelKeys(name string, data []byte) (*TunnelKeys, []error) {
	var k TunnelKeys
	if errs := readJSON(name, data, MaxTunnelKeysSize, "a tunnel key file", &k, k.Check); errs != nil {
		return nil, errs
	}
	return &k, nil
}

// Check returns every problem of the key file on its own, at field paths.
func (k *TunnelKeys) Check() []Error {
	var errs []Error
	bad := func(path, format string, args ...any) {
		errs = append(errs, Error{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if k.Kind != TunnelKeysKind {
		bad("kind", "want %q, got %s: not a tunnel key file", TunnelKeysKind, catalog.Quote(k.Kind))
		return errs // anything else would be noise
	}
	if k.Version != TunnelKeysVersion {
		bad("version", "%d: this firmware reads version %d", k.Version, TunnelKeysVersion)
		return errs
	}
	if !tunnelNameRE.MatchString(k.Tunnel) {
		bad("tunnel", "%s: want the tunnel's name", catalog.Quote(k.Tunnel))
	}
	if k.Created != "" {
		if _, err := time.Parse(time.RFC3339, k.Created); err != nil {
			bad("created", "%s: want an RFC 3339 time", catalog.Quote(k.Created))
		}
	}
	encSize, macSize := -1, -1
	if c, ok := catalog.LookupCipher(k.Cipher); ok && contains(TunnelCiphers, k.Cipher) {
		encSize = c.KeySize
	} else {
		bad("cipher", "%s: want one of %v", catalog.Quote(k.Cipher), TunnelCiphers)
	}
	if a, ok := catalog.LookupCipher(k.Auth); ok && contains(TunnelAuths, k.Auth) {
		macSize = a.DigestSize
	} else {
		bad("auth", "%s: want one of %v", catalog.Quote(k.Auth), TunnelAuths)
	}
	if k.ReplayWindow < MinReplayWindow || k.ReplayWindow > MaxReplayWindow {
		bad("replay_window", "%d: want %d-%d packets", k.ReplayWindow, MinReplayWindow, MaxReplayWindow)
	} else if k.ReplayWindow > 255 && !k.ESN {
		// Without ESN the window is the kernel's 8-bit legacy field.
		bad("replay_window", "%d: more than 255 needs esn: true", k.ReplayWindow)
	}
	if len(k.SAs) != 2 {
		bad("sas", "want 2 directions (one from each end), got %d", len(k.SAs))
		return errs
	}
	var spis []uint32
	var ends [2][2]netip.Addr
	for i, sa := range k.SAs {
		p := fmt.Sprintf("sas[%d]", i)
		for j, a := range []string{sa.From, sa.To} {
			ip, err := netip.ParseAddr(a)
			if err != nil || ip.Zone() != "" || ip.Is4In6() {
				bad(p+[]string{".from", ".to"}[j], "%s: want an IPv4 or IPv6 address", catalog.Quote(a))
			}
			ends[i][j] = ip
		}
		if ends[i][0].IsValid() && ends[i][0] == ends[i][1] {
			bad(p+".to", "%s is the same as from", ends[i][1])
		}
		spi, err := ParseSPI(sa.SPI)
		switch {
		case err != nil:
			bad(p+".spi", "%v", err)
		case containsSPI(spis, spi):
			bad(p+".spi", "0x%08x is the other direction's SPI too", spi)
		default:
			spis = append(spis, spi)
		}
		checkKey(bad, p+".enc_key", sa.EncKey, encSize)
		checkKey(bad, p+".auth_key", sa.AuthKey, macSize)
		if k.Cipher == "des-ede3-cbc" {
			if b, err := hex.DecodeString(sa.EncKey); err == nil && weak3DES(b) {
				bad(p+".enc_key", "a 3DES key with two equal thirds is single DES: make new keys")
			}
		}
	}
	checkDistinctKeys(bad, k.SAs)
	if ends[0][0] != ends[1][1] || ends[0][1] != ends[1][0] {
		bad("sas[1]", "want the reverse of sas[0] (from %v to %v), got from %v to %v", ends[0][1], ends[0][0], ends[1][0], ends[1][1])
	}
	return errs
}

// ParseSPI reads an SPI as the key file writes it (0x… hex, or decimal)
// and refuses 0 and the reserved 1-255.
func ParseSPI(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: want an SPI such as 0x1a2b3c4d", catalog.Quote(s))
	}
	if v < MinSPI {
		return 0, fmt.Errorf("%s: SPIs 0-255 are reserved; want %d or more", s, MinSPI)
	}
	return uint32(v), nil
}

func checkKey(bad func(string, string, ...any), path, key string, size int) {
	b, err := hex.DecodeString(key)
	switch {
	case err != nil:
		bad(path, "not hex: %v", err)
	case size >= 0 && len(b) != size:
		bad(path, "%d bytes: want %d for this algorithm", len(b), size)
	case len(b) > 0 && bytes.Count(b, []byte{0}) == len(b):
		// A placeholder or a broken generator, not a key.
		bad(path, "all zero: not a key; make new keys with ocfw tunnel keys")
	}
}

// checkDistinctKeys refuses a key file in which two of the four keys are
// the same: the two directions' keys must differ (else one direction's
// traffic can be replayed or read as the other's), and a cipher key must
// not double as a MAC key.
func checkDistinctKeys(bad func(string, string, ...any), sas []TunnelSA) {
	seen := map[string]string{}
	for i, sa := range sas {
		for _, f := range []struct{ name, hex string }{{"enc_key", sa.EncKey}, {"auth_key", sa.AuthKey}} {
			b, err := hex.DecodeString(f.hex)
			if err != nil || len(b) == 0 {
				continue // checkKey reports it
			}
			path := fmt.Sprintf("sas[%d].%s", i, f.name)
			if other, dup := seen[string(b)]; dup {
				bad(path, "the same key as %s: each direction's cipher and MAC need keys of their own; make new keys with ocfw tunnel keys", other)
				continue
			}
			seen[string(b)] = path
		}
	}
}

// TunnelSetup is everything an XFRM installer needs for one tunnel, from
// this box's side: two SAs in tunnel mode (Out from Local to Peer, In from
// Peer to Local, both ESP with the same algorithms) and the policies
// between the subnets (out: LocalSubnet to RemoteSubnet through Out's
// template; in and fwd: RemoteSubnet to LocalSubnet through In's).
type TunnelSetup struct {
	Name string
	// Local and Peer are the outer addresses: the SAs' source and
	// destination.
	Local, Peer netip.Addr
	// LocalSubnet and RemoteSubnet are the policies' selectors.
	LocalSubnet, RemoteSubnet netip.Prefix
	// Cipher and Auth are the catalog's names; CipherAlg and AuthAlg the
	// kernel's (cbc(aes), cbc(des3_ede), hmac(sha1), hmac(sha256)), what
	// XFRMA_ALG_CRYPT and XFRMA_ALG_AUTH_TRUNC name.
	Cipher, Auth       string
	CipherAlg, AuthAlg string
	// AuthTruncBits is the ICV length: 96 for hmac-sha1, 128 for
	// hmac-sha256.
	AuthTruncBits int
	Out, In       SAKeys
	// ESN: extended sequence numbers (XFRM_STATE_ESN with
	// XFRMA_REPLAY_ESN_VAL); ReplayWindow in packets.
	ESN          bool
	ReplayWindow int
}

// SAKeys is one direction's SPI and keys.
type SAKeys struct {
	SPI     uint32
	EncKey  []byte
	AuthKey []byte
}

// Setup turns a tunnel of site and its key file into what the kernel
// needs, from this box's side (the key file's direction leaving this
// box's address is Out). It checks that they belong together: the key
// file is for this tunnel, with its cipher and MAC, between its two
// addresses. Every mismatch is returned; the setup is nil unless there
// are none.
func (t Tunnel) Setup(site *Site, keys *TunnelKeys) (*TunnelSetup, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("tunnel %s: "+format, append([]any{t.Name}, args...)...))
	}
	addrs, err := site.TunnelAddrs(t)
	if err != nil {
		return nil, []error{err}
	}
	for _, e := range keys.Check() {
		bad("key file: %s: %s", e.Path, e.Msg)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if keys.Tunnel != t.Name {
		bad("the key file is for tunnel %q", keys.Tunnel)
	}
	if keys.Cipher != t.Cipher {
		bad("the key file's cipher is %s, the site's %s", keys.Cipher, t.Cipher)
	}
	if keys.Auth != t.Auth {
		bad("the key file's auth is %s, the site's %s", keys.Auth, t.Auth)
	}
	var out, in *TunnelSA
	for i := range keys.SAs {
		sa := &keys.SAs[i]
		switch {
		case sa.From == addrs.Local.String() && sa.To == addrs.Peer.String():
			out = sa
		case sa.From == addrs.Peer.String() && sa.To == addrs.Local.String():
			in = sa
		}
	}
	if out == nil || in == nil {
		bad("the key file is between %s and %s, the tunnel between %s (local) and %s (peer)",
			keys.SAs[0].From, keys.SAs[0].To, addrs.Local, addrs.Peer)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	c, _ := catalog.LookupCipher(t.Cipher)
	a, _ := catalog.LookupCipher(t.Auth)
	return &TunnelSetup{
		Name: t.Name, Local: addrs.Local, Peer: addrs.Peer,
		LocalSubnet: addrs.LocalSubnet, RemoteSubnet: addrs.RemoteSubnet,
		Cipher: t.Cipher, Auth: t.Auth, CipherAlg: c.Kernel, AuthAlg: a.Kernel,
		AuthTruncBits: authTruncBits[t.Auth],
		Out:           saKeys(out), In: saKeys(in),
		ESN: keys.ESN, ReplayWindow: keys.ReplayWindow,
	}, nil
}

// saKeys decodes a direction Check has passed.
func saKeys(sa *TunnelSA) SAKeys {
	spi, _ := ParseSPI(sa.SPI)
	enc, _ := hex.DecodeString(sa.EncKey)
	mac, _ := hex.DecodeString(sa.AuthKey)
	return SAKeys{SPI: spi, EncKey: enc, AuthKey: mac}
}
