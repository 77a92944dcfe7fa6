package ocf

import "testing"

func meas(engine string, hw bool, kbps ...float64) Measurement {
	m := Measurement{Engine: engine, Cipher: "aes-128-cbc", Hardware: hw}
	for i, v := range kbps {
		m.Sizes = append(m.Sizes, 16<<(2*i))
		m.KBps = append(m.KBps, v)
	}
	return m
}

func TestDerivePolicyChoice(t *testing.T) {
	sw := meas("go", false, 1000, 1000, 1000, 1000)
	for _, tc := range []struct {
		name     string
		verdicts []Verdict
		hw       []Measurement
		driver   string
		min      int
	}{
		{"no hardware", nil, nil, "", 0},
		{"wins from 256", nil, []Measurement{meas("a", true, 500, 900, 1200, 2000)}, "a", 256},
		{"a loss above a win ends the run", nil, []Measurement{meas("a", true, 2000, 900, 2000, 2000)}, "a", 256},
		{"within the margin is not a win", nil, []Measurement{meas("a", true, 1100, 1100, 1100, 1100)}, "", 0},
		{"smaller threshold wins", nil, []Measurement{meas("a", true, 500, 500, 2000, 9000), meas("b", true, 500, 2000, 2000, 2000)}, "b", 64},
		{"same threshold: faster at the top", nil, []Measurement{meas("a", true, 500, 2000, 2000, 3000), meas("b", true, 500, 2000, 2000, 4000)}, "b", 64},
		{"failed engine never chosen", []Verdict{{Engine: "a", Cipher: "aes-128-cbc", Failed: true, Reason: "wrong bytes"}},
			[]Measurement{meas("a", true, 9000, 9000, 9000, 9000)}, "", 0},
		{"not software-only in software", nil, []Measurement{meas("x", false, 9000, 9000, 9000, 9000)}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DerivePolicy(tc.verdicts, append([]Measurement{sw}, tc.hw...), "go", DefaultMargin)
			got := p.Ciphers["aes-128-cbc"]
			if got.Driver != tc.driver || got.MinHardware != tc.min || got.SoftwareOnly != (tc.driver == "") {
				t.Errorf("got %+v, want driver %q from %d", got, tc.driver, tc.min)
			}
			if err := p.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestDerivePolicyTrustAndFailures(t *testing.T) {
	p := DerivePolicy([]Verdict{
		{Engine: "a", Cipher: "aes-128-cbc", Passed: true},
		{Engine: "b", Cipher: "aes-128-cbc", Passed: true},
		{Engine: "b", Cipher: "des-cbc", Failed: true, Reason: "cross-check 1024 bytes"},
		{Engine: "b", Cipher: "aes-256-cbc", Failed: true, Reason: "later failure"},
		{Engine: "go", Cipher: "aes-128-cbc", Passed: true},
		{Engine: "c", Cipher: "aes-128-cbc"}, // absent
	}, nil, "go", DefaultMargin)
	if len(p.Trusted) != 1 || p.Trusted[0] != "a" {
		t.Errorf("trusted %v, want [a] (b failed, go is the reference, c absent)", p.Trusted)
	}
	if p.Failed["b"] != "des-cbc: cross-check 1024 bytes" {
		t.Errorf("failed %v: want b's first failure", p.Failed)
	}
}

// The margin rule, at its edge: exactly 1+margin times software beats it.
func TestBeatsAndMargin(t *testing.T) {
	for _, tc := range []struct {
		hw, sw, margin float64
		want           bool
	}{
		{1150, 1000, 0.15, true},
		{1149, 1000, 0.15, false},
		{1000, 1000, 0, true},
		{2000, 1000, 1, true},
		{1999, 1000, 1, false},
	} {
		if got := Beats(tc.hw, tc.sw, tc.margin); got != tc.want {
			t.Errorf("Beats(%v, %v, %v) = %v", tc.hw, tc.sw, tc.margin, got)
		}
	}
	for in, want := range map[float64]float64{0: DefaultMargin, -1: DefaultMargin, 0.3: 0.3} {
		if got := Margin(in); got != want {
			t.Errorf("Margin(%v) = %v, want %v", in, got, want)
		}
	}
}

// DeriveOnSoftware takes the one software measurement as the reference,
// whatever it is named.
func TestDeriveOnSoftware(t *testing.T) {
	sw := meas("cbc(aes-generic)", false, 1000, 1000)
	for _, tc := range []struct {
		hw     Measurement
		driver string
	}{
		{meas("a", true, 1200, 1200), "a"},
		{meas("a", true, 1100, 1100), ""},
	} {
		p := DeriveOnSoftware(nil, []Measurement{tc.hw, sw}, DefaultMargin)
		if got := p.Ciphers["aes-128-cbc"].Driver; got != tc.driver {
			t.Errorf("%v against %v: driver %q, want %q (%+v)", tc.hw.KBps, sw.KBps, got, tc.driver, p)
		}
	}
}
