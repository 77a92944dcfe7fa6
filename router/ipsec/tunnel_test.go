package ipsec

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// key is a deterministic test key of n bytes.
func key(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)*7
	}
	return b
}

// testTunnel is site A's side of a tunnel to site B with the given
// algorithms; mirror gives B's side.
func testTunnel(cipher, auth string, esn bool) Tunnel {
	c, err := CipherAlgorithm(cipher)
	if err != nil {
		panic(err)
	}
	a, err := AuthAlgorithm(auth)
	if err != nil {
		panic(err)
	}
	window := uint32(0)
	if esn {
		window = 128
	}
	return Tunnel{
		Name:      "site-b",
		Local:     netip.MustParseAddr("198.51.100.1"),
		Remote:    netip.MustParseAddr("198.51.100.2"),
		LocalNet:  netip.MustParsePrefix("10.1.0.0/24"),
		RemoteNet: netip.MustParsePrefix("10.2.0.0/24"),
		Out: SA{SPI: 0x0cf0a001, Cipher: cipher, Auth: auth, EncKey: key(1, c.KeySize), AuthKey: key(2, a.KeySize),
			ReplayWindow: window, ESN: esn},
		In: SA{SPI: 0x0cf0b001, Cipher: cipher, Auth: auth, EncKey: key(3, c.KeySize), AuthKey: key(4, a.KeySize),
			ReplayWindow: window, ESN: esn},
	}
}

// mirror is the peer's view of the same tunnel.
func mirror(t Tunnel, name string) Tunnel {
	return Tunnel{Name: name, Local: t.Remote, Remote: t.Local, LocalNet: t.RemoteNet, RemoteNet: t.LocalNet, Out: t.In, In: t.Out}
}

func TestAlgorithms(t *testing.T) {
	for _, c := range []struct {
		name, kernel string
		key          int
		trunc        uint32
	}{
		{"aes-128-cbc", "cbc(aes)", 16, 0},
		{"aes-192-cbc", "cbc(aes)", 24, 0},
		{"aes-256-cbc", "cbc(aes)", 32, 0},
		{"des-ede3-cbc", "cbc(des3_ede)", 24, 0},
		{"hmac-sha1", "hmac(sha1)", 20, 96},
		{"hmac-sha256", "hmac(sha256)", 32, 128},
	} {
		a, err := CipherAlgorithm(c.name)
		if c.trunc != 0 {
			a, err = AuthAlgorithm(c.name)
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if a.Kernel != c.kernel || a.KeySize != c.key || a.TruncBits != c.trunc {
			t.Errorf("%s: %+v, want kernel %s, key %d, trunc %d", c.name, a, c.kernel, c.key, c.trunc)
		}
	}
	if _, err := CipherAlgorithm("des-cbc"); err == nil {
		t.Error("des-cbc is in the catalog but not a tunnel cipher")
	}
	if _, err := CipherAlgorithm("aes128-cbc"); err == nil || !strings.Contains(err.Error(), `did you mean "aes-128-cbc"`) {
		t.Errorf("a typo: %v, want a suggestion", err)
	}
	if _, err := AuthAlgorithm("hmac-md5"); err == nil {
		t.Error("hmac-md5 accepted for a tunnel")
	}
	if got := strings.Join(Auths(), " "); got != "hmac-sha1 hmac-sha256" {
		t.Errorf("Auths() = %s", got)
	}
}

func TestValidate(t *testing.T) {
	ok := testTunnel("aes-128-cbc", "hmac-sha1", true)
	if err := ok.Validate(); err != nil {
		t.Fatalf("a good tunnel: %v", err)
	}
	if err := mirror(ok, "site-a").Validate(); err != nil {
		t.Fatalf("its mirror: %v", err)
	}
	cases := []struct {
		name  string
		edit  func(*Tunnel)
		wants []string
	}{
		{"no name", func(t *Tunnel) { t.Name = "" }, []string{"no name"}},
		{"same WAN", func(t *Tunnel) { t.Remote = t.Local }, []string{"the same"}},
		{"mixed families", func(t *Tunnel) { t.Remote = netip.MustParseAddr("2001:db8::1") }, []string{"one address family"}},
		{"host bits", func(t *Tunnel) { t.LocalNet = netip.MustParsePrefix("10.1.0.1/24") }, []string{"did you mean 10.1.0.0/24"}},
		{"overlap", func(t *Tunnel) { t.RemoteNet = netip.MustParsePrefix("10.0.0.0/8") }, []string{"overlap"}},
		{"reserved spi", func(t *Tunnel) { t.Out.SPI = 255 }, []string{"SA out: spi 0xff"}},
		{"short key and bad auth", func(t *Tunnel) { t.In.EncKey = t.In.EncKey[:15]; t.In.Auth = "hmac-md5" },
			[]string{"SA in: aes-128-cbc key is 15 bytes, want 16", `authentication "hmac-md5"`}},
		{"esn without window", func(t *Tunnel) { t.Out.ReplayWindow = 0 }, []string{"need a replay window"}},
		{"huge window", func(t *Tunnel) { t.In.ReplayWindow = 40000 }, []string{"at most 32768"}},
		{"wrong SA addresses", func(t *Tunnel) { t.Out.Dst = netip.MustParseAddr("192.0.2.9") }, []string{"want 198.51.100.1 -> 198.51.100.2"}},
	}
	for _, c := range cases {
		tun := testTunnel("aes-128-cbc", "hmac-sha1", true)
		tun.Out.EncKey = bytes.Clone(tun.Out.EncKey)
		c.edit(&tun)
		err := tun.Validate()
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", c.name, err, w)
			}
		}
	}
	// Explicit SA addresses that agree are fine.
	tun := testTunnel("des-ede3-cbc", "hmac-sha256", false)
	tun.Out.Src, tun.Out.Dst = tun.Local, tun.Remote
	if err := tun.Validate(); err != nil {
		t.Errorf("explicit matching SA addresses: %v", err)
	}
}

