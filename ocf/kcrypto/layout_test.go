package kcrypto

import (
	"encoding/hex"
	"strings"
	"testing"
)

// The messages below were laid out by hand from include/uapi/linux/
// cryptouser.h (struct crypto_user_alg: char cru_name[64],
// cru_driver_name[64], cru_module_name[64]; __u32 cru_type, cru_mask,
// cru_refcnt, cru_flags = 208 bytes) and netlink.h (nlmsghdr 16 bytes,
// nlattr 4). The struct has no pointer or 64-bit field, so 386, arm and
// amd64 share the layout: these bytes hold for every GOARCH the firmware
// is built for.
func TestUpdateMessageBytes(t *testing.T) {
	prio := uint32(1)
	b, err := updateMsg(7, "cbc-aes-geode", &prio)
	if err != nil {
		t.Fatal(err)
	}
	if userAlgSize != 208 || len(b) != 232 {
		t.Fatalf("crypto_user_alg %d bytes, message %d; want 208 and 232", userAlgSize, len(b))
	}
	head := "e8000000" + "1200" + "0500" + "07000000" + "00000000" // len 232, UPDATEALG, REQUEST|ACK, seq 7, pid 0
	if got := hex.EncodeToString(b[:16]); got != head {
		t.Errorf("header %s, want %s", got, head)
	}
	if got := b[16 : 16+64]; strings.Trim(string(got), "\x00") != "" {
		t.Errorf("cru_name should be empty (the kernel matches the driver name exactly): %q", got)
	}
	if got := string(b[16+64 : 16+64+13]); got != "cbc-aes-geode" || b[16+64+13] != 0 {
		t.Errorf("cru_driver_name %q", b[16+64:16+128])
	}
	for i := 16 + 128; i < 16+208; i++ {
		if b[i] != 0 {
			t.Fatalf("byte %d of the struct is %#x, want 0 (module name, type, mask, refcnt, flags)", i-16, b[i])
		}
	}
	attr := "0800" + "0100" + "01000000" // nla_len 8, CRYPTOCFGA_PRIORITY_VAL, 1
	if got := hex.EncodeToString(b[224:]); got != attr {
		t.Errorf("attribute %s, want %s", got, attr)
	}

	flush, err := updateMsg(1, "aes-generic", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(flush) != 224 || hex.EncodeToString(flush[:8]) != "e000000012000500" {
		t.Errorf("flush message: %d bytes, header %x", len(flush), flush[:8])
	}
	get, err := getMsg(1, "aes-generic")
	if err != nil {
		t.Fatal(err)
	}
	if len(get) != 224 || hex.EncodeToString(get[:8]) != "e000000013000100" { // GETALG, REQUEST only
		t.Errorf("get message: %d bytes, header %x", len(get), get[:8])
	}
	if _, err := updateMsg(1, strings.Repeat("x", 64), &prio); err == nil {
		t.Error("a 64-byte driver name leaves no room for the NUL; want an error")
	}
}

func TestParseAlg(t *testing.T) {
	p := make([]byte, 208)
	copy(p, "cbc(aes)")
	copy(p[64:], "virtio_crypto_aes_cbc")
	copy(p[128:], "virtio_crypto")
	order.PutUint32(p[offRefcnt:], 3)
	order.PutUint32(p[offFlags:], 0x5|FlagAsync|FlagTested|FlagKernDriverOnly)
	prio := []byte{8, 0, 1, 0, 150, 0, 0, 0}
	report := make([]byte, 4+64+64+16)
	order.PutUint16(report, uint16(len(report)))
	order.PutUint16(report[2:], 4) // CRYPTOCFGA_REPORT_BLKCIPHER
	copy(report[4:], "skcipher")
	a, err := parseAlg(append(append(p, prio...), report...))
	if err != nil {
		t.Fatal(err)
	}
	want := Alg{Name: "cbc(aes)", Driver: "virtio_crypto_aes_cbc", Module: "virtio_crypto", Priority: 150, Type: "skcipher",
		SelfTest: "passed", Async: true, Refcnt: 3, Flags: 0x5 | FlagAsync | FlagTested | FlagKernDriverOnly}
	if a != want {
		t.Errorf("got  %+v\nwant %+v", a, want)
	}
	if _, err := parseAlg(p[:100]); err == nil {
		t.Error("a short reply should be an error")
	}
	bad := append(append([]byte{}, p...), 0x40, 0, 1, 0)
	if _, err := parseAlg(bad); err == nil {
		t.Error("an attribute longer than the message should be an error")
	}
}

func TestParseMessages(t *testing.T) {
	// An ack (NLMSG_ERROR with error 0) followed by an error -1 (EPERM).
	ack := make([]byte, 36)
	order.PutUint32(ack, 36)
	order.PutUint16(ack[4:], 2)
	order.PutUint32(ack[8:], 9)
	neg := make([]byte, 36)
	copy(neg, ack)
	order.PutUint32(neg[16:], uint32(0xffffffff))
	msgs, err := parseMessages(append(ack, neg...))
	if err != nil || len(msgs) != 2 || msgs[0].seq != 9 || msgs[1].typ != 2 || int32(order.Uint32(msgs[1].data)) != -1 {
		t.Fatalf("%+v %v", msgs, err)
	}
	if _, err := parseMessages([]byte{100, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Error("a message longer than the datagram should be an error")
	}
}
