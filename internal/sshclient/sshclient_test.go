package sshclient

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func newKey(t *testing.T) ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The host key is checked as OpenSSH checks it: known, unknown (refused,
// or added with AcceptNew), changed (always refused), or pinned; and only
// the key types known_hosts has for the box are asked for.
func TestHostKeyCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "known_hosts")
	addr := "127.0.0.1:2222"
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2222}
	k, other := newKey(t), newKey(t)

	cb, algos, err := hostKeyCheck(Options{KnownHosts: file}, addr)
	if err != nil {
		t.Fatal(err)
	}
	var unknown *UnknownHostError
	if err := cb(addr, remote, k); !errors.As(err, &unknown) || unknown.Fingerprint != ssh.FingerprintSHA256(k) {
		t.Fatalf("unknown host: %v", err)
	}
	if len(algos) == 0 || algos[0] != ssh.KeyAlgoED25519 {
		t.Errorf("key types asked of an unknown host: %v, want ed25519 first (what ocf net shows)", algos)
	}
	cb, _, err = hostKeyCheck(Options{KnownHosts: file, AcceptNew: true}, addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := cb(addr, remote, k); err != nil {
		t.Fatalf("accept-new: %v", err)
	}
	b, _ := os.ReadFile(file)
	if !strings.Contains(string(b), "[127.0.0.1]:2222 ssh-ed25519 ") {
		t.Fatalf("known_hosts after accept-new: %q", b)
	}
	cb, algos, err = hostKeyCheck(Options{KnownHosts: file, AcceptNew: true}, addr)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(algos, []string{ssh.KeyAlgoED25519}) {
		t.Errorf("key types asked of a known host: %v, want its ed25519 only", algos)
	}
	if err := cb(addr, remote, k); err != nil {
		t.Errorf("known host: %v", err)
	}
	if err := cb(addr, remote, other); err == nil || !strings.Contains(err.Error(), "CHANGED") {
		t.Errorf("changed key, even with accept-new: %v", err)
	}
	pin, _, err := hostKeyCheck(Options{HostKey: ssh.FingerprintSHA256(k)}, addr)
	if err != nil {
		t.Fatal(err)
	}
	if pin(addr, remote, k) != nil || pin(addr, remote, other) == nil {
		t.Error("the pinned fingerprint does not decide")
	}
}

func TestTarget(t *testing.T) {
	for _, c := range []struct{ host, user, addr, wantUser string }{
		{"192.168.1.1", "", "192.168.1.1:22", "root"},
		{"admin@192.168.1.1:2222", "", "192.168.1.1:2222", "admin"},
		{"admin@gw", "ops", "gw:22", "ops"},
		{"[fe80::1]", "", "[fe80::1]:22", "root"},
	} {
		if a, u := Target(c.host, c.user); a != c.addr || u != c.wantUser {
			t.Errorf("target(%q, %q) = %q, %q", c.host, c.user, a, u)
		}
	}
}
