package boards

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The pairing workflow without a command line: the pair found, keys
// made for it and written once, an existing file kept, and each way it
// fails as a typed error.
func TestPairTunnel(t *testing.T) {
	cat := embeddedT(t)
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }
	dir, _ := pairDir(t, nil)
	a, b := filepath.Join(dir, "site-a.yaml"), filepath.Join(dir, "site-b.yaml")

	p, err := cat.PairTunnel(a, b, "", read)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "a-b" || p.A.File != a || p.B.File != b {
		t.Errorf("pair %s of %s and %s", p.Name, p.A.File, p.B.File)
	}
	paths := p.KeyPaths()
	if len(paths) != 1 || paths[0] != filepath.Join(dir, "a-b.keys") {
		t.Errorf("key paths %v, want the one file both sites name", paths)
	}
	k, err := p.NewKeys(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if k.SAs[0].From != "198.51.100.2" && k.SAs[0].From != "203.0.113.2" {
		t.Errorf("keys from %s", k.SAs[0].From)
	}
	if err := WriteTunnelKeys(paths, k, false); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(paths[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, %v", fi, err)
	}
	var exist *KeysExistError
	if err := WriteTunnelKeys(paths, k, false); !errors.As(err, &exist) || exist.Path != paths[0] {
		t.Errorf("second write without force: %v", err)
	}
	if err := WriteTunnelKeys(paths, k, true); err != nil {
		t.Errorf("second write with force: %v", err)
	}

	var same *SameSiteError
	if _, err := cat.PairTunnel(a, a, "", read); !errors.As(err, &same) || same.A != a {
		t.Errorf("one site twice: %v", err)
	}
	if _, err := cat.PairTunnel(a, b, "a-c", read); err == nil || !strings.Contains(err.Error(), `has no tunnel "a-c"`) {
		t.Errorf("unknown tunnel: %v", err)
	}
	// b's peer moved: the two configs are not the ends of one tunnel.
	dir2, _ := pairDir(t, func(s string) string { return strings.Replace(s, "peer: 198.51.100.2", "peer: 198.51.100.9", 1) })
	var mismatch *PairMismatchError
	if _, err := cat.PairTunnel(filepath.Join(dir2, "site-a.yaml"), filepath.Join(dir2, "site-b.yaml"), "", read); !errors.As(err, &mismatch) || len(mismatch.Errs) == 0 {
		t.Errorf("mismatched ends: %v", err)
	}
	var list ErrorList
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: site\nboard: nosuch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.PairTunnel(a, bad, "", read); !errors.As(err, &list) {
		t.Errorf("a wrong site config: %v (%T), want an ErrorList", err, err)
	}
}
