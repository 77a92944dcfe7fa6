package childsa

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/ike"
	"github.com/ocfw/ocfw/router/ipsec"
)

// fakeXFRM records the sink's kernel calls.
type fakeXFRM struct {
	calls   []string
	tunnels []string          // what each Install asked for: "out SPI in SPI reqid R"
	packets map[uint32]uint64 // inbound packets by SPI
	fail    error
}

func (f *fakeXFRM) Install(t ipsec.Tunnel) error {
	f.calls = append(f.calls, fmt.Sprintf("install %08x", t.In.SPI))
	f.tunnels = append(f.tunnels, fmt.Sprintf("out %08x in %08x reqid %08x", t.Out.SPI, t.In.SPI, t.ReqID))
	return f.fail
}
func (f *fakeXFRM) Remove(t ipsec.Tunnel) error {
	f.calls = append(f.calls, fmt.Sprintf("remove %08x", t.In.SPI))
	return nil
}
func (f *fakeXFRM) RemoveSAs(t ipsec.Tunnel) error {
	f.calls = append(f.calls, fmt.Sprintf("remove-sas %08x", t.In.SPI))
	return nil
}
func (f *fakeXFRM) Counters(t ipsec.Tunnel) (ipsec.TunnelCounters, error) {
	return ipsec.TunnelCounters{In: ipsec.SACounters{SPI: t.In.SPI, Packets: f.packets[t.In.SPI]}}, nil
}

func testChild(in, out uint32) ike.ChildSA {
	return ike.ChildSA{Peer: "a-b", InSPI: in, OutSPI: out,
		Encr: ike.Encr{ID: ike.ENCR_AES_CBC, KeyLen: 16}, Integ: ike.Integ{ID: ike.AUTH_HMAC_SHA2_256_128, KeyLen: 32, ICVLen: 16},
		ESN: true, InEncr: bytes.Repeat([]byte{1}, 16), InInteg: bytes.Repeat([]byte{2}, 32),
		OutEncr: bytes.Repeat([]byte{3}, 16), OutInteg: bytes.Repeat([]byte{4}, 32),
		Local: netip.MustParseAddr("198.51.100.2"), Remote: netip.MustParseAddr("203.0.113.2"),
		LocalTS: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}, RemoteTS: []netip.Prefix{netip.MustParsePrefix("192.168.2.0/24")},
		Lifetime: time.Hour}
}

// A CHILD SA becomes the kernel tunnel a manual tunnel of the same
// algorithms would: directions, keys, ESN, window; with UDP
// encapsulation each direction's ports the right way round; unlike a
// manual tunnel's, its SAs have a hard lifetime 10% above the CHILD
// SA's (66 minutes for an hour).
func TestTunnel(t *testing.T) {
	c := testChild(0xc0000001, 0xd0000001)
	x, err := Tunnel(c)
	if err != nil {
		t.Fatal(err)
	}
	want := ipsec.Tunnel{Name: "a-b", Local: c.Local, Remote: c.Remote, LocalNet: c.LocalTS[0], RemoteNet: c.RemoteTS[0],
		Out: ipsec.SA{SPI: 0xd0000001, Cipher: "aes-128-cbc", Auth: "hmac-sha256", EncKey: c.OutEncr, AuthKey: c.OutInteg, ReplayWindow: 128, ESN: true, HardLifetime: 66 * time.Minute},
		In:  ipsec.SA{SPI: 0xc0000001, Cipher: "aes-128-cbc", Auth: "hmac-sha256", EncKey: c.InEncr, AuthKey: c.InInteg, ReplayWindow: 128, ESN: true, HardLifetime: 66 * time.Minute}}
	if fmt.Sprintf("%+v", x) != fmt.Sprintf("%+v", want) {
		t.Errorf("tunnel\n%+v\nwant\n%+v", x, want)
	}
	c.Encap = &ike.Encap{LocalPort: 4500, RemotePort: 31337}
	x, err = Tunnel(c)
	if err != nil {
		t.Fatal(err)
	}
	if *x.Out.Encap != (ipsec.UDPEncap{SrcPort: 4500, DstPort: 31337}) || *x.In.Encap != (ipsec.UDPEncap{SrcPort: 31337, DstPort: 4500}) {
		t.Errorf("encap out %+v in %+v", *x.Out.Encap, *x.In.Encap)
	}
	for _, bad := range []struct {
		name string
		mod  func(*ike.ChildSA)
		want string
	}{
		{"two subnets", func(c *ike.ChildSA) { c.LocalTS = append(c.LocalTS, c.LocalTS[0]) }, "2 local and 1 remote subnets"},
		{"unknown cipher", func(c *ike.ChildSA) { c.Encr.ID = 20 }, "has no kernel ESP name"},
		{"3des", func(c *ike.ChildSA) { c.Encr = ike.Encr{ID: ike.ENCR_3DES, KeyLen: 24} }, "key is 16 bytes, want 24"},
	} {
		c := testChild(0xc0000001, 0xd0000001)
		bad.mod(&c)
		if _, err := Tunnel(c); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.name, err, bad.want)
		}
		if _, err := Tunnel(c); err != nil && strings.Contains(err.Error(), "\x01\x01\x01") {
			t.Errorf("%s: the error shows a key", bad.name)
		}
	}
}

