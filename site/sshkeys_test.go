package site

import (
	"strings"
	"testing"
)

const goodKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIDJBYzebnRhK3LHcyyTTcrXdqQmMaRhb8G7tBsE4Ph6 me@laptop"

// A key line that only looks right is refused on the host, naming what
// is wrong; the router's SSH server would have rejected it at login.
func TestAuthorizedKeyParsed(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string // want "" means accepted
	}{
		{"good", goodKey, ""},
		{"placeholder is a valid key", "ssh-ed25519 " + PlaceholderKey + " me", ""},
		{"not base64", "ssh-ed25519 !!!notbase64!!! me", "not a public key"},
		{"truncated", goodKey[:40], "not a public key"},
		{"type but no key", "ssh-ed25519", "not a public key"},
		{"a password", "hunter2", "not a public key"},
		{"options", `from="10.0.0.1" ` + goodKey, "options from="},
		{"two keys on one line", goodKey + "\n" + goodKey, "one key per line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkAuthorizedKey(tc.line)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v; want one with %q", err, tc.want)
			}
		})
	}
}

func TestOnlyPlaceholderKey(t *testing.T) {
	ph := "ssh-ed25519 " + PlaceholderKey + " me@laptop"
	for _, tc := range []struct {
		keys []string
		want bool
	}{
		{[]string{ph}, true},
		{[]string{ph, "# a comment"}, true},
		{[]string{ph, goodKey}, false},
		{[]string{goodKey}, false},
		{nil, false},
	} {
		s := &Site{SSH: SSH{AuthorizedKeys: tc.keys}}
		if got := s.OnlyPlaceholderKey(); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.keys, got, tc.want)
		}
	}
}
