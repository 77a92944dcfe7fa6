package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/ocf/fault"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/soft"
	"github.com/ocfw/ocfw/ocf/speed"
)

func row(engine, cipher string, hw bool, kbps ...float64) speed.Row {
	r := speed.Row{Engine: engine, Cipher: cipher, Hardware: hw, Multi: 1}
	for i, v := range kbps {
		r.Cells = append(r.Cells, speed.Cell{Size: speed.Sizes[i], KBps: v, Ops: 1})
	}
	return r
}

func TestDerivePolicy(t *testing.T) {
	sw := row("go", "aes-128-cbc", false, 3600, 4000, 4100, 4200, 4200, 4200)
	// Like the published Geode numbers: loses at 16-64 bytes, wins above.
	geode := row("cbc-aes-geode", "aes-128-cbc", true, 370, 1400, 5100, 13600, 26800, 27000)
	// Wins only at 16384: still a threshold, from there on.
	late := row("cbc-aes-hifn0", "aes-128-cbc", true, 300, 1100, 3000, 4000, 4300, 9000)
	// Faster everywhere but failed its self-test: never used.
	broken := row("safe0", "des-cbc", true, 9000, 9000, 9000, 9000, 9000, 9000)
	swDES := row("go", "des-cbc", false, 3000, 3000, 3000, 3000, 3000, 3000)
	// A MAC with no hardware row at all.
	swMAC := row("go", "hmac-sha1", false, 1000, 2000, 3000, 4000, 5000, 5000)
	tests := []selftest.Result{
		{Engine: "cbc-aes-geode", Cipher: "aes-128-cbc", Status: selftest.Pass},
		{Engine: "cbc-aes-hifn0", Cipher: "aes-128-cbc", Status: selftest.Pass},
		{Engine: "safe0", Cipher: "des-cbc", Status: selftest.Fail, Failure: &selftest.Failure{Case: "cross-check 1024 bytes", Op: "encrypt", Size: 1024, Err: "first difference at byte 3"}},
		{Engine: "go", Cipher: "hmac-sha1", Status: selftest.Pass},
	}
	p := DerivePolicy(tests, []speed.Row{sw, geode, late, broken, swDES, swMAC}, DefaultMargin)
	if got := p.Ciphers["aes-128-cbc"]; got.Driver != "cbc-aes-geode" || got.MinHardware != 256 || got.SoftwareOnly {
		t.Errorf("aes-128-cbc: %+v, want cbc-aes-geode from 256", got)
	}
	if got := p.Ciphers["des-cbc"]; !got.SoftwareOnly {
		t.Errorf("des-cbc with only a failed engine: %+v, want software only", got)
	}
	if got := p.Ciphers["hmac-sha1"]; !got.SoftwareOnly {
		t.Errorf("hmac-sha1: %+v", got)
	}
	if !strings.Contains(p.Failed["safe0"], "des-cbc: cross-check 1024 bytes") {
		t.Errorf("failed: %v", p.Failed)
	}
	if strings.Join(p.Trusted, " ") != "cbc-aes-geode cbc-aes-hifn0" {
		t.Errorf("trusted: %v", p.Trusted)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("derived policy does not validate: %v", err)
	}

	// The margin matters: 10% faster is not enough.
	close := row("x", "aes-128-cbc", true, 3960, 4400, 4510, 4620, 4620, 4620)
	p = DerivePolicy(nil, []speed.Row{sw, close}, DefaultMargin)
	if !p.Ciphers["aes-128-cbc"].SoftwareOnly {
		t.Errorf("10%% faster engine chosen: %+v", p.Ciphers["aes-128-cbc"])
	}
}

func TestNoHardwareMeansSoftwareEverywhere(t *testing.T) {
	var tests []selftest.Result
	var rows []speed.Row
	for _, c := range []string{"aes-128-cbc", "hmac-sha256", "null"} {
		tests = append(tests, selftest.Check(soft.New(), c, selftest.Options{Sizes: []int{16, 64}}))
		rows = append(rows, speed.Measure(soft.New(), c, speed.Options{Duration: 5 * time.Millisecond, Sizes: []int{16, 64}}))
	}
	p := DerivePolicy(tests, rows, DefaultMargin)
	if len(p.Ciphers) != 3 {
		t.Fatalf("ciphers %v", p.Ciphers)
	}
	for c, cp := range p.Ciphers {
		if !cp.SoftwareOnly {
			t.Errorf("%s: %+v", c, cp)
		}
	}
}

func sampleReport(t *testing.T) *Report {
	t.Helper()
	bad := fault.NewCorrupting("cbc-aes-bad0", soft.New(), fault.Sizes(1024))
	r := &Report{Version: Version, Env: HostEnvironment()}
	r.SelfTest = []selftest.Result{
		selftest.Check(soft.New(), "aes-128-cbc", selftest.Options{}),
		selftest.Check(bad, "aes-128-cbc", selftest.Options{}),
		selftest.AbsentResult("cbc-aes-geode", "aes-128-cbc", "no Geode AES device (PCI 1022:2082)"),
	}
	r.Speed = []speed.Row{
		speed.Measure(soft.New(), "aes-128-cbc", speed.Options{Duration: 5 * time.Millisecond}),
		speed.Measure(bad, "aes-128-cbc", speed.Options{Duration: 5 * time.Millisecond}),
	}
	r.Policy = DerivePolicy(r.SelfTest, r.Speed, DefaultMargin)
	return r
}

// TestDevCryptoSpeedApart checks the /dev/crypto speed rows print as
// their own table and survive the JSON.
func TestDevCryptoSpeedApart(t *testing.T) {
	r := sampleReport(t)
	row := speed.Measure(soft.New(), "aes-128-cbc", speed.Options{Duration: 5 * time.Millisecond, Sizes: []int{16, 8192}})
	row.Engine, row.Hardware = "/dev/crypto:cbc-aes-geode", true
	r.DevCryptoSpeed = []speed.Row{row}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "speed through /dev/crypto") || !strings.Contains(text.String(), "/dev/crypto:cbc-aes-geode") {
		t.Errorf("text lacks the /dev/crypto table:\n%s", text.String())
	}
	j, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.DevCryptoSpeed) != 1 || back.DevCryptoSpeed[0].Engine != row.Engine || len(back.DevCryptoSpeed[0].Cells) != 2 {
		t.Errorf("JSON round trip: %+v", back.DevCryptoSpeed)
	}
}

func TestReportTextAndJSON(t *testing.T) {
	r := sampleReport(t)
	if !r.Failed() {
		t.Error("a failed engine does not fail the report")
	}
	if _, ok := r.Policy.Failed["cbc-aes-bad0"]; !ok {
		t.Errorf("policy does not exclude the corrupting engine: %v", r.Policy.Failed)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"self-test: 1 passed, 1 failed, 1 absent", "FAIL   aes-128-cbc  cbc-aes-bad0", "cross-check 1024 bytes", speed.Header, "excluded cbc-aes-bad0"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	j, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	j2, _ := back.JSON()
	if !bytes.Equal(j, j2) {
		t.Error("JSON does not round-trip")
	}
	for _, junk := range []string{"", "{}", "[1,2]", `{"version": 99}`, "not json"} {
		if _, err := Read(strings.NewReader(junk)); err == nil {
			t.Errorf("Read(%q) accepted", junk)
		}
	}
}
