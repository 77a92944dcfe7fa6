package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/boards"
)

// The tunnel workflow on the example pair: validate asks for the key
// file, tunnel keys makes it (0600, refusing to overwrite), validate then
// passes, and the board's reader takes the file with each end's site.
func TestTunnelKeysCommand(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"site-a.yaml", "site-b.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/sites", n))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, n), data, 0o644))
	}
	a, b := filepath.Join(dir, "site-a.yaml"), filepath.Join(dir, "site-b.yaml")
	keys := filepath.Join(dir, "a-b.keys")

	_, errs, code := ocfw(t, "validate", a, b)
	if want := a + ":34:11: key file " + keys + " not found: make it with ocfw tunnel keys --site " + a + " --site " + b + " --tunnel a-b"; code != 1 || !strings.Contains(errs, want) {
		t.Errorf("validate without keys: exit %d, want %q in\n%s", code, want, errs)
	}

	_, errs, code = ocfw(t, "tunnel", "keys", "--site", a, "--site", b)
	if code != 0 || !strings.Contains(errs, "wrote "+keys+": tunnel a-b, 198.51.100.2 <-> 203.0.113.2, aes-128-cbc with hmac-sha256") {
		t.Fatalf("tunnel keys: exit %d\n%s", code, errs)
	}
	fi, err := os.Stat(keys)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	first, err := os.ReadFile(keys)
	must(t, err)

	out, errs, code := ocfw(t, "validate", a, b)
	if code != 0 || !strings.Contains(out, a+": ok (site site-a for alix2d13; tunnel a-b to 203.0.113.2, keys "+keys+")") {
		t.Errorf("validate with keys: exit %d\n%s%s", code, out, errs)
	}

	// Each end reads the one file as the board does, from its side.
	cat, err := boards.Embedded()
	must(t, err)
	k, kerrs := site.ReadTunnelKeys("a-b.keys", first)
	if len(kerrs) != 0 {
		t.Fatal(kerrs)
	}
	var setups []*site.TunnelSetup
	for _, f := range []string{a, b} {
		data, err := os.ReadFile(f)
		must(t, err)
		s, _, err := cat.ParseSite(f, data)
		must(t, err)
		su, serrs := s.Tunnels[0].Setup(s, k)
		if len(serrs) != 0 {
			t.Fatal(serrs)
		}
		setups = append(setups, su)
	}
	if setups[0].Out.SPI != setups[1].In.SPI || setups[0].In.SPI != setups[1].Out.SPI || len(setups[0].Out.EncKey) != 16 || len(setups[0].Out.AuthKey) != 32 {
		t.Errorf("A %+v\nB %+v", setups[0], setups[1])
	}

	// Old keys are never overwritten by accident; --force rolls them.
	_, errs, code = ocfw(t, "tunnel", "keys", "--site", a, "--site", b, "--tunnel", "a-b")
	if code == 0 || !strings.Contains(errs, keys+" exists: the boxes may be using those keys; give --force") {
		t.Errorf("overwrite: exit %d %s", code, errs)
	}
	if again, _ := os.ReadFile(keys); string(again) != string(first) {
		t.Error("a refused run changed the key file")
	}
	_, errs, code = ocfw(t, "tunnel", "keys", "--site", a, "--site", b, "--force")
	if again, _ := os.ReadFile(keys); code != 0 || string(again) == string(first) {
		t.Errorf("--force: exit %d, file changed %v: %s", code, string(again) != string(first), errs)
	}
	other := filepath.Join(dir, "elsewhere.keys")
	if _, errs, code = ocfw(t, "tunnel", "keys", "--site", a, "--site", b, "-o", other); code != 0 {
		t.Errorf("-o: exit %d %s", code, errs)
	}
	if _, err := os.Stat(other); err != nil {
		t.Error(err)
	}

	// Sites that are not each other's ends get no keys.
	must(t, os.WriteFile(b, []byte(strings.Replace(mustRead(t, b), "cipher: aes-128-cbc", "cipher: aes-256-cbc", 1)), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--site", a, "--site", b}, a + ":32:13: tunnel a-b: cipher aes-128-cbc, but " + b + "'s is aes-256-cbc"},
		{[]string{"--site", a}, "give the two ends' site configs"},
		{[]string{"--site", a, "--site", a}, "are the same site"},
		{[]string{"--site", a, "--site", b, "--tunnel", "a-c"}, `has no tunnel "a-c" (` + a + " has a-b)"},
	} {
		_, errs, code := ocfw(t, append([]string{"tunnel", "keys", "--force"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, want %q in\n%s", tc.args, code, tc.want, errs)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	return string(data)
}
