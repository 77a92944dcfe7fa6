package site

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// siteAB returns the two ends of a tunnel a-b: A (198.51.100.2, LAN
// 192.168.1.0/24) and B (203.0.113.2, LAN 192.168.2.0/24), as the
// examples have them.
func siteAB() (a, b *Site) {
	a = &Site{
		Kind: "site", Board: "alix2d13", Hostname: "site-a",
		WAN: WAN{Port: "wan", Address: "198.51.100.2/24", Gateway: "198.51.100.1"},
		LAN: LAN{Ports: []string{"lan1"}, Address: "192.168.1.1/24"},
		Tunnels: []Tunnel{{Name: "a-b", Peer: "203.0.113.2", RemoteSubnet: "192.168.2.0/24",
			Cipher: "aes-128-cbc", Auth: "hmac-sha256", Keys: "a-b.keys"}},
	}
	b = &Site{
		Kind: "site", Board: "alix2d13", Hostname: "site-b",
		WAN: WAN{Port: "wan", Address: "203.0.113.2/24", Gateway: "203.0.113.1"},
		LAN: LAN{Ports: []string{"lan1"}, Address: "192.168.2.1/24"},
		Tunnels: []Tunnel{{Name: "a-b", Peer: "198.51.100.2", Local: "wan", LocalSubnet: "192.168.2.0/24",
			RemoteSubnet: "192.168.1.0/24", Cipher: "aes-128-cbc", Auth: "hmac-sha256", Keys: "a-b.keys"}},
	}
	return a, b
}

func TestTunnelValidate(t *testing.T) {
	a, b := siteAB()
	for _, s := range []*Site{a, b} {
		if errs := s.Validate(alixPorts); len(errs) != 0 {
			t.Errorf("%s: %v", s.Hostname, errs)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*Site)
		want []string // path: message, each must appear
	}{
		{"unknown cipher and auth", func(s *Site) { s.Tunnels[0].Cipher, s.Tunnels[0].Auth = "aes128-cbc", "hmac-sah1" }, []string{
			`tunnels[0].cipher: "aes128-cbc": want one of aes-128-cbc, aes-192-cbc, aes-256-cbc, des-ede3-cbc (did you mean "aes-128-cbc"?)`,
			`tunnels[0].auth: "hmac-sah1": want one of hmac-sha1, hmac-sha256 (did you mean "hmac-sha1"?)`,
		}},
		{"remote overlaps LAN", func(s *Site) { s.Tunnels[0].RemoteSubnet = "192.168.0.0/16" }, []string{
			"tunnels[0].remote_subnet: 192.168.0.0/16 overlaps the LAN 192.168.1.0/24",
		}},
		{"remote overlaps WAN", func(s *Site) { s.Tunnels[0].RemoteSubnet = "198.51.100.128/25" }, []string{
			"tunnels[0].remote_subnet: 198.51.100.128/25 overlaps the WAN network 198.51.100.0/24",
		}},
		{"not proper prefixes", func(s *Site) {
			s.Tunnels[0].RemoteSubnet, s.Tunnels[0].LocalSubnet = "192.168.2.1/24", "192.168.1.0/33"
		}, []string{
			`tunnels[0].remote_subnet: "192.168.2.1/24": not a network address: did you mean 192.168.2.0/24?`,
			`tunnels[0].local_subnet: "192.168.1.0/33": want an IPv4 or IPv6 network`,
		}},
		{"local subnet outside the LAN", func(s *Site) { s.Tunnels[0].LocalSubnet = "192.168.0.0/23" }, []string{
			"tunnels[0].local_subnet: 192.168.0.0/23 is not inside the LAN 192.168.1.0/24",
		}},
		{"peer is self", func(s *Site) { s.Tunnels[0].Peer = "198.51.100.2" }, []string{
			"tunnels[0].peer: 198.51.100.2 is this box's own address",
		}},
		{"peer missing, in the LAN", func(s *Site) {
			s.Tunnels = append(s.Tunnels, s.Tunnels[0])
			s.Tunnels[0].Peer = ""
			s.Tunnels[1].Peer, s.Tunnels[1].RemoteSubnet, s.Tunnels[1].Keys = "192.168.1.7", "10.0.0.0/8", "other.keys"
		}, []string{
			"tunnels[0].peer: give the other end's WAN address",
			"tunnels[1].peer: 192.168.1.7 is inside the LAN",
			"tunnels[1].name: tunnel a-b is already tunnels[0]",
		}},
		{"duplicate name, key file and remote", func(s *Site) { s.Tunnels = append(s.Tunnels, s.Tunnels[0]) }, []string{
			"tunnels[1].name: tunnel a-b is already tunnels[0]",
			"tunnels[1].keys: a-b.keys is already tunnels[0]'s key file",
			"tunnels[1].remote_subnet: 192.168.2.0/24 overlaps tunnels[0]'s remote_subnet",
		}},
		{"local is not the WAN's", func(s *Site) { s.Tunnels[0].Local = "198.51.100.9" }, []string{
			"tunnels[0].local: 198.51.100.9 is not this box's WAN address 198.51.100.2",
		}},
		{"DHCP WAN without local", func(s *Site) { s.WAN = WAN{Port: "wan", Address: "dhcp"} }, []string{
			`tunnels[0].local: the WAN has no static address ("dhcp"): give the address your ISP always gives`,
		}},
		{"key file names", func(s *Site) {
			s.Tunnels = append(s.Tunnels, s.Tunnels[0], s.Tunnels[0])
			s.Tunnels[0].Keys = "../a-b.keys"
			s.Tunnels[1].Name, s.Tunnels[1].Keys, s.Tunnels[1].RemoteSubnet = "x", "SITE.JSON", "10.1.0.0/16"
			s.Tunnels[2].Name, s.Tunnels[2].Keys, s.Tunnels[2].RemoteSubnet = "Bad_Name", "", "10.2.0.0/16"
		}, []string{
			`tunnels[0].keys: "../a-b.keys": want a plain file name`,
			`tunnels[1].keys: "SITE.JSON": want a plain file name`,
			`tunnels[2].keys: name the tunnel's key file`,
			`tunnels[2].name: "Bad_Name": want a name of lower-case letters`,
		}},
		{"no LAN", func(s *Site) { s.LAN = LAN{} }, []string{
			"tunnels[0]: a tunnel joins this site's LAN to the peer's: the site has no lan",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := siteAB()
			tc.edit(s)
			var got []string
			for _, e := range s.Validate(alixPorts) {
				got = append(got, e.Error())
			}
			all := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("lacks %q in:\n%s", w, all)
				}
			}
		})
	}
	// A DHCP WAN with the ISP's fixed address named is fine.
	a.WAN = WAN{Port: "wan", Address: "dhcp"}
	a.Tunnels[0].Local = "198.51.100.2"
	if errs := a.Validate(alixPorts); len(errs) != 0 {
		t.Errorf("DHCP WAN with local: %v", errs)
	}
}

