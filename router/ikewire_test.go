package router

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/ike"
	"github.com/ocfw/ocfw/site"
)

// siteIKE is site A with one IKEv2 tunnel, as examples/sites/site-ike-a.yaml.
func siteIKE() *site.Site {
	s := siteA()
	s.Tunnels = []site.Tunnel{{Name: "a-b", Keying: site.KeyingIKEv2, Peer: "203.0.113.2", RemoteSubnet: "192.168.2.0/24",
		PSK: "a-b.psk", LocalID: "ike-a.example", RemoteID: "ike-b.example",
		IKEProposals: []string{"aes128-sha256-curve25519-ecp256-modp2048"}, ESPProposals: []string{"aes128-sha256", "3des-sha1"}}}
	return s
}

func pskFile(t *testing.T, tunnel string) ([]byte, *site.TunnelPSK) {
	t.Helper()
	p, err := site.NewTunnelPSK(rand.Reader, tunnel, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	j, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return j, p
}

// An IKEv2 tunnel's PSK comes from the card, checked; every refusal
// says what to do and none quotes the secret.
func TestReadTunnelIKE(t *testing.T) {
	sc := siteIKE()
	good, p := pskFile(t, "a-b")
	other, _ := pskFile(t, "a-c")
	for _, c := range []struct {
		name  string
		files Files
		want  string
	}{
		{"no data partition", nil, "no data partition: the PSK file a-b.psk is read from the card's ocfw folder"},
		{"no file", files{}, "no PSK file a-b.psk in the card's ocfw folder (make it with ocfw tunnel psk and copy it beside site.json)"},
		{"another tunnel's", files{"a-b.psk": other}, `a-b.psk: the PSK file is for tunnel "a-c", this is a-b`},
		{"good", files{"a-b.psk": good}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRouter(Config{Site: sc, Files: c.files})
			k, psk, why := r.readTunnelIKE(sc.Tunnels[0])
			if !strings.HasPrefix(why, c.want) || (c.want == "") != (why == "") {
				t.Errorf("why %q, want %q", why, c.want)
			}
			if strings.Contains(why, p.Secret) {
				t.Error("the reason quotes the secret")
			}
			if c.want == "" && (k == nil || !bytes.Equal(psk, p.Octets()) || k.Name != "a-b") {
				t.Errorf("settings %v, psk matches %v", k, bytes.Equal(psk, p.Octets()))
			}
		})
	}
}

