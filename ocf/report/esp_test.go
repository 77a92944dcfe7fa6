package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/ocf/esp"
)

// The ESP section round-trips through JSON and the text report shows the
// table and the engine choice's basis, with why when it is not ESP.
func TestESPSection(t *testing.T) {
	res := &esp.Result{Cipher: "aes-128-cbc", Auth: "hmac-sha1", Kernel: "cbc(aes)", Default: "cbc(aes-fixed-time)",
		Rows: []esp.Row{
			{Engine: esp.Software, Driver: "cbc(aes-fixed-time)", Size: 1400, MBps: 4.5, CPU: 1, Millis: 500},
			{Engine: "virtio-crypto", Driver: "virtio_crypto_aes_cbc", Hardware: true, Size: 1400, MBps: 9.25, CPU: 0.5, Millis: 500},
		}}
	for _, tc := range []struct {
		name string
		esp  *ESP
		want []string
	}{
		{"on esp", &ESP{Result: res, Basis: BasisESP}, []string{"virtio_crypto_aes_cbc", "9.25", "engine choice basis: the ESP rows above"}},
		{"on speed", &ESP{Basis: BasisSpeed, Why: "no ESP modules in this kernel"},
			[]string{"ESP throughput: not measured", "engine choice basis: the speed table (AF_ALG), not ESP: no ESP modules in this kernel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Version: Version, ESP: tc.esp}
			j, err := r.JSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Read(bytes.NewReader(j))
			if err != nil {
				t.Fatal(err)
			}
			if back.ESP == nil || back.ESP.Basis != tc.esp.Basis || back.ESP.Why != tc.esp.Why ||
				(tc.esp.Result != nil && (back.ESP.Result == nil || len(back.ESP.Rows) != len(res.Rows) || back.ESP.Rows[1].MBps != 9.25)) {
				t.Errorf("does not round-trip: %+v\n%s", back.ESP, j)
			}
			if !strings.Contains(string(j), `"esp": {`) {
				t.Errorf("no esp field:\n%s", j)
			}
			var b bytes.Buffer
			if err := back.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("text lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
