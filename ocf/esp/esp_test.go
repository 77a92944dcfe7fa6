package esp

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/kcrypto"
)

// run is a measurement of the stand-ins: software fastest at MTU size,
// virtio-crypto close behind, the test engine slow (a large delay).
func run() *Result {
	row := func(id, drv string, hw bool, size int, mbps float64, err string) Row {
		return Row{Engine: id, Driver: drv, Hardware: hw, Size: size, MBps: mbps, Packets: 100, Err: err}
	}
	return &Result{Cipher: "aes-128-cbc", Auth: "hmac-sha1", Kernel: "cbc(aes)", Default: "ocfw_testaes_cbc", Rows: []Row{
		row("software", "cbc(aes-fixed-time)", false, 64, 0.20, ""),
		row("software", "cbc(aes-fixed-time)", false, 512, 1.10, ""),
		row("software", "cbc(aes-fixed-time)", false, 1400, 2.00, ""),
		row("virtio-crypto", "virtio_crypto_aes_cbc", true, 64, 0.15, ""),
		row("virtio-crypto", "virtio_crypto_aes_cbc", true, 512, 1.00, ""),
		row("virtio-crypto", "virtio_crypto_aes_cbc", true, 1400, 2.10, ""),
		row("test-aes", "ocfw_testaes_cbc", true, 64, 0.02, ""),
		row("test-aes", "ocfw_testaes_cbc", true, 512, 0.15, ""),
		row("test-aes", "ocfw_testaes_cbc", true, 1400, 0.40, ""),
	}}
}

// with returns r with the MB/s of (engine, size) set, or an error when
// mbps is negative.
func with(r *Result, id string, size int, mbps float64) *Result {
	c := *r
	c.Rows = append([]Row(nil), r.Rows...)
	for i := range c.Rows {
		if c.Rows[i].Engine == id && c.Rows[i].Size == size {
			if mbps < 0 {
				c.Rows[i].Err, c.Rows[i].MBps, c.Rows[i].Packets = "nothing received", 0, 0
			} else {
				c.Rows[i].MBps = mbps
			}
		}
	}
	return &c
}

func TestMeasurements(t *testing.T) {
	ms := Measurements(run(), 1400)
	if len(ms) != 3 {
		t.Fatalf("%d measurements, want 3: %+v", len(ms), ms)
	}
	want := []ocf.Measurement{
		{Engine: "cbc(aes-fixed-time)", Cipher: "aes-128-cbc", Sizes: []int{1400}, KBps: []float64{2000}},
		{Engine: "virtio_crypto_aes_cbc", Cipher: "aes-128-cbc", Hardware: true, Sizes: []int{1400}, KBps: []float64{2100}},
		{Engine: "ocfw_testaes_cbc", Cipher: "aes-128-cbc", Hardware: true, Sizes: []int{1400}, KBps: []float64{400}},
	}
	for i, m := range ms {
		w := want[i]
		if m.Engine != w.Engine || m.Cipher != w.Cipher || m.Hardware != w.Hardware || len(m.Sizes) != 1 || m.Sizes[0] != 1400 || math.Abs(m.KBps[0]-w.KBps[0]) > 1e-9 {
			t.Errorf("measurement %d: %+v, want %+v", i, m, w)
		}
	}
	if all := Measurements(run()); len(all) != 3 || len(all[0].Sizes) != 3 || all[0].Sizes[2] != 1400 {
		t.Errorf("all sizes: %+v", all)
	}
	// An engine with a failed step is left out, whichever size failed.
	if ms := Measurements(with(run(), "virtio-crypto", 64, -1)); len(ms) != 2 || ms[1].Engine != "ocfw_testaes_cbc" {
		t.Errorf("with virtio's 64-byte step failed: %+v", ms)
	}
	// ... but only among the sizes asked for.
	if ms := Measurements(with(run(), "virtio-crypto", 64, -1), 1400); len(ms) != 3 {
		t.Errorf("a failure at another size counted: %+v", ms)
	}
}

func TestChoose(t *testing.T) {
	for _, c := range []struct {
		name   string
		res    *Result
		size   int
		margin float64
		want   string
		err    bool
	}{
		{"virtio faster, but not by the margin: software", run(), 1400, 0, "software", false},
		{"virtio faster by the margin", with(run(), "virtio-crypto", 1400, 2.5), 1400, 0, "virtio-crypto", false},
		{"a smaller margin", run(), 1400, 0.01, "virtio-crypto", false},
		{"both beat software: the faster", with(with(run(), "test-aes", 1400, 3.0), "virtio-crypto", 1400, 2.5), 1400, 0, "test-aes", false},
		{"the fastest failed", with(with(run(), "test-aes", 1400, -1), "virtio-crypto", 1400, 2.5), 1400, 0, "virtio-crypto", false},
		{"small packets: software", run(), 64, 0, "software", false},
		{"no software row", with(run(), "software", 1400, -1), 1400, 0, "", true},
		{"a size not measured", run(), 1000, 0, "", true},
	} {
		got, err := Choose(c.res, c.size, c.margin)
		if (err != nil) != c.err || got.Engine != c.want {
			t.Errorf("%s: %q, %v; want %q (error %v)", c.name, got.Engine, err, c.want, c.err)
		}
	}
}

