package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/ocf/kcrypto"
)

func sampleChoice() *EngineChoice {
	return &EngineChoice{
		Ciphers: []string{"aes-128-cbc"},
		Size:    kcrypto.MTU,
		Demote: &kcrypto.Outcome{Phase: "demote-hardware",
			Changes: []kcrypto.Change{
				{Driver: "ocfw_testaes_cbc", Name: "cbc(aes)", From: 300, To: 1, Reason: "hardware engine testaes not yet proven"},
				{Driver: "virtio_crypto_aes_cbc", Name: "cbc(aes)", From: 150, To: 1, Reason: "hardware engine virtio-crypto not yet proven"},
			},
			Ciphers: []kcrypto.Choice{{Cipher: "aes-128-cbc", Kernel: "cbc(aes)", Why: "hardware stays below software", Driver: "cbc(aes-fixed-time)", Priority: 101}},
			Notes:   []string{"built the software cbc(aes) instance cbc(aes-fixed-time)"}},
		Promote: &kcrypto.Outcome{Phase: "promote",
			Changes: []kcrypto.Change{{Driver: "virtio_crypto_aes_cbc", Name: "cbc(aes)", From: 1, To: 201, Reason: "the policy's choice"}},
			Kept:    []kcrypto.Change{{Driver: "ocfw_testaes_cbc", Name: "cbc(aes)", From: 1, To: 1, Reason: "failed its self-test (wrong output at 1024 bytes): below software"}},
			Ciphers: []kcrypto.Choice{{Cipher: "aes-128-cbc", Kernel: "cbc(aes)", Want: "virtio_crypto_aes_cbc", Why: "the policy chose virtio_crypto_aes_cbc",
				Driver: "virtio_crypto_aes_cbc", Priority: 201, Hardware: true}}},
	}
}

// The engine choice section says, per cipher, what the kernel resolves
// and why, and every demotion with its reason; the JSON keeps it whole.
func TestEngineChoice(t *testing.T) {
	tests := []struct {
		name   string
		choice *EngineChoice
		want   []string
	}{
		{"demoted then promoted", sampleChoice(), []string{
			"engine choice (what the kernel hands IPsec and other users, for 1400-byte packets):",
			"aes-128-cbc  cbc(aes) -> virtio_crypto_aes_cbc (hardware, priority 201): the policy chose",
			"demoted before the network: ocfw_testaes_cbc demoted 300 -> 1: hardware engine testaes not yet proven",
			"after the self-test: virtio_crypto_aes_cbc promoted 1 -> 201",
			"after the self-test: ocfw_testaes_cbc stays at 1: failed its self-test (wrong output at 1024 bytes)",
			"demoted before the network: note: built the software",
		}},
		{"no promotion", &EngineChoice{Demote: sampleChoice().Demote}, []string{
			"not promoted after the self-test: every hardware engine stays below software",
			"aes-128-cbc  cbc(aes) -> cbc(aes-fixed-time) (software, priority 101)",
		}},
		{"nothing done", &EngineChoice{}, []string{"not changed: the kernel chooses by its drivers' own priorities"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleReport(t)
			r.EngineChoice = tc.choice
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("text lacks %q:\n%s", w, b.String())
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
			if !bytes.Equal(j, j2) || !bytes.Contains(j, []byte(`"engine_choice"`)) {
				t.Errorf("engine choice does not round-trip:\n%s", j)
			}
		})
	}
}

// Reports of every version from MinVersion on are read (cards keep old
// ones); a newer one is refused, saying which versions are read.
func TestReadVersions(t *testing.T) {
	for _, tc := range []struct {
		json string
		ok   bool
	}{
		{`{"version": 1, "environment": {}, "selftest": [], "speed": [], "policy": {}}`, true},
		{`{"version": 2, "environment": {}, "selftest": [], "speed": [], "policy": {}, "engine_choice": {"promote": {"phase": "promote", "changes": [], "ciphers": []}}}`, true},
		{`{"version": 3, "environment": {}, "esp": {"cipher": "aes-128-cbc", "rows": [{"engine": "software", "size": 1400, "mbytes_per_sec": 5}], "basis": "esp"}}`, true},
		{`{"version": 4, "environment": {}, "tunnels": {"at": "2026-12-04T12:37:10Z", "after_boot": "21s", "settled": true, "list": [{"name": "a-b", "keying": "ikev2", "state": "up"}]}}`, true},
		{`{"version": 5, "environment": {}}`, false},
		{`{"version": 0, "environment": {}}`, false},
	} {
		r, err := Read(strings.NewReader(tc.json))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.json, err)
		}
		if err != nil && !strings.Contains(err.Error(), "versions 1 to 4") {
			t.Errorf("error does not say what is read: %v", err)
		}
		if err == nil && r.Version == 2 && r.EngineChoice.Now().Phase != "promote" {
			t.Errorf("engine choice lost: %+v", r.EngineChoice)
		}
		if err == nil && r.Version == 3 && (r.ESP == nil || r.ESP.Basis != BasisESP || len(r.ESP.Rows) != 1 || r.ESP.Rows[0].MBps != 5) {
			t.Errorf("esp lost: %+v", r.ESP)
		}
		if err == nil && r.Version == 4 && (r.Tunnels == nil || len(r.Tunnels.List) != 1 || r.Tunnels.List[0].State != "up") {
			t.Errorf("tunnels lost: %+v", r.Tunnels)
		}
	}
}
