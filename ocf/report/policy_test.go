package report

import (
	"reflect"
	"testing"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
)

// Derive makes the dispatcher's and the kernel's policy from the same
// verdicts: the ESP measurements decide their cipher for the kernel only,
// judged on that cipher's verdicts.
func TestDerive(t *testing.T) {
	rows := []speed.Row{
		{Engine: "go", Cipher: "aes-128-cbc", Cells: []speed.Cell{{Size: 1024, KBps: 5000}}},
		{Engine: "fast_aes", Cipher: "aes-128-cbc", Hardware: true, Cells: []speed.Cell{{Size: 1024, KBps: 90000}}},
		{Engine: "go", Cipher: "des-ede3-cbc", Cells: []speed.Cell{{Size: 1024, KBps: 500}}},
	}
	esp := func(kbps map[string]float64) []ocf.Measurement {
		out := []ocf.Measurement{{Engine: "cbc(aes-generic)", Cipher: "aes-128-cbc", Sizes: []int{1400}, KBps: []float64{4000}}}
		for e, v := range kbps {
			out = append(out, ocf.Measurement{Engine: e, Cipher: "aes-128-cbc", Hardware: true, Sizes: []int{1400}, KBps: []float64{v}})
		}
		return out
	}
	pass := func(engine, cipher string) selftest.Result {
		return selftest.Result{Engine: engine, Cipher: cipher, Status: selftest.Pass}
	}
	for _, tc := range []struct {
		name   string
		tests  []selftest.Result
		esp    []ocf.Measurement
		kernel string // the kernel policy's aes driver
	}{
		{"no ESP: the speed table's choice", []selftest.Result{pass("fast_aes", "aes-128-cbc")}, nil, "fast_aes"},
		{"ESP: its fastest engine", []selftest.Result{pass("fast_aes", "aes-128-cbc"), pass("esp_aes", "aes-128-cbc")},
			esp(map[string]float64{"esp_aes": 9000, "fast_aes": 4100}), "esp_aes"},
		{"ESP: none beats software", []selftest.Result{pass("fast_aes", "aes-128-cbc")}, esp(map[string]float64{"fast_aes": 4500}), ""},
		{"ESP: a failure of another cipher does not count", []selftest.Result{pass("esp_aes", "aes-128-cbc"),
			{Engine: "esp_aes", Cipher: "des-ede3-cbc", Status: selftest.Fail}}, esp(map[string]float64{"esp_aes": 9000}), "esp_aes"},
		{"ESP: a failure of this cipher does", []selftest.Result{{Engine: "esp_aes", Cipher: "aes-128-cbc", Status: selftest.Fail}},
			esp(map[string]float64{"esp_aes": 9000}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Derive(tc.tests, rows, tc.esp, 0)
			if want := ocf.DerivePolicy(Verdicts(tc.tests), Measurements(rows), "go", ocf.DefaultMargin); !reflect.DeepEqual(p.Dispatcher, want) {
				t.Errorf("dispatcher policy %+v, want the speed table's %+v", p.Dispatcher, want)
			}
			if got := p.Kernel.Ciphers["aes-128-cbc"].Driver; got != tc.kernel {
				t.Errorf("kernel aes driver %q, want %q (%+v)", got, tc.kernel, p.Kernel)
			}
			if p.Kernel.Ciphers["des-ede3-cbc"] != p.Dispatcher.Ciphers["des-ede3-cbc"] {
				t.Errorf("des changed: %+v vs %+v", p.Kernel.Ciphers, p.Dispatcher.Ciphers)
			}
			var aesSizes []int
			for _, m := range p.KernelSpeeds {
				if m.Cipher == "aes-128-cbc" {
					aesSizes = append(aesSizes, m.Sizes...)
				}
			}
			wantSize := 1024
			if tc.esp != nil {
				wantSize = 1400
			}
			for _, s := range aesSizes {
				if s != wantSize {
					t.Errorf("kernel aes measurements at %v, want all at %d", aesSizes, wantSize)
					break
				}
			}
		})
	}
}
