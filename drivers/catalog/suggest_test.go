package catalog

import (
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	fields := []string{"kind", "name", "description", "vendor", "aliases", "cpu", "ram_mb", "storage", "console", "boot", "slots", "engine", "kernel", "image"}
	ciphers := []string{"des-cbc", "des-ede3-cbc", "aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "hmac-md5", "hmac-sha1", "hmac-sha256", "null"}
	for _, tc := range []struct {
		got        string
		candidates []string
		want       string
	}{
		{"ram", fields, "ram_mb"}, // a shortening beats "name", two edits away
		{"desc", fields, "description"},
		{"slot", fields, "slots"},
		{"from", []string{"kind", "name", "form", "pci"}, "form"},
		{"baut", []string{"device", "baud"}, "baud"},
		{"aes128", ciphers, "aes-128-cbc"},
		{"hmac-sha", ciphers, "hmac-sha1"}, // the shortest of several
		{"zzzz", fields, ""},
		{strings.Repeat("r", 1000), fields, ""},
	} {
		got := Suggest(tc.got, tc.candidates)
		want := ""
		if tc.want != "" {
			want = ` (did you mean "` + tc.want + `"?)`
		}
		if got != want {
			t.Errorf("Suggest(%.20q) = %q, want %q", tc.got, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("alix2d13"); got != `"alix2d13"` {
		t.Errorf("short value: %s", got)
	}
	long := strings.Repeat("x", 20<<20)
	got := Quote(long)
	if want := `"` + strings.Repeat("x", MaxShown) + `..." (20971520 bytes)`; got != want {
		t.Errorf("long value: %.100s", got)
	}
	// Cut on a character boundary, never inside one.
	if got := Quote(strings.Repeat("é", 100)); !strings.HasPrefix(got, `"`+strings.Repeat("é", MaxShown)+`..."`) {
		t.Errorf("multi-byte value: %s", got)
	}
}
