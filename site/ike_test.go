package site

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
)

// ikeAB is siteAB with the tunnel keyed by IKEv2 and nothing else given.
func ikeAB() (a, b *Site) {
	a, b = siteAB()
	for _, s := range []*Site{a, b} {
		t := &s.Tunnels[0]
		t.Cipher, t.Auth, t.Keys, t.PSK = "", "", "", "a-b.psk"
	}
	return a, b
}

// Which keying a tunnel gets: manual when it says so or has any of the
// manual fields (every config written before IKEv2), IKEv2 otherwise.
func TestTunnelMode(t *testing.T) {
	for _, tc := range []struct {
		t    Tunnel
		want string
	}{
		{Tunnel{}, KeyingIKEv2},
		{Tunnel{PSK: "a.psk"}, KeyingIKEv2},
		{Tunnel{Keys: "a.keys"}, KeyingManual},
		{Tunnel{Cipher: "aes-128-cbc"}, KeyingManual},
		{Tunnel{Auth: "hmac-sha1"}, KeyingManual},
		{Tunnel{Keying: "ikev2", Keys: "a.keys"}, KeyingIKEv2},
		{Tunnel{Keying: "manual"}, KeyingManual},
	} {
		if got := tc.t.Mode(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.t, got, tc.want)
		}
	}
}

