package ipsec

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/cabi"
)

// Message types, attributes and values of include/uapi/linux/xfrm.h.
const (
	msgNewSA      = 0x10 // XFRM_MSG_NEWSA
	msgDelSA      = 0x11 // XFRM_MSG_DELSA
	msgGetSA      = 0x12 // XFRM_MSG_GETSA
	msgDelPolicy  = 0x14 // XFRM_MSG_DELPOLICY
	msgUpdPolicy  = 0x19 // XFRM_MSG_UPDPOLICY (creates or replaces)
	attrAlgCrypt  = 2    // XFRMA_ALG_CRYPT
	attrEncap     = 4    // XFRMA_ENCAP
	attrTmpl      = 5    // XFRMA_TMPL
	attrAuthTrunc = 20   // XFRMA_ALG_AUTH_TRUNC
	attrReplayESN = 23   // XFRMA_REPLAY_ESN_VAL

	modeTunnel    = 1   // XFRM_MODE_TUNNEL
	stateESN      = 128 // XFRM_STATE_ESN
	stateAFUnspec = 32  // XFRM_STATE_AF_UNSPEC: the selector's family stays unspecified
	policyIn      = 0   // XFRM_POLICY_IN
	policyOut     = 1   // XFRM_POLICY_OUT
	policyFwd     = 2   // XFRM_POLICY_FWD
	policyAllow   = 0   // XFRM_POLICY_ALLOW
	protoESP      = unix.IPPROTO_ESP

	xfrmInf = ^uint64(0) // XFRM_INF: no limit

	// encapESPInUDP is UDP_ENCAP_ESPINUDP (linux/udp.h): RFC 3948's
	// ESP in UDP with the non-ESP marker for IKE.
	encapESPInUDP = 2

	// maxReplayWindow: the bitmap may be XFRMA_REPLAY_ESN_MAX (4096)
	// bytes.
	maxReplayWindow = 4096 * 8
)

// saMsg is everything an XFRM_MSG_NEWSA for one ESP SA carries.
type saMsg struct {
	src, dst     netip.Addr // outer (WAN) addresses
	spi          uint32
	reqid        uint32
	mode         uint8
	cryptName    string // kernel name, e.g. cbc(aes)
	cryptKey     []byte
	authName     string // kernel name, e.g. hmac(sha1)
	authKey      []byte
	truncBits    uint32
	replayWindow uint32 // packets; 0 = no anti-replay check
	esn          bool
	// crossFamily: the SA carries inner packets of the other family
	// than its outer addresses (IPv6 in IPv4 or the reverse).
	crossFamily bool
	// oseq and seq start the SA's counters (xfrm_replay_state_esn,
	// split into the low and, with ESN, high 32 bits): the last
	// sequence number sent (the next packet carries oseq+1) and the
	// highest one received. Only with a replay attribute.
	oseq, seq uint64
	// encap: ESP in UDP between these ports (0/0: plain ESP).
	encapSport, encapDport uint16
	// hardSecs: the kernel deletes the SA this many seconds after it
	// was added (0: never).
	hardSecs uint64
}

func family(a netip.Addr) uint16 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// addrBytes is an address as xfrm_address_t holds it: IPv4 in a4 (the
// first four bytes), IPv6 in all sixteen.
func addrBytes(a netip.Addr) []byte {
	if a.Is4() {
		b := a.As4()
		return b[:]
	}
	b := a.As16()
	return b[:]
}

