package ipsec

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink/nl"

	"github.com/ocfw/ocfw/internal/cabi"
)

// le and be write into an expected message at a hand-derived offset, so
// that the expectations below do not go through the layout engine.
func le(b []byte, off int, v any) {
	switch v := v.(type) {
	case uint8:
		b[off] = v
	case uint16:
		binary.LittleEndian.PutUint16(b[off:], v)
	case uint32:
		binary.LittleEndian.PutUint32(b[off:], v)
	case uint64:
		binary.LittleEndian.PutUint64(b[off:], v)
	default:
		panic("le: unsupported type")
	}
}

func be32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }

var (
	wanA   = netip.MustParseAddr("198.51.100.1")
	wanB   = netip.MustParseAddr("203.0.113.2")
	encKey = bytes.Repeat([]byte{0x11}, 16)
	macKey = bytes.Repeat([]byte{0x22}, 20)
)

func testSA() saMsg {
	return saMsg{src: wanA, dst: wanB, spi: 0x0cf00001, reqid: 0x0cf00001, mode: modeTunnel,
		cryptName: "cbc(aes)", cryptKey: encKey, authName: "hmac(sha1)", authKey: macKey, truncBits: 96,
		replayWindow: 64, esn: true}
}

// wantNewSA assembles the NEWSA body byte by byte from the offsets in
// layout_test.go's comment: xfrm_usersa_info of size infoSize, then the
// attributes, each a 4-byte header (length, type) and its payload padded
// to 4.
func wantNewSA(infoSize int) []byte {
	b := make([]byte, infoSize)
	le(b, 40, uint16(2))         // sel.family AF_INET
	copy(b[56:], wanB.AsSlice()) // id.daddr
	be32(b, 72, 0x0cf00001)      // id.spi
	le(b, 76, uint8(50))         // id.proto ESP
	copy(b[80:], wanA.AsSlice()) // saddr
	for off := 96; off < 96+32; off += 8 {
		le(b, off, ^uint64(0)) // lft: byte and packet limits infinite
	}
	le(b, 208, uint32(0x0cf00001)) // reqid
	le(b, 212, uint16(2))          // family
	le(b, 214, uint8(1))           // mode tunnel
	le(b, 215, uint8(0))           // replay_window: in the ESN attribute
	le(b, 216, uint8(128))         // flags XFRM_STATE_ESN

	crypt := make([]byte, 4+68+16) // XFRMA_ALG_CRYPT: xfrm_algo + key
	le(crypt, 0, uint16(len(crypt)))
	le(crypt, 2, uint16(2))
	copy(crypt[4:], "cbc(aes)")
	le(crypt, 4+64, uint32(128))
	copy(crypt[4+68:], encKey)

	auth := make([]byte, 4+72+20) // XFRMA_ALG_AUTH_TRUNC: xfrm_algo_auth + key
	le(auth, 0, uint16(len(auth)))
	le(auth, 2, uint16(20))
	copy(auth[4:], "hmac(sha1)")
	le(auth, 4+64, uint32(160))
	le(auth, 4+68, uint32(96))
	copy(auth[4+72:], macKey)

	esn := make([]byte, 4+24+8) // XFRMA_REPLAY_ESN_VAL: 64 packets = 2 bitmap words
	le(esn, 0, uint16(len(esn)))
	le(esn, 2, uint16(23))
	le(esn, 4, uint32(2))     // bmp_len
	le(esn, 4+20, uint32(64)) // replay_window
	return append(append(append(b, crypt...), auth...), esn...)
}