// An IKEv2 tunnel's fields are checked at their paths, each message
// saying what is valid; the defaults resolve to the WAN addresses, the
// default proposals, 4h/1h/30s and PFS.
func TestIKEValidate(t *testing.T) {
	a, b := ikeAB()
	for _, s := range []*Site{a, b} {
		if errs := s.Validate(alixPorts); len(errs) != 0 {
			t.Fatalf("%s: %v", s.Hostname, errs)
		}
	}
	k, err := a.IKE(a.Tunnels[0])
	if err != nil {
		t.Fatal(err)
	}
	if k.LocalID != (Identity{IDIPv4, "198.51.100.2"}) || k.RemoteID != (Identity{IDIPv4, "203.0.113.2"}) ||
		k.IKELifetime != 4*time.Hour || k.ChildLifetime != time.Hour || k.DPD != 30*time.Second || !k.PFS || k.PSK != "a-b.psk" {
		t.Errorf("defaults: %+v", k)
	}
	if got := fmt.Sprint(tokensOf(k.IKEProposals), tokensOf(k.ESPProposals)); got != "[[aes128 aes256 sha256 prfsha256 curve25519 ecp256 modp2048]] [[aes128 aes256 sha256]]" {
		t.Errorf("default proposals %s", got)
	}
	f := false
	for _, tc := range []struct {
		name string
		edit func(*Tunnel)
		want []string
	}{
		{"no psk", func(t *Tunnel) { t.PSK = "" }, []string{
			"tunnels[0].psk: name the tunnel's PSK file (made by ocfw tunnel psk), e.g. psk: a-b.psk; or, for manual keys, keying: manual with keys",
		}},
		{"psk names", func(t *Tunnel) { t.PSK = "../a-b.psk" }, []string{`tunnels[0].psk: "../a-b.psk": want a plain file name`}},
		{"manual fields on ikev2", func(t *Tunnel) { t.Keying, t.Keys, t.Cipher = "ikev2", "a-b.keys", "aes-128-cbc" }, []string{
			"tunnels[0].keys: a key file is for keying: manual; an IKEv2 tunnel negotiates its keys and needs psk: a-b.psk",
			"tunnels[0].cipher: cipher is for keying: manual; an IKEv2 tunnel negotiates its algorithms: list them in esp_proposals",
		}},
		{"unknown keying", func(t *Tunnel) { t.Keying = "ikev1" }, []string{
			`tunnels[0].keying: "ikev1": want ikev2 (the default: IKEv2 with a pre-shared key) or manual (a key file made by ocfw tunnel keys) (did you mean "ikev2"?)`,
		}},
		{"proposals", func(t *Tunnel) {
			t.IKEProposals = []string{"aes128-sha256-modp2048", "aes128-md5-modp1024", "aes256-sha1", "aes128-aes128-sha1-ecp256"}
			t.ESPProposals = []string{"aes128-sha256-modp2048", "sha256", "aes128gcm16", "aes128-prfsha1-sha1"}
		}, []string{
			`tunnels[0].ike_proposals[1]: "aes128-md5-modp1024": "md5" is not an algorithm this firmware speaks: want aes128, aes192, aes256, 3des, sha1, sha256, prfsha1, prfsha256, modp2048, ecp256, curve25519`,
			`tunnels[0].ike_proposals[2]: "aes256-sha1": no Diffie-Hellman group: add curve25519, ecp256 or modp2048`,
			`tunnels[0].ike_proposals[3]: "aes128-aes128-sha1-ecp256": aes128 appears twice`,
			`tunnels[0].esp_proposals[0]: "aes128-sha256-modp2048": modp2048: esp_proposals name no Diffie-Hellman group: with pfs: true (the default) the CHILD SAs' rekeys use the IKE SA's group`,
			`tunnels[0].esp_proposals[1]: "sha256": no encryption algorithm`,
			`tunnels[0].esp_proposals[2]: "aes128gcm16": "aes128gcm16" is not an algorithm`,
			`tunnels[0].esp_proposals[3]: "aes128-prfsha1-sha1": prfsha1: a PRF belongs to the IKE SA's proposals`,
		}},
		{"too many proposals", func(t *Tunnel) { t.ESPProposals = strings.Split(strings.Repeat("aes128-sha1 ", 9), " ")[:9] }, []string{
			"tunnels[0].esp_proposals: 9 proposals: want at most 8",
		}},
		{"bad id", func(t *Tunnel) { t.LocalID = "not an id" }, []string{
			`tunnels[0].local_id: "not an id": want an IP address, a DNS name (east.example) or an e-mail address (gw@east.example) (or leave it out for this end's address)`,
		}},
		{"remote id is ours", func(t *Tunnel) { t.RemoteID = "198.51.100.2" }, []string{
			"tunnels[0].remote_id: 198.51.100.2 is this end's own id too: the two ends need different ids",
		}},
		{"lifetimes and dpd", func(t *Tunnel) { t.IKELifetime, t.Lifetime, t.DPD = "48h", "1 hour", "1s" }, []string{
			`tunnels[0].ike_lifetime: "48h": want a duration from 10m0s to 24h0m0s, e.g. 4h0m0s (or leave it out for 4h0m0s)`,
			`tunnels[0].lifetime: "1 hour": want a duration from 5m0s to 8h0m0s`,
			`tunnels[0].dpd: "1s": want a duration from 10s to 1h0m0s, e.g. 30s (or leave it out for 30s); or off`,
		}},
		{"ikev2 fields on a manual tunnel", func(t *Tunnel) {
			t.Keying, t.Keys, t.Cipher, t.Auth, t.PFS, t.DPD = "manual", "a-b.keys", "aes-128-cbc", "hmac-sha1", &f, "off"
		}, []string{
			"tunnels[0].psk: psk is for keying: ikev2; this tunnel has manual keys (keys, cipher, auth): drop psk, or write keying: ikev2 and drop keys, cipher and auth",
			"tunnels[0].pfs: pfs is for keying: ikev2",
			"tunnels[0].dpd: dpd is for keying: ikev2",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := ikeAB()
			tc.edit(&s.Tunnels[0])
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

	// A port forward of IKE's ports would take the tunnel's packets.
	a.Firewall.PortForwards = []PortForward{{Proto: "udp", Port: 4500, To: "192.168.1.10"}, {Proto: "tcp", Port: 500, To: "192.168.1.10"}}
	errs := a.Validate(alixPorts)
	if len(errs) != 1 || errs[0].Error() != "firewall.port_forwards[0].port: udp 4500 is IKE's port, which the IKEv2 tunnel a-b needs on the router: forward another port" {
		t.Errorf("port forward of 4500: %v", errs)
	}

	// Everything given resolves as written.
	off := false
	a.Firewall.PortForwards = nil
	a.Tunnels[0].LocalID, a.Tunnels[0].RemoteID = "@ike-a.example", "gw@ike-b.example"
	a.Tunnels[0].IKELifetime, a.Tunnels[0].Lifetime, a.Tunnels[0].DPD, a.Tunnels[0].PFS = "2h", "20m", "off", &off
	a.Tunnels[0].IKEProposals = []string{"3des-sha1-prfsha256-x25519"}
	if errs := a.Validate(alixPorts); len(errs) != 0 {
		t.Fatal(errs)
	}
	k, err = a.IKE(a.Tunnels[0])
	if err != nil {
		t.Fatal(err)
	}
	if k.LocalID != (Identity{IDFQDN, "ike-a.example"}) || k.RemoteID != (Identity{IDEmail, "gw@ike-b.example"}) ||
		k.IKELifetime != 2*time.Hour || k.ChildLifetime != 20*time.Minute || k.DPD != 0 || k.PFS {
		t.Errorf("given: %+v", k)
	}
	p := k.IKEProposals[0]
	if p.Encr[0].ID != 3 || p.Integ[0].ID != 2 || p.PRF[0].ID != 5 || len(p.PRF) != 1 || p.DH[0].ID != 31 || p.DH[0].Token != "curve25519" {
		t.Errorf("3des-sha1-prfsha256-x25519: %+v", p)
	}
}

// The IANA numbers of each algorithm (RFC 7296 3.3.2, RFC 3602,
// RFC 4868, RFC 5903, RFC 8031).
func TestParseProposalIDs(t *testing.T) {
	p, err := ParseProposal("aes128-aes192-aes256-3des-sha1-sha256-modp2048-ecp256-curve25519", false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range [][]Transform{p.Encr, p.Integ, p.PRF, p.DH} {
		for _, tr := range l {
			got = append(got, fmt.Sprintf("%d:%d/%d", tr.Type, tr.ID, tr.KeyBits))
		}
	}
	if s := strings.Join(got, " "); s != "1:12/128 1:12/192 1:12/256 1:3/0 3:2/0 3:12/0 2:2/0 2:5/0 4:14/0 4:19/0 4:31/0" {
		t.Errorf("transforms %s", s)
	}
}

// The router proposes the ciphers its proven engines run fastest first;
// with no engine to prefer, the config's order stands.
func TestPreferCiphers(t *testing.T) {
	var props []Proposal
	for _, s := range []string{"aes256-3des-sha256", "aes128-sha1"} {
		p, err := ParseProposal(s, true)
		if err != nil {
			t.Fatal(err)
		}
		props = append(props, p)
	}
	for _, tc := range []struct {
		fastest []string
		want    string
	}{
		{nil, "[[aes256 3des sha256] [aes128 sha1]]"},
		{[]string{"des-ede3-cbc"}, "[[3des aes256 sha256] [aes128 sha1]]"},
		{[]string{"aes-128-cbc", "des-ede3-cbc"}, "[[aes128 sha1] [3des aes256 sha256]]"},
	} {
		if got := fmt.Sprint(tokensOf(PreferCiphers(props, tc.fastest))); got != tc.want {
			t.Errorf("fastest %v: %s, want %s", tc.fastest, got, tc.want)
		}
	}
	if got := fmt.Sprint(tokensOf(props)); got != "[[aes256 3des sha256] [aes128 sha1]]" {
		t.Errorf("PreferCiphers changed its argument: %s", got)
	}
}

func tokensOf(ps []Proposal) [][]string {
	var out [][]string
	for _, p := range ps {
		var s []string
		for _, l := range [][]Transform{p.Encr, p.Integ, p.PRF, p.DH} {
			for _, tr := range l {
				s = append(s, tr.Token)
			}
		}
		out = append(out, s)
	}
	return out
}

// A weak PSK is refused with why, never quoting it; the generator's are
// strong, and equal keys compare equal whatever their writing.
func TestWeakPSK(t *testing.T) {
	random := make([]byte, 32)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	seq := make([]byte, 40)
	for i := range seq {
		seq[i] = byte(3 * i)
	}
	for _, tc := range []struct {
		secret, want string
	}{
		{"0x" + hex.EncodeToString(random), ""},
		{"0s" + base64.StdEncoding.EncodeToString(random), ""},
		{base64.RawURLEncoding.EncodeToString(random), ""},
		{"Tr0ub4dor&3-horse?Battery#staple!9xQ", ""},
		{"correct horse battery staple and a few more words to make it long", ""},
		{"0x" + hex.EncodeToString(random[:31]), "31 bytes: want at least 32"},
		{"short", "5 bytes: want at least 32"},
		{strings.Repeat("a", 40), "one byte (0x61) 40 times"},
		{"0x" + strings.Repeat("00", 32), "one byte (0x00) 32 times"},
		{strings.Repeat("pass1234", 5), "a 8-byte pattern repeated"},
		{"0x" + hex.EncodeToString(seq), "a counting sequence (each byte +3)"},
		{"0x" + strings.Repeat("0102030405060708090a0b", 3) + "0102", "a 11-byte pattern repeated"},
		{"abababababcdcdcdcdcdababababcdcdcdcdcd1234", "only 8 different bytes in 42"},
		{"correct horse battery staple 2024!", "a passphrase of 34 characters (words, or letters only): want at least 64"},
		{"correcthorsebatterystapleandmorewords", "a passphrase of 37 characters"},
		{"31415926535897932384626433832795028841971", ""},
		{"314159265358979323846264338327950288", "about 120 bits for its characters: want at least 128"},
		{"0xzz" + strings.Repeat("ab", 32), "starts with 0x but is not hex"},
		{"0s!!!", "starts with 0s but is not base64"},
		{"tab\there and some more words to be long enough", "byte 4 is not printable ASCII"},
		{" " + base64.RawURLEncoding.EncodeToString(random), "starts or ends with a space"},
		{"0x" + strings.Repeat("ab", 300), "300 bytes: want at most 256"},
	} {
		got := WeakPSK(tc.secret)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("WeakPSK(%q) = %q, want %q", tc.secret, got, tc.want)
		}
		if len(tc.secret) >= 8 && got != "" && strings.Contains(got, tc.secret[2:8]) {
			t.Errorf("WeakPSK's message quotes the secret: %q", got)
		}
	}

	// The generator: 43 characters of text, strong, mode-free JSON the
	// reader takes; String never shows the secret.
	p, err := NewTunnelPSK(rand.Reader, "a-b", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Secret) != 43 || WeakPSK(p.Secret) != "" || len(p.Octets()) != 43 {
		t.Errorf("generated %d characters: %q", len(p.Secret), WeakPSK(p.Secret))
	}
	data, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	q, errs := ReadTunnelPSK("a-b.psk", data)
	if len(errs) != 0 || !SamePSK(p, q) {
		t.Fatalf("read back: %v", errs)
	}
	for _, s := range []string{fmt.Sprint(p), fmt.Sprintf("%+v", *p), fmt.Sprintf("%#v", p), fmt.Sprintf("%q", q)} {
		if strings.Contains(s, p.Secret) {
			t.Errorf("printing the PSK file shows the secret: %s", s)
		}
	}
	// Two draws differ; a source of patterns is refused, not written.
	if r, _ := NewTunnelPSK(rand.Reader, "a-b", time.Unix(0, 0)); r.Secret == p.Secret {
		t.Error("two PSKs alike")
	}
	if _, err := NewTunnelPSK(bytes.NewReader(make([]byte, 32*16)), "a-b", time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), "patterns") {
		t.Errorf("zero source: %v", err)
	}

	// The same key in hex and in base64 is the same key.
	h := &TunnelPSK{Secret: "0x" + hex.EncodeToString(random)}
	b := &TunnelPSK{Secret: "0s" + base64.StdEncoding.EncodeToString(random)}
	o := &TunnelPSK{Secret: "0x" + hex.EncodeToString(append(random[:31:31], random[31]^1))}
	if !SamePSK(h, b) || SamePSK(h, o) {
		t.Error("SamePSK")
	}

	// A weak key in a file: at its field, naming the way to fix it.
	weak := []byte(`{"kind": "tunnel-psk", "version": 1, "tunnel": "a-b", "secret": "password password password password"}`)
	if _, errs := ReadTunnelPSK("a-b.psk", weak); len(errs) != 1 || !strings.Contains(errs[0].Error(), "a-b.psk: secret: a 9-byte pattern repeated: not a key: make a strong one with ocfw tunnel psk") {
		t.Errorf("weak file: %v", errs)
	}
	if _, errs := ReadTunnelPSK("a-b.keys", []byte(`{"kind": "tunnel-keys", "version": 1}`)); len(errs) != 1 || !strings.Contains(errs[0].Error(), `kind: want "tunnel-psk", got "tunnel-keys"`) {
		t.Errorf("key file as PSK: %v", errs)
	}
}

// The board reads an IKEv2 tunnel from site.json as the host wrote it:
// the same settings resolve on both sides, and no manual field appears.
func TestIKEJSONRoundTrip(t *testing.T) {
	a, _ := ikeAB()
	off := false
	a.Tunnels[0].LocalID, a.Tunnels[0].ESPProposals, a.Tunnels[0].DPD, a.Tunnels[0].PFS = "ike-a.example", []string{"aes256-sha1"}, "off", &off
	data, err := a.JSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"cipher"`, `"auth"`, `"keys"`} {
		if bytes.Contains(data, []byte(f)) {
			t.Errorf("site.json of an IKEv2 tunnel has %s:\n%s", f, data)
		}
	}
	b, errs := Read("site.json", data, alixPorts)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	want, err := a.IKE(a.Tunnels[0])
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.IKE(b.Tunnels[0])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) || got.PFS || got.DPD != 0 {
		t.Errorf("board %+v\nhost  %+v", got, want)
	}
}

// The router's reader: the file on its own and for this tunnel.
func TestTunnelPSKFor(t *testing.T) {
	a, _ := ikeAB()
	p, err := NewTunnelPSK(rand.Reader, "a-b", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := p.JSON()
	if q, errs := TunnelPSKFor(a.Tunnels[0], data); len(errs) != 0 || !SamePSK(p, q) {
		t.Errorf("the tunnel's own file: %v", errs)
	}
	other, _ := NewTunnelPSK(rand.Reader, "a-c", time.Unix(0, 0))
	od, _ := other.JSON()
	for _, tc := range []struct {
		t    Tunnel
		data []byte
		want string
	}{
		{a.Tunnels[0], od, `a-b.psk: the PSK file is for tunnel "a-c", this is a-b`},
		{a.Tunnels[0], []byte(`{"kind": "tunnel-psk", "version": 1, "tunnel": "a-b", "secret": "0x00"}`), "a-b.psk: secret: 1 bytes: want at least 32"},
		{Tunnel{Name: "a-b", Keys: "a-b.keys"}, data, "tunnel a-b has manual keys"},
	} {
		_, errs := TunnelPSKFor(tc.t, tc.data)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, errs)
		}
	}
}

// Random keys are never called weak: 2000 draws of 32 bytes, written in
// hex and in base64, all pass.
func TestWeakPSKTakesRandomKeys(t *testing.T) {
	b := make([]byte, 32)
	for i := 0; i < 2000; i++ {
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"0x" + hex.EncodeToString(b), "0s" + base64.StdEncoding.EncodeToString(b)} {
			if why := WeakPSK(s); why != "" {
				t.Fatalf("random key %s called weak: %s", s, why)
			}
		}
	}
}
