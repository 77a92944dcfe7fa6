package ocf_test

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/soft"
)

func TestPolicyJSONRoundTrip(t *testing.T) {
	for _, p := range []ocf.Policy{
		{},
		{
			Timeout: ocf.Duration(150 * time.Millisecond),
			Verify:  ocf.VerifyAll,
			Trusted: []string{"cbc-aes-geode"},
			Allow:   []string{"cbc-aes-geode", "cbc-aes-hifn0"},
			Deny:    []string{"cbc-des-hifn0"},
			Failed:  map[string]string{"safe0": "timed out"},
			Ciphers: map[string]ocf.CipherPolicy{
				"aes-128-cbc": {MinHardware: 256, Driver: "cbc-aes-geode"},
				"hmac-sha1":   {SoftwareOnly: true},
			},
		},
		{Timeout: -1, Verify: ocf.VerifyOff},
	} {
		var buf bytes.Buffer
		if err := p.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		got, err := ocf.ReadPolicy(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%v\n%s", err, buf.String())
		}
		if p.Timeout < 0 && got.Timeout >= 0 {
			t.Fatalf("no timeout came back as %v", time.Duration(got.Timeout))
		}
		if p.Timeout < 0 {
			got.Timeout = p.Timeout
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip changed the policy:\n got %+v\nwant %+v\njson %s", got, p, buf.String())
		}
		// Same policy, same bytes.
		var again bytes.Buffer
		got.WriteJSON(&again)
		if !bytes.Equal(again.Bytes(), buf.Bytes()) {
			t.Fatalf("JSON not stable:\n%s\n%s", buf.String(), again.String())
		}
	}
}

func TestPolicyJSONShape(t *testing.T) {
	p, err := ocf.ReadPolicy(strings.NewReader(`{"timeout": "none", "ciphers": {"des-cbc": {"min_hw_bytes": 1024}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Timeout >= 0 || p.Ciphers["des-cbc"].MinHardware != 1024 {
		t.Fatalf("parsed %+v", p)
	}
}

func TestPolicyErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"timeout": 2}`, "duration must be a string"},
		{`{"timeout": "soon"}`, `duration "soon"`},
		{`{"verify": "sometimes"}`, `verify "sometimes"`},
		{`{"ciphers": {"rot13": {}}}`, "rot13"},
		{`{"ciphers": {"aes-128-cbc": {"min_hw_bytes": -1}}}`, "ciphers.aes-128-cbc.min_hw_bytes is -1"},
		{`{"ciphers": {"aes-128-cbc": {"min_hw": 64}}}`, `unknown field "min_hw"`},
		{`{"allow": ["x"], "deny": ["x"]}`, `"x" is in both allow and deny`},
		{`{} {}`, "trailing data"},
		{`[`, "policy:"},
	} {
		_, err := ocf.ReadPolicy(strings.NewReader(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadPolicy(%s) = %v; want an error containing %q", tc.json, err, tc.want)
		}
	}
}

func TestPolicyFileAndRuntimeFailures(t *testing.T) {
	d := newDispatcher(t, ocf.Policy{Ciphers: map[string]ocf.CipherPolicy{"null": {MinHardware: 64}}}, good("hw"))
	if err := d.MarkFailed("hw", "self-test failed"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := ocf.SavePolicyFile(path, d.Policy()); err != nil {
		t.Fatal(err)
	}
	p, err := ocf.LoadPolicyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Failed["hw"] != "self-test failed" || p.Ciphers["null"].MinHardware != 64 {
		t.Fatalf("loaded %+v", p)
	}
	// A dispatcher built from the saved policy does not use the engine.
	d2, err := ocf.NewDispatcher(soft.New(), []ocf.Driver{good("hw")}, p)
	if err != nil {
		t.Fatal(err)
	}
	s := openCipher(t, d2, "null")
	if s.Driver() != "dispatch(go)" || d2.Hardware() {
		t.Fatalf("session %s, Hardware %v: the failed engine is still in use", s.Driver(), d2.Hardware())
	}
	if _, err := ocf.LoadPolicyFile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("loading a missing file succeeded")
	}
}