func TestPolicies(t *testing.T) {
	tun := testTunnel("aes-128-cbc", "hmac-sha1", true)
	out, in, err := tun.resolve()
	if err != nil {
		t.Fatal(err)
	}
	ps := tun.policies(out, in)
	want := []string{
		"out 10.1.0.0/24->10.2.0.0/24 via 198.51.100.1->198.51.100.2 reqid 0xcf0a001",
		"in 10.2.0.0/24->10.1.0.0/24 via 198.51.100.2->198.51.100.1 reqid 0xcf0b001",
		"fwd 10.2.0.0/24->10.1.0.0/24 via 198.51.100.2->198.51.100.1 reqid 0xcf0b001",
	}
	for i, p := range ps {
		got := fmt.Sprintf("%s %s->%s via %s->%s reqid %#x", dirNames[p.dir], p.src, p.dst, p.tunnelSrc, p.tunnelDst, p.reqid)
		if got != want[i] {
			t.Errorf("policy %d: %s, want %s", i, got, want[i])
		}
		if p.priority != 0x1000-48 {
			t.Errorf("policy %d priority %#x", i, p.priority)
		}
	}
}

func TestKernelErrorMessages(t *testing.T) {
	err := &saOpError{"add SA", &KernelError{Errno: unix.ENOENT}}
	wrapped := errors.Join(err)
	if !errors.Is(wrapped, unix.ENOENT) {
		t.Error("the errno is lost in the wrapping")
	}
	if !strings.Contains(err.Error(), "no such file or directory (the kernel could not build the ESP transform") {
		t.Errorf("ENOENT on add SA: %q", err)
	}
	if h := hint(unix.EPROTONOSUPPORT, "socket"); !strings.Contains(h, "xfrm_user") {
		t.Errorf("EPROTONOSUPPORT on socket: %q", h)
	}
	if !gone(&KernelError{Errno: unix.ESRCH}) || gone(&KernelError{Errno: unix.EINVAL}) {
		t.Error("gone: ESRCH is a missing SA, EINVAL is not")
	}
	e := ackError(message{typ: 2, data: []byte{0xea, 0xff, 0xff, 0xff}}) // -22
	if !errors.Is(e, unix.EINVAL) {
		t.Errorf("ack -22: %v", e)
	}
	if ackError(message{typ: 2, data: make([]byte, 20)}) != nil {
		t.Error("ack 0 is not an error")
	}
}
