package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/ra"
)

// TestDHCPv6InfoServerDhcpcd: a LAN host's dhcpcd, sent to DHCPv6 by
// the router advertisement's O flag (the advertisement carries no
// RDNSS, so only DHCPv6 can tell it), asks the stateless server with
// Information-request and takes its resolvers and search domain; a
// Solicit for addresses gets nothing.
func TestDHCPv6InfoServerDhcpcd(t *testing.T) {
	bin := realclient.Need(t, "dhcpcd")
	link := realclient.NewLink(t, "2001:db8:1:10::1/64")
	srv, err := NewInfoServer(InfoConfig{Interface: link.ServerIf, DNS: []netip.Addr{netip.MustParseAddr("2001:db8:1:10::1"), netip.MustParseAddr("fd12:3456:789a:10::1")},
		Domains: []string{"home.example"}})
	if err != nil {
		t.Fatal(err)
	}
	adv := ra.Advert{Other: true, RouterLifetime: 30 * time.Minute,
		Prefixes: []ra.Prefix{{Prefix: netip.MustParsePrefix("2001:db8:1:10::/64"), Valid: time.Hour, Preferred: 30 * time.Minute}}}
	rsrv, err := ra.New(ra.Config{Interface: link.ServerIf}, adv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- link.Server.Do(func() error { return srv.Serve(ctx) }) }()
	go func() { done <- link.Server.Do(func() error { return rsrv.Serve(ctx) }) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Serve returned %v, want context.Canceled", err)
			}
		}
	})
	dir := t.TempDir()
	conf := filepath.Join(dir, "dhcpcd.conf")
	// ipv6only and no IA: dhcpcd follows the O flag with an
	// Information-request.
	if err := os.WriteFile(conf, []byte("ipv6only\nnoipv4ll\noption domain_name_servers, domain_search\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, "env")
	hook := realclient.Script(t, "hook", fmt.Sprintf("{ echo \"== $reason\"; env; } >> %q\n", env))
	p := realclient.Start(t, link.Client, realclient.Options{Tmpfs: []string{"/run", "/var/lib/dhcpcd"}},
		bin, "-f", conf, "-c", hook, "-6", "-B", "-d", "-t", "0", link.ClientIf)
	var seen string
	ok := false
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end) && !ok; time.Sleep(200 * time.Millisecond) {
		b, _ := os.ReadFile(env)
		seen = string(b)
		ok = strings.Contains(seen, "dhcp6_name_servers=")
	}
	if !ok {
		t.Fatalf("dhcpcd's hook saw no DHCPv6 resolvers:\n%s\ndhcpcd:\n%s\nserver %+v", seen, p.Output(), srv.Stats())
	}
	for _, re := range []string{`== INFORM6`, `dhcp6_name_servers=2001:db8:1:10::1 fd12:3456:789a:10::1`, `dhcp6_domain_search=home\.example`} {
		if !regexp.MustCompile(re).MatchString(seen) {
			t.Errorf("dhcpcd's hook environment lacks %s:\n%s", re, seen)
		}
	}
	if st := srv.Stats(); st.Replies == 0 {
		t.Errorf("stats %+v: no reply counted", st)
	}
}

// TestDHCPv6InfoServerIgnores: only Information-request without an IA
// is answered (RFC 8415 16.12); a Solicit or one asking for an address
// is not.
func TestDHCPv6InfoServerIgnores(t *testing.T) {
	s, err := NewInfoServer(InfoConfig{Interface: "lan0", DNS: []netip.Addr{netip.MustParseAddr("fd00::1")}})
	if err != nil {
		t.Fatal(err)
	}
	s.duid = &duidLL
	info, _ := newInfoRequest(false)
	withIA, _ := newInfoRequest(true)
	tests := []struct {
		name  string
		req   []byte
		reply bool
	}{
		{"information-request", info, true},
		{"with an IA_NA", withIA, false},
		{"garbage", []byte{11, 1, 2}, false},
	}
	for _, tt := range tests {
		if got := s.answer(tt.req, netip.Addr{}) != nil; got != tt.reply {
			t.Errorf("%s: answered %v, want %v", tt.name, got, tt.reply)
		}
	}
	if st := s.Stats(); st.Replies != 1 || st.Ignored != 2 {
		t.Errorf("stats %+v, want 1 reply, 2 ignored", st)
	}
}

var duidLL = dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}

func newInfoRequest(ia bool) ([]byte, error) {
	m, err := dhcpv6.NewMessage()
	if err != nil {
		return nil, err
	}
	m.MessageType = dhcpv6.MessageTypeInformationRequest
	m.AddOption(dhcpv6.OptClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 2}}))
	if ia {
		m.AddOption(&dhcpv6.OptIANA{IaId: [4]byte{0, 0, 0, 1}})
	}
	return m.ToBytes(), nil
}
