package ipsec

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/ocfw/ocfw/internal/cabi"
)

// The sizes and offsets below were worked out by hand from
// include/uapi/linux/xfrm.h with the C rules (each field at a multiple of
// its alignment, the struct padded to its strictest field):
//
//   - xfrm_address_t is a union of __be32 a4, __be32 a6[4] and in6_addr:
//     16 bytes, aligned to 4.
//   - xfrm_selector: daddr 0, saddr 16, dport 32, dport_mask 34, sport 36,
//     sport_mask 38, family 40, prefixlen_d 42, prefixlen_s 43, proto 44,
//     3 bytes padding, ifindex 48, user 52: 56 bytes everywhere.
//   - xfrm_id: daddr 0, spi 16, proto 20, padded to 24.
//   - xfrm_lifetime_cfg is 8 __u64 (64 bytes), xfrm_lifetime_cur 4 (32),
//     aligned to alignof(__u64): 4 on i386, 8 on ARM EABI and amd64.
//   - xfrm_usersa_info: sel 0, id 56, saddr 80, lft 96 (already a multiple
//     of 8), curlft 160, stats 192 (12 bytes), seq 204, reqid 208, family
//     212, mode 214, replay_window 215, flags 216, so 217 bytes of fields:
//     220 with i386's 4-byte alignment, 224 with 8. FACTS.md records the
//     same pair (the kernel takes 220 on i386, netlink's 224 on amd64).
//   - xfrm_userpolicy_info: sel 0, lft 56, curlft 120, priority 152, index
//     156, dir 160, action 161, flags 162, share 163: 164 on i386, 168.
//   - xfrm_usersa_id: daddr 0, spi 16, family 20, proto 22, padded to 24.
//   - xfrm_userpolicy_id: sel 0, index 56, dir 60, padded to 64.
//   - xfrm_user_tmpl: id 0, family 24, saddr 28, reqid 44, mode 48, share
//     49, optional 50, aalgos 52, ealgos 56, calgos 60: 64.
//   - xfrm_algo: alg_name[64], alg_key_len 64: 68; xfrm_algo_auth adds
//     alg_trunc_len at 68: 72; xfrm_replay_state_esn: six u32, 24.
//   - xfrm_encap_tmpl: encap_type 0, encap_sport 2, encap_dport 4, 2 bytes
//     padding, encap_oa 8: 24.
var wantLayouts = []struct {
	def     *cabi.Struct
	size    [3]int // 386, arm, amd64
	offsets map[string]int
}{
	{selectorDef, [3]int{56, 56, 56}, map[string]int{
		"daddr": 0, "saddr": 16, "dport": 32, "dport_mask": 34, "sport": 36, "sport_mask": 38,
		"family": 40, "prefixlen_d": 42, "prefixlen_s": 43, "proto": 44, "ifindex": 48, "user": 52}},
	{idDef, [3]int{24, 24, 24}, map[string]int{"daddr": 0, "spi": 16, "proto": 20}},
	{lifetimeCfgDef, [3]int{64, 64, 64}, map[string]int{"soft_byte_limit": 0, "hard_byte_limit": 8, "hard_use_expires_seconds": 56}},
	{lifetimeCurDef, [3]int{32, 32, 32}, map[string]int{"bytes": 0, "packets": 8, "add_time": 16, "use_time": 24}},
	{statsDef, [3]int{12, 12, 12}, map[string]int{"replay_window": 0, "replay": 4, "integrity_failed": 8}},
	{usersaInfoDef, [3]int{220, 224, 224}, map[string]int{
		"sel": 0, "sel.family": 40, "id": 56, "id.daddr": 56, "id.spi": 72, "id.proto": 76, "saddr": 80,
		"lft": 96, "lft.hard_byte_limit": 104, "curlft": 160, "curlft.bytes": 160, "curlft.packets": 168,
		"stats": 192, "stats.replay": 196, "stats.integrity_failed": 200,
		"seq": 204, "reqid": 208, "family": 212, "mode": 214, "replay_window": 215, "flags": 216}},
	{usersaIDDef, [3]int{24, 24, 24}, map[string]int{"daddr": 0, "spi": 16, "family": 20, "proto": 22}},
	{userpolicyInfoDef, [3]int{164, 168, 168}, map[string]int{
		"sel": 0, "sel.prefixlen_s": 43, "lft": 56, "curlft": 120, "priority": 152, "index": 156,
		"dir": 160, "action": 161, "flags": 162, "share": 163}},
	{userpolicyIDDef, [3]int{64, 64, 64}, map[string]int{"sel": 0, "index": 56, "dir": 60}},
	{userTmplDef, [3]int{64, 64, 64}, map[string]int{
		"id": 0, "id.spi": 16, "family": 24, "saddr": 28, "reqid": 44, "mode": 48, "share": 49,
		"optional": 50, "aalgos": 52, "ealgos": 56, "calgos": 60}},
	{algoDef, [3]int{68, 68, 68}, map[string]int{"alg_name": 0, "alg_key_len": 64}},
	{algoAuthDef, [3]int{72, 72, 72}, map[string]int{"alg_name": 0, "alg_key_len": 64, "alg_trunc_len": 68}},
	{encapTmplDef, [3]int{24, 24, 24}, map[string]int{"encap_type": 0, "encap_sport": 2, "encap_dport": 4, "encap_oa": 8}},
	{replayESNDef, [3]int{24, 24, 24}, map[string]int{"bmp_len": 0, "oseq": 4, "seq": 8, "oseq_hi": 12, "seq_hi": 16, "replay_window": 20}},
	// xfrm_encap_tmpl: encap_type 0, encap_sport 2, encap_dport 4, 2
	// bytes padding, encap_oa 8: 24.
	{encapTmplDef, [3]int{24, 24, 24}, map[string]int{"encap_type": 0, "encap_sport": 2, "encap_dport": 4, "encap_oa": 8}},
}