// Keys of every size, from crypto/rand as the command makes them; both
// ends read the same file and see mirrored directions.
func TestTunnelKeysBothEnds(t *testing.T) {
	for _, tc := range []struct {
		cipher, auth  string
		enc, mac, icv int
		alg, authAlg  string
	}{
		{"aes-128-cbc", "hmac-sha1", 16, 20, 96, "cbc(aes)", "hmac(sha1)"},
		{"aes-192-cbc", "hmac-sha256", 24, 32, 128, "cbc(aes)", "hmac(sha256)"},
		{"aes-256-cbc", "hmac-sha256", 32, 32, 128, "cbc(aes)", "hmac(sha256)"},
		{"des-ede3-cbc", "hmac-sha1", 24, 20, 96, "cbc(des3_ede)", "hmac(sha1)"},
	} {
		t.Run(tc.cipher+"/"+tc.auth, func(t *testing.T) {
			a, b := siteAB()
			for _, s := range []*Site{a, b} {
				s.Tunnels[0].Cipher, s.Tunnels[0].Auth = tc.cipher, tc.auth
			}
			k, err := NewTunnelKeys(rand.Reader, "a-b", tc.cipher, tc.auth,
				netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("203.0.113.2"), time.Unix(1e9, 0))
			if err != nil {
				t.Fatal(err)
			}
			j, err := k.JSON()
			if err != nil {
				t.Fatal(err)
			}
			k2, errs := ReadTunnelKeys("a-b.keys", j)
			if len(errs) != 0 {
				t.Fatalf("reading back: %v\n%s", errs, j)
			}
			sa, errs := a.Tunnels[0].Setup(a, k2)
			if len(errs) != 0 {
				t.Fatal(errs)
			}
			sb, errs := b.Tunnels[0].Setup(b, k2)
			if len(errs) != 0 {
				t.Fatal(errs)
			}
			if len(sa.Out.EncKey) != tc.enc || len(sa.Out.AuthKey) != tc.mac || len(sa.In.EncKey) != tc.enc || len(sa.In.AuthKey) != tc.mac {
				t.Errorf("key sizes %d/%d, want %d/%d", len(sa.Out.EncKey), len(sa.Out.AuthKey), tc.enc, tc.mac)
			}
			if sa.Out.SPI < MinSPI || sa.In.SPI < MinSPI || sa.Out.SPI == sa.In.SPI {
				t.Errorf("SPIs out 0x%x in 0x%x: want two different, outside 0-255", sa.Out.SPI, sa.In.SPI)
			}
			if bytes.Equal(sa.Out.EncKey, sa.In.EncKey) || bytes.Equal(sa.Out.AuthKey, sa.In.AuthKey) {
				t.Error("the two directions share a key")
			}
			// A's out is B's in, and the other way round.
			if !sameSA(sa.Out, sb.In) || !sameSA(sa.In, sb.Out) {
				t.Errorf("A out %+v in %+v; B out %+v in %+v", sa.Out, sa.In, sb.Out, sb.In)
			}
			want := TunnelSetup{Name: "a-b",
				Local: netip.MustParseAddr("198.51.100.2"), Peer: netip.MustParseAddr("203.0.113.2"),
				LocalSubnet: netip.MustParsePrefix("192.168.1.0/24"), RemoteSubnet: netip.MustParsePrefix("192.168.2.0/24"),
				Cipher: tc.cipher, Auth: tc.auth, CipherAlg: tc.alg, AuthAlg: tc.authAlg, AuthTruncBits: tc.icv,
				Out: sa.Out, In: sa.In, ESN: true, ReplayWindow: DefaultReplayWindow}
			if !sameSetup(*sa, want) {
				t.Errorf("A's setup\n%+v, want\n%+v", *sa, want)
			}
			if sb.Local != sa.Peer || sb.Peer != sa.Local || sb.LocalSubnet != sa.RemoteSubnet || sb.RemoteSubnet != sa.LocalSubnet {
				t.Errorf("B's addresses are not A's mirrored: %+v", *sb)
			}
			if k.Created != "2001-09-09T01:46:40Z" {
				t.Errorf("created %q", k.Created)
			}
		})
	}
}

