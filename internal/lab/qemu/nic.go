package qemu

import (
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
)

// NIC is an emulated network card and the back-end it is wired to. Only
// back-ends that keep the guest off the host's network can be said here:
// a stream socket to exactly one other VM over a unix socket, or QEMU's
// user network with restrict=on (no path to the host or beyond). Taps,
// bridges and unrestricted user networks are deliberately missing.
//
// Two VMs share a link when one has the NIC with Listen set and the
// other its Peer. QEMU 7.2 (checked with 7.2.22): the listening side
// creates the socket at startup and does not wait for the peer (its guest
// boots with the link up and frames dropped until a peer connects); it
// accepts a new peer after the old one went away, so the connecting VM
// may be restarted. The connecting side must start after the socket
// exists: it connects once, at startup, and never retries (7.2 has no
// reconnect=), so a VM started before its listener, or whose listener
// went away, stays cut off without any error until it is restarted.
type NIC struct {
	// Model is the QEMU device; "" means e1000. Every i386 model has a
	// module in Debian's 686 kernel (e1000, ne2k_pci, pcnet, rtl8139,
	// virtio-net-pci).
	Model string
	// MAC is the card's address. "" derives a fixed locally administered
	// 52:54:00:xx:xx:xx from Socket and the side, so the two ends of a
	// link differ (QEMU's own default is the same in every VM).
	MAC string
	// Socket is the unix socket path of a stream netdev (-netdev stream,
	// QEMU 7.2 and later); no commas, at most 107 bytes.
	Socket string
	// Listen makes this VM the side that creates Socket (server=on).
	Listen bool
	// RestrictedUser wires the card to QEMU's user network with
	// restrict=on instead of a socket: DHCP and the guest's own
	// addresses only, no host and no outside.
	RestrictedUser bool
	// UserNet and UserHost place the restricted user network on the
	// guest's own subnet ("192.168.1.0/24") with QEMU at UserHost, so a
	// LAN port can sit on it; "" leaves QEMU's 10.0.2.0/24.
	UserNet, UserHost string
	// Forwards are host ports, on 127.0.0.1 only, forwarded into the
	// guest through the restricted user network (restrict=on still
	// allows explicit forwards): how `ocfw run` reaches the router's SSH.
	Forwards []Forward
	// Unplugged is a card with nothing on the other end of its cable (an
	// isolated hub port).
	Unplugged bool
	// USBPort is where a USB card (Model usb-net) plugs in: "1.2" is the
	// second port of the hub Config.CommandLine puts on the machine's
	// first USB port (StandIn.PlugNICs sets both).
	USBPort string
}

// USBHub is the hub a machine with USB cards gets on its first USB
// port: the raspi machines have one, behind their dwc2 controller.
var USBHub = []string{"-device", "usb-hub,bus=usb-bus.0,port=1"}

// Forward is one host port forwarded into the guest.
type Forward struct {
	Proto     string // "tcp" or "udp"
	HostPort  int    // on 127.0.0.1
	GuestAddr string // the guest's address on the user network
	GuestPort int
}

// Peer returns the NIC for the other end of n's link: the same socket,
// the other side, an e1000 with the given MAC ("" derives one).
func (n NIC) Peer(mac string) NIC {
	return NIC{MAC: mac, Socket: n.Socket, Listen: !n.Listen}
}

// maxSocketPath is sun_path's size less the terminating NUL.
const maxSocketPath = 107