func TestEncodeNewSA(t *testing.T) {
	for _, c := range []struct {
		arch     cabi.Arch
		infoSize int
	}{{cabi.Arch386, 220}, {cabi.ArchARM, 224}, {cabi.ArchAMD64, 224}} {
		got, err := encodeNewSA(c.arch, testSA())
		if err != nil {
			t.Fatal(err)
		}
		if want := wantNewSA(c.infoSize); !bytes.Equal(got, want) {
			t.Errorf("NEWSA on %s:\n got %x\nwant %x", c.arch.Name, got, want)
		}
	}
	m := testSA()
	m.esn, m.replayWindow = false, 0
	got, err := encodeNewSA(cabi.Arch386, m)
	if err != nil {
		t.Fatal(err)
	}
	if got[216] != 0 || len(got) != 220+88+96 {
		t.Errorf("without replay window: flags %#x, %d bytes; want no ESN flag and no replay attribute", got[216], len(got))
	}
	m.esn = true
	if _, err := encodeNewSA(cabi.Arch386, m); err == nil {
		t.Error("ESN without a replay window encoded (the kernel refuses it)")
	}
}

func TestEncodePolicy(t *testing.T) {
	p := policyMsg{
		src: netip.MustParsePrefix("10.1.0.0/16"), dst: netip.MustParsePrefix("10.2.3.0/24"),
		dir: policyOut, priority: 0x0fd8, tunnelSrc: wanA, tunnelDst: wanB, reqid: 0x0cf00001,
	}
	for _, c := range []struct {
		arch     cabi.Arch
		infoSize int
	}{{cabi.Arch386, 164}, {cabi.ArchARM, 168}, {cabi.ArchAMD64, 168}} {
		want := make([]byte, c.infoSize+4+64)
		copy(want[0:], []byte{10, 2, 3, 0})  // sel.daddr
		copy(want[16:], []byte{10, 1, 0, 0}) // sel.saddr
		le(want, 40, uint16(2))              // sel.family
		le(want, 42, uint8(24))              // prefixlen_d
		le(want, 43, uint8(16))              // prefixlen_s
		for off := 56; off < 56+32; off += 8 {
			le(want, off, ^uint64(0))
		}
		le(want, 152, uint32(0x0fd8)) // priority
		le(want, 160, uint8(1))       // dir out
		tm := want[c.infoSize:]
		le(tm, 0, uint16(68)) // XFRMA_TMPL, one xfrm_user_tmpl
		le(tm, 2, uint16(5))
		tm = tm[4:]
		copy(tm[0:], wanB.AsSlice())  // id.daddr
		le(tm, 20, uint8(50))         // id.proto; id.spi 0
		le(tm, 24, uint16(2))         // family
		copy(tm[28:], wanA.AsSlice()) // saddr
		le(tm, 44, uint32(0x0cf00001))
		le(tm, 48, uint8(1)) // mode tunnel
		le(tm, 52, ^uint32(0))
		le(tm, 56, ^uint32(0))
		le(tm, 60, ^uint32(0))

		got, err := encodePolicy(c.arch, p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("UPDPOLICY on %s:\n got %x\nwant %x", c.arch.Name, got, want)
		}
	}
}

func TestEncodeIDs(t *testing.T) {
	got, err := encodeSAID(cabi.Arch386, wanB, 0x0cf00002)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 24)
	copy(want, wanB.AsSlice())
	be32(want, 16, 0x0cf00002)
	le(want, 20, uint16(2))
	le(want, 22, uint8(50))
	if !bytes.Equal(got, want) {
		t.Errorf("xfrm_usersa_id:\n got %x\nwant %x", got, want)
	}
	got, err = encodePolicyID(cabi.Arch386, netip.MustParsePrefix("10.2.0.0/24"), netip.MustParsePrefix("10.1.0.0/24"), policyFwd)
	if err != nil {
		t.Fatal(err)
	}
	want = make([]byte, 64)
	copy(want[0:], []byte{10, 1, 0, 0})
	copy(want[16:], []byte{10, 2, 0, 0})
	le(want, 40, uint16(2))
	le(want, 42, uint8(24))
	le(want, 43, uint8(24))
	le(want, 60, uint8(2))
	if !bytes.Equal(got, want) {
		t.Errorf("xfrm_userpolicy_id:\n got %x\nwant %x", got, want)
	}
}

