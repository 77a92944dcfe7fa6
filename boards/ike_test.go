package boards

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/site"
)

// ikePairDocs parses the example IKEv2 pair, B's text edited, and writes
// one strong PSK file beside them.
func ikePairDocs(t *testing.T, editB func(string) string) []*SiteDoc {
	t.Helper()
	cat := embeddedT(t)
	dir := t.TempDir()
	var docs []*SiteDoc
	for _, n := range []string{"site-ike-a.yaml", "site-ike-b.yaml"} {
		data, err := os.ReadFile(filepath.Join("../examples/sites", n))
		if err != nil {
			t.Fatal(err)
		}
		if n == "site-ike-b.yaml" && editB != nil {
			data = []byte(editB(string(data)))
		}
		d, err := cat.ParseSiteDoc(filepath.Join(dir, n), data)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	p, err := site.NewTunnelPSK(rand.Reader, "a-b", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	j, _ := p.JSON()
	if err := os.WriteFile(filepath.Join(dir, "a-b.psk"), j, 0o600); err != nil {
		t.Fatal(err)
	}
	return docs
}

// Two IKEv2 ends are checked against each other: the example pair
// passes; ends keyed differently, or with no IKE proposal in common, or
// ids that do not mirror, are each refused at the field, naming the
// other file. Proposals need only one of each kind in common.
func TestCheckTunnelsIKEPair(t *testing.T) {
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }
	if errs := CheckTunnels(ikePairDocs(t, nil), read); len(errs) != 0 {
		t.Fatalf("the example pair: %v", errs)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"keying", "    psk: a-b.psk", "    keying: manual\n    cipher: aes-128-cbc\n    auth: hmac-sha1\n    keys: a-b.keys\n", "tunnel a-b: keying ikev2, but "},
		{"ike proposals", "ike_proposals: [aes128-sha256-curve25519-ecp256-modp2048]", "ike_proposals: [aes128-sha256-prfsha1-modp2048, 3des-sha256-curve25519]",
			"tunnel a-b: aes128-sha256-curve25519-ecp256-modp2048 and "},
		{"ids", "remote_id: ike-a.example", "remote_id: 198.51.100.2", "tunnel a-b: this end's id is ike-a.example, but "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := ikePairDocs(t, func(s string) string {
				if tc.name == "keying" { // B's IKEv2 fields go
					return s[:strings.Index(s, tc.old)] + tc.new
				}
				return strings.Replace(s, tc.old, tc.new, 1)
			})
			errs := CheckTunnels(docs, read)
			var all []string
			found := false
			for _, e := range errs {
				all = append(all, e.Error())
				found = found || e.File == docs[0].File && e.Line > 0 && strings.Contains(e.Msg, tc.want+docs[1].File)
			}
			if !found {
				t.Errorf("want %q in\n%s", tc.want+docs[1].File, strings.Join(all, "\n"))
			}
		})
	}
	// One algorithm of each kind in common is enough.
	docs := ikePairDocs(t, func(s string) string {
		s = strings.Replace(s, "ike_proposals: [aes128-sha256-curve25519-ecp256-modp2048]", "ike_proposals: [aes256-aes128-sha1-sha256-modp2048]", 1)
		return strings.Replace(s, "esp_proposals: [aes128-sha256, aes256-sha256]", "esp_proposals: [3des-sha1, aes256-aes192-sha1-sha256]", 1)
	})
	if errs := CheckTunnels(docs, read); len(errs) != 0 {
		t.Errorf("proposals with one of each kind in common: %v", errs)
	}
}
