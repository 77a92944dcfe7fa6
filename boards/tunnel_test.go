package boards

import (
	"crypto/rand"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/site"
)

// Tunnel mistakes come with the rest of the site's, each at its line and
// column.
func TestSiteTunnelMistakesLocated(t *testing.T) {
	cat := embeddedT(t)
	src := `kind: site
board: alix2d13
hostname: gw
wan: {port: wan, address: 198.51.100.2/24, gateway: 198.51.100.1}
lan: {ports: [lan1], address: 192.168.1.1/24}
tunnels:
  - name: a-b
    peer: 198.51.100.2
    remote_subnet: 192.168.1.0/25
    cipher: aes-128-cbd
    auth: hmac-md5
    keys: a-b.keys
  - name: a-b
    peer: 203.0.113.2
    remote_subnet: 10.0.0.1/8
    cipher: aes-256-cbc
    auth: hmac-sha1
    keys: a-b.keys
    rekey: 1h
`
	_, _, err := cat.ParseSite("s.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`s.yaml:8:11: 198.51.100.2 is this box's own address`,
		`s.yaml:9:20: 192.168.1.0/25 overlaps the LAN 192.168.1.0/24`,
		`s.yaml:10:13: "aes-128-cbd": want one of aes-128-cbc, aes-192-cbc, aes-256-cbc, des-ede3-cbc (did you mean "aes-128-cbc"?)`,
		`s.yaml:11:11: "hmac-md5": want one of hmac-sha1, hmac-sha256`,
		`s.yaml:13:11: tunnel a-b is already tunnels[0]`,
		`s.yaml:15:20: "10.0.0.1/8": not a network address: did you mean 10.0.0.0/8?`,
		`s.yaml:18:11: a-b.keys is already tunnels[0]'s key file`,
		`s.yaml:19:5: unknown field "rekey"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}

// pairDir copies the example tunnel sites into a fresh folder, with edit
// applied to site B's text, and returns their parsed docs.
func pairDir(t *testing.T, editB func(string) string) (dir string, docs []*SiteDoc) {
	t.Helper()
	cat := embeddedT(t)
	dir = t.TempDir()
	for _, n := range []string{"site-a.yaml", "site-b.yaml"} {
		data, err := os.ReadFile(filepath.Join("../examples/sites", n))
		if err != nil {
			t.Fatal(err)
		}
		if n == "site-b.yaml" && editB != nil {
			data = []byte(editB(string(data)))
		}
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := cat.ParseSiteDoc(p, data)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	return dir, docs
}

func writeKeys(t *testing.T, path string) {
	t.Helper()
	k, err := site.NewTunnelKeys(rand.Reader, "a-b", "aes-128-cbc", "hmac-sha256",
		netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("203.0.113.2"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	j, _ := k.JSON()
	if err := os.WriteFile(path, j, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheckTunnels(t *testing.T) {
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }
	dir, docs := pairDir(t, nil)
	keys := filepath.Join(dir, "a-b.keys")

	errs := CheckTunnels(docs, read)
	if len(errs) != 2 || !strings.Contains(errs.Error(), filepath.Join(dir, "site-a.yaml")+":34:11: key file "+keys+" not found: make it with ocfw tunnel keys") {
		t.Errorf("without keys: %v", errs)
	}
	if mk := errs[0].MissingKeys; mk == nil || mk.Site != filepath.Join(dir, "site-a.yaml") || mk.Peer != filepath.Join(dir, "site-b.yaml") || mk.Tunnel != "a-b" {
		t.Errorf("without keys: what makes them is %+v", errs[0].MissingKeys)
	}

	writeKeys(t, keys)
	if errs := CheckTunnels(docs, read); len(errs) != 0 {
		t.Errorf("with keys: %v", errs)
	}

	// B with keys of its own: each file is fine alone, but the two ends
	// would not understand each other.
	dir, docs = pairDir(t, func(s string) string { return strings.Replace(s, "keys: a-b.keys", "keys: b.keys", 1) })
	writeKeys(t, filepath.Join(dir, "a-b.keys"))
	writeKeys(t, filepath.Join(dir, "b.keys"))
	errs = CheckTunnels(docs, read)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "give different keys: both ends need the same file") {
		t.Errorf("two key files: %v", errs)
	}

	// B's config does not mirror A's; a broken key file is reported at its
	// own line.
	dir, docs = pairDir(t, func(s string) string {
		s = strings.Replace(s, "peer: 198.51.100.2", "peer: 198.51.100.3", 1)
		s = strings.Replace(s, "remote_subnet: 192.168.1.0/24", "remote_subnet: 192.168.1.0/25", 1)
		return strings.Replace(s, "cipher: aes-128-cbc", "cipher: aes-256-cbc", 1)
	})
	if err := os.WriteFile(filepath.Join(dir, "a-b.keys"), []byte("{\n  \"kind\": \"tunnel-keys\",\n  \"version\": 1,,\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	errs = CheckTunnels(docs, read)
	if n := strings.Count(errs.Error(), "JSON syntax"); n != 1 {
		t.Errorf("the shared key file's error is reported %d times, want once", n)
	}
	a := filepath.Join(dir, "site-a.yaml")
	for _, want := range []string{
		filepath.Join(dir, "a-b.keys") + ":3:16: JSON syntax",
		a + ":29:12: tunnel a-b: this end is at 198.51.100.2, but " + filepath.Join(dir, "site-b.yaml") + "'s peer is 198.51.100.3",
		a + ":30:19: tunnel a-b: local_subnet 192.168.1.0/24, but " + filepath.Join(dir, "site-b.yaml") + "'s remote_subnet is 192.168.1.0/25",
		a + ":32:13: tunnel a-b: cipher aes-128-cbc, but " + filepath.Join(dir, "site-b.yaml") + "'s is aes-256-cbc",
	} {
		if !strings.Contains(errs.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, errs)
		}
	}
}
