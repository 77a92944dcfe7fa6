package boot

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/esp"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
)

// The ESP run measures software and the kernel-API engines whose driver
// passed for the cipher; failed and absent ones are left out.
func TestESPEngines(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := cat.Resolve(boards.Request{Board: "alix2d13", Cards: []string{"virtio-crypto", "testaes"}, Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		tests []selftest.Result
		want  []string
	}{
		{"all pass", []selftest.Result{
			{Engine: "virtio_crypto_aes_cbc", Cipher: "aes-128-cbc", Status: selftest.Pass},
			{Engine: "ocfw_testaes_cbc", Cipher: "aes-128-cbc", Status: selftest.Pass},
			{Engine: "cbc-aes-geode", Cipher: "aes-128-cbc", Status: selftest.Absent},
		}, []string{"software", "virtio-crypto/virtio_crypto_aes_cbc", "testaes/ocfw_testaes_cbc"}},
		{"one fails", []selftest.Result{
			{Engine: "virtio_crypto_aes_cbc", Cipher: "aes-128-cbc", Status: selftest.Pass},
			{Engine: "ocfw_testaes_cbc", Cipher: "aes-128-cbc", Status: selftest.Fail},
		}, []string{"software", "virtio-crypto/virtio_crypto_aes_cbc"}},
		{"passed for another cipher only", []selftest.Result{
			{Engine: "virtio_crypto_aes_cbc", Cipher: "aes-256-cbc", Status: selftest.Pass},
		}, []string{"software"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range espEngines(pl, tc.tests, "aes-128-cbc") {
				if e.Hardware {
					got = append(got, e.ID+"/"+e.Driver)
				} else {
					got = append(got, e.ID)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("engines %q, want %q", got, tc.want)
			}
		})
	}
}

// Every module the run needs must be loaded or built in; DES's only for
// a 3DES tunnel.
func TestESPMissing(t *testing.T) {
	all := ModuleResults{}
	for _, n := range espModules() {
		all = append(all, ModuleResult{Name: n, Status: ModLoaded})
	}
	for _, tc := range []struct {
		name    string
		mods    ModuleResults
		builtin map[string]bool
		cipher  string
		want    []string
	}{
		{"all loaded", all, nil, "aes-128-cbc", nil},
		{"veth missing", without(all, "veth"), nil, "aes-128-cbc", []string{"veth"}},
		{"esp4 built in", without(all, "esp4"), map[string]bool{"esp4": true}, "aes-128-cbc", nil},
		{"no DES for AES", without(all, "des_generic"), nil, "aes-128-cbc", nil},
		{"DES for 3DES", without(all, "des_generic"), nil, "des-ede3-cbc", []string{"des_generic"}},
		{"failed is missing", append(without(all, "xfrm_user"), ModuleResult{Name: "xfrm_user", Status: ModFailed}), nil, "aes-128-cbc", []string{"xfrm_user"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := espMissing(tc.mods, tc.builtin, tc.cipher); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("missing %q, want %q", got, tc.want)
			}
		})
	}
}

func without(rs ModuleResults, name string) ModuleResults {
	var out ModuleResults
	for _, r := range rs {
		if r.Name != name {
			out = append(out, r)
		}
	}
	return out
}

func TestESPAlgorithms(t *testing.T) {
	for _, tc := range []struct {
		site         *site.Site
		cipher, auth string
	}{
		{nil, "aes-128-cbc", "hmac-sha1"},
		{&site.Site{}, "aes-128-cbc", "hmac-sha1"},
		{&site.Site{Tunnels: []site.Tunnel{{Cipher: "aes-256-cbc", Auth: "hmac-sha256"}, {Cipher: "des-ede3-cbc", Auth: "hmac-sha1"}}}, "aes-256-cbc", "hmac-sha256"},
		// An IKEv2 tunnel: the first of its ESP proposals, or the default ones.
		{&site.Site{Tunnels: []site.Tunnel{{Keying: "ikev2", ESPProposals: []string{"3des-aes128-sha1"}}}}, "des-ede3-cbc", "hmac-sha1"},
		{&site.Site{Tunnels: []site.Tunnel{{PSK: "a-b.psk"}}}, "aes-128-cbc", "hmac-sha256"},
	} {
		if c, a := espAlgorithms(tc.site); c != tc.cipher || a != tc.auth {
			t.Errorf("%+v: %s+%s, want %s+%s", tc.site, c, a, tc.cipher, tc.auth)
		}
	}
}

// With ESP rows the promotion ranks on them at MTU size for the ESP
// cipher — the policy's driver too, since kcrypto puts it first — and
// on the speed table for the others; without, on the speed table.
func TestESPChoiceInput(t *testing.T) {
	tests := []selftest.Result{
		{Engine: "virtio_crypto_aes_cbc", Cipher: "aes-128-cbc", Status: selftest.Pass},
		{Engine: "ocfw_testaes_cbc", Cipher: "aes-128-cbc", Status: selftest.Pass},
	}
	rows := []speed.Row{
		{Engine: "ocfw_testaes_cbc", Cipher: "aes-128-cbc", Hardware: true, Cells: []speed.Cell{{Size: 1024, KBps: 90000}}},
		{Engine: "virtio_crypto_aes_cbc", Cipher: "aes-128-cbc", Hardware: true, Cells: []speed.Cell{{Size: 1024, KBps: 1000}}},
		{Engine: "go", Cipher: "aes-128-cbc", Cells: []speed.Cell{{Size: 1024, KBps: 5000}}},
		{Engine: "go", Cipher: "des-ede3-cbc", Cells: []speed.Cell{{Size: 1024, KBps: 500}}},
	}
	res := &esp.Result{Cipher: "aes-128-cbc", Auth: "hmac-sha1", Kernel: "cbc(aes)", Rows: []esp.Row{
		{Engine: esp.Software, Driver: "cbc(aes-fixed-time)", Size: kcrypto.MTU, MBps: 4},
		{Engine: "virtio-crypto", Driver: "virtio_crypto_aes_cbc", Hardware: true, Size: kcrypto.MTU, MBps: 9},
		{Engine: "testaes", Driver: "ocfw_testaes_cbc", Hardware: true, Size: kcrypto.MTU, MBps: 1},
	}}
	base := report.Report{SelfTest: tests, Speed: rows,
		Policy: ocf.Policy{Ciphers: map[string]ocf.CipherPolicy{"aes-128-cbc": {Driver: "ocfw_testaes_cbc", MinHardware: 64}}}}
	for _, tc := range []struct {
		name       string
		esp        *report.ESP
		wantDriver string
		wantESP    bool
	}{
		{"no esp", nil, "ocfw_testaes_cbc", false},
		{"esp on speed basis", &report.ESP{Result: res, Basis: report.BasisSpeed, Why: "x"}, "ocfw_testaes_cbc", false},
		{"esp", &report.ESP{Result: res, Basis: report.BasisESP}, "virtio_crypto_aes_cbc", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.ESP = tc.esp
			p, ms := espChoiceInput(&r)
			if got := p.Ciphers["aes-128-cbc"].Driver; got != tc.wantDriver {
				t.Errorf("policy driver %q, want %q", got, tc.wantDriver)
			}
			if base.Policy.Ciphers["aes-128-cbc"].Driver != "ocfw_testaes_cbc" {
				t.Error("the report's own policy was changed")
			}
			var aes, des int
			for _, m := range ms {
				switch m.Cipher {
				case "aes-128-cbc":
					aes++
					if tc.wantESP && (len(m.Sizes) != 1 || m.Sizes[0] != kcrypto.MTU) {
						t.Errorf("aes measurement not from ESP at MTU: %+v", m)
					}
				case "des-ede3-cbc":
					des++
				}
			}
			if aes != 3 || des != 1 {
				t.Errorf("%d aes and %d des measurements, want 3 and 1: %+v", aes, des, ms)
			}
			if tc.wantESP && !strings.Contains(ms[len(ms)-1].Engine, "_") {
				t.Errorf("ESP measurements not named by driver: %+v", ms)
			}
		})
	}
}