// Args returns the -netdev and -device arguments of n, with id naming
// the netdev.
func (n NIC) Args(id string) ([]string, error) {
	if id == "" || strings.ContainsAny(id, ", =") {
		return nil, fmt.Errorf("qemu: NIC id %q: want a plain word", id)
	}
	model := n.Model
	if model == "" {
		model = "e1000"
	}
	if strings.ContainsAny(model, ", =") {
		return nil, fmt.Errorf("qemu: NIC model %q", model)
	}
	var netdev string
	switch {
	case (len(n.Forwards) > 0 || n.UserNet != "") && !n.RestrictedUser:
		return nil, errors.New("qemu: forwards and a user subnet need RestrictedUser")
	case n.RestrictedUser && n.Socket != "":
		return nil, errors.New("qemu: a NIC is either a socket or a restricted user network, not both")
	case n.Unplugged && (n.RestrictedUser || n.Socket != ""):
		return nil, errors.New("qemu: an unplugged NIC has no back-end")
	case n.Unplugged:
		netdev = "hubport,id=" + id + ",hubid=" + strconv.Itoa(int(fnvID(id)))
	case n.RestrictedUser:
		netdev = "user,id=" + id + ",restrict=on"
		for _, kv := range [][2]string{{"net", n.UserNet}, {"host", n.UserHost}} {
			if kv[1] == "" {
				continue
			}
			if strings.ContainsAny(kv[1], ", =") {
				return nil, fmt.Errorf("qemu: user network %s %q", kv[0], kv[1])
			}
			netdev += "," + kv[0] + "=" + kv[1]
		}
		for _, f := range n.Forwards {
			if (f.Proto != "tcp" && f.Proto != "udp") || f.HostPort <= 0 || f.HostPort > 65535 || f.GuestPort <= 0 || f.GuestPort > 65535 || strings.ContainsAny(f.GuestAddr, ",=:") {
				return nil, fmt.Errorf("qemu: forward %+v", f)
			}
			netdev += fmt.Sprintf(",hostfwd=%s:127.0.0.1:%d-%s:%d", f.Proto, f.HostPort, f.GuestAddr, f.GuestPort)
		}
	case n.Socket == "":
		return nil, fmt.Errorf("qemu: NIC %s has no back-end: set Socket (or RestrictedUser)", id)
	case strings.Contains(n.Socket, ","):
		return nil, fmt.Errorf("qemu: socket path %q contains a comma", n.Socket)
	case len(n.Socket) > maxSocketPath:
		return nil, fmt.Errorf("qemu: socket path %q is %d bytes, longer than a unix socket allows (%d)", n.Socket, len(n.Socket), maxSocketPath)
	default:
		server := "off"
		if n.Listen {
			server = "on"
		}
		netdev = "stream,id=" + id + ",server=" + server + ",addr.type=unix,addr.path=" + n.Socket
	}
	mac := n.MAC
	if mac == "" && n.Socket != "" {
		mac = n.defaultMAC()
	}
	// No option ROM (iPXE): nothing here boots from the network, and
	// it costs boot time. A USB card has no ROM, but a port.
	device := model + ",netdev=" + id + ",romfile="
	switch usb := strings.HasPrefix(model, "usb-"); {
	case usb && !usbPortRe.MatchString(n.USBPort):
		return nil, fmt.Errorf("qemu: USB card %s: port %q, want 1.N (a port of the hub)", model, n.USBPort)
	case usb:
		device = model + ",netdev=" + id + ",bus=usb-bus.0,port=" + n.USBPort
	case n.USBPort != "":
		return nil, fmt.Errorf("qemu: NIC %s is not a USB card: no USB port", model)
	}
	if mac != "" {
		if strings.ContainsAny(mac, ", =") {
			return nil, fmt.Errorf("qemu: MAC %q", mac)
		}
		device += ",mac=" + mac
	}
	return []string{"-netdev", netdev, "-device", device}, nil
}

var usbPortRe = regexp.MustCompile(`^1\.[1-8]$`)

func (n NIC) defaultMAC() string {
	h := fnv.New32a()
	side := "connect"
	if n.Listen {
		side = "listen"
	}
	h.Write([]byte(side + "\x00" + n.Socket))
	s := h.Sum32()
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", byte(s>>16), byte(s>>8), byte(s))
}

// fnvID gives an unplugged card a hub of its own.
func fnvID(id string) uint16 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return uint16(h.Sum32()%30000) + 1000
}
