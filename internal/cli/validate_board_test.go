package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/site"
)

// ocfw validate (the host) and the board's choice of a site config at
// boot (router.ReadSite: site.Read, then a dry run of the firewall, the
// DHCP server and the SSH keys) give every config the same verdict. Each
// row is a config the firmware used to apply only in part (or a good one
// that must keep passing); a tunnel row also walks its key file through
// what the board does with it (site.ReadTunnelKeys, Tunnel.Setup).
func TestValidateAgreesWithBoard(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	b, err := cat.Board("alix2d13")
	if err != nil {
		t.Fatal(err)
	}
	ed := edKeyLine(t)
	rsa1024, rsa2048 := rsaKeyLine(t, 1024), rsaKeyLine(t, 2048)
	base := func() *site.Site {
		return &site.Site{Kind: "site", Board: "alix2d13", Hostname: "gw",
			WAN: site.WAN{Port: "wan", Address: "198.51.100.2/24", Gateway: "198.51.100.1", DNS: []string{"198.51.100.53"}},
			LAN: site.LAN{Ports: []string{"lan1", "lan2"}, Address: "192.168.1.1/24", DHCP: site.DHCP{
				Range:  []string{"192.168.1.100", "192.168.1.199"},
				Static: []site.StaticLease{{MAC: "00:0d:b9:12:34:56", IP: "192.168.1.10", Name: "nas"}}}},
			Firewall: site.Firewall{PortForwards: []site.PortForward{{Proto: "tcp", Port: 8080, To: "192.168.1.10", ToPort: 80}}},
			SSH:      site.SSH{AuthorizedKeys: []string{ed}},
		}
	}
	tunnel := func(s *site.Site) {
		s.Tunnels = []site.Tunnel{{Name: "a-b", Peer: "203.0.113.2", RemoteSubnet: "192.168.2.0/24",
			Cipher: "aes-256-cbc", Auth: "hmac-sha256", Keys: "a-b.keys"}}
	}
	for _, tc := range []struct {
		name string
		edit func(*site.Site)
		// keys edits the tunnel's key file (a tunnel row: edit adds the
		// tunnel).
		keys func(*site.TunnelKeys)
		// secondDoc appends another document to the file.
		secondDoc bool
		// want is "field.path: message" or "message": the board's errors
		// have all of it, validate's the message, at the field's line
		// ("": both accept the config); wantBoard, when set, is in the
		// board's instead.
		want, wantBoard string
	}{
		{name: "good", edit: func(s *site.Site) {}},
		{name: "good: RSA 2048", edit: func(s *site.Site) { s.SSH.AuthorizedKeys = []string{rsa2048} }},
		{name: "good: range up to .254", edit: func(s *site.Site) { s.LAN.DHCP.Range[1] = "192.168.1.254" }},
		{name: "good: a /30 LAN", edit: func(s *site.Site) {
			s.LAN.Address, s.LAN.DHCP.Range, s.LAN.DHCP.Static = "10.0.0.1/30", []string{"10.0.0.2", "10.0.0.2"}, nil
			s.Firewall.PortForwards[0].To = "10.0.0.2"
		}},
		{name: "good: an /8 LAN", edit: func(s *site.Site) { s.LAN.Address = "192.168.1.1/16" }},
		{name: "good: a tunnel", edit: tunnel, keys: func(*site.TunnelKeys) {}},
		{name: "good: no LAN", edit: func(s *site.Site) { s.LAN, s.Firewall.PortForwards = site.LAN{Ports: []string{}}, nil }},

		{name: "duplicate port forward", edit: func(s *site.Site) {
			s.Firewall.PortForwards = append(s.Firewall.PortForwards, site.PortForward{Proto: "tcp", Port: 8080, To: "192.168.1.11"})
		}, want: "firewall.port_forwards[1].port: tcp 8080 is forwarded by firewall.port_forwards[0] already"},
		{name: "duplicate static IP", edit: func(s *site.Site) {
			s.LAN.DHCP.Static = append(s.LAN.DHCP.Static, site.StaticLease{MAC: "00:0d:b9:12:34:57", IP: "192.168.1.10"})
		}, want: "lan.dhcp.static[1].ip: 192.168.1.10 is lan.dhcp.static[0]'s address already"},
		{name: "duplicate static MAC", edit: func(s *site.Site) {
			s.LAN.DHCP.Static = append(s.LAN.DHCP.Static, site.StaticLease{MAC: "00:0D:B9:12:34:56", IP: "192.168.1.11"})
		}, want: "lan.dhcp.static[1].mac: 00:0d:b9:12:34:56 has a static lease already"},
		{name: "garbage key line", edit: func(s *site.Site) { s.SSH.AuthorizedKeys = append(s.SSH.AuthorizedKeys, "ssh-ed25519 hunter2") },
			want: "ssh.authorized_keys[1]: not a public key"},
		{name: "RSA 1024", edit: func(s *site.Site) { s.SSH.AuthorizedKeys = []string{rsa1024} },
			want: "ssh.authorized_keys[0]: an RSA key of 1024 bits is too weak: want 2048 bits or more"},
		{name: "DSA", edit: func(s *site.Site) { s.SSH.AuthorizedKeys = append(s.SSH.AuthorizedKeys, dsaKeyLine(t)) },
			want: "ssh.authorized_keys[1]: a DSA (ssh-dss) key cannot log in"},
		{name: "range to the broadcast", edit: func(s *site.Site) { s.LAN.DHCP.Range[1] = "192.168.1.255" },
			want: "lan.dhcp.range[1]: 192.168.1.255 is the broadcast address of the LAN 192.168.1.0/24"},
		{name: "range from the network", edit: func(s *site.Site) { s.LAN.DHCP.Range[0] = "192.168.1.0" },
			want: "lan.dhcp.range[0]: 192.168.1.0 is the network address of the LAN 192.168.1.0/24"},
		{name: "range outside the LAN", edit: func(s *site.Site) { s.LAN.DHCP.Range[1] = "192.168.2.10" },
			want: "lan.dhcp.range[1]: 192.168.2.10 is outside the LAN 192.168.1.0/24"},
		{name: "LAN /0", edit: func(s *site.Site) { s.LAN.Address = "192.168.1.1/0" },
			want: `lan.address: "192.168.1.1/0": want the router's LAN address with its prefix, e.g. 192.168.1.1/24: the prefix must be /8 to /30`},
		{name: "LAN /7", edit: func(s *site.Site) { s.LAN.Address = "192.168.1.1/7" }, want: "the prefix must be /8 to /30"},
		{name: "LAN /31", edit: func(s *site.Site) { s.LAN.Address = "192.168.1.1/31" }, want: "the prefix must be /8 to /30"},
		{name: "LAN address is the network", edit: func(s *site.Site) { s.LAN.Address = "192.168.1.0/24" },
			want: "lan.address: \"192.168.1.0/24\": 192.168.1.0 is the LAN's network address"},
		{name: "LAN address is the broadcast", edit: func(s *site.Site) { s.LAN.Address = "192.168.1.255/24" },
			want: "192.168.1.255 is the LAN's broadcast address"},
		{name: "forward to the network address", edit: func(s *site.Site) { s.Firewall.PortForwards[0].To = "192.168.1.0" },
			want: "firewall.port_forwards[0].to: 192.168.1.0 is the network address of the LAN"},
		{name: "forward to the broadcast", edit: func(s *site.Site) { s.Firewall.PortForwards[0].To = "192.168.1.255" },
			want: "firewall.port_forwards[0].to: 192.168.1.255 is the broadcast address of the LAN"},
		{name: "forward without a LAN", edit: func(s *site.Site) { s.LAN = site.LAN{Ports: []string{}} },
			want: "firewall.port_forwards[0].to: 192.168.1.10: the site has no lan"},
		{name: "WAN gateway is the WAN address", edit: func(s *site.Site) { s.WAN.Gateway = "198.51.100.2" },
			want: "wan.gateway: 198.51.100.2 is this box's own WAN address"},
		{name: "WAN gateway is the broadcast", edit: func(s *site.Site) { s.WAN.Gateway = "198.51.100.255" },
			want: "wan.gateway: 198.51.100.255 is the broadcast address of 198.51.100.0/24"},
		{name: "WAN address is the network", edit: func(s *site.Site) { s.WAN.Address = "198.51.100.0/24" },
			want: "wan.address: 198.51.100.0 is the network's network address"},
		{name: "static lease for the broadcast MAC", edit: func(s *site.Site) { s.LAN.DHCP.Static[0].MAC = "ff:ff:ff:ff:ff:ff" },
			want: "lan.dhcp.static[0].mac: ff:ff:ff:ff:ff:ff is the broadcast address"},
		{name: "static lease for a multicast MAC", edit: func(s *site.Site) { s.LAN.DHCP.Static[0].MAC = "01:00:5e:00:00:01" },
			want: "is a multicast address"},
		{name: "static lease for the zero MAC", edit: func(s *site.Site) { s.LAN.DHCP.Static[0].MAC = "00:00:00:00:00:00" },
			want: "is the zero address"},
		{name: "DHCP hands out an IPv6 DNS server", edit: func(s *site.Site) { s.LAN.DHCP.DNS = []string{"2001:db8::53"} },
			want: `lan.dhcp.dns[0]: "2001:db8::53": want an IPv4 address`},
		{name: "all-zero encryption key", edit: tunnel, keys: func(k *site.TunnelKeys) { k.SAs[0].EncKey = strings.Repeat("00", 32) },
			want: "sas[0].enc_key: all zero"},
		{name: "all-zero MAC key", edit: tunnel, keys: func(k *site.TunnelKeys) { k.SAs[1].AuthKey = strings.Repeat("00", 32) },
			want: "sas[1].auth_key: all zero"},
		{name: "both directions' encryption keys equal", edit: tunnel, keys: func(k *site.TunnelKeys) { k.SAs[1].EncKey = k.SAs[0].EncKey },
			want: "sas[1].enc_key: the same key as sas[0].enc_key"},
		{name: "encryption key is the MAC key", edit: tunnel, keys: func(k *site.TunnelKeys) { k.SAs[0].AuthKey = k.SAs[0].EncKey },
			want: "sas[0].auth_key: the same key as sas[0].enc_key"},
		{name: "a second YAML document", edit: func(s *site.Site) {}, secondDoc: true,
			want: "a second YAML document (---)", wantBoard: "site.json: more than one JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(s)
			data, err := s.JSON() // what ocfw site json writes; JSON is YAML too
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "site.yaml")
			host := data
			if tc.secondDoc {
				host = append(append(append([]byte{}, data...), "---\n"...), data...)
			}
			var keys *site.TunnelKeys
			if tc.keys != nil {
				keys, err = site.NewTunnelKeys(rand.Reader, "a-b", "aes-256-cbc", "hmac-sha256",
					netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("203.0.113.2"), time.Now())
				if err != nil {
					t.Fatal(err)
				}
				tc.keys(keys)
				kj, err := keys.JSON()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "a-b.keys"), kj, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(file, host, 0o644); err != nil {
				t.Fatal(err)
			}
			out, errs, code := ocfw(t, "validate", file)
			hostOK := code == 0

			// The board: the card's JSON, as the boot chooses it.
			board := data
			if tc.secondDoc {
				board = append(append([]byte{}, data...), data...)
			}
			var boardErrs []string
			bs, berrs := router.ReadSite("site.json", board, b.Ports)
			for _, e := range berrs {
				boardErrs = append(boardErrs, e.Error())
			}
			if bs != nil && keys != nil {
				kj, _ := keys.JSON()
				rk, kerrs := site.ReadTunnelKeys("a-b.keys", kj)
				if len(kerrs) == 0 {
					_, kerrs = bs.Tunnels[0].Setup(bs, rk)
				}
				for _, e := range kerrs {
					boardErrs = append(boardErrs, e.Error())
				}
			}
			boardOK := len(boardErrs) == 0
			if hostOK != boardOK {
				t.Fatalf("verdicts differ: validate ok=%v (%s%s), board ok=%v %q", hostOK, out, errs, boardOK, boardErrs)
			}
			if tc.want == "" {
				if !hostOK {
					t.Fatalf("a good config refused:\n%s%s\nboard: %q", out, errs, boardErrs)
				}
				return
			}
			if hostOK {
				t.Fatalf("validate passed it: %s", out)
			}
			msg := tc.want
			if m := fieldPath.FindStringSubmatch(tc.want); m != nil {
				msg = tc.want[len(m[0]):]
			}
			// Each message is placed at a line and column of the site
			// config, or at a field of the key file.
			if !regexp.MustCompile(`(site\.yaml:\d+:\d+|a-b\.keys: sas\[\d\]\.[a-z_]+): [^\n]*` + regexp.QuoteMeta(msg)).MatchString(errs) {
				t.Errorf("validate's message lacks %q at a file:line:column (or a key file's field):\n%s", msg, errs)
			}
			wantBoard := tc.want
			if tc.wantBoard != "" {
				wantBoard = tc.wantBoard
			}
			if !strings.Contains(strings.Join(boardErrs, "\n"), wantBoard) {
				t.Errorf("the board's message lacks %q: %q", wantBoard, boardErrs)
			}
		})
	}
}

// fieldPath is a site config's field path leading a message.
var fieldPath = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+|\[\d+\])*: `)

func edKeyLine(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " me@laptop"
}

func rsaKeyLine(t *testing.T, bits int) string {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " old@box"
}

// dsaKeyLine is an ssh-dss line in the wire format (RFC 4253 6.6: p, q,
// g, y) with numbers of DSA's sizes: the key library no longer makes
// them.
func dsaKeyLine(t *testing.T) string {
	t.Helper()
	n := func(bits int) *big.Int {
		v, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), uint(bits)))
		if err != nil {
			t.Fatal(err)
		}
		return v.SetBit(v, bits-1, 1)
	}
	w := ssh.Marshal(struct {
		Name       string
		P, Q, G, Y *big.Int
	}{"ssh-dss", n(1024), n(160), n(1024), n(1024)})
	return "ssh-dss " + base64.StdEncoding.EncodeToString(w) + " old@box"
}
