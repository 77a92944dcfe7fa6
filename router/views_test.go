package router

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/dhcp"
	"github.com/ocfw/ocfw/router/firewall"
)

func TestWriteClients(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	st := &Status{Views: Views{Clients: []dhcp.Lease{
		{MAC: "52:54:00:0b:00:02", IP: netip.MustParseAddr("192.168.1.100"), Hostname: "laptop", Expires: now.Add(59*time.Minute + 30*time.Second)},
		{MAC: "52:54:00:0b:00:03", IP: netip.MustParseAddr("192.168.1.101"), Hostname: "evil\x1b[2J", Expires: now.Add(-time.Minute)},
		{MAC: "52:54:00:0b:00:04", IP: netip.MustParseAddr("192.168.1.10"), Static: true},
	}}}
	var b bytes.Buffer
	if err := st.WriteClients(&b, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"address        mac                hostname     lease\n",
		"192.168.1.100  52:54:00:0b:00:02  laptop       until 2026-12-04T10:59:30Z (59m30s left)\n",
		"192.168.1.101  52:54:00:0b:00:03  evil\\x1b[2J  expired 2026-12-04T09:59:00Z\n",
		"192.168.1.10   52:54:00:0b:00:04  -            static\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
	b.Reset()
	(&Status{}).WriteClients(&b, now)
	if b.String() != "no DHCP clients\n" {
		t.Errorf("no clients: %q", b.String())
	}
}

func TestWriteFirewall(t *testing.T) {
	st := &Status{Views: Views{Firewall: []firewall.ChainListing{
		{Name: "input", Hook: "input", Policy: "drop", Rules: []firewall.RuleListing{
			{Rule: `iifname "lo" accept`, Packets: 12, Bytes: 960},
			{Rule: `iifname "br0" accept comment "the LAN"`, Packets: 1234567, Bytes: 98765432},
		}},
		{Name: "forward", Hook: "forward", Policy: "drop"},
	}}}
	var b bytes.Buffer
	if err := st.WriteFirewall(&b); err != nil {
		t.Fatal(err)
	}
	want := `chain input (hook input, policy drop)
  packets     bytes
       12       960  iifname "lo" accept
  1234567  98765432  iifname "br0" accept comment "the LAN"

chain forward (hook forward, policy drop)
  packets  bytes
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
