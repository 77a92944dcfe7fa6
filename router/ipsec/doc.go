// Package ipsec sets up ocfw's site-to-site IPsec tunnels on the board:
// ESP in tunnel mode between two WAN addresses, carrying the traffic
// between a local and a remote subnet, through the kernel's XFRM
// framework over a NETLINK_XFRM socket. Install puts in both SAs and the
// out, in and fwd policies (idempotently), Remove takes them out, and
// Counters reads each SA's bytes, packets, refusals and sequence numbers.
// Seqs keeps those sequence numbers in the power-safe store across
// restarts (an outbound reservation committed before the SA is
// installed, the inbound number saved periodically), and PeerCommands
// prints the iproute2 commands for a Linux peer's end.
//
// Keys are manual: the host generates them per tunnel and direction
// (SPIs, cipher and HMAC keys, replay window, extended sequence numbers),
// and both ends install the same SAs mirrored. There is no IKE and no
// rekeying: an SA lives until it is removed or replaced. Rolling keys
// means installing a tunnel with new keys (and new SPIs) on both ends;
// Install replaces an SA whose keys changed.
//
// Why its own messages rather than github.com/vishvananda/netlink's: that
// library serialises XFRM structs with the amd64 layout (xfrm_usersa_info
// 224 bytes, xfrm_userpolicy_info 168), but a native i386 kernel, as on
// the Geode boards, aligns __u64 to 4 bytes and expects 220 and 164, so
// adding an SA fails there with EINVAL. Here every struct is described
// field by field as include/uapi/linux/xfrm.h declares it and laid out
// per GOARCH by internal/cabi (see HostArch): 386, arm (EABI, which
// happens to match amd64) and amd64, pinned byte for byte in the tests.
//
// The kernel needs the modules in Modules, loaded in that order.
package ipsec
