package ipsec

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink/nl"

	"github.com/ocfw/ocfw/internal/cabi"
)

// IPv6 nets over IPv4 WAN addresses: the SA is of the outer family with
// an unspecified selector and XFRM_STATE_AF_UNSPEC, the policies of the
// inner family with the outer family in their template. Checked against
// the netlink library's structs (amd64) and the i386 flags offset.
func TestEncodeIPv6OverIPv4(t *testing.T) {
	tun := testTunnel("aes-128-cbc", "hmac-sha1", true)
	tun.LocalNet = netip.MustParsePrefix("2001:db8:1::/48")
	tun.RemoteNet = netip.MustParsePrefix("2001:db8:2::/48")
	out, _, err := tun.resolve()
	if err != nil {
		t.Fatal(err)
	}
	m := out.msg()
	got, err := encodeNewSA(cabi.ArchAMD64, m)
	if err != nil {
		t.Fatal(err)
	}
	info := nl.XfrmUsersaInfo{Reqid: m.reqid, Family: nl.FAMILY_V4, Mode: modeTunnel, Flags: stateESN | stateAFUnspec}
	info.Id.Daddr.FromIP(net.IP(tun.Remote.AsSlice()))
	info.Id.Spi = nl.Swap32(m.spi)
	info.Id.Proto = protoESP
	info.Saddr.FromIP(net.IP(tun.Local.AsSlice()))
	info.Lft.SoftByteLimit, info.Lft.HardByteLimit = xfrmInf, xfrmInf
	info.Lft.SoftPacketLimit, info.Lft.HardPacketLimit = xfrmInf, xfrmInf
	want := info.Serialize()
	if !bytes.Equal(got[:len(want)], want) {
		t.Errorf("NEWSA xfrm_usersa_info, IPv6 over IPv4, amd64:\n got %x\nwant %x", got[:len(want)], want)
	}
	got386, err := encodeNewSA(cabi.Arch386, m)
	if err != nil {
		t.Fatal(err)
	}
	if got386[216] != stateESN|stateAFUnspec || got386[32] != 0 || got386[33] != 0 {
		t.Errorf("NEWSA on 386: flags %#x, sel.family %x; want %#x and 0", got386[216], got386[32:34], stateESN|stateAFUnspec)
	}

	pol := nl.XfrmUserpolicyInfo{Priority: 7, Dir: policyOut}
	pol.Sel.Family = nl.FAMILY_V6
	pol.Sel.Saddr.FromIP(net.ParseIP("2001:db8:1::"))
	pol.Sel.Daddr.FromIP(net.ParseIP("2001:db8:2::"))
	pol.Sel.PrefixlenD, pol.Sel.PrefixlenS = 48, 48
	pol.Lft.SoftByteLimit, pol.Lft.HardByteLimit = xfrmInf, xfrmInf
	pol.Lft.SoftPacketLimit, pol.Lft.HardPacketLimit = xfrmInf, xfrmInf
	tmpl := nl.XfrmUserTmpl{Family: nl.FAMILY_V4, Reqid: 9, Mode: modeTunnel, Aalgos: ^uint32(0), Ealgos: ^uint32(0), Calgos: ^uint32(0)}
	tmpl.XfrmId.Daddr.FromIP(net.IP(tun.Remote.AsSlice()))
	tmpl.XfrmId.Proto = protoESP
	tmpl.Saddr.FromIP(net.IP(tun.Local.AsSlice()))
	want = attr(pol.Serialize(), attrTmpl, tmpl.Serialize())
	got, err = encodePolicy(cabi.ArchAMD64, policyMsg{
		src: tun.LocalNet, dst: tun.RemoteNet, dir: policyOut, priority: 7,
		tunnelSrc: tun.Local, tunnelDst: tun.Remote, reqid: 9,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("UPDPOLICY, IPv6 nets over IPv4, amd64:\n got %x\nwant %x", got, want)
	}
}

// IPv6 nets over IPv6 WAN addresses: one family, so the SA keeps a
// selector of it and no AF_UNSPEC flag.
func TestEncodeIPv6OverIPv6(t *testing.T) {
	tun := testTunnel("aes-128-cbc", "hmac-sha1", true)
	tun.Local, tun.Remote = netip.MustParseAddr("2001:db8:ff::1"), netip.MustParseAddr("2001:db8:ff::2")
	tun.LocalNet = netip.MustParsePrefix("2001:db8:1::/48")
	tun.RemoteNet = netip.MustParsePrefix("2001:db8:2::/48")
	out, _, err := tun.resolve()
	if err != nil {
		t.Fatal(err)
	}
	m := out.msg()
	got, err := encodeNewSA(cabi.ArchAMD64, m)
	if err != nil {
		t.Fatal(err)
	}
	info := nl.XfrmUsersaInfo{Reqid: m.reqid, Family: nl.FAMILY_V6, Mode: modeTunnel, Flags: stateESN}
	info.Sel.Family = nl.FAMILY_V6
	info.Id.Daddr.FromIP(net.IP(tun.Remote.AsSlice()))
	info.Id.Spi = nl.Swap32(m.spi)
	info.Id.Proto = protoESP
	info.Saddr.FromIP(net.IP(tun.Local.AsSlice()))
	info.Lft.SoftByteLimit, info.Lft.HardByteLimit = xfrmInf, xfrmInf
	info.Lft.SoftPacketLimit, info.Lft.HardPacketLimit = xfrmInf, xfrmInf
	want := info.Serialize()
	if !bytes.Equal(got[:len(want)], want) {
		t.Errorf("NEWSA xfrm_usersa_info, IPv6 over IPv6, amd64:\n got %x\nwant %x", got[:len(want)], want)
	}
	// The SA reads back with its IPv6 addresses.
	s, err := decodeSA(cabi.ArchAMD64, got)
	if err != nil {
		t.Fatal(err)
	}
	if s.src != tun.Local || s.dst != tun.Remote {
		t.Errorf("decoded SA %s -> %s, want %s -> %s", s.src, s.dst, tun.Local, tun.Remote)
	}
}

func TestValidateIPv6(t *testing.T) {
	tun := testTunnel("aes-128-cbc", "hmac-sha1", true)
	tun.LocalNet = netip.MustParsePrefix("2001:db8:1::/48")
	tun.RemoteNet = netip.MustParsePrefix("10.2.0.0/24")
	err := tun.Validate()
	if err == nil || !strings.Contains(err.Error(), "one address family for both") {
		t.Errorf("IPv6 local net with an IPv4 remote net: %v, want refused", err)
	}
	tun.RemoteNet = netip.MustParsePrefix("2001:db8:1:8000::/56")
	if err := tun.Validate(); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("overlapping IPv6 nets: %v, want refused", err)
	}
}