// netlink's nl package holds Go mirrors of the same structs with the
// amd64 layout (that is the bug on i386). For amd64, and so for the
// x86_64 kernel ABI the library is used against, they must give the
// same bytes as this package's amd64 layout; for 386 they must not.
func TestAgainstNetlinkLibrary(t *testing.T) {
	for _, c := range []struct {
		def         *cabi.Struct
		nlSize      int
		i386Differs bool
	}{
		{usersaInfoDef, nl.SizeofXfrmUsersaInfo, true},
		{userpolicyInfoDef, nl.SizeofXfrmUserpolicyInfo, true},
		{usersaIDDef, nl.SizeofXfrmUsersaId, false},
		{userpolicyIDDef, nl.SizeofXfrmUserpolicyId, false},
		{userTmplDef, nl.SizeofXfrmUserTmpl, false},
		{algoDef, nl.SizeofXfrmAlgo, false},
		{algoAuthDef, nl.SizeofXfrmAlgoAuth, false},
		{replayESNDef, nl.SizeofXfrmReplayStateEsn, false},
		{statsDef, nl.SizeofXfrmStats, false},
	} {
		if got := c.def.Layout(cabi.ArchAMD64).Size; got != c.nlSize {
			t.Errorf("sizeof(%s) on amd64 = %d, netlink library %d", c.def.Name, got, c.nlSize)
		}
		if differs := c.def.Layout(cabi.Arch386).Size != c.nlSize; differs != c.i386Differs {
			t.Errorf("%s: 386 size %d against the library's %d: differs = %v, want %v",
				c.def.Name, c.def.Layout(cabi.Arch386).Size, c.nlSize, differs, c.i386Differs)
		}
	}

	// The same SA through the library's structs, with a hard lifetime
	// (an IKE-keyed SA's backstop).
	m := testSA()
	m.hardSecs = 3960
	info := nl.XfrmUsersaInfo{Reqid: m.reqid, Family: nl.FAMILY_V4, Mode: modeTunnel, Flags: stateESN}
	info.Sel.Family = nl.FAMILY_V4
	info.Id.Daddr.FromIP(net.IP(wanB.AsSlice()))
	info.Id.Spi = nl.Swap32(m.spi)
	info.Id.Proto = protoESP
	info.Saddr.FromIP(net.IP(wanA.AsSlice()))
	info.Lft.SoftByteLimit, info.Lft.HardByteLimit = xfrmInf, xfrmInf
	info.Lft.SoftPacketLimit, info.Lft.HardPacketLimit = xfrmInf, xfrmInf
	info.Lft.HardAddExpiresSeconds = 3960
	crypt := nl.XfrmAlgo{AlgKeyLen: 128, AlgKey: encKey}
	copy(crypt.AlgName[:], "cbc(aes)")
	auth := nl.XfrmAlgoAuth{AlgKeyLen: 160, AlgTruncLen: 96, AlgKey: macKey}
	copy(auth.AlgName[:], "hmac(sha1)")
	esn := nl.XfrmReplayStateEsn{BmpLen: 2, ReplayWindow: 64}
	want := info.Serialize()
	want = attr(want, attrAlgCrypt, crypt.Serialize())
	want = attr(want, attrAuthTrunc, auth.Serialize())
	want = attr(want, attrReplayESN, esn.Serialize(), make([]byte, 8)) // the library leaves the bitmap out
	got, err := encodeNewSA(cabi.ArchAMD64, m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("NEWSA on amd64 against the library's structs:\n got %x\nwant %x", got, want)
	}

	pol := nl.XfrmUserpolicyInfo{Priority: 7, Dir: policyIn}
	pol.Sel.Family = nl.FAMILY_V4
	pol.Sel.Daddr.FromIP(net.IP{10, 1, 0, 0})
	pol.Sel.Saddr.FromIP(net.IP{10, 2, 0, 0})
	pol.Sel.PrefixlenD, pol.Sel.PrefixlenS = 24, 16
	pol.Lft.SoftByteLimit, pol.Lft.HardByteLimit = xfrmInf, xfrmInf
	pol.Lft.SoftPacketLimit, pol.Lft.HardPacketLimit = xfrmInf, xfrmInf
	tmpl := nl.XfrmUserTmpl{Family: nl.FAMILY_V4, Reqid: 9, Mode: modeTunnel, Aalgos: ^uint32(0), Ealgos: ^uint32(0), Calgos: ^uint32(0)}
	tmpl.XfrmId.Daddr.FromIP(net.IP(wanA.AsSlice()))
	tmpl.XfrmId.Proto = protoESP
	tmpl.Saddr.FromIP(net.IP(wanB.AsSlice()))
	want = attr(pol.Serialize(), attrTmpl, tmpl.Serialize())
	got, err = encodePolicy(cabi.ArchAMD64, policyMsg{
		src: netip.MustParsePrefix("10.2.0.0/16"), dst: netip.MustParsePrefix("10.1.0.0/24"),
		dir: policyIn, priority: 7, tunnelSrc: wanB, tunnelDst: wanA, reqid: 9,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("UPDPOLICY on amd64 against the library's structs:\n got %x\nwant %x", got, want)
	}
}

// A GETSA reply as the kernel sends it: the SA with counters, the legacy
// XFRMA_ALG_AUTH before the attributes that are read, and 64-bit
// attributes padded with XFRMA_PAD.
func TestDecodeSA(t *testing.T) {
	for _, c := range []struct {
		arch     cabi.Arch
		infoSize int
	}{{cabi.Arch386, 220}, {cabi.ArchARM, 224}, {cabi.ArchAMD64, 224}} {
		full, err := encodeNewSA(c.arch, testSA())
		if err != nil {
			t.Fatal(err)
		}
		info := append([]byte(nil), full[:c.infoSize]...)
		le(info, 160, uint64(123456789012))         // curlft.bytes
		le(info, 168, uint64(4242))                 // curlft.packets
		le(info, 192, uint32(3))                    // stats.replay_window
		le(info, 196, uint32(5))                    // stats.replay
		le(info, 200, uint32(7))                    // stats.integrity_failed
		reply := attr(info, 1, make([]byte, 68+20)) // XFRMA_ALG_AUTH, ignored
		reply = attr(reply, 27, nil)                // XFRMA_PAD
		reply = append(reply, full[c.infoSize:]...)
		s, err := decodeSA(c.arch, reply)
		if err != nil {
			t.Fatalf("%s: %v", c.arch.Name, err)
		}
		if !s.same(testSA()) {
			t.Errorf("%s: decoded %+v, want the SA that was encoded", c.arch.Name, s.saMsg)
		}
		if s.bytes != 123456789012 || s.packets != 4242 || s.windowDrops != 3 || s.replayDrops != 5 || s.integrityFailed != 7 {
			t.Errorf("%s: counters %d bytes %d packets, drops %d/%d/%d; want 123456789012, 4242, 3/5/7",
				c.arch.Name, s.bytes, s.packets, s.windowDrops, s.replayDrops, s.integrityFailed)
		}
		other := testSA()
		other.authKey = bytes.Repeat([]byte{0x23}, 20)
		if s.same(other) {
			t.Errorf("%s: an SA with another key compares the same", c.arch.Name)
		}
	}
	if _, err := decodeSA(cabi.Arch386, make([]byte, 100)); err == nil || !strings.Contains(err.Error(), "220") {
		t.Errorf("a short reply: %v, want an error naming the size", err)
	}
}

// The counters' start values go into xfrm_replay_state_esn (24 bytes on
// every target: six __u32): oseq at 4, seq at 8, oseq_hi at 12, seq_hi at
// 16, low and high halves of the 64-bit numbers with ESN; and a GETSA
// reply's are read back from there.
func TestEncodeDecodeSeq(t *testing.T) {
	for _, c := range []struct {
		arch     cabi.Arch
		infoSize int
	}{{cabi.Arch386, 220}, {cabi.ArchARM, 224}, {cabi.ArchAMD64, 224}} {
		m := testSA()
		m.oseq, m.seq = 0x0000000500400007, 0x00000003fffffff0
		b, err := encodeNewSA(c.arch, m)
		if err != nil {
			t.Fatal(err)
		}
		esn := b[len(b)-(4+24+8)+4:] // the ESN attribute's payload
		for _, f := range []struct {
			off  int
			want uint32
		}{{0, 2}, {4, 0x00400007}, {8, 0xfffffff0}, {12, 5}, {16, 3}, {20, 64}} {
			if got := binary.LittleEndian.Uint32(esn[f.off:]); got != f.want {
				t.Errorf("%s: xfrm_replay_state_esn at %d: %#x, want %#x", c.arch.Name, f.off, got, f.want)
			}
		}
		s, err := decodeSA(c.arch, b)
		if err != nil {
			t.Fatal(err)
		}
		if s.oseq != m.oseq || s.seq != m.seq {
			t.Errorf("%s: decoded oseq %#x seq %#x, want %#x %#x", c.arch.Name, s.oseq, s.seq, m.oseq, m.seq)
		}
	}
	// Without ESN only 32 bits fit.
	m := testSA()
	m.esn, m.oseq = false, 1<<32
	if _, err := encodeNewSA(cabi.Arch386, m); err == nil {
		t.Error("a 33-bit sequence number encoded without ESN")
	}
	m.oseq = 0xfffffff0
	b, err := encodeNewSA(cabi.Arch386, m)
	if err != nil {
		t.Fatal(err)
	}
	if esn := b[len(b)-(4+24+8)+4:]; binary.LittleEndian.Uint32(esn[4:]) != 0xfffffff0 || binary.LittleEndian.Uint32(esn[12:]) != 0 {
		t.Errorf("without ESN: oseq %x", esn[4:16])
	}
}

// A key's ID changes with any key, SPI or algorithm and never holds the
// keys themselves.
func TestKeyID(t *testing.T) {
	a := testTunnel("aes-128-cbc", "hmac-sha256", true)
	id := KeyID(a)
	if !strings.HasPrefix(id, "0cf0a001-") || len(id) != 9+24 {
		t.Errorf("KeyID %q, want the out SPI and 24 hex digits", id)
	}
	if KeyID(a) != id {
		t.Error("KeyID is not stable")
	}
	for _, k := range [][]byte{a.Out.EncKey, a.Out.AuthKey, a.In.EncKey, a.In.AuthKey} {
		if strings.Contains(id, hex.EncodeToString(k[:4])) {
			t.Errorf("KeyID %q shows a key", id)
		}
	}
	changes := []func(*Tunnel){
		func(t *Tunnel) { t.Out.EncKey = key(9, 16) },
		func(t *Tunnel) { t.In.AuthKey = key(9, 32) },
		func(t *Tunnel) { t.In.SPI++ },
		func(t *Tunnel) { t.Out.Auth = "hmac-sha1" },
	}
	for i, ch := range changes {
		b := a
		ch(&b)
		if KeyID(b) == id {
			t.Errorf("change %d: same KeyID", i)
		}
	}
}

// NAT traversal: XFRMA_ENCAP carries xfrm_encap_tmpl (type ESPINUDP, the
// ports big-endian), byte for byte as the netlink library builds it, and
// a GETSA reply's ports are read back, so that Install keeps an SA that
// has them and replaces one whose ports moved.
func TestEncodeDecodeEncap(t *testing.T) {
	if got := encapTmplDef.Layout(cabi.ArchAMD64).Size; got != nl.SizeofXfrmEncapTmpl {
		t.Errorf("sizeof(xfrm_encap_tmpl) = %d, netlink library %d", got, nl.SizeofXfrmEncapTmpl)
	}
	m := testSA()
	m.encapSport, m.encapDport = 4500, 40123
	plain, err := encodeNewSA(cabi.ArchAMD64, testSA())
	if err != nil {
		t.Fatal(err)
	}
	enc := nl.XfrmEncapTmpl{EncapType: encapESPInUDP, EncapSport: nl.Swap16(4500), EncapDport: nl.Swap16(40123)}
	want := attr(plain, attrEncap, enc.Serialize())
	for _, a := range []cabi.Arch{cabi.Arch386, cabi.ArchARM, cabi.ArchAMD64} {
		got, err := encodeNewSA(a, m)
		if err != nil {
			t.Fatal(err)
		}
		if a == cabi.ArchAMD64 && !bytes.Equal(got, want) {
			t.Errorf("NEWSA with encap against the library's structs:\n got %x\nwant %x", got, want)
		}
		s, err := decodeSA(a, got)
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		if s.encapSport != 4500 || s.encapDport != 40123 || !s.same(m) {
			t.Errorf("%s: decoded encap %d -> %d, want 4500 -> 40123", a.Name, s.encapSport, s.encapDport)
		}
		if s.same(testSA()) {
			t.Errorf("%s: an SA with UDP encapsulation compares the same as one without", a.Name)
		}
	}
}

// A tunnel's Encap gives its out SA our port first and its in SA the
// peer's first.
func TestTunnelEncapPorts(t *testing.T) {
	tn := Tunnel{Name: "t", Local: wanA, Remote: wanB,
		LocalNet: netip.MustParsePrefix("10.1.0.0/24"), RemoteNet: netip.MustParsePrefix("10.2.0.0/24"),
		Out:   SA{SPI: 0x1001, Cipher: "aes-128-cbc", Auth: "hmac-sha1", EncKey: encKey, AuthKey: macKey},
		In:    SA{SPI: 0x1002, Cipher: "aes-128-cbc", Auth: "hmac-sha1", EncKey: encKey, AuthKey: macKey},
		Encap: &UDPEncap{4500, 40123}}
	out, in, err := tn.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if *out.Encap != (UDPEncap{4500, 40123}) || *in.Encap != (UDPEncap{40123, 4500}) {
		t.Errorf("out %+v in %+v", *out.Encap, *in.Encap)
	}
	tn.Encap = &UDPEncap{4500, 0}
	if err := tn.Validate(); err == nil || !strings.Contains(err.Error(), "both ports") {
		t.Errorf("a zero port: %v", err)
	}
}

// A tunnel's ReqID goes into both SAs and the three policies' templates
// (a rekey's successor shares it); without one each SA's SPI is used.
func TestTunnelReqID(t *testing.T) {
	tn := Tunnel{Name: "t", Local: wanA, Remote: wanB,
		LocalNet: netip.MustParsePrefix("10.1.0.0/24"), RemoteNet: netip.MustParsePrefix("10.2.0.0/24"),
		Out: SA{SPI: 0x1001, Cipher: "aes-128-cbc", Auth: "hmac-sha1", EncKey: encKey, AuthKey: macKey},
		In:  SA{SPI: 0x1002, Cipher: "aes-128-cbc", Auth: "hmac-sha1", EncKey: encKey, AuthKey: macKey}}
	for _, c := range []struct {
		reqid           uint32
		wantOut, wantIn uint32
	}{{0, 0x1001, 0x1002}, {7, 7, 7}} {
		tn.ReqID = c.reqid
		out, in, err := tn.resolve()
		if err != nil {
			t.Fatal(err)
		}
		if out.msg().reqid != c.wantOut || in.msg().reqid != c.wantIn {
			t.Errorf("ReqID %d: SAs' reqids %d/%d, want %d/%d", c.reqid, out.msg().reqid, in.msg().reqid, c.wantOut, c.wantIn)
		}
		for _, p := range tn.policies(out, in) {
			want := c.wantIn
			if p.dir == policyOut {
				want = c.wantOut
			}
			if p.reqid != want {
				t.Errorf("ReqID %d: policy %s has reqid %d, want %d", c.reqid, dirNames[p.dir], p.reqid, want)
			}
		}
	}
}