// A rekey installs the successor (which takes the policies) and then
// deletes the old SAs only; the last CHILD SA of the subnets takes the
// policies with it. A delete of the SA the policies point at, while an
// older one runs, points them back first.
func TestSinkRekey(t *testing.T) {
	f := &fakeXFRM{}
	s := New(f)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	for _, spi := range []uint32{0x101, 0x102} {
		if err := s.Install(testChild(spi, spi+0x1000)); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	s.Delete(testChild(0x101, 0x1101))
	s.Delete(testChild(0x102, 0x1102))
	s.Delete(testChild(0x102, 0x1102)) // twice: nothing more
	s.Install(testChild(0x103, 0x1103))
	now = now.Add(time.Second)
	s.Install(testChild(0x104, 0x1104))
	s.Delete(testChild(0x104, 0x1104)) // the newest first
	want := "install 00000101, install 00000102, remove-sas 00000101, remove 00000102, " +
		"install 00000103, install 00000104, install 00000103, remove-sas 00000104"
	if got := strings.Join(f.calls, ", "); got != want {
		t.Errorf("kernel calls\n%s\nwant\n%s", got, want)
	}
	f.fail = errors.New("ipsec: no")
	if err := s.Install(testChild(0x105, 0x1105)); err == nil {
		t.Error("a failed install was not reported to the endpoint")
	}
	f.calls = nil
	s.RemoveAll()
	if strings.Join(f.calls, ",") != "remove 00000103" {
		t.Errorf("RemoveAll: %v", f.calls)
	}
}

// All CHILD SAs of a tunnel share one request ID (the in policy takes
// both SAs of a rekey; the out one the newest). A successor of the
// peer's rekey takes its inbound SA at once but sends on the old SA
// until the peer deletes that (the peer installs its new inbound SA only
// once it has our answer): no packet is sent on an SA the peer cannot
// read yet. Our own rekey's successor sends at once.
func TestSinkResponderRekey(t *testing.T) {
	f := &fakeXFRM{packets: map[uint32]uint64{}}
	s := New(f)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	step := func(what string, fn func() error, calls, tunnels string) {
		t.Helper()
		f.calls, f.tunnels = nil, nil
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := strings.Join(f.calls, ", "); got != calls {
			t.Errorf("%s: kernel calls %s, want %s", what, got, calls)
		}
		if got := strings.Join(f.tunnels, ", "); got != tunnels {
			t.Errorf("%s: installed %s, want %s", what, got, tunnels)
		}
		now = now.Add(time.Second)
	}
	first, peers, ours := testChild(0x101, 0x1101), testChild(0x102, 0x1102), testChild(0x103, 0x1103)
	peers.ReplacesOut = 0x1101
	step("the first CHILD SA", func() error { return s.Install(first) },
		"install 00000101", "out 00001101 in 00000101 reqid 00000101")
	step("the peer's rekey", func() error { return s.Install(peers) },
		"install 00000102", "out 00001101 in 00000102 reqid 00000101")
	f.packets[0x102] = 7
	if tc, _, ok, err := s.Counters(0x102); !ok || err != nil || tc.In.Packets != 7 {
		t.Errorf("counters of the waiting successor: %+v %v %v", tc, ok, err)
	}
	step("the peer deletes the old SA", func() error { return s.Delete(first) },
		"install 00000102, remove-sas 00000101", "out 00001102 in 00000102 reqid 00000101")
	step("our own rekey", func() error { return s.Install(ours) },
		"install 00000103", "out 00001103 in 00000103 reqid 00000101")
	step("its old SA deleted", func() error { return s.Delete(peers) }, "remove-sas 00000102", "")
	step("the last one deleted", func() error { return s.Delete(ours) }, "remove 00000103", "")
	step("a new IKE SA's CHILD SA", func() error { return s.Install(testChild(0x104, 0x1104)) },
		"install 00000104", "out 00001104 in 00000104 reqid 00000104")

	// The successor goes before the SA it replaces (the IKE SA died):
	// its never-installed outbound SA is no loss; the old one stays.
	late := testChild(0x105, 0x1105)
	late.ReplacesOut = 0x1104
	step("the peer's rekey again", func() error { return s.Install(late) },
		"install 00000105", "out 00001104 in 00000105 reqid 00000104")
	step("the successor deleted first", func() error { return s.Delete(late) },
		"install 00000104, remove-sas 00000105", "out 00001104 in 00000104 reqid 00000104")
}

// LastInbound is when the kernel's inbound packet count last grew, read
// at most once a second; unknown before any packet.
func TestSinkLastInbound(t *testing.T) {
	f := &fakeXFRM{packets: map[uint32]uint64{}}
	s := New(f)
	t0 := time.Unix(1000, 0)
	now := t0
	s.now = func() time.Time { return now }
	c := testChild(0x101, 0x1101)
	s.Install(c)
	if _, ok := s.LastInbound(c); ok {
		t.Error("a time before any packet")
	}
	now = now.Add(2 * time.Second)
	f.packets[0x101] = 5
	if got, ok := s.LastInbound(c); !ok || !got.Equal(now) {
		t.Errorf("after packets: %v %v, want %v", got, ok, now)
	}
	seen := now
	now = now.Add(500 * time.Millisecond)
	f.packets[0x101] = 9
	if got, _ := s.LastInbound(c); !got.Equal(seen) {
		t.Errorf("read again within a second: %v", got)
	}
	now = now.Add(3 * time.Second)
	if got, _ := s.LastInbound(c); !got.Equal(now) {
		t.Errorf("more packets: %v, want %v", got, now)
	}
	now = now.Add(10 * time.Second)
	if got, _ := s.LastInbound(c); got.Equal(now) {
		t.Error("no new packets, yet the time moved")
	}
	if _, ok := s.LastInbound(testChild(0x999, 0x1999)); ok {
		t.Error("a time for an SA not installed")
	}
}
