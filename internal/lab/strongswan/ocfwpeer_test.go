package strongswan_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/site"
)

// swanctl reads the subset of swanctl.conf's syntax the testdata uses
// (sections in braces, key = value, # comments) into dotted keys:
// connections.a-b.local.id.
func swanctl(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	var path []string
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasSuffix(line, "{"):
			path = append(path, strings.TrimSpace(strings.TrimSuffix(line, "{")))
		case line == "}":
			path = path[:len(path)-1]
		case strings.Contains(line, "="):
			k, v, _ := strings.Cut(line, "=")
			kv[strings.Join(append(path, strings.TrimSpace(k)), ".")] = strings.Trim(strings.TrimSpace(v), `"`)
		default:
			t.Fatalf("%s:%d: cannot read %q", file, n+1, line)
		}
	}
	return kv
}

// The strongSwan configuration docs/tunnels.md shows, and the ocfw-vs-
// strongSwan tests run, is site B of examples/sites/site-ike-a.yaml's
// tunnel: what ocfw validate checks between two ocfw ends holds between
// it and the example (addresses, subnets and ids mirrored, a common
// proposal for the IKE SA and the CHILD SAs, PFS on both or neither, the
// same lifetimes and liveness interval), and its secret is the PSK file
// beside it, a PSK that passes ocfw's strength check.
func TestSwanctlMatchesExampleSite(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	exFile := "../../../examples/sites/site-ike-a.yaml"
	data, err := os.ReadFile(exFile)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := cat.ParseSite(exFile, data)
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.IKE(s.Tunnels[0])
	if err != nil {
		t.Fatal(err)
	}
	dir := "testdata"
	kv := swanctl(t, filepath.Join(dir, "site-ike-b.swanctl.conf"))
	c := "connections." + k.Name + "."
	ch := c + "children." + k.Name + "."
	for key, want := range map[string]string{
		c + "version":      "2",
		c + "local_addrs":  k.Peer.String(),
		c + "remote_addrs": k.Local.String(),
		c + "local.auth":   "psk",
		c + "local.id":     k.RemoteID.Value,
		c + "remote.auth":  "psk",
		c + "remote.id":    k.LocalID.Value,
		c + "rekey_time":   swanDuration(k.IKELifetime),
		c + "dpd_delay":    swanDuration(k.DPD),
		ch + "mode":        "tunnel",
		ch + "local_ts":    k.RemoteSubnet.String(),
		ch + "remote_ts":   k.LocalSubnet.String(),
		ch + "rekey_time":  swanDuration(k.ChildLifetime),
	} {
		if got := kv[key]; got != want {
			t.Errorf("%s = %q, want %q (from %s)", key, got, want, exFile)
		}
	}

	// Proposals: strongSwan's syntax is the site config's; its CHILD SA
	// proposals carry the DH groups exactly when the site has PFS.
	var ike, esp []site.Proposal
	for _, p := range strings.Split(kv[c+"proposals"], ",") {
		pr, err := site.ParseProposal(strings.TrimSpace(p), false)
		if err != nil {
			t.Fatalf("proposals %q: %v", p, err)
		}
		ike = append(ike, pr)
	}
	for _, p := range strings.Split(kv[ch+"esp_proposals"], ",") {
		var algs, groups []string
		for _, tok := range strings.Split(strings.TrimSpace(p), "-") {
			if strings.HasPrefix(tok, "modp") || strings.HasPrefix(tok, "ecp") || tok == "curve25519" {
				groups = append(groups, tok)
			} else {
				algs = append(algs, tok)
			}
		}
		if (len(groups) > 0) != k.PFS {
			t.Errorf("esp_proposals %q: DH groups %v, but the site's pfs is %v", p, groups, k.PFS)
		}
		pr, err := site.ParseProposal(strings.Join(algs, "-"), true)
		if err != nil {
			t.Fatalf("esp_proposals %q: %v", p, err)
		}
		esp = append(esp, pr)
	}
	if !sharesFirst(k.IKEProposals, ike) || !sharesFirst(k.ESPProposals, esp) {
		t.Errorf("the site's first proposals are not strongSwan's first: IKE %v / %v, ESP %v / %v", k.IKEProposals, ike, k.ESPProposals, esp)
	}

	psk, errs := site.ReadTunnelPSK("a-b.psk", mustRead(t, filepath.Join(dir, k.PSK)))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	secretKey := "secrets.ike-" + k.Name + ".secret"
	if psk.Tunnel != k.Name || kv[secretKey] != psk.Secret {
		t.Errorf("%s is not the PSK file %s's secret (tunnel %s)", secretKey, k.PSK, psk.Tunnel)
	}
	ids := []string{kv["secrets.ike-"+k.Name+".id-a"], kv["secrets.ike-"+k.Name+".id-b"]}
	if ids[0] != k.LocalID.Value || ids[1] != k.RemoteID.Value {
		t.Errorf("secret's ids %v, want %s and %s", ids, k.LocalID, k.RemoteID)
	}
}

// sharesFirst says whether the two lists' first proposals are the same
// algorithms in the same order, so either end's first choice is the
// other's.
func sharesFirst(a, b []site.Proposal) bool {
	return len(a) > 0 && len(b) > 0 && fmt.Sprint(tokens(a[0])) == fmt.Sprint(tokens(b[0]))
}

func tokens(p site.Proposal) []string {
	var s []string
	for _, l := range [][]site.Transform{p.Encr, p.Integ, p.PRF, p.DH} {
		for _, tr := range l {
			s = append(s, tr.Token)
		}
	}
	return s
}

// swanDuration writes a duration as swanctl.conf does: 4h, 30m, 30s.
func swanDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
