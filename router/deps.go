//go:build never

// Package router is the board's router: links and addresses, DHCP, the
// DNS forwarder, NAT and the firewall, SSH, NTP and the log, driven by the
// site config (plan.Site). This file only pins the libraries the router
// is built on until the code that uses them lands.
package router

import (
	_ "github.com/creack/pty"
	_ "github.com/google/nftables"
	_ "github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	_ "github.com/insomniacslk/dhcp/dhcpv4/server4"
	_ "github.com/vishvananda/netlink"
	_ "golang.org/x/crypto/ssh"
	_ "golang.org/x/net/dns/dnsmessage"
)
