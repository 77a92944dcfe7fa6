package router

import (
	"fmt"
	"net/netip"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router/dhcp"
	"github.com/ocfw/ocfw/router/firewall"
	"github.com/ocfw/ocfw/router/sshd"
	"github.com/ocfw/ocfw/site"
)

// ReadSite reads a site config in its JSON form as the boot chooses it:
// site.Read (every check the host's ocfw validate makes too), then
// CheckSite. A config that passes is one Start applies whole; any other is
// refused whole, so that the boot can fall back to the built-in config
// instead of a router that half works (no firewall and so no forwarding,
// no DHCP server, no SSH).
func ReadSite(name string, data []byte, ports []plan.Port) (*site.Site, []error) {
	s, errs := site.Read(name, data, ports)
	if len(errs) > 0 {
		return nil, errs
	}
	if errs := CheckSite(s, ports); len(errs) > 0 {
		var out []error
		for _, e := range errs {
			out = append(out, fmt.Errorf("%s: %w", name, e))
		}
		return nil, out
	}
	return s, nil
}

// CheckSite builds, without touching the system, every part of the site
// that Start would refuse to apply: the firewall's ruleset, the DHCP
// server's pool, the SSH keys. site.Validate checks all of it first; this
// is the second lock, which must never refuse what Validate passed (a
// test walks the cases through both).
func CheckSite(s *site.Site, ports []plan.Port) []error {
	var errs []error
	wanIf, lanIf := interfaces(s, ports)
	if s.LAN.HasLAN() {
		if _, err := s.LAN.Address.Prefix(); err != nil {
			errs = append(errs, fmt.Errorf("network: LAN address: %w", err))
		}
	}
	if _, err := firewall.Build(s, wanIf, lanIf, firewallLAN(s, lanIf)); err != nil {
		errs = append(errs, err)
	}
	if !s.WAN.Address.IsDHCP() {
		if _, err := s.WAN.Address.Prefix(); err != nil {
			errs = append(errs, fmt.Errorf("network: WAN address: %w", err))
		}
	}
	_, bad := sshd.ParseAuthorizedKeys(s.SSH.AuthorizedKeys)
	for _, e := range bad {
		errs = append(errs, fmt.Errorf("ssh: %w", e))
	}
	if len(s.LAN.DHCP.Range) > 0 && lanIf != "" {
		cfg, err := dhcp.ServerConfigFromSite(s, lanIf)
		if err == nil {
			_, err = dhcp.NewServer(cfg) // no store: nothing is read or written
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// interfaces are the kernel interfaces Start puts the WAN and the LAN on:
// the LAN's port, or the bridge of its ports when it has several; "" for
// no LAN.
func interfaces(s *site.Site, ports []plan.Port) (wan, lan string) {
	wan = portIface(ports, s.WAN.Port)
	switch {
	case !s.LAN.HasLAN() || len(s.LAN.Ports) == 0:
	case len(s.LAN.Ports) > 1:
		lan = LANBridge
	default:
		lan = portIface(ports, s.LAN.Ports[0])
	}
	return wan, lan
}

// firewallLAN is the LAN address the firewall is built for: none without
// a LAN interface.
func firewallLAN(s *site.Site, lanIf string) netip.Prefix {
	if lanIf == "" {
		return netip.Prefix{}
	}
	lan, _ := s.LAN.Address.Prefix()
	return lan
}

// portIface maps a site port name to its kernel interface.
func portIface(ports []plan.Port, port string) string {
	for _, p := range ports {
		if p.Name == port {
			return p.Interface
		}
	}
	return ""
}
