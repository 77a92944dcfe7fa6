package main

import "testing"

func TestParseNetMemory(t *testing.T) {
	// ocf net as the console shows it: the echoed command, \r\n endings.
	out := "ocf net; echo v6mem-''end\r\n" +
		"slug, up 41s\r\n" +
		"interface  state  mac  mtu  addresses  rx/tx bytes\r\n" +
		"eth0       down        0    \r\n" +
		"WAN eth0: no lease yet\r\n" +
		"IPv6 auto: LAN fd12:3456:789a::/64, WAN none\r\n" +
		"service dhcp6-client: waiting for eth0\r\n" +
		"service ssh: listening on :22\r\n" +
		"memory: firmware process 14236 KiB (peak 15012), initramfs and other shared 9120 KiB, 80000 of 120000 KiB available\r\n" +
		"v6mem-end\r\n"
	m, err := parseNetMemory(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS != 14236 || m.Peak != 15012 {
		t.Errorf("RSS %d peak %d, want 14236 15012", m.RSS, m.Peak)
	}
	if len(m.Services) != 2 || m.Services["dhcp6-client"] != "waiting for eth0" || m.Services["ssh"] != "listening on :22" {
		t.Errorf("services %q", m.Services)
	}
	if len(m.IPv6) != 1 || m.IPv6[0] != "IPv6 auto: LAN fd12:3456:789a::/64, WAN none" {
		t.Errorf("IPv6 lines %q", m.IPv6)
	}
	if _, err := parseNetMemory("slug, up 3s\r\nservice ssh: up\r\n"); err == nil {
		t.Error("output without a memory line parsed")
	}
	if d := medianInt([]int64{300, -20, 90}); d != 90 {
		t.Errorf("median %d, want 90", d)
	}
	if d := medianU([]uint64{5, 1}); d != 5 {
		t.Errorf("median of two %d, want the upper 5", d)
	}
}
