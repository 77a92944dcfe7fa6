package site

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
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
		{"DSA", "ssh-dss AAAAB3NzaC1kc3MAAACBAP8= old@box", "a DSA (ssh-dss) key cannot log in"},
		{"RSA 1024", rsaLine(t, 1024), "an RSA key of 1024 bits is too weak"},
		{"RSA 2048", rsaLine(t, 2048), ""},
		{"ECDSA P-256", ecdsaLine(t), ""},
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

func rsaLine(t *testing.T, bits int) string {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return keyLine(t, &k.PublicKey)
}

func ecdsaLine(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return keyLine(t, &k.PublicKey)
}

func keyLine(t *testing.T, pub any) string {
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " me"
}