// The policy from ESP rows drives kcrypto's promotion: the engine ESP
// chose at MTU size becomes the kernel's choice, the slow test engine
// stays below software, whatever the priorities they registered with.
func TestKernelPolicyPromotes(t *testing.T) {
	verdicts := []ocf.Verdict{
		{Engine: "virtio_crypto_aes_cbc", Cipher: "aes-128-cbc", Passed: true},
		{Engine: "ocfw_testaes_cbc", Cipher: "aes-128-cbc", Passed: true},
	}
	hw := []kcrypto.HWEngine{
		{ID: "virtio-crypto", Module: "virtio_crypto", Drivers: map[string]string{"aes-128-cbc": "virtio_crypto_aes_cbc"}},
		{ID: "test-aes", Module: "ocfw_testaes", Drivers: map[string]string{"aes-128-cbc": "ocfw_testaes_cbc"}},
	}
	// /proc/crypto of the test kernel: both stand-ins, the software
	// instance built.
	sk := func(drv, mod string, prio int) kcrypto.Alg {
		return kcrypto.Alg{Name: "cbc(aes)", Driver: drv, Module: mod, Priority: prio, Type: "skcipher", SelfTest: "passed"}
	}
	ci := func(drv, mod string, prio int) kcrypto.Alg {
		return kcrypto.Alg{Name: "aes", Driver: drv, Module: mod, Priority: prio, Type: "cipher", SelfTest: "passed"}
	}
	algs := []kcrypto.Alg{
		sk("ocfw_testaes_cbc", "ocfw_testaes", 300),
		sk("virtio_crypto_aes_cbc", "virtio_crypto", 150),
		ci("aes-fixed-time", "aes_ti", 101),
		ci("aes-generic", "kernel", 100),
		{Name: "__cbc(aes)", Driver: "__cbc-aes-x", Module: "kernel", Priority: 900, Type: "skcipher", Internal: true, SelfTest: "passed"},
		sk("cbc(aes-fixed-time)", "kernel", 101),
	}
	for _, c := range []struct {
		name     string
		res      *Result
		verdicts []ocf.Verdict
		chosen   string // the policy's driver, "" for software only
	}{
		{"virtio wins at MTU", with(run(), "virtio-crypto", 1400, 2.5), verdicts, "virtio_crypto_aes_cbc"},
		{"nothing beats software", run(), verdicts, ""},
		{"the test engine wins but failed its self-test", with(run(), "test-aes", 1400, 9),
			[]ocf.Verdict{verdicts[0], {Engine: "ocfw_testaes_cbc", Cipher: "aes-128-cbc", Failed: true, Reason: "wrong output"}}, ""},
		{"the test engine wins at MTU", with(run(), "test-aes", 1400, 9), verdicts, "ocfw_testaes_cbc"},
	} {
		p := KernelPolicy(c.res, c.verdicts, kcrypto.MTU, 0)
		cp := p.Ciphers["aes-128-cbc"]
		if cp.Driver != c.chosen || (c.chosen == "") != cp.SoftwareOnly {
			t.Errorf("%s: policy %+v, want driver %q", c.name, cp, c.chosen)
			continue
		}
		d := kcrypto.Promotions(kcrypto.Input{Engines: hw, Algs: algs, Policy: p, Speeds: Measurements(c.res, kcrypto.MTU), Ciphers: []string{"aes-128-cbc"}})
		if len(d.Ciphers) != 1 || d.Ciphers[0].Want != c.chosen {
			t.Errorf("%s: decision %+v, want %q", c.name, d.Ciphers, c.chosen)
		}
		// What the kernel picks after the changes: the highest priority.
		prio := map[string]int{}
		for _, a := range algs {
			prio[a.Driver] = a.Priority
		}
		for _, ch := range d.Changes {
			if !ch.Flush {
				prio[ch.Driver] = ch.To
			}
		}
		want := c.chosen
		if want == "" {
			want = "cbc(aes-fixed-time)"
		}
		for _, drv := range []string{"cbc(aes-fixed-time)", "virtio_crypto_aes_cbc", "ocfw_testaes_cbc"} {
			if drv != want && prio[drv] >= prio[want] {
				t.Errorf("%s: %s at %d, not below the choice %s at %d; changes %v", c.name, drv, prio[drv], want, prio[want], d.Changes)
			}
		}
	}
}

func TestWriteTable(t *testing.T) {
	res := with(run(), "test-aes", 64, -1)
	res.Rows[0].CPU = 0.97
	res.Notes = []string{"a note"}
	var b bytes.Buffer
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	lines := strings.Split(out, "\n")
	for _, want := range []string{
		"type                       64 bytes     512 bytes    1400 bytes  engine",
		"aes-128-cbc+hmac-sha1         0.20M         1.10M         2.00M  software (cbc(aes-fixed-time))",
		"aes-128-cbc+hmac-sha1             -         0.15M         0.40M  test-aes (ocfw_testaes_cbc)",
		"aes-128-cbc+hmac-sha1           97%            0%            0%  software (cbc(aes-fixed-time))",
		"The kernel's own choice for cbc(aes): ocfw_testaes_cbc",
		"test-aes at 64 bytes: nothing received",
		"note: a note",
	} {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("no line %q", want)
		}
	}
}