func addrFrom(b []byte, fam uint16) netip.Addr {
	if fam == unix.AF_INET {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16([16]byte(b[:16]))
}

// putInfiniteLifetime sets every byte and packet limit to XFRM_INF, as
// iproute2 does: a zero limit would expire the SA or policy at once.
// Zero seconds mean no time limit.
func putInfiniteLifetime(r *record, prefix string) {
	for _, f := range []string{"soft_byte_limit", "hard_byte_limit", "soft_packet_limit", "hard_packet_limit"} {
		r.putU64(prefix+f, xfrmInf)
	}
}

// attr appends one netlink attribute, padded to 4 bytes.
func attr(b []byte, typ uint16, payload ...[]byte) []byte {
	n := unix.SizeofNlAttr
	for _, p := range payload {
		n += len(p)
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(n))
	b = binary.LittleEndian.AppendUint16(b, typ)
	for _, p := range payload {
		b = append(b, p...)
	}
	return append(b, make([]byte, nlAlign(n)-n)...)
}

// encodeNewSA is the body of an XFRM_MSG_NEWSA (after the nlmsghdr):
// xfrm_usersa_info and the algorithm and replay attributes.
func encodeNewSA(a cabi.Arch, m saMsg) ([]byte, error) {
	fam := family(m.dst)
	r := newRecord(usersaInfoDef, a)
	// The SA's selector stays empty (any inner addresses of the family):
	// which traffic uses the SA is the policies' business, as in
	// strongSwan's tunnel-mode SAs.
	// With crossFamily it stays AF_UNSPEC with XFRM_STATE_AF_UNSPEC
	// (as strongSwan does for every tunnel-mode SA): a selector of the
	// outer family would not describe the inner packets.
	if !m.crossFamily {
		r.putU16("sel.family", fam)
	}
	r.putBytes("id.daddr", addrBytes(m.dst))
	r.putBE32("id.spi", m.spi)
	r.putU8("id.proto", protoESP)
	r.putBytes("saddr", addrBytes(m.src))
	putInfiniteLifetime(r, "lft.")
	r.putU64("lft.hard_add_expires_seconds", m.hardSecs)
	r.putU32("reqid", m.reqid)
	r.putU16("family", fam)
	r.putU8("mode", m.mode)
	// With XFRMA_REPLAY_ESN_VAL the window is given there and this u8
	// must be 0 (xfrm_user.c verify_replay).
	r.putU8("replay_window", 0)
	var flags uint8
	if m.esn {
		flags |= stateESN
	}
	if m.crossFamily {
		flags |= stateAFUnspec
	}
	r.putU8("flags", flags)
	if r.err != nil {
		return nil, r.err
	}
	b := r.b

	crypt := newRecord(algoDef, a)
	crypt.putBytes("alg_name", []byte(m.cryptName))
	crypt.putU32("alg_key_len", uint32(len(m.cryptKey)*8))
	auth := newRecord(algoAuthDef, a)
	auth.putBytes("alg_name", []byte(m.authName))
	auth.putU32("alg_key_len", uint32(len(m.authKey)*8))
	auth.putU32("alg_trunc_len", m.truncBits)
	for _, rec := range []*record{crypt, auth} {
		if rec.err != nil {
			return nil, rec.err
		}
	}
	b = attr(b, attrAlgCrypt, crypt.b, m.cryptKey)
	b = attr(b, attrAuthTrunc, auth.b, m.authKey)

	if m.replayWindow > 0 || m.esn {
		if m.replayWindow == 0 || m.replayWindow > maxReplayWindow {
			return nil, fmt.Errorf("ipsec: replay window %d: want 1 to %d packets with extended sequence numbers", m.replayWindow, maxReplayWindow)
		}
		words := (m.replayWindow + 31) / 32
		esn := newRecord(replayESNDef, a)
		esn.putU32("bmp_len", words)
		esn.putU32("replay_window", m.replayWindow)
		esn.putU32("oseq", uint32(m.oseq))
		esn.putU32("seq", uint32(m.seq))
		if m.esn {
			esn.putU32("oseq_hi", uint32(m.oseq>>32))
			esn.putU32("seq_hi", uint32(m.seq>>32))
		} else if m.oseq > 0xffffffff || m.seq > 0xffffffff {
			return nil, fmt.Errorf("ipsec: sequence numbers %d/%d need extended sequence numbers", m.oseq, m.seq)
		}
		if esn.err != nil {
			return nil, esn.err
		}
		b = attr(b, attrReplayESN, esn.b, make([]byte, 4*words))
	}
	if m.encapSport != 0 || m.encapDport != 0 {
		enc := newRecord(encapTmplDef, a)
		enc.putU16("encap_type", encapESPInUDP)
		enc.putBE16("encap_sport", m.encapSport)
		enc.putBE16("encap_dport", m.encapDport)
		if enc.err != nil {
			return nil, enc.err
		}
		b = attr(b, attrEncap, enc.b)
	}
	return b, nil
}

// encodeSAID is the body of XFRM_MSG_GETSA and XFRM_MSG_DELSA: the SA's
// identity (destination, SPI, protocol).
func encodeSAID(a cabi.Arch, dst netip.Addr, spi uint32) ([]byte, error) {
	r := newRecord(usersaIDDef, a)
	r.putBytes("daddr", addrBytes(dst))
	r.putBE32("spi", spi)
	r.putU16("family", family(dst))
	r.putU8("proto", protoESP)
	return r.b, r.err
}

// policyMsg is an XFRM policy with one ESP tunnel template: traffic from
// src to dst (inner prefixes) in direction dir goes through the SA
// between tunnelSrc and tunnelDst with reqid.
type policyMsg struct {
	src, dst             netip.Prefix
	dir                  uint8
	priority             uint32
	tunnelSrc, tunnelDst netip.Addr
	reqid                uint32
}

func putSelector(r *record, src, dst netip.Prefix) {
	r.putBytes("sel.daddr", addrBytes(dst.Addr()))
	r.putBytes("sel.saddr", addrBytes(src.Addr()))
	r.putU16("sel.family", family(dst.Addr()))
	r.putU8("sel.prefixlen_d", uint8(dst.Bits()))
	r.putU8("sel.prefixlen_s", uint8(src.Bits()))
}

// encodePolicy is the body of an XFRM_MSG_UPDPOLICY:
// xfrm_userpolicy_info and an XFRMA_TMPL with one xfrm_user_tmpl.
func encodePolicy(a cabi.Arch, m policyMsg) ([]byte, error) {
	r := newRecord(userpolicyInfoDef, a)
	putSelector(r, m.src, m.dst)
	putInfiniteLifetime(r, "lft.")
	r.putU32("priority", m.priority)
	r.putU8("dir", m.dir)
	r.putU8("action", policyAllow)
	if r.err != nil {
		return nil, r.err
	}
	t := newRecord(userTmplDef, a)
	t.putBytes("id.daddr", addrBytes(m.tunnelDst))
	t.putU8("id.proto", protoESP) // id.spi 0: any SA that fits
	t.putU16("family", family(m.tunnelDst))
	t.putBytes("saddr", addrBytes(m.tunnelSrc))
	t.putU32("reqid", m.reqid)
	t.putU8("mode", modeTunnel)
	// Any algorithm (iproute2's default): the SA fixes them.
	t.putU32("aalgos", ^uint32(0))
	t.putU32("ealgos", ^uint32(0))
	t.putU32("calgos", ^uint32(0))
	if t.err != nil {
		return nil, t.err
	}
	return attr(r.b, attrTmpl, t.b), nil
}

// encodePolicyID is the body of an XFRM_MSG_DELPOLICY: the policy's
// selector and direction.
func encodePolicyID(a cabi.Arch, src, dst netip.Prefix, dir uint8) ([]byte, error) {
	r := newRecord(userpolicyIDDef, a)
	putSelector(r, src, dst)
	r.putU8("dir", dir)
	return r.b, r.err
}

// saState is what the kernel reports for an SA (an XFRM_MSG_NEWSA reply
// to XFRM_MSG_GETSA): its configuration, to compare with what Install
// wants, and its counters.
type saState struct {
	saMsg
	flags           uint8
	bytes, packets  uint64 // xfrm_lifetime_cur: traffic through the SA
	replayDrops     uint32 // xfrm_stats.replay: packets seen twice
	windowDrops     uint32 // xfrm_stats.replay_window: below the window
	integrityFailed uint32 // xfrm_stats.integrity_failed: ICV mismatch
}

// decodeSA reads the body of an XFRM_MSG_NEWSA message.
func decodeSA(a cabi.Arch, body []byte) (*saState, error) {
	r, err := readRecord(usersaInfoDef, a, body)
	if err != nil {
		return nil, err
	}
	fam := r.u16("family")
	if fam != unix.AF_INET && fam != unix.AF_INET6 {
		return nil, fmt.Errorf("ipsec: SA of address family %d", fam)
	}
	s := &saState{
		saMsg: saMsg{
			dst:          addrFrom(r.bytes("id.daddr"), fam),
			src:          addrFrom(r.bytes("saddr"), fam),
			spi:          r.be32("id.spi"),
			reqid:        r.u32("reqid"),
			mode:         r.u8("mode"),
			replayWindow: uint32(r.u8("replay_window")),
		},
		flags:           r.u8("flags"),
		bytes:           r.u64("curlft.bytes"),
		packets:         r.u64("curlft.packets"),
		replayDrops:     r.u32("stats.replay"),
		windowDrops:     r.u32("stats.replay_window"),
		integrityFailed: r.u32("stats.integrity_failed"),
	}
	s.esn = s.flags&stateESN != 0
	if r.err != nil {
		return nil, r.err
	}
	attrs, err := parseAttrs(body[nlAlign(len(r.b)):])
	if err != nil {
		return nil, err
	}
	if p, ok := attrs[attrAlgCrypt]; ok {
		s.cryptName, s.cryptKey, _, err = decodeAlgo(a, p, false)
		if err != nil {
			return nil, err
		}
	}
	if p, ok := attrs[attrAuthTrunc]; ok {
		s.authName, s.authKey, s.truncBits, err = decodeAlgo(a, p, true)
		if err != nil {
			return nil, err
		}
	}
	if p, ok := attrs[attrReplayESN]; ok {
		esn, err := readRecord(replayESNDef, a, p)
		if err != nil {
			return nil, err
		}
		s.replayWindow = esn.u32("replay_window")
		s.oseq = uint64(esn.u32("oseq_hi"))<<32 | uint64(esn.u32("oseq"))
		s.seq = uint64(esn.u32("seq_hi"))<<32 | uint64(esn.u32("seq"))
		if esn.err != nil {
			return nil, esn.err
		}
	}
	if p, ok := attrs[attrEncap]; ok {
		enc, err := readRecord(encapTmplDef, a, p)
		if err != nil {
			return nil, err
		}
		s.encapSport, s.encapDport = enc.be16("encap_sport"), enc.be16("encap_dport")
		if enc.err != nil {
			return nil, enc.err
		}
	}
	return s, nil
}

func decodeAlgo(a cabi.Arch, p []byte, auth bool) (name string, key []byte, trunc uint32, err error) {
	def := algoDef
	if auth {
		def = algoAuthDef
	}
	r, err := readRecord(def, a, p)
	if err != nil {
		return "", nil, 0, err
	}
	raw := r.bytes("alg_name")
	for i, c := range raw {
		if c == 0 {
			raw = raw[:i]
			break
		}
	}
	bits := r.u32("alg_key_len")
	if auth {
		trunc = r.u32("alg_trunc_len")
	}
	n := int(bits+7) / 8
	if len(p)-len(r.b) < n {
		return "", nil, 0, fmt.Errorf("ipsec: %s attribute holds %d key bytes, says %d bits", def.Name, len(p)-len(r.b), bits)
	}
	return string(raw), append([]byte(nil), p[len(r.b):len(r.b)+n]...), trunc, r.err
}

// parseAttrs splits netlink attributes by type (the last one wins).
func parseAttrs(b []byte) (map[uint16][]byte, error) {
	out := map[uint16][]byte{}
	for len(b) >= unix.SizeofNlAttr {
		n := int(binary.LittleEndian.Uint16(b))
		typ := binary.LittleEndian.Uint16(b[2:]) & 0x3fff // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
		if n < unix.SizeofNlAttr || n > len(b) {
			return nil, fmt.Errorf("ipsec: netlink attribute of length %d in %d bytes", n, len(b))
		}
		out[typ] = b[unix.SizeofNlAttr:n]
		if nlAlign(n) >= len(b) {
			break
		}
		b = b[nlAlign(n):]
	}
	return out, nil
}

// nlAlign rounds n up to 4 bytes, to which netlink pads messages
// (NLMSG_ALIGNTO), attributes (NLA_ALIGNTO) and the struct that starts a
// message.
func nlAlign(n int) int { return (n + 3) &^ 3 }