// The site's tunnel becomes the endpoint's peer: ids, subnets, the IKE
// proposals in order, the ESP proposals with the proven engine's cipher
// first, ESN offered and, with pfs, the IKE SA's groups.
func TestIKEPeer(t *testing.T) {
	sc := siteIKE()
	k, err := sc.IKE(sc.Tunnels[0])
	if err != nil {
		t.Fatal(err)
	}
	tr := func(p ike.Proposal) string {
		var s []string
		for _, t := range p.Transforms {
			s = append(s, t.String())
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		name    string
		fastest []string
		pfs     bool
		want    []string
	}{
		{"config's order", nil, true, []string{
			"ENCR:12/128 INTEG:12 DH:31 DH:19 DH:14 ESN:1 ESN:0", "ENCR:3 INTEG:2 DH:31 DH:19 DH:14 ESN:1 ESN:0"}},
		{"3des engine first", []string{"des-ede3-cbc"}, true, []string{
			"ENCR:3 INTEG:2 DH:31 DH:19 DH:14 ESN:1 ESN:0", "ENCR:12/128 INTEG:12 DH:31 DH:19 DH:14 ESN:1 ESN:0"}},
		{"no pfs", nil, false, []string{"ENCR:12/128 INTEG:12 ESN:1 ESN:0", "ENCR:3 INTEG:2 ESN:1 ESN:0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k.PFS = c.pfs
			p := ikePeer(k, []byte("octets"), c.fastest)
			if p.Name != "a-b" || p.Local != netip.MustParseAddrPort("198.51.100.2:500") || p.Remote != netip.MustParseAddrPort("203.0.113.2:500") || !p.Initiate {
				t.Errorf("peer %s %v -> %v initiate %v", p.Name, p.Local, p.Remote, p.Initiate)
			}
			if p.LocalID.IDType != ike.ID_FQDN || string(p.LocalID.Data) != "ike-a.example" || string(p.RemoteID.Data) != "ike-b.example" {
				t.Errorf("ids %v %v", p.LocalID, p.RemoteID)
			}
			if fmt.Sprint(p.LocalTS, p.RemoteTS) != "[192.168.1.0/24] [192.168.2.0/24]" {
				t.Errorf("subnets %v %v", p.LocalTS, p.RemoteTS)
			}
			if len(p.IKE) != 1 || tr(p.IKE[0]) != "ENCR:12/128 INTEG:12 PRF:5 DH:31 DH:19 DH:14" {
				t.Errorf("IKE proposals %v", p.IKE)
			}
			var got []string
			for _, q := range p.Child {
				got = append(got, tr(q))
			}
			if strings.Join(got, "; ") != strings.Join(c.want, "; ") {
				t.Errorf("ESP proposals\n%s\nwant\n%s", strings.Join(got, "; "), strings.Join(c.want, "; "))
			}
			if p.DPD != 30*time.Second || p.ChildLifetime != time.Hour || p.IKELifetime != 4*time.Hour {
				t.Errorf("dpd %v lifetimes %v %v", p.DPD, p.ChildLifetime, p.IKELifetime)
			}
		})
	}
	// An IPv4 id is the address's four octets.
	if id := ikeIdentity(site.Identity{Type: site.IDIPv4, Value: "198.51.100.2"}); id.IDType != ike.ID_IPV4_ADDR || !bytes.Equal(id.Data, []byte{198, 51, 100, 2}) {
		t.Errorf("IPv4 id %v", id)
	}
}

// What `ocf net` prints of an IKEv2 tunnel: no empty cipher, auth or
// keys fields; each IKE SA's state, peer id, proposal, rekey and
// liveness; each CHILD SA's proposal, driver and counters. A manual
// tunnel names its cipher's driver.
func TestTunnelTextIKEv2(t *testing.T) {
	st := Status{Tunnels: []TunnelState{{
		Name: "a-b", Keying: "ikev2", Peer: "203.0.113.2", LocalSubnet: "192.168.1.0/24", RemoteSubnet: "192.168.2.0/24",
		PSK: "a-b.psk", State: "up",
		IKE: []IKEState{{State: "established", Role: "initiator", PeerID: "ike-b.example", Remote: "203.0.113.2:4500",
			Proposal: "AES-CBC-128/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/CURVE25519", Established: "2026-12-04T10:00:00Z",
			LastRekey: "2026-12-04T10:00:00Z", Liveness: "last heard 3s ago, liveness check after 30s of silence",
			Children: []ChildState{{Proposal: "AES-CBC-128/HMAC_SHA2_256_128", Driver: "cbc(aes-geode) (hardware)",
				Out: &SAState{SPI: "0xd0000001", Packets: 4, Bytes: 336}, In: &SAState{SPI: "0xc0000001", Packets: 4, Bytes: 336}}}}},
	}, {
		Name: "a-c", Keying: "ikev2", Peer: "198.51.100.9", RemoteSubnet: "192.168.3.0/24", PSK: "a-c.psk",
		State: "down: authentication failed: the peer's AUTH did not verify: do both ends have the same psk file?",
	}, {
		Name: "a-d", Keying: "manual", Peer: "198.51.100.10", RemoteSubnet: "192.168.4.0/24", Cipher: "aes-128-cbc", Auth: "hmac-sha1",
		Keys: "a-d.keys", Driver: "cbc(aes-generic)", State: "up",
	}}}
	var b strings.Builder
	st.WriteText(&b)
	out := b.String()
	for _, want := range []string{
		"tunnel a-b: up; peer 203.0.113.2, 192.168.1.0/24 <-> 192.168.2.0/24, ikev2, psk a-b.psk\n",
		"  IKE SA established (initiator) with ike-b.example at 203.0.113.2:4500: AES-CBC-128/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/CURVE25519; up since 2026-12-04T10:00:00Z, last rekey 2026-12-04T10:00:00Z; last heard 3s ago, liveness check after 30s of silence\n",
		"    CHILD SA AES-CBC-128/HMAC_SHA2_256_128, cipher on cbc(aes-geode) (hardware)\n",
		"      out spi 0xd0000001: 4 packets, 336 bytes, 0 errors\n",
		"      in  spi 0xc0000001: 4 packets, 336 bytes, 0 errors\n",
		"tunnel a-c: down: authentication failed: the peer's AUTH did not verify: do both ends have the same psk file?; peer 198.51.100.9, - <-> 192.168.3.0/24, ikev2, psk a-c.psk\n",
		"tunnel a-d: up; peer 198.51.100.10, - <-> 192.168.4.0/24, aes-128-cbc hmac-sha1 (driver cbc(aes-generic)), keys a-d.keys\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ocf net lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, ",  ,") || strings.Contains(out, "keys \n") || strings.Contains(out, ", keys ,") {
		t.Errorf("empty fields printed:\n%s", out)
	}
}

// The tunnel's state follows its IKE peer: up with a CHILD SA, down with
// the endpoint's reason (the wrong-PSK and dead-peer words of router/ike),
// else connecting.
func TestIKEState(t *testing.T) {
	for _, c := range []struct {
		ps   ike.PeerStatus
		want string
	}{
		{ike.PeerStatus{SAs: []ike.SAStatus{{State: "established", Children: []ike.ChildStatus{{}}}}}, "up"},
		{ike.PeerStatus{SAs: []ike.SAStatus{{State: "established"}}}, "connecting"},
		{ike.PeerStatus{LastError: "authentication failed: the peer rejected our pre-shared key (AUTHENTICATION_FAILED): do both ends have the same psk file?"},
			"down: authentication failed: the peer rejected our pre-shared key (AUTHENTICATION_FAILED): do both ends have the same psk file?"},
		{ike.PeerStatus{LastError: "no answer to liveness checks for 95 s: peer down?"}, "down: no answer to liveness checks for 95 s: peer down?"},
		{ike.PeerStatus{}, "connecting"},
	} {
		if got := ikeState(c.ps); got != c.want {
			t.Errorf("%+v: %q, want %q", c.ps, got, c.want)
		}
	}
}

// router/ike quotes a name identity; ocf net shows it as the site config
// writes it. An address stays as it is.
func TestPeerID(t *testing.T) {
	for in, want := range map[string]string{`"ike-b.example"`: "ike-b.example", "203.0.113.2": "203.0.113.2", "": ""} {
		if got := peerID(in); got != want {
			t.Errorf("peerID(%q) = %q, want %q", in, got, want)
		}
	}
}
