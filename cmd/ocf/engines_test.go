package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/ocf/kcrypto"
)

// The kernel side (prefer and demote changing what cbc(aes) resolves
// to) is proved in ocf/kcrypto's kernel-in-the-loop test; here, what
// the command does with its arguments and how it prints.
func TestEnginesArguments(t *testing.T) {
	tests := []struct {
		args []string
		err  string
	}{
		{[]string{"engines", "demote"}, "accepts 1 arg(s), received 0"},
		{[]string{"engines", "prefer", "a", "b"}, "accepts 1 arg(s), received 2"},
		{[]string{"engines", "extra"}, "unknown command"},
		{[]string{"engines", "demote", "cbc(aes)"}, "not a generic name like cbc(aes)"},
		{[]string{"engines", "prefer", "no-such-driver"}, `no driver named "no-such-driver"`},
	}
	for _, tc := range tests {
		out, errs, code := ocf(tc.args...)
		if code == 0 || !strings.Contains(errs, tc.err) {
			t.Errorf("ocf %v: exit %d, stderr %q, stdout %q; want an error containing %q", tc.args, code, errs, out, tc.err)
		}
	}
}

func TestEnginesHelp(t *testing.T) {
	out, _, code := ocf("engines", "--help")
	if code != 0 {
		t.Fatal(code)
	}
	for _, w := range []string{"ocf engines demote cbc-aes-geode", "without a reboot", "prefer", "demote", "--json", "crypto_user"} {
		if !strings.Contains(out, w) {
			t.Errorf("help lacks %q:\n%s", w, out)
		}
	}
}

// On this host (no AF_ALG here) the list still shows what /proc/crypto
// registers, and says why the kernel's choice could not be checked.
func TestEnginesList(t *testing.T) {
	if _, err := os.Stat("/proc/crypto"); err != nil {
		t.Skip("no /proc/crypto")
	}
	out, errs, code := ocf("engines", "--cipher", "aes-128-cbc", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var st []kcrypto.NameStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(st) != 1 || st[0].Name != "cbc(aes)" || st[0].Type != "skcipher" || len(st[0].Ciphers) != 1 {
		t.Fatalf("%+v", st)
	}
	if st[0].Resolved == nil && st[0].Error == "" {
		t.Error("neither a resolution nor why not")
	}
	if len(st[0].Bases) == 0 {
		t.Errorf("no aes implementations listed: %+v", st[0])
	}
	text, _, code := ocf("engines", "--cipher", "aes-128-cbc", "--cipher", "aes-256-cbc")
	if code != 0 || !strings.Contains(text, "cbc(aes)  (aes-128-cbc, aes-256-cbc)") || !strings.Contains(text, "kernel resolves:") {
		t.Errorf("text:\n%s", text)
	}
}

// "ocf engines list" lists, as "ocf engines" does (it was an unknown
// command).
func TestEnginesListSubcommand(t *testing.T) {
	if _, err := os.Stat("/proc/crypto"); err != nil {
		t.Skip("no /proc/crypto")
	}
	want, _, _ := ocf("engines", "--cipher", "aes-128-cbc")
	out, errs, code := ocf("engines", "list", "--cipher", "aes-128-cbc")
	if code != 0 || !strings.Contains(out, "cbc(aes)") || out != want {
		t.Errorf("engines list: exit %d, %s\n%s\nwant the same as engines:\n%s", code, errs, out, want)
	}
}