var arches = []cabi.Arch{cabi.Arch386, cabi.ArchARM, cabi.ArchAMD64}

func TestLayouts(t *testing.T) {
	for _, w := range wantLayouts {
		for i, a := range arches {
			l := w.def.Layout(a)
			if l.Size != w.size[i] {
				t.Errorf("sizeof(%s) on %s = %d, want %d", w.def.Name, a.Name, l.Size, w.size[i])
			}
			for path, want := range w.offsets {
				if p, ok := l.At[path]; !ok || p.Off != want {
					t.Errorf("%s.%s on %s at %d (known %v), want %d", w.def.Name, path, a.Name, p.Off, ok, want)
				}
			}
		}
	}
}

// Go lays structs out like C on 386 and amd64 (uint64 aligned to 4 and 8
// respectively), so on those two a Go mirror of each struct checks the
// hand-written offsets against the compiler. On arm Go aligns uint64 to
// 4 where the EABI says 8, so the mirror would be wrong there.
type (
	cAddr [4]uint32 // a union holding __be32 a4: aligned to 4
	// Exported fields: they exist for their offsets only.
	cSelector struct {
		Daddr, Saddr                            cAddr
		Dport, DportMask, Sport, SportMask, Fam uint16
		PrefixlenD, PrefixlenS, Proto           uint8
		Ifindex                                 int32
		User                                    uint32
	}
	cID struct {
		Daddr cAddr
		Spi   uint32
		Proto uint8
	}
	cLifetimeCfg struct{ V [8]uint64 }
	cLifetimeCur struct{ Bytes, Packets, AddTime, UseTime uint64 }
	cStats       struct{ ReplayWindow, Replay, IntegrityFailed uint32 }
	cUsersaInfo  struct {
		Sel                       cSelector
		ID                        cID
		Saddr                     cAddr
		Lft                       cLifetimeCfg
		Curlft                    cLifetimeCur
		Stats                     cStats
		Seq, Reqid                uint32
		Family                    uint16
		Mode, ReplayWindow, Flags uint8
	}
	cUsersaID struct {
		Daddr  cAddr
		Spi    uint32
		Family uint16
		Proto  uint8
	}
	cUserpolicyInfo struct {
		Sel                       cSelector
		Lft                       cLifetimeCfg
		Curlft                    cLifetimeCur
		Priority, Index           uint32
		Dir, Action, Flags, Share uint8
	}
	cUserpolicyID struct {
		Sel   cSelector
		Index uint32
		Dir   uint8
	}
	cUserTmpl struct {
		ID                     cID
		Family                 uint16
		Saddr                  cAddr
		Reqid                  uint32
		Mode, Share, Optional  uint8
		Aalgos, Ealgos, Calgos uint32
	}
)

