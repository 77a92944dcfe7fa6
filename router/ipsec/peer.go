package ipsec

import (
	"encoding/hex"
	"fmt"
)

// PeerCommands are the iproute2 commands that set up the other end of t on
// a Linux peer (one that is not ocfw): t's mirror, with exactly the SAs and
// policies Install puts into this box's kernel (the same kernel algorithm
// names, ICV truncation, reqid, window, ESN and policy priority). Lines
// starting with # are comments for the reader. The commands hold the keys.
func (t Tunnel) PeerCommands() ([]string, error) {
	out, in, err := t.resolve()
	if err != nil {
		return nil, fmt.Errorf("ipsec: %w", err)
	}
	// The peer sends with this box's in SA and receives with its out SA.
	lines := []string{
		fmt.Sprintf("# tunnel %s, the end at %s (the peer of %s): run as root", t.Name, t.Remote, t.Local),
		"# its SAs: what it sends, then what it receives",
	}
	for _, sa := range []SA{in, out} {
		m := sa.msg()
		line := fmt.Sprintf("ip xfrm state add src %s dst %s proto esp spi 0x%08x reqid 0x%08x mode tunnel", m.src, m.dst, m.spi, m.reqid)
		if m.replayWindow > 0 {
			line += fmt.Sprintf(" replay-window %d", m.replayWindow)
		}
		if m.esn {
			line += " flag esn"
		}
		if m.crossFamily {
			// IPv6 networks over IPv4 WAN addresses (or the other
			// way): the SA's selector family stays unspecified, as
			// Install makes it; without the flag the peer's kernel
			// would not match the inner packets to the SA.
			line += " flag af-unspec"
		}
		line += fmt.Sprintf(" enc '%s' 0x%s auth-trunc '%s' 0x%s %d",
			m.cryptName, hex.EncodeToString(m.cryptKey), m.authName, hex.EncodeToString(m.authKey), m.truncBits)
		lines = append(lines, line)
	}
	lines = append(lines, "# its policies: out, in and fwd")
	peer := Tunnel{Name: t.Name, Local: t.Remote, Remote: t.Local, LocalNet: t.RemoteNet, RemoteNet: t.LocalNet, Out: in, In: out}
	for _, p := range peer.policies(in, out) {
		lines = append(lines, fmt.Sprintf("ip xfrm policy add src %s dst %s dir %s priority %d tmpl src %s dst %s proto esp reqid 0x%08x mode tunnel",
			p.src, p.dst, dirNames[p.dir], p.priority, p.tunnelSrc, p.tunnelDst, p.reqid))
	}
	route := fmt.Sprintf("# and a route to %s out of its WAN, with its LAN address as source (ip route add %s via GATEWAY src LAN-ADDRESS)", t.LocalNet, t.LocalNet)
	if t.LocalNet.Addr().Is4() != t.Local.Is4() {
		// An IPv6 route cannot take an IPv4 gateway; the SA finds its
		// outer route itself.
		route = fmt.Sprintf("# and a route to %s onto its WAN link, with its LAN address as source (ip route add %s dev WAN-INTERFACE src LAN-ADDRESS)", t.LocalNet, t.LocalNet)
	}
	lines = append(lines, route,
		"# It keeps no sequence numbers across its restarts: after one, this box sees its packets behind the window",
		"# (ocf net says so). Then roll the keys, or add the state again with replay-oseq and replay-oseq-hi above",
		"# the last number it sent (ip -s xfrm state shows it as oseq) before it restarts.")
	return lines, nil
}
