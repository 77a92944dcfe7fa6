package boards

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/plan"
)

func embeddedT(t *testing.T) *Catalog {
	t.Helper()
	c, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func routeList(pc plan.Cipher) string {
	var d []string
	for _, r := range pc.Routes {
		s := r.Driver
		if r.Hardware {
			s += "*"
		}
		d = append(d, s)
	}
	return strings.Join(d, " ")
}

func TestResolveRoutes(t *testing.T) {
	cases := []struct {
		board  string
		cards  []string
		cipher string
		want   string
	}{
		{"alix2d13", []string{"vpn1411"}, "aes-128-cbc", "cbc-aes-geode* cbc-aes-hifn0* cbc(aes-generic) go"},
		// The Geode does only 128-bit keys in hardware: the Hifn goes first.
		{"alix2d13", []string{"vpn1411"}, "aes-256-cbc", "cbc-aes-hifn0* cbc-aes-geode cbc(aes-generic) go"},
		{"alix2d13", nil, "aes-256-cbc", "cbc-aes-geode cbc(aes-generic) go"},
		{"alix2d13", []string{"vpn1411"}, "hmac-sha1", "hmac(sha1-generic) go"},
		{"net5501", []string{"vpn1401", "vpn1411"}, "des-ede3-cbc", "cbc-3des-hifn0* cbc-3des-hifn1* cbc(des3_ede-generic) go"},
		{"net5501", []string{"safenet1141"}, "hmac-sha1", "safe0* hmac(sha1-generic) go"},
		{"avila-gw2348", []string{"vpn1411", "vpn1411"}, "aes-192-cbc", "cbc(aes)-ixp4xx* cbc-aes-hifn0* cbc-aes-hifn1* cbc(aes-generic) go"},
		{"nslu2", nil, "null", "ecb-cipher_null go"},
	}
	c := embeddedT(t)
	for _, tc := range cases {
		p, err := c.Resolve(Request{Board: tc.board, Cards: tc.cards})
		if err != nil {
			t.Fatalf("%s %v: %v", tc.board, tc.cards, err)
		}
		found := false
		for _, pc := range p.Ciphers {
			if pc.Cipher == tc.cipher {
				found = true
				if got := routeList(pc); got != tc.want {
					t.Errorf("%s %v %s: engines %q, want %q", tc.board, tc.cards, tc.cipher, got, tc.want)
				}
			}
		}
		if !found {
			t.Errorf("%s: no %s in plan", tc.board, tc.cipher)
		}
	}
}

func TestResolveTargets(t *testing.T) {
	c := embeddedT(t)
	cases := []struct {
		board, env, console, boot string
	}{
		{"alix2d13", "GOOS=linux GOARCH=386 CGO_ENABLED=0 GO386=softfloat", "console=ttyS0,38400n8", plan.BootBIOSCF},
		{"net5501", "GOOS=linux GOARCH=386 CGO_ENABLED=0 GO386=softfloat", "console=ttyS0,19200n8", plan.BootBIOSCF},
		{"nslu2", "GOOS=linux GOARCH=arm CGO_ENABLED=0 GOARM=5", "console=ttyS0,115200n8", plan.BootRedBoot},
		{"gw2348-4", "GOOS=linux GOARCH=arm CGO_ENABLED=0 GOARM=5", "console=ttyS0,115200n8", plan.BootRedBoot},
	}
	for _, tc := range cases {
		p, err := c.Resolve(Request{Board: tc.board})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(p.Go.Env(), " "); got != tc.env {
			t.Errorf("%s: go env %q, want %q", tc.board, got, tc.env)
		}
		if p.Console.KernelArg != tc.console || p.Boot != tc.boot {
			t.Errorf("%s: console %q boot %q", tc.board, p.Console.KernelArg, p.Boot)
		}
	}
}

func TestResolveModules(t *testing.T) {
	c := embeddedT(t)
	p, err := c.Resolve(Request{Board: "alix2d13", Cards: []string{"vpn1411"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range p.Modules {
		names = append(names, m.Name)
	}
	// Crypto first, then the ports' NIC driver, QEMU's NIC (x86 boards),
	// what the router's firewall, NAT and LAN bridge need, and its IPsec
	// tunnels (des_generic once, where it comes first).
	router := " via_rhine e1000 crc32c_generic libcrc32c nfnetlink nf_tables nft_objref nf_defrag_ipv4 nf_defrag_ipv6 nf_conntrack nft_ct nf_nat nft_chain_nat nft_nat nft_masq nft_limit nft_fib nft_fib_ipv4 nft_fib_ipv6 nft_fib_inet bridge" +
		" ctr sha512_generic drbg cbc hmac sha1_generic sha256_generic"
	// veth: the boot's ESP run (optional: a kernel without it still
	// boots and routes).
	// cryptodev: /dev/crypto (cryptodev-linux), built by ocfw build, for
	// x86 plans with a hardware engine (the Geode's, here).
	// Last, the Geode's watchdog (the CS5536's MFGPT, through its MFD
	// driver) and QEMU's: each optional, and only the one whose device
	// is there loads.
	ipsec := " xfrm_algo xfrm_user esp4 esp6 authenc authencesn echainiv seqiv veth cryptodev cs5535_mfd cs5535_mfgpt geodewdt i6300esb"
	if got, want := strings.Join(names, " "), "af_alg algif_skcipher algif_hash crypto_user des_generic aes_ti geode_aes hifn_795x"+router+ipsec; got != want {
		t.Errorf("modules %q, want %q", got, want)
	}
	// Only AES: no hash socket, no DES.
	p, _ = c.Resolve(Request{Board: "alix2d13", Ciphers: []string{"aes-128-cbc"}})
	names = nil
	for _, m := range p.Modules {
		names = append(names, m.Name)
	}
	if got, want := strings.Join(names, " "), "af_alg algif_skcipher crypto_user aes_ti geode_aes"+router+" des_generic"+ipsec; got != want {
		t.Errorf("aes-only modules %q, want %q", got, want)
	}
	watchdog := map[string]bool{"cs5535_mfd": true, "cs5535_mfgpt": true, "geodewdt": true, "i6300esb": true}
	for _, m := range p.Modules {
		if m.Optional != (m.Name == "aes_ti" || m.Name == "veth" || watchdog[m.Name]) {
			t.Errorf("%s optional %v: only aes_ti, the ESP run's veth and the watchdogs are (a kernel without them still boots)", m.Name, m.Optional)
		}
		if m.IfDevice != watchdog[m.Name] {
			t.Errorf("%s if_device %v: only the watchdogs may find no device", m.Name, m.IfDevice)
		}
	}
	// The stand-ins load after the AF_ALG sockets and crypto_user, the
	// test module last of the crypto modules.
	p, err = c.Resolve(Request{Board: "alix2d13", Cards: []string{"virtio-crypto", "testaes"}, Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, m := range p.Modules {
		names = append(names, m.Name)
	}
	if got, want := strings.Join(names, " "), "af_alg algif_skcipher crypto_user aes_ti geode_aes virtio_pci virtio_crypto ocfw_testaes"+router+" des_generic"+ipsec; got != want {
		t.Errorf("stand-ins' modules %q, want %q", got, want)
	}
	// ARM: crypto_user, no aes_ti (the kernel has its own ARM AES).
	p, err = c.Resolve(Request{Board: "nslu2", Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, m := range p.Modules {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, " "); !strings.HasPrefix(got, "af_alg algif_skcipher crypto_user ixp4xx_crypto") || strings.Contains(got, "aes_ti") {
		t.Errorf("nslu2 modules %q", got)
	}
	// SafeNet: out-of-tree OCF modules, and the plan says so.
	p, err = c.Resolve(Request{Board: "net5501", Cards: []string{"safenet1141"}})
	if err != nil {
		t.Fatal(err)
	}
	var oot []string
	for _, m := range p.Modules {
		if m.OutOfTree {
			oot = append(oot, m.Name)
		}
	}
	if strings.Join(oot, " ") != "ocf cryptodev safe" {
		t.Errorf("out-of-tree modules %v", oot)
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "OCF") || !strings.Contains(strings.Join(p.Notes, "\n"), "/dev/crypto") {
		t.Errorf("notes do not say SafeNet needs an OCF /dev/crypto kernel: %q", p.Notes)
	}
}

func TestResolveErrors(t *testing.T) {
	c := embeddedT(t)
	cases := []struct {
		name  string
		req   Request
		input string // the request's field and value at fault
		want  []string
	}{
		{"unknown board", Request{Board: "alx2d13"}, "board alx2d13", []string{`unknown board "alx2d13"`, `did you mean "alix2d13"?`}},
		{"unknown card", Request{Board: "alix2d13", Cards: []string{"vpn-1411"}}, "card vpn-1411", []string{`unknown card "vpn-1411"`, `did you mean "vpn1411"?`}},
		{"unknown cipher", Request{Board: "alix2d13", Ciphers: []string{"aes-128-cbd"}}, "cipher aes-128-cbd", []string{`did you mean "aes-128-cbc"?`}},
		{"unknown cipher shortened", Request{Board: "alix2d13", Ciphers: []string{"aes256"}}, "cipher aes256", []string{`did you mean "aes-256-cbc"?`}},
		{"unknown require-hw", Request{Board: "alix2d13", RequireHW: []string{"sha1"}}, "require-hw sha1", []string{`unknown cipher "sha1"`}},
		{"no slot of that form", Request{Board: "nslu2", Cards: []string{"vpn1401"}}, "card vpn1401", []string{"PCI card", "nslu2 has no expansion slots"}},
		{"wrong form suggests other card", Request{Board: "alix2d13", Cards: []string{"vpn1401"}}, "card vpn1401", []string{"alix2d13 has 1 mini-PCI slot(s)", "vpn1411, a mini-PCI card that fits"}},
		{"more cards than slots", Request{Board: "alix2d13", Cards: []string{"vpn1411", "vpn1411"}}, "card vpn1411", []string{"card 2 (vpn1411) needs a mini-PCI slot", "taken by earlier cards"}},
		{"five cards on avila", Request{Board: "avila-gw2348", Cards: []string{"vpn1411", "vpn1411", "vpn1411", "vpn1411", "vpn1411"}}, "card vpn1411", []string{"card 5"}},
		{"require-hw geode aes-256", Request{Board: "alix2d13", RequireHW: []string{"aes-256-cbc"}}, "require-hw aes-256-cbc",
			[]string{"no selected engine on alix2d13 does aes-256-cbc in hardware", "geode-aes does only 128-bit keys", "fits: vpn1411"}},
		{"stand-in on an ARM board", Request{Board: "nslu2", Cards: []string{"virtio-crypto"}}, "card virtio-crypto",
			[]string{"exists only in QEMU runs", "only the x86 boards", "not nslu2"}},
		{"stand-in twice", Request{Board: "alix2d13", Cards: []string{"testaes", "testaes"}}, "card testaes", []string{"testaes given twice"}},
		{"require-hw hmac on hifn", Request{Board: "alix2d13", Cards: []string{"vpn1411"}, RequireHW: []string{"hmac-sha256"}}, "require-hw hmac-sha256",
			[]string{"does hmac-sha256 in hardware", "fits none"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Resolve(tc.req)
			var input, msg string
			var re *RequestError
			var hw *RequireHWError
			switch {
			case errors.As(err, &hw):
				input = "require-hw " + hw.Cipher
				msg = hw.Problem() + "; fits none"
				if len(hw.Fits) > 0 {
					msg = hw.Problem() + "; fits: " + strings.Join(hw.Fits, ", ")
				}
			case errors.As(err, &re):
				input, msg = re.Field+" "+re.Value, re.Msg
			default:
				t.Fatalf("err = %v (%T), want a RequestError or RequireHWError", err, err)
			}
			if input != tc.input {
				t.Errorf("input %q, want %q", input, tc.input)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if strings.Contains(err.Error(), "--") {
				t.Errorf("error %q names a flag: the CLI words it", err)
			}
		})
	}
}

func TestPlanJSONDeterministic(t *testing.T) {
	c := embeddedT(t)
	a, err := c.Resolve(Request{Board: "net5501", Cards: []string{"vpn1401", "vpn1411"}, Ciphers: []string{"hmac-sha1", "aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Resolve(Request{Board: "net5501", Cards: []string{"vpn1401", "vpn1411"}, Ciphers: []string{"aes-128-cbc", "hmac-sha1", "aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := a.JSON()
	jb, _ := b.JSON()
	if !bytes.Equal(ja, jb) {
		t.Errorf("cipher flag order or repeats changed the plan:\n%s\n%s", ja, jb)
	}
	if len(a.Ciphers) != 2 || a.Ciphers[0].Cipher != "aes-128-cbc" {
		t.Errorf("ciphers %+v", a.Ciphers)
	}
}

// The stand-ins take no slot: with both of them the ALIX's one mini-PCI
// slot still takes a Hifn card. Their engines come with their modules
// (virtio_crypto after its bus driver; the test module out of tree), and
// the notes say what they are.
func TestResolveStandIns(t *testing.T) {
	c := embeddedT(t)
	p, err := c.Resolve(Request{Board: "alix2d13", Cards: []string{"virtio-crypto", "vpn1411", "testaes"}})
	if err != nil {
		t.Fatal(err)
	}
	var cards []string
	for _, pc := range p.Cards {
		cards = append(cards, pc.Name+"@"+pc.Slot)
	}
	if got := strings.Join(cards, " "); got != "virtio-crypto@qemu vpn1411@minipci0 testaes@qemu" {
		t.Errorf("cards %s", got)
	}
	var engines []string
	for _, e := range p.Engines {
		engines = append(engines, e.ID+" ("+e.From+")")
	}
	if got, want := strings.Join(engines, ", "), "geode-aes (on-chip), virtio-crypto (card virtio-crypto (QEMU stand-in, no slot)), "+
		"hifn-795x (card vpn1411 in minipci0), testaes (card testaes (QEMU stand-in, no slot)), kernel-soft (software), go-soft (software)"; got != want {
		t.Errorf("engines\n got %s\nwant %s", got, want)
	}
	var mods []string
	for _, m := range p.Modules {
		if m.OutOfTree {
			mods = append(mods, m.Name+"(oot)")
		} else {
			mods = append(mods, m.Name)
		}
	}
	if got := strings.Join(mods, " "); !strings.Contains(got, "geode_aes virtio_pci virtio_crypto hifn_795x ocfw_testaes(oot) ") {
		t.Errorf("modules %s", got)
	}
	for _, pc := range p.Ciphers {
		if pc.Cipher == "aes-256-cbc" {
			if got := routeList(pc); got != "cbc-aes-hifn0* ocfw_testaes_cbc* virtio_crypto_aes_cbc* cbc-aes-geode cbc(aes-generic) go" {
				t.Errorf("aes-256-cbc routes %s", got)
			}
		}
	}
	notes := strings.Join(p.Notes, "\n")
	for _, w := range []string{"virtio-crypto is a QEMU stand-in: ocfw run and ocfw try attach", "testaes is ocfw's test engine", "ocfw_testaes module built for the image's kernel, which ocfw build compiles"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
	// Without them, nothing of them is in the plan.
	p, _ = c.Resolve(Request{Board: "alix2d13"})
	for _, m := range p.Modules {
		if m.Name == "virtio_crypto" || m.Name == "virtio_pci" || m.Name == "ocfw_testaes" {
			t.Errorf("plan without stand-ins loads %s", m.Name)
		}
	}
}

// The stand-in plan keeps the board's userland, ciphers and budget, takes
// the rpi kernel and its ARM crypto, drops the drivers the stand-in
// cannot have and says why the board's engines are absent; x86 boards
// have no stand-in.
func TestResolveStandIn(t *testing.T) {
	c := embeddedT(t)
	board, err := c.Resolve(Request{Board: "nslu2"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Resolve(Request{Board: "nslu2", StandIn: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Boot != plan.BootQEMUARM || p.StandIn == nil || p.StandIn.Machine != "raspi1ap" || p.Kernel.Package != "linux-image-rpi" || p.Kernel.Arch != "armel" {
		t.Fatalf("stand-in plan: boot %s, stand-in %+v, kernel %+v", p.Boot, p.StandIn, p.Kernel)
	}
	if p.Go != board.Go || p.Image.InitramfsBudgetKB != board.Image.InitramfsBudgetKB || len(p.Ciphers) != len(board.Ciphers) || p.Board != "nslu2" {
		t.Errorf("the stand-in changed the board's target, budget or ciphers: %+v %+v", p.Go, p.Image)
	}
	if !strings.Contains(p.StandIn.Cmdline, "initcall_blacklist=bcm2835_power_driver_init") || !strings.HasPrefix(p.StandIn.Cmdline, "console=ttyAMA0") {
		t.Errorf("cmdline %q", p.StandIn.Cmdline)
	}
	if len(p.StandIn.Limits) < 5 {
		t.Errorf("limits: %q", p.StandIn.Limits)
	}
	var mods []string
	for _, m := range p.Modules {
		mods = append(mods, m.Name)
	}
	got := strings.Join(mods, " ")
	for _, want := range []string{"af_alg", "algif_skcipher", "algif_hash", "aes_arm", "sha1_arm", "nf_tables"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("modules %s lack %s", got, want)
		}
	}
	for _, gone := range []string{"ixp4xx_crypto", "ixp4xx_eth"} {
		if strings.Contains(got, gone) {
			t.Errorf("modules %s keep %s, which the stand-in kernel lacks", got, gone)
		}
	}
	for _, e := range p.Engines {
		switch {
		case e.Hardware && !strings.Contains(e.Absent, "stand-in"):
			t.Errorf("hardware engine %s without the stand-in's reason: %q", e.ID, e.Absent)
		case !e.Hardware && e.Absent != "":
			t.Errorf("software engine %s absent: %q", e.ID, e.Absent)
		}
	}
	if board.StandIn != nil || board.Engines[0].Absent != "" {
		t.Error("the board's own plan changed")
	}
	// An Avila's cards have no bus on the stand-in either.
	av, err := c.Resolve(Request{Board: "avila-gw2348", Cards: []string{"vpn1411"}, StandIn: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range av.Engines {
		if e.Hardware && !strings.Contains(e.Absent, "stand-in") {
			t.Errorf("avila %s: %q", e.ID, e.Absent)
		}
	}
	// Its ports are the stand-in's USB Ethernet cards, in port order.
	var ports []string
	for _, pt := range av.Ports {
		ports = append(ports, pt.Name+":"+pt.Driver+":"+pt.Interface+":"+pt.PCI+pt.Platform)
	}
	if got := strings.Join(ports, " "); got != "wan:cdc_ether:usb0: lan:cdc_ether:usb1:" {
		t.Errorf("avila stand-in ports: %s", got)
	}
	var avMods []string
	for _, m := range av.Modules {
		avMods = append(avMods, m.Name)
	}
	if !slices.Contains(avMods, "cdc_ether") || slices.Contains(avMods, "ixp4xx_eth") {
		t.Errorf("avila stand-in modules: %v", avMods)
	}
	if all := strings.Join(av.StandIn.Limits, "\n"); !strings.Contains(all, "wan usb0, lan usb1") {
		t.Errorf("avila stand-in limits do not name the ports:\n%s", all)
	}
	_, err = c.Resolve(Request{Board: "alix2d13", StandIn: true})
	var re *RequestError
	if !errors.As(err, &re) || re.Field != "stand-in" || !strings.Contains(err.Error(), "x86") {
		t.Errorf("alix2d13 --stand-in: %v", err)
	}
}

// cryptodev-linux's module is planned, out of tree, for x86 plans with a
// hardware engine behind the kernel's crypto API, and for no ARM plan
// (no IXP4xx kernel headers to build it with).
func TestResolveDevCrypto(t *testing.T) {
	c := embeddedT(t)
	for _, tc := range []struct {
		req  Request
		want bool
	}{
		{Request{Board: "alix2d13"}, true},
		{Request{Board: "alix2d13", Cards: []string{"vpn1411"}}, true},
		{Request{Board: "nslu2"}, false},
	} {
		p, err := c.Resolve(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		var got *plan.Module
		for i, m := range p.Modules {
			if m.Name == catalog.DevCryptoModule {
				got = &p.Modules[i]
			}
		}
		if (got != nil) != tc.want || (got != nil && (!got.OutOfTree || got.Optional)) {
			t.Errorf("%s %v: cryptodev module %+v, want planned %v (out of tree)", tc.req.Board, tc.req.Cards, got, tc.want)
		}
	}
}