func TestLayoutMatchesGoCompiler(t *testing.T) {
	if runtime.GOARCH != "386" && runtime.GOARCH != "amd64" {
		t.Skipf("Go's struct layout differs from the C ABI's on %s", runtime.GOARCH)
	}
	a, err := HostArch()
	if err != nil {
		t.Fatal(err)
	}
	var sa cUsersaInfo
	var pi cUserpolicyInfo
	var tm cUserTmpl
	var id cUsersaID
	var pid cUserpolicyID
	var sel cSelector
	cases := []struct {
		def     *cabi.Struct
		size    uintptr
		offsets map[string]uintptr
	}{
		{selectorDef, unsafe.Sizeof(sel), map[string]uintptr{
			"family": unsafe.Offsetof(sel.Fam), "prefixlen_d": unsafe.Offsetof(sel.PrefixlenD),
			"proto": unsafe.Offsetof(sel.Proto), "ifindex": unsafe.Offsetof(sel.Ifindex), "user": unsafe.Offsetof(sel.User)}},
		{usersaInfoDef, unsafe.Sizeof(sa), map[string]uintptr{
			"id": unsafe.Offsetof(sa.ID), "saddr": unsafe.Offsetof(sa.Saddr), "lft": unsafe.Offsetof(sa.Lft),
			"curlft": unsafe.Offsetof(sa.Curlft), "stats": unsafe.Offsetof(sa.Stats), "seq": unsafe.Offsetof(sa.Seq),
			"reqid": unsafe.Offsetof(sa.Reqid), "family": unsafe.Offsetof(sa.Family), "mode": unsafe.Offsetof(sa.Mode),
			"replay_window": unsafe.Offsetof(sa.ReplayWindow), "flags": unsafe.Offsetof(sa.Flags)}},
		{userpolicyInfoDef, unsafe.Sizeof(pi), map[string]uintptr{
			"lft": unsafe.Offsetof(pi.Lft), "curlft": unsafe.Offsetof(pi.Curlft), "priority": unsafe.Offsetof(pi.Priority),
			"index": unsafe.Offsetof(pi.Index), "dir": unsafe.Offsetof(pi.Dir), "share": unsafe.Offsetof(pi.Share)}},
		{userTmplDef, unsafe.Sizeof(tm), map[string]uintptr{
			"family": unsafe.Offsetof(tm.Family), "saddr": unsafe.Offsetof(tm.Saddr), "reqid": unsafe.Offsetof(tm.Reqid),
			"mode": unsafe.Offsetof(tm.Mode), "optional": unsafe.Offsetof(tm.Optional), "aalgos": unsafe.Offsetof(tm.Aalgos),
			"calgos": unsafe.Offsetof(tm.Calgos)}},
		{usersaIDDef, unsafe.Sizeof(id), map[string]uintptr{
			"spi": unsafe.Offsetof(id.Spi), "family": unsafe.Offsetof(id.Family), "proto": unsafe.Offsetof(id.Proto)}},
		{userpolicyIDDef, unsafe.Sizeof(pid), map[string]uintptr{
			"index": unsafe.Offsetof(pid.Index), "dir": unsafe.Offsetof(pid.Dir)}},
	}
	for _, c := range cases {
		l := c.def.Layout(a)
		if int(c.size) != l.Size {
			t.Errorf("%s on %s: Go says %d bytes, the description %d", c.def.Name, a.Name, c.size, l.Size)
		}
		for path, off := range c.offsets {
			if p, ok := l.At[path]; !ok || int(off) != p.Off {
				t.Errorf("%s.%s on %s: Go says offset %d, the description %d (known %v)", c.def.Name, path, a.Name, off, p.Off, ok)
			}
		}
	}
}

func TestRecordRejectsMistakes(t *testing.T) {
	r := newRecord(usersaIDDef, cabi.Arch386)
	r.putU32("spi", 1) // spi is __be32
	if r.err == nil {
		t.Error("writing a __be32 field as host-order u32 was accepted")
	}
	r = newRecord(usersaIDDef, cabi.Arch386)
	r.putU8("nosuch", 1)
	if r.err == nil {
		t.Error("writing an unknown field was accepted")
	}
	r = newRecord(algoDef, cabi.Arch386)
	r.putBytes("alg_name", make([]byte, 65))
	if r.err == nil {
		t.Error("a 65-byte name fit in alg_name[64]")
	}
	if _, err := readRecord(usersaInfoDef, cabi.Arch386, make([]byte, 219)); err == nil {
		t.Error("reading xfrm_usersa_info from 219 bytes worked on 386")
	}
}
