// Package config changes the running router's site config over SSH
// (`ocfw push`): a bundle staged in RAM (StagingDir) is checked on the
// box, kept in the store as a provisional generation, applied live
// (router.Reconfigure restarts only what changed), and rolled back by
// itself unless confirmed over a new SSH connection in time. The store's
// one-record commits make every step power-safe: the box boots the old
// config or the new one, whole.
//
// It is board-side code: it imports no host package.
package config

import (
	"encoding/json"
	"reflect"

	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/site"
)

// Diff names the parts (router.Part...) in which b differs from a, in a
// fixed order; key files count for the tunnels. PortsChanged says the
// board or its ports changed, which no live apply does.
func Diff(a, b *site.Site, filesA, filesB map[string]string) []string {
	if len(filesA) == 0 {
		filesA = nil // no key files pushed, whether nil or empty
	}
	if len(filesB) == 0 {
		filesB = nil
	}
	var parts []string
	add := func(p string, x, y any) {
		if !same(x, y) {
			parts = append(parts, p)
		}
	}
	add(router.PartHostname, a.Hostname, b.Hostname)
	add(router.PartLAN, []any{a.LAN.Address, a.LAN.MTU}, []any{b.LAN.Address, b.LAN.MTU})
	add(router.PartWAN, []any{a.WAN.Address, a.WAN.Gateway, a.WAN.DNS, a.WAN.MTU}, []any{b.WAN.Address, b.WAN.Gateway, b.WAN.DNS, b.WAN.MTU})
	add(router.PartFirewall, []any{a.Firewall, a.SSH.Port}, []any{b.Firewall, b.SSH.Port})
	add(router.PartDHCP, a.LAN.DHCP, b.LAN.DHCP)
	add(router.PartDNS, []any{a.LAN.DNSForwarder, a.LAN.Domain}, []any{b.LAN.DNSForwarder, b.LAN.Domain})
	add(router.PartSSH, a.SSH, b.SSH)
	add(router.PartTunnels, []any{a.Tunnels, filesA}, []any{b.Tunnels, filesB})
	add(router.PartNTP, a.NTP, b.NTP)
	add(router.PartIPv6, a.IPv6, b.IPv6)
	return parts
}

// PortsChanged says b moves the WAN or the LAN to other ports, or names
// another board: that takes a reboot with the config on the card.
func PortsChanged(a, b *site.Site) bool {
	return !same([]any{a.Board, a.WAN.Port, a.LAN.Ports}, []any{b.Board, b.WAN.Port, b.LAN.Ports})
}

// same compares by JSON form, so that nil and empty lists are equal.
func same(x, y any) bool {
	bx, err1 := json.Marshal(x)
	by, err2 := json.Marshal(y)
	if err1 != nil || err2 != nil {
		return reflect.DeepEqual(x, y)
	}
	return string(bx) == string(by)
}
