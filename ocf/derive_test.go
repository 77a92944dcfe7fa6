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