func sameSA(a, b SAKeys) bool {
	return a.SPI == b.SPI && bytes.Equal(a.EncKey, b.EncKey) && bytes.Equal(a.AuthKey, b.AuthKey)
}

func sameSetup(a, b TunnelSetup) bool {
	return reflect.DeepEqual(a, b)
}

// stream is a reader that gives fixed bytes, then counts 0, 1, 2...
type stream struct {
	b []byte
	n byte
}

func (s *stream) Read(p []byte) (int, error) {
	n := copy(p, s.b)
	s.b = s.b[n:]
	for i := n; i < len(p); i++ {
		p[i] = s.n
		s.n++
	}
	return len(p), nil
}

// The generator skips reserved SPIs and an SPI the other direction has,
// and redraws degenerate 3DES keys.
func TestTunnelKeysRedraw(t *testing.T) {
	var in []byte
	in = append(in, 0, 0, 0, 5) // reserved SPI: drawn again
	in = append(in, 0, 0, 1, 0) // 0x100: the first usable
	three := bytes.Repeat([]byte{7}, 24)
	in = append(in, three...) // K1 == K2: drawn again
	in = append(in, []byte("0123456789abcdefghijklmn")...)
	in = append(in, bytes.Repeat([]byte{1}, 20)...) // MAC key
	in = append(in, 0, 0, 1, 0)                     // same SPI as the other direction: drawn again
	in = append(in, 0, 0, 1, 1)
	k, err := NewTunnelKeys(&stream{b: in}, "a-b", "des-ede3-cbc", "hmac-sha1",
		netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("203.0.113.2"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if k.SAs[0].SPI != "0x00000100" || k.SAs[1].SPI != "0x00000101" {
		t.Errorf("SPIs %s %s, want 0x00000100 0x00000101", k.SAs[0].SPI, k.SAs[1].SPI)
	}
	if k.SAs[0].EncKey != hex.EncodeToString([]byte("0123456789abcdefghijklmn")) {
		t.Errorf("3DES key %s: the degenerate one was kept", k.SAs[0].EncKey)
	}
}

func TestReadTunnelKeysRefuses(t *testing.T) {
	k, err := NewTunnelKeys(rand.Reader, "a-b", "aes-256-cbc", "hmac-sha1",
		netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("203.0.113.2"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	good, _ := k.JSON()
	edit := func(f func(k *TunnelKeys)) string {
		c := *k
		c.SAs = append([]TunnelSA(nil), k.SAs...)
		f(&c)
		j, _ := c.JSON()
		return string(j)
	}
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"syntax", "{\n  \"kind\": \"tunnel-keys\",\n  \"version\" 1}", []string{"k.keys:3:13: JSON syntax"}},
		{"unknown field", strings.Replace(string(good), `"esn"`, `"esm"`, 1), []string{`unknown field "esm"`}},
		{"not a key file", `{"kind": "site"}`, []string{`k.keys: kind: want "tunnel-keys", got "site"`}},
		{"newer version", edit(func(k *TunnelKeys) { k.Version = 2 }), []string{"k.keys: version: 2: this firmware reads version 1"}},
		{"sizes and SPIs", edit(func(k *TunnelKeys) {
			k.SAs[0].EncKey = k.SAs[0].EncKey[:32]
			k.SAs[0].AuthKey = "zz"
			k.SAs[1].SPI = "0x000000ff"
			k.ReplayWindow = 0
		}), []string{
			"k.keys: sas[0].enc_key: 16 bytes: want 32 for this algorithm",
			"k.keys: sas[0].auth_key: not hex",
			"k.keys: sas[1].spi: 0x000000ff: SPIs 0-255 are reserved",
			"k.keys: replay_window: 0: want 32-4096",
		}},
		{"same SPI both ways", edit(func(k *TunnelKeys) { k.SAs[1].SPI = k.SAs[0].SPI }), []string{"sas[1].spi: " + k.SAs[0].SPI + " is the other direction's SPI too"}},
		{"one direction twice", edit(func(k *TunnelKeys) { k.SAs[1] = k.SAs[0]; k.SAs[1].SPI = "0x12345678" }), []string{"sas[1]: want the reverse of sas[0]"}},
		{"one direction", edit(func(k *TunnelKeys) { k.SAs = k.SAs[:1] }), []string{"sas: want 2 directions"}},
		{"big window without ESN", edit(func(k *TunnelKeys) { k.ESN, k.ReplayWindow = false, 1024 }), []string{"more than 255 needs esn: true"}},
		{"huge", strings.Repeat(" ", MaxTunnelKeysSize+1), []string{"larger than"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, errs := ReadTunnelKeys("k.keys", []byte(tc.data))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			all := strings.Join(got, "\n")
			for _, w := range tc.want {
				if k != nil || !strings.Contains(all, w) {
					t.Errorf("lacks %q in:\n%s", w, all)
				}
			}
		})
	}
}

// Setup refuses a key file that belongs to another tunnel, other
// algorithms or other addresses, saying each.
func TestTunnelSetupMismatch(t *testing.T) {
	a, _ := siteAB()
	k, err := NewTunnelKeys(rand.Reader, "a-c", "aes-256-cbc", "hmac-sha1",
		netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("203.0.113.9"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, errs := a.Tunnels[0].Setup(a, k)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	all := strings.Join(got, "\n")
	for _, w := range []string{
		`tunnel a-b: the key file is for tunnel "a-c"`,
		"tunnel a-b: the key file's cipher is aes-256-cbc, the site's aes-128-cbc",
		"tunnel a-b: the key file's auth is hmac-sha1, the site's hmac-sha256",
		"tunnel a-b: the key file is between 198.51.100.2 and 203.0.113.9, the tunnel between 198.51.100.2 (local) and 203.0.113.2 (peer)",
	} {
		if s != nil || !strings.Contains(all, w) {
			t.Errorf("lacks %q in:\n%s", w, all)
		}
	}
}
