package boardvm

import (
	"fmt"
	"net/netip"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/plan"
)

// Network says how Run wires the board's Ethernet ports to QEMU cards
// (e1000: QEMU emulates no VIA Rhine; x86 images carry its driver). Guest
// traffic never reaches the host's network: a port is a socket to another
// VM, QEMU's user network with restrict=on, or unplugged.
type Network struct {
	// None gives the guest no cards at all.
	None bool
	// SSHPort, when not 0, forwards 127.0.0.1:SSHPort on the host to the
	// router's SSH on its LAN address.
	SSHPort int
	// Ports wire named ports explicitly (e.g. a socket to another VM's
	// card); they win over the defaults below.
	Ports map[string]qemu.NIC
}

// PortMAC is the MAC Run gives the board's port i (fixed, so leases and
// logs are the same from run to run).
func PortMAC(i int) string { return fmt.Sprintf("52:54:00:0f:00:%02x", i+1) }

// NICs lays out the cards for the board's ports, in port order (so the
// kernel names them as on the board: eth0, eth1, ...). With a site
// config, the WAN port is on a restricted QEMU user network (whose DHCP
// server gives a DHCP WAN its address; nothing gets out), the first LAN
// port on a restricted user network on the LAN's own subnet, where QEMU's
// end carries the SSH forward; other ports are unplugged. Without one
// every port is unplugged. notes say, for the user, what went where.
func NICs(pl *plan.Plan, site *site.Site, n Network) (nics []qemu.NIC, notes []string, err error) {
	if n.None {
		return nil, []string{"no network cards (--net none)"}, nil
	}
	for name := range n.Ports {
		found := false
		for _, p := range pl.Ports {
			found = found || p.Name == name
		}
		if !found {
			return nil, nil, fmt.Errorf("--port %s: %s has no port %s", name, pl.Board, name)
		}
	}
	firstLAN := ""
	if site != nil && len(site.LAN.Ports) > 0 {
		firstLAN = site.LAN.Ports[0]
	}
	for i, p := range pl.Ports {
		nic, explicit := n.Ports[p.Name]
		switch {
		case explicit:
			if nic.MAC == "" {
				nic.MAC = PortMAC(i)
			}
			notes = append(notes, fmt.Sprintf("port %s (%s): %s", p.Name, p.Interface, describe(nic)))
		case site != nil && p.Name == site.WAN.Port:
			nic = qemu.NIC{MAC: PortMAC(i), RestrictedUser: true}
			notes = append(notes, fmt.Sprintf("port %s (%s, WAN): QEMU's user network, restricted (its DHCP gives a DHCP WAN 10.0.2.15 with no gateway and no DNS: nothing reaches the host's network, so NTP and the LAN's DNS have no upstream)", p.Name, p.Interface))
		case p.Name == firstLAN:
			nic, err = lanNIC(site, i, n.SSHPort)
			if err != nil {
				return nil, nil, err
			}
			note := fmt.Sprintf("port %s (%s, LAN): QEMU's user network on %s, restricted", p.Name, p.Interface, nic.UserNet)
			if n.SSHPort != 0 {
				note += fmt.Sprintf("; the router's SSH is 127.0.0.1:%d on this host", n.SSHPort)
			}
			notes = append(notes, note)
		default:
			nic = qemu.NIC{MAC: PortMAC(i), Unplugged: true}
			notes = append(notes, fmt.Sprintf("port %s (%s): unplugged", p.Name, p.Interface))
		}
		nics = append(nics, nic)
	}
	return nics, notes, nil
}

// lanNIC puts QEMU's end of the first LAN port on the LAN's subnet, at
// an address neither the router's nor in its DHCP range.
func lanNIC(site *site.Site, i, sshPort int) (qemu.NIC, error) {
	lan, err := site.LAN.Address.Prefix()
	if err != nil {
		return qemu.NIC{}, fmt.Errorf("site LAN address %w", err)
	}
	var lo, hi netip.Addr
	if r := site.LAN.DHCP.Range; len(r) == 2 {
		lo, _ = netip.ParseAddr(r[0])
		hi, _ = netip.ParseAddr(r[1])
	}
	// From the top of the subnet down: the last address before broadcast
	// that is free.
	host := netip.Addr{}
	a := lan.Masked().Addr()
	for j := 0; j < 1<<(32-lan.Bits()); j++ {
		a = a.Next()
		if !lan.Masked().Contains(a) {
			break
		}
		next := a.Next()
		if !lan.Masked().Contains(next) {
			break // a is the broadcast address
		}
		inRange := lo.IsValid() && !a.Less(lo) && !hi.Less(a)
		if a != lan.Addr() && !inRange {
			host = a
		}
	}
	if !host.IsValid() {
		return qemu.NIC{}, fmt.Errorf("the LAN %s has no free address for QEMU's end", lan.Masked())
	}
	nic := qemu.NIC{MAC: PortMAC(i), RestrictedUser: true, UserNet: lan.Masked().String(), UserHost: host.String()}
	if sshPort != 0 {
		nic.Forwards = []qemu.Forward{{Proto: "tcp", HostPort: sshPort, GuestAddr: lan.Addr().String(), GuestPort: site.SSH.SSHPort()}}
	}
	return nic, nil
}

func describe(n qemu.NIC) string {
	switch {
	case n.Socket != "" && n.Listen:
		return "listening on the unix socket " + n.Socket
	case n.Socket != "":
		return "connected to the unix socket " + n.Socket
	case n.RestrictedUser:
		return "QEMU's user network, restricted"
	}
	return "unplugged"
}
