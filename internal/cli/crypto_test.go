package cli

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/speed"
)

func TestSelftestHost(t *testing.T) {
	out, errs, code := ocfw(t, "selftest")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "self-test: 9 passed, 0 failed") {
		t.Errorf("Go software did not pass every cipher:\n%s", out)
	}
}

// TestSelftestFull checks --full runs every CAVP vector and the default
// the boot's subset (one per file), each in both directions.
func TestSelftestFull(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, " 20 known answers"},
		{[]string{"--full"}, " 598 known answers"},
	} {
		out, errs, code := ocfw(t, append([]string{"selftest", "--cipher", "aes-128-cbc"}, tc.args...)...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want %q:\n%s\n%s", tc.args, code, tc.want, out, errs)
		}
	}
}

func TestSelftestCatchesFaultyEngines(t *testing.T) {
	cases := []struct {
		inject string
		want   string
	}{
		{"corrupt:4096", "FAIL   aes-256-cbc  test-corrupt           cross-check 4096 bytes"},
		{"fail:64", "FAIL   aes-256-cbc  test-fail              SP 800-38A F.2.5/F.2.6 CBC-AES256: encrypt of 64 bytes: fault: injected"},
		{"hang:1024", "timed out after 300ms"},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		rep := filepath.Join(dir, "r.json")
		out, errs, code := ocfw(t, "selftest", "--cipher", "aes-256-cbc", "--inject", tc.inject, "--timeout", "300ms", "-o", rep)
		if code == 0 {
			t.Errorf("%s: exit 0", tc.inject)
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s: output lacks %q:\n%s", tc.inject, tc.want, out)
		}
		if !strings.Contains(errs, "self-test failed for 1 (engine, cipher) pair(s)") {
			t.Errorf("%s: stderr %q", tc.inject, errs)
		}
		// The policy excludes the faulty engine.
		out, _, code = ocfw(t, "policy", rep)
		if code != 0 || !strings.Contains(out, "excluded test-") {
			t.Errorf("%s: policy does not exclude it:\n%s", tc.inject, out)
		}
	}
	_, errs, code := ocfw(t, "selftest", "--inject", "melt:5")
	if code == 0 || !strings.Contains(errs, "want corrupt, fail or hang") {
		t.Errorf("bad --inject: %d %q", code, errs)
	}
}

func TestSpeedAndReport(t *testing.T) {
	dir := t.TempDir()
	rep := filepath.Join(dir, "speed.json")
	out, errs, code := ocfw(t, "speed", "--cipher", "aes-128-cbc", "--seconds", "0.2", "-o", rep)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, speed.Header) || !strings.Contains(out, "type               16 bytes") {
		t.Errorf("not the openssl speed table:\n%s", out)
	}
	data, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Speed) != 1 || len(r.Speed[0].Cells) != 6 || r.Speed[0].Engine != "go" {
		t.Errorf("speed rows: %+v", r.Speed)
	}
	if r.Env.Kernel == "" || r.Env.GOARCH == "" {
		t.Errorf("environment: %+v", r.Env)
	}
	out, _, code = ocfw(t, "speed", "--cipher", "hmac-sha1", "--seconds", "0.05", "--json")
	var back map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &back) != nil || back["speed"] == nil {
		t.Errorf("speed --json does not parse back: %q", out)
	}

	svg := filepath.Join(dir, "chart.svg")
	out, errs, code = ocfw(t, "report", rep, "--reference", "-o", svg)
	if code != 0 || !strings.Contains(out, "self-test: 1 passed") {
		t.Fatalf("report: exit %d %q %q", code, out, errs)
	}
	f, err := os.Open(svg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Errorf("chart is not well-formed SVG: %v", err)
			}
			break
		}
	}
	_, errs, code = ocfw(t, "report", rep, "-o", filepath.Join(dir, "chart.png"))
	if code == 0 || !strings.Contains(errs, "ending in .svg") {
		t.Errorf("png: %d %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "chart.png")); err == nil {
		t.Error("a refused chart left a file behind")
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"hello": 1}`), 0o644)
	_, errs, code = ocfw(t, "report", bad, "-o", svg, "--force")
	if code == 0 || !strings.Contains(errs, bad) {
		t.Errorf("bad report: %d %q", code, errs)
	}
}

func TestSelftestBoardPlan(t *testing.T) {
	// On a host the Geode and Hifn engines are absent, which is not a failure.
	out, errs, code := ocfw(t, "selftest", "--board", "alix2d13", "--card", "vpn1411", "--cipher", "aes-128-cbc")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	for _, w := range []string{"ABSENT aes-128-cbc  cbc-aes-geode", "ABSENT aes-128-cbc  cbc-aes-hifn0", "PASS   aes-128-cbc  go"} {
		if !strings.Contains(out, w) {
			t.Errorf("lacks %q:\n%s", w, out)
		}
	}
}
