package firewall

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/site"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/drivers/catalog"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func baseSite() *site.Site {
	return &site.Site{
		Kind: "site", Hostname: "gw",
		WAN: site.WAN{Port: "wan", Address: "dhcp"},
		LAN: site.LAN{Ports: []string{"lan1"}, Address: "192.168.1.1/24"},
	}
}

var lanAddr = netip.MustParsePrefix("192.168.1.1/24")

// tunnelSite is site A of the examples with a second tunnel to a third
// site, on a static WAN address.
func tunnelSite() *site.Site {
	s := baseSite()
	s.WAN = site.WAN{Port: "wan", Address: "198.51.100.2/24", Gateway: "198.51.100.1"}
	s.Tunnels = []site.Tunnel{
		{Name: "a-b", Peer: "203.0.113.2", RemoteSubnet: "192.168.2.0/24", Cipher: "aes-128-cbc", Auth: "hmac-sha256", Keys: "a-b.keys"},
		{Name: "a-c", Peer: "192.0.2.7", LocalSubnet: "192.168.1.128/25", RemoteSubnet: "10.3.0.0/16", Cipher: "aes-256-cbc", Auth: "hmac-sha1", Keys: "a-c.keys"},
	}
	return s
}

// ikeSite is tunnelSite with a-b keyed by IKEv2 and a-c still manual.
func ikeSite() *site.Site {
	s := tunnelSite()
	s.Tunnels[0] = site.Tunnel{Name: "a-b", Keying: site.KeyingIKEv2, Peer: "203.0.113.2", RemoteSubnet: "192.168.2.0/24", PSK: "a-b.psk"}
	return s
}

// The golden files are the whole policy in nft's syntax: a change to what
// the router lets through shows up as a diff a reviewer reads.
func TestBuildGolden(t *testing.T) {
	forwards := baseSite()
	forwards.SSH.Port = 2222
	forwards.Firewall = site.Firewall{
		WANServices: []string{"ssh"},
		PortForwards: []site.PortForward{
			{Proto: "tcp", Port: 8080, To: "192.168.1.10", ToPort: 80},
			{Proto: "udp", Port: 51820, To: "192.168.1.20"},
		},
	}
	// A one-port box with no LAN (an NSLU2 as a host): input only.
	host := baseSite()
	host.LAN = site.LAN{}
	host.Firewall.WANServices = []string{"ssh"}
	for name, site := range map[string]*site.Site{"closed": baseSite(), "forwards-ssh": forwards, "host-no-lan": host, "tunnels": tunnelSite(), "tunnels-ikev2": ikeSite()} {
		t.Run(name, func(t *testing.T) {
			lan, addr := "br0", lanAddr
			if !site.LAN.HasLAN() {
				lan, addr = "", netip.Prefix{}
			}
			rs, err := Build(site, "eth0", lan, addr)
			if err != nil {
				t.Fatal(err)
			}
			got := rs.String()
			file := filepath.Join("testdata", name+".nft")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("ruleset differs from %s (run with -update if intended):\n%s", file, got)
			}
		})
	}
}

// Properties the golden files should always have, checked apart from
// them so that an -update cannot bless a hole.
func TestBuildPolicy(t *testing.T) {
	site := baseSite()
	rs, err := Build(site, "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range rs.Chains {
		if ch.Type == "filter" && ch.Hook != "prerouting" {
			if ch.Policy != "drop" {
				t.Errorf("chain %s: policy %s, want drop", ch.Name, ch.Policy)
			}
			last := ch.Rules[len(ch.Rules)-1]
			if last.Verdict != "drop" || last.Counter == "" || last.IIf != "" || last.Proto != "" {
				t.Errorf("chain %s: last rule %q, want an unconditional counted drop", ch.Name, last)
			}
		}
		for _, r := range ch.Rules {
			if r.Verdict == "accept" && r.IIf == "eth0" && r.Proto == "tcp" {
				t.Errorf("chain %s: %q opens TCP on the WAN without wan_services", ch.Name, r)
			}
		}
	}
	if s := rs.String(); strings.Contains(s, "dnat ip to") {
		t.Errorf("no port forwards, but:\n%s", s)
	}

	site.Firewall.WANServices = []string{"ssh"}
	rs, err = Build(site, "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rs.String(), `iifname "eth0" tcp dport 22 accept`) {
		t.Errorf("wan_services ssh: no SSH rule on the default port:\n%s", rs)
	}
}

// Tunnels open ESP to their peers only, forward only decrypted packets
// between their subnets, and keep their traffic out of the masquerade.
func TestBuildTunnelPolicy(t *testing.T) {
	rs, err := Build(tunnelSite(), "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	chains := map[string]Chain{}
	for _, ch := range rs.Chains {
		chains[ch.Name] = ch
	}
	var esp []string
	for _, r := range chains["input"].Rules {
		if r.Proto == "esp" {
			if r.Verdict != "accept" || r.IIf != "eth0" || !r.SAddr.IsSingleIP() {
				t.Errorf("input: %q, want ESP accepted on the WAN from one address", r)
			}
			esp = append(esp, r.SAddr.Addr().String())
		}
	}
	if got := strings.Join(esp, " "); got != "203.0.113.2 192.0.2.7" {
		t.Errorf("ESP accepted from %q, want the two peers", got)
	}
	var fwd []string
	for _, r := range chains["forward"].Rules {
		if r.IIf == "eth0" && r.SAddr.IsValid() {
			if !r.IPsec || r.Verdict != "accept" || r.OIf != "br0" {
				t.Errorf("forward: %q: WAN to LAN by address without meta ipsec", r)
			}
			fwd = append(fwd, r.SAddr.String()+">"+r.DAddr.String())
		}
	}
	if got := strings.Join(fwd, " "); got != "192.168.2.0/24>192.168.1.0/24 10.3.0.0/16>192.168.1.128/25" {
		t.Errorf("forwarded from the tunnels: %q", got)
	}
	post := chains["postrouting"].Rules
	last := post[len(post)-1]
	if last.Verdict != "masquerade" || len(post) != 3 {
		t.Fatalf("postrouting: %v", post)
	}
	for i, want := range []string{"192.168.2.0/24", "10.3.0.0/16"} {
		if r := post[i]; r.DAddr.String() != want || r.Verdict != "accept" || r.OIf != "eth0" {
			t.Errorf("postrouting rule %d: %q, want no NAT to %s before the masquerade", i, r, want)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		edit     func(*site.Site)
		wan, lan string
		addr     netip.Prefix
		want     string
	}{
		"same interface": {nil, "eth0", "eth0", lanAddr, "same interface"},
		"no WAN":         {nil, "", "br0", lanAddr, "WAN interface"},
		"long name":      {nil, "eth0", "averyveryverylongname", lanAddr, "LAN interface"},
		"no LAN address": {nil, "eth0", "br0", netip.Prefix{}, "LAN address"},
		"IPv6 LAN":       {nil, "eth0", "br0", netip.MustParsePrefix("fd00::1/64"), "LAN address"},
		"telnet":         {func(s *site.Site) { s.Firewall.WANServices = []string{"telnet"} }, "eth0", "br0", lanAddr, "only ssh"},
		"forward to WAN": {func(s *site.Site) {
			s.Firewall.PortForwards = []site.PortForward{{Proto: "tcp", Port: 80, To: "8.8.8.8"}}
		}, "eth0", "br0", lanAddr, "host in the LAN"},
		"forward to self": {func(s *site.Site) {
			s.Firewall.PortForwards = []site.PortForward{{Proto: "tcp", Port: 80, To: "192.168.1.1"}}
		}, "eth0", "br0", lanAddr, "host in the LAN"},
		"forward sctp": {func(s *site.Site) {
			s.Firewall.PortForwards = []site.PortForward{{Proto: "sctp", Port: 80, To: "192.168.1.5"}}
		}, "eth0", "br0", lanAddr, "tcp or udp"},
		"forward port 0": {func(s *site.Site) {
			s.Firewall.PortForwards = []site.PortForward{{Proto: "tcp", Port: 0, To: "192.168.1.5"}}
		}, "eth0", "br0", lanAddr, "out of range"},
		"forward twice": {func(s *site.Site) {
			s.Firewall.PortForwards = []site.PortForward{{Proto: "tcp", Port: 80, To: "192.168.1.5"}, {Proto: "tcp", Port: 80, To: "192.168.1.6"}}
		}, "eth0", "br0", lanAddr, "twice"},
		"tunnel without LAN": {func(s *site.Site) { *s = *tunnelSite(); s.LAN = site.LAN{} }, "eth0", "", netip.Prefix{}, "tunnels need a LAN"},
		"tunnel peer": {func(s *site.Site) {
			*s = *tunnelSite()
			s.Tunnels[0].Peer = "me"
		}, "eth0", "br0", lanAddr, `tunnel a-b: peer "me"`},
		"tunnel into the LAN": {func(s *site.Site) {
			*s = *tunnelSite()
			s.Tunnels[1].RemoteSubnet = "192.168.0.0/16"
		}, "eth0", "br0", lanAddr, "tunnel a-c: 192.168.1.128/25 to 192.168.0.0/16"},
		"tunnel on DHCP without local": {func(s *site.Site) {
			*s = *tunnelSite()
			s.WAN.Address = "dhcp"
		}, "eth0", "br0", lanAddr, "tunnel a-b: local: the WAN has no static address"},
		"forward over ssh": {func(s *site.Site) {
			s.Firewall.WANServices = []string{"ssh"}
			s.Firewall.PortForwards = []site.PortForward{{Proto: "tcp", Port: 22, To: "192.168.1.5"}}
		}, "eth0", "br0", lanAddr, "SSH port"},
	} {
		t.Run(name, func(t *testing.T) {
			site := baseSite()
			if tc.edit != nil {
				tc.edit(site)
			}
			_, err := Build(site, tc.wan, tc.lan, tc.addr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// The translation to netlink expressions for the matches whose encoding
// is easy to get wrong: interface names padded to IFNAMSIZ, ct bits in
// host order, ports in network order, DNAT's registers.
func TestExprs(t *testing.T) {
	ex, err := Rule{IIf: "eth0", CTState: []string{"established", "related"}, Verdict: "accept"}.exprs()
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) != 6 {
		t.Fatalf("got %d expressions, want meta, cmp, ct, bitwise, cmp, verdict", len(ex))
	}
	if c := ex[1].(*expr.Cmp); len(c.Data) != unix.IFNAMSIZ || !bytes.HasPrefix(c.Data, []byte("eth0\x00")) {
		t.Errorf("iifname data %q, want eth0 NUL-padded to 16 bytes", c.Data)
	}
	if b := ex[3].(*expr.Bitwise); !bytes.Equal(b.Mask, binaryutil.NativeEndian.PutUint32(6)) {
		t.Errorf("ct state mask %x, want established|related (6) in host order", b.Mask)
	}
	if c := ex[4].(*expr.Cmp); c.Op != expr.CmpOpNeq {
		t.Errorf("ct state compare %v, want neq 0", c.Op)
	}

	ex, err = Rule{IPv4: true, Proto: "tcp", DPort: 8080, Verdict: "dnat", DNAT: netip.MustParseAddrPort("192.168.1.10:80")}.exprs()
	if err != nil {
		t.Fatal(err)
	}
	port := ex[5].(*expr.Cmp)
	if !bytes.Equal(port.Data, []byte{0x1f, 0x90}) {
		t.Errorf("dport data %x, want 1f90 (8080 big-endian)", port.Data)
	}
	nat := ex[len(ex)-1].(*expr.NAT)
	addr, prt := ex[len(ex)-3].(*expr.Immediate), ex[len(ex)-2].(*expr.Immediate)
	if nat.Type != expr.NATTypeDestNAT || nat.Family != unix.NFPROTO_IPV4 ||
		nat.RegAddrMin != addr.Register || nat.RegProtoMin != prt.Register ||
		!bytes.Equal(addr.Data, []byte{192, 168, 1, 10}) || !bytes.Equal(prt.Data, []byte{0, 80}) {
		t.Errorf("dnat: %+v with %+v and %+v", nat, addr, prt)
	}

	ex, err = Rule{IPv4: true, SAddr: netip.MustParsePrefix("192.168.1.0/23"), Verdict: "accept"}.exprs()
	if err != nil {
		t.Fatal(err)
	}
	if b := ex[3].(*expr.Bitwise); !bytes.Equal(b.Mask, []byte{255, 255, 254, 0}) {
		t.Errorf("saddr mask %v, want 255.255.254.0", b.Mask)
	}
	if c := ex[4].(*expr.Cmp); !bytes.Equal(c.Data, []byte{192, 168, 0, 0}) {
		t.Errorf("saddr network %v, want 192.168.0.0", c.Data)
	}

	ex, err = Rule{IIf: "eth0", IPv4: true, SAddr: netip.MustParsePrefix("192.168.2.0/24"), DAddr: netip.MustParsePrefix("192.168.1.0/24"), IPsec: true, Verdict: "accept"}.exprs()
	if err != nil {
		t.Fatal(err)
	}
	if p := ex[7].(*expr.Payload); p.Offset != 16 || p.Len != 4 || p.Base != expr.PayloadBaseNetworkHeader {
		t.Errorf("daddr load %+v, want 4 bytes at offset 16 of the IP header", p)
	}
	if c := ex[9].(*expr.Cmp); !bytes.Equal(c.Data, []byte{192, 168, 1, 0}) {
		t.Errorf("daddr network %v", c.Data)
	}
	// NFT_META_SECPATH is 25, loading one byte that is 1 for a packet
	// out of an SA.
	if m, c := ex[10].(*expr.Meta), ex[11].(*expr.Cmp); m.Key != 25 || c.Op != expr.CmpOpEq || !bytes.Equal(c.Data, []byte{1}) {
		t.Errorf("ipsec match %+v %+v, want meta secpath (25) == 1", m, c)
	}
	ex, err = Rule{IIf: "eth0", IPv4: true, SAddr: netip.MustParsePrefix("192.168.2.0/24"), NoIPsec: true, Verdict: "drop"}.exprs()
	if err != nil {
		t.Fatal(err)
	}
	if m, c := ex[7].(*expr.Meta), ex[8].(*expr.Cmp); m.Key != 25 || c.Op != expr.CmpOpEq || !bytes.Equal(c.Data, []byte{0}) {
		t.Errorf("ipsec missing %+v %+v, want meta secpath (25) == 0", m, c)
	}
	ex, err = Rule{IIf: "br0", IPv6: true, Verdict: "accept"}.exprs()
	if err != nil {
		t.Fatal(err)
	}
	if c := ex[3].(*expr.Cmp); !bytes.Equal(c.Data, []byte{unix.NFPROTO_IPV6}) {
		t.Errorf("nfproto ipv6 data %v", c.Data)
	}
	ex, err = Rule{IPv4: true, SAddr: netip.MustParsePrefix("203.0.113.2/32"), Proto: "esp", Verdict: "accept"}.exprs()
	if err != nil {
		t.Fatal(err)
	}
	if c := ex[len(ex)-2].(*expr.Cmp); !bytes.Equal(c.Data, []byte{50}) {
		t.Errorf("esp protocol %v, want 50", c.Data)
	}
	rs := &Ruleset{Table: TableName, Chains: []Chain{{Name: "postrouting", Type: "nat", Hook: "postrouting", Policy: "accept",
		Rules: []Rule{{IPsec: true, Verdict: "accept"}}}}}
	if err := rs.check(); err == nil {
		t.Error("meta ipsec in postrouting passed the check; the kernel refuses it")
	}

	for _, bad := range []Rule{
		{Proto: "tcp", Verdict: "reject"},
		{DAddr: netip.MustParsePrefix("10.0.0.0/8"), Verdict: "accept"},
		{Proto: "esp", DPort: 500, Verdict: "accept"},
		{DPort: 80, Verdict: "accept"},
		{Proto: "icmp", ICMPType: "echo-request", Verdict: "accept"}, // no IPv4 match
		{IPv4: true, Verdict: "dnat"},
		{SAddr: netip.MustParsePrefix("10.0.0.0/8"), Verdict: "accept"},
		{CTState: []string{"confused"}, Verdict: "accept"},
		{Limit: &Limit{}, Verdict: "accept"},
		{IPv4: true, IPv6: true, Verdict: "accept"},
		{IPsec: true, NoIPsec: true, Verdict: "accept"},
	} {
		if _, err := bad.exprs(); err == nil {
			t.Errorf("%q translated, want an error", bad)
		}
	}
}

func TestModulesListed(t *testing.T) {
	// Each expression Build uses beyond nf_tables' built-ins has its module.
	for _, m := range []string{"nft_objref", "nft_ct", "nft_nat", "nft_masq", "nft_chain_nat", "nft_limit", "nft_fib", "nft_fib_ipv4", "nft_fib_ipv6", "nft_fib_inet"} {
		found := false
		for _, x := range Modules {
			found = found || x == m
		}
		if !found {
			t.Errorf("Modules lacks %s", m)
		}
	}
	idx := func(name string) int {
		for i, x := range Modules {
			if x == name {
				return i
			}
		}
		return -1
	}
	if idx("crc32c_generic") > idx("libcrc32c") {
		t.Error("crc32c_generic must load before libcrc32c (a soft dependency modules.dep does not carry)")
	}
}

// The firmware build loads catalog.RouterModules: everything the
// firewall needs must be there, in the same relative order.
func TestModulesInTheCatalog(t *testing.T) {
	var names []string
	for _, m := range catalog.RouterModules {
		names = append(names, m.Name)
	}
	at := -1
	for _, m := range Modules {
		i := slices.Index(names, m)
		if i < 0 {
			t.Errorf("%s is not in catalog.RouterModules: the image would lack it", m)
		} else if i < at {
			t.Errorf("%s comes earlier in catalog.RouterModules than in firewall.Modules: load order", m)
		}
		at = max(at, i)
	}
}

// spoofDropped evaluates the antispoof chain of rs for an IPv4 packet from
// src coming in on iif, decrypted by an SA or not: whether a rule drops it.
func spoofDropped(t *testing.T, rs *Ruleset, iif string, src netip.Addr, ipsec bool) bool {
	t.Helper()
	for _, ch := range rs.Chains {
		if ch.Name != "antispoof" {
			continue
		}
		for _, r := range ch.Rules {
			if (r.IIf == "" || r.IIf == iif) && r.SAddr.Contains(src) && !(r.IPsec && !ipsec) && !(r.NoIPsec && ipsec) && r.Verdict == "drop" {
				return true
			}
		}
		return false
	}
	t.Fatal("no antispoof chain")
	return false
}

// The WAN's impossible sources are dropped before conntrack and counted;
// the WAN's own network, the internet and decrypted tunnel traffic are
// not.
func TestBuildAntispoof(t *testing.T) {
	rs, err := Build(tunnelSite(), "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	ch := rs.Chains[0]
	// Conntrack hooks prerouting at -200: the chain must come first so
	// a forged packet creates no connection.
	if ch.Name != "antispoof" || ch.Hook != "prerouting" || ch.Priority >= -200 || ch.Type != "filter" || ch.Policy != "accept" {
		t.Fatalf("first chain %s: %s hook %s priority %d policy %s; want antispoof, filter at prerouting before conntrack, accepting the rest",
			ch.Name, ch.Type, ch.Hook, ch.Priority, ch.Policy)
	}
	for _, r := range ch.Rules {
		if r.IIf != "eth0" || r.Verdict != "drop" || r.Counter != CounterSpoofDrop {
			t.Errorf("antispoof: %q, want drops on the WAN counted in %s", r, CounterSpoofDrop)
		}
	}
	for _, src := range []string{"192.168.1.100", "192.168.1.1", "198.51.100.2", "127.0.0.1", "0.0.0.0", "0.1.2.3",
		"169.254.1.1", "224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1", "192.168.2.5", "10.3.4.5"} {
		if !spoofDropped(t, rs, "eth0", netip.MustParseAddr(src), false) {
			t.Errorf("%s on the WAN in the clear: not dropped", src)
		}
	}
	for _, src := range []string{"198.51.100.1", "203.0.113.2", "8.8.8.8", "192.168.0.1", "10.0.0.1", "172.16.0.1", "100.64.0.1"} {
		if spoofDropped(t, rs, "eth0", netip.MustParseAddr(src), false) {
			t.Errorf("%s on the WAN: dropped, but it can be a real WAN source", src)
		}
	}
	for _, src := range []string{"192.168.2.5", "10.3.4.5"} {
		if spoofDropped(t, rs, "eth0", netip.MustParseAddr(src), true) {
			t.Errorf("%s decrypted by the tunnel's SA: dropped", src)
		}
	}
	if spoofDropped(t, rs, "br0", netip.MustParseAddr("192.168.1.100"), false) {
		t.Error("the LAN's own addresses dropped on the LAN")
	}

	// A WAN behind a modem on an otherwise "impossible" network: the
	// WAN's neighbours stay allowed.
	s := baseSite()
	s.WAN = site.WAN{Port: "wan", Address: "169.254.10.2/16", Gateway: "169.254.10.1"}
	rs, err = Build(s, "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	if spoofDropped(t, rs, "eth0", netip.MustParseAddr("169.254.10.1"), false) {
		t.Error("the static WAN's own network 169.254.0.0/16: its gateway dropped")
	}
	if !spoofDropped(t, rs, "eth0", netip.MustParseAddr("169.254.10.2"), false) || !spoofDropped(t, rs, "eth0", netip.MustParseAddr("127.0.0.1"), false) {
		t.Error("with the WAN on 169.254/16: its own address or loopback no longer dropped")
	}

	// The remote subnet in the clear is dropped: a peer inside it would
	// have its ESP dropped, so Build refuses it.
	s = tunnelSite()
	s.Tunnels = s.Tunnels[:1]
	s.Tunnels[0].RemoteSubnet = "203.0.113.0/24"
	if _, err := Build(s, "eth0", "br0", lanAddr); err == nil || !strings.Contains(err.Error(), "holds the peer") {
		t.Errorf("peer inside the remote subnet: %v, want refused", err)
	}
}

// Connection state lets a packet in only on the side the connection is
// on: every accept in input and forward names its interfaces, and the
// LAN's accepts name its addresses.
func TestBuildStateTiedToInterfaces(t *testing.T) {
	forwards := baseSite()
	forwards.Firewall.PortForwards = []site.PortForward{{Proto: "tcp", Port: 8080, To: "192.168.1.10", ToPort: 80}}
	for name, s := range map[string]*site.Site{"closed": baseSite(), "forwards": forwards, "tunnels": tunnelSite()} {
		rs, err := Build(s, "eth0", "br0", lanAddr)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range rs.Chains {
			if ch.Hook != "input" && ch.Hook != "forward" {
				continue
			}
			for _, r := range ch.Rules {
				if r.Verdict != "accept" {
					continue
				}
				switch {
				case r.IIf == "":
					t.Errorf("%s: %s: %q accepts from any interface", name, ch.Name, r)
				case ch.Hook == "forward" && (r.OIf == "" || r.OIf == r.IIf):
					t.Errorf("%s: forward: %q: want an in and a different out interface", name, r)
				case r.IIf == "br0" && !r.IPv6 && !(r.SAddr == lanAddr.Masked() || r.SAddr.String() == "0.0.0.0/32" && r.Proto == "udp" && r.DPort == 67):
					t.Errorf("%s: %s: %q accepts from the LAN without the LAN's addresses", name, ch.Name, r)
				case len(r.CTState) > 0 && r.IIf != "eth0":
					t.Errorf("%s: %s: %q: state accepted elsewhere than on the WAN", name, ch.Name, r)
				}
			}
		}
	}
}

func TestReversePathSysctls(t *testing.T) {
	got := map[string]string{}
	for _, s := range ReversePathSysctls("eth0", "br0", "") {
		got[s.Path] = s.Value
	}
	for _, p := range []string{"all", "default", "eth0", "br0"} {
		if v := got["net/ipv4/conf/"+p+"/rp_filter"]; v != "1" {
			t.Errorf("rp_filter for %s = %q, want 1 (strict)", p, v)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d settings %v, want all, default and the two interfaces", len(got), got)
	}
}

// An IKEv2 tunnel opens UDP 500 and 4500 (IKE, and NAT traversal) and
// ESP to its peer's address only, from any source port; a manual tunnel
// opens ESP alone; nothing else on the WAN accepts UDP to those ports.
func TestBuildIKEPolicy(t *testing.T) {
	rs, err := Build(ikeSite(), "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	opened := map[string][]string{} // peer -> what it may send
	for _, ch := range rs.Chains {
		for _, r := range ch.Rules {
			if r.Verdict != "accept" || r.IIf != "eth0" || r.Proto != "esp" && !(r.Proto == "udp" && (r.DPort == 500 || r.DPort == 4500)) {
				continue
			}
			if ch.Name != "input" || !r.SAddr.IsValid() || r.SAddr.Bits() != 32 || r.SPort != 0 {
				t.Errorf("chain %s: %q: want input from one address, any source port", ch.Name, r)
				continue
			}
			what := r.Proto
			if r.Proto == "udp" {
				what = fmt.Sprintf("udp/%d", r.DPort)
			}
			opened[r.SAddr.Addr().String()] = append(opened[r.SAddr.Addr().String()], what)
		}
	}
	want := map[string][]string{"203.0.113.2": {"esp", "udp/500", "udp/4500"}, "192.0.2.7": {"esp"}}
	if fmt.Sprint(opened) != fmt.Sprint(want) {
		t.Errorf("opened %v, want %v", opened, want)
	}
	if !strings.Contains(rs.String(), `iifname "eth0" meta nfproto ipv4 ip saddr 203.0.113.2 udp dport 4500 accept`) {
		t.Errorf("no UDP 4500 rule from the peer in nft's syntax:\n%s", rs)
	}
	// Without tunnels IKE's ports stay closed.
	rs, err = Build(baseSite(), "eth0", "br0", lanAddr)
	if err != nil {
		t.Fatal(err)
	}
	if s := rs.String(); strings.Contains(s, "dport 500") || strings.Contains(s, "dport 4500") {
		t.Errorf("IKE open without an IKEv2 tunnel:\n%s", s)
	}
}
