package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/site"
)

// ikePair copies the example IKEv2 pair into a temporary directory, B in
// a directory of its own when apart (so each end has its own PSK file).
func ikePair(t *testing.T, apart bool) (a, b string) {
	t.Helper()
	dir := t.TempDir()
	bdir := dir
	if apart {
		bdir = filepath.Join(dir, "b")
		must(t, os.Mkdir(bdir, 0o755))
	}
	a, b = filepath.Join(dir, "site-ike-a.yaml"), filepath.Join(bdir, "site-ike-b.yaml")
	for _, c := range [][2]string{{"site-ike-a.yaml", a}, {"site-ike-b.yaml", b}} {
		data, err := os.ReadFile(filepath.Join("../../examples/sites", c[0]))
		must(t, err)
		must(t, os.WriteFile(c[1], data, 0o644))
	}
	return a, b
}

// The IKEv2 workflow on the example pair: validate asks for the PSK file
// with the command that makes it, tunnel psk writes one strong file
// (0600, never over an existing one without --force, never onto a device
// or directory), validate then passes, and the firmware's reader takes it.
func TestTunnelPSKCommand(t *testing.T) {
	a, b := ikePair(t, false)
	psk := filepath.Join(filepath.Dir(a), "a-b.psk")

	_, errs, code := ocfw(t, "validate", a, b)
	if want := a + ":31:10: PSK file " + psk + " not found: make it with ocfw tunnel psk --site " + a + " --site " + b + " --tunnel a-b"; code != 1 || !strings.Contains(errs, want) {
		t.Errorf("validate without a PSK: exit %d, want %q in\n%s", code, want, errs)
	}

	_, errs, code = ocfw(t, "tunnel", "psk", "--site", a, "--site", b)
	if code != 0 || !strings.Contains(errs, "wrote "+psk+": tunnel a-b, a 32-byte random pre-shared key") {
		t.Fatalf("tunnel psk: exit %d\n%s", code, errs)
	}
	fi, err := os.Stat(psk)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("PSK file mode %v, want 0600", fi.Mode().Perm())
	}
	first := mustRead(t, psk)
	p, perrs := site.ReadTunnelPSK(psk, []byte(first))
	if len(perrs) != 0 || p.Tunnel != "a-b" || site.WeakPSK(p.Secret) != "" {
		t.Fatalf("the firmware's reader: %v %v", perrs, p)
	}
	if strings.Contains(errs, p.Secret) {
		t.Error("tunnel psk printed the secret")
	}

	// What goes into an image names the file, never holds the key.
	out, errs, code := ocfw(t, "site", "json", a)
	if code != 0 || strings.Contains(out, p.Secret) || !strings.Contains(out, `"psk": "a-b.psk"`) {
		t.Errorf("site json: exit %d, secret in it %v\n%s%s", code, strings.Contains(out, p.Secret), out, errs)
	}

	out, errs, code = ocfw(t, "validate", "--allow-placeholder-key", a, b)
	if code != 0 || !strings.Contains(out, a+": ok (site ike-a for alix2d13; tunnel a-b to 203.0.113.2, ikev2, psk "+psk+")") {
		t.Errorf("validate with the PSK: exit %d\n%s%s", code, out, errs)
	}
	// The box runs IKEv2 tunnels: validate has nothing to warn of.
	if strings.Contains(errs, "warning") {
		t.Errorf("validate warned of an IKEv2 tunnel:\n%s", errs)
	}

	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"existing file", []string{"--site", a, "--site", b}, "the sites' psk field: " + psk + ": the file exists: add --force to replace it"},
		{"a directory", []string{"--site", a, "-o", dir}, "-o " + dir + " is a directory, not a regular file"},
		{"a device", []string{"--site", a, "-o", "/dev/null", "--force"}, "-o /dev/null is a character device, not a regular file"},
		{"no site", nil, "--site: give the tunnel's site config, or both ends' (--site A.yaml --site B.yaml), got 0"},
		{"no such tunnel", []string{"--site", a, "--tunnel", "a-c"}, `has no tunnel "a-c" (` + a + " has a-b)"},
		{"same site twice", []string{"--site", a, "--site", a}, "are the same site"},
	} {
		_, errs, code := ocfw(t, append([]string{"tunnel", "psk"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, want %q in\n%s", tc.name, code, tc.want, errs)
		}
	}
	if mustRead(t, psk) != first {
		t.Error("a refused run changed the PSK file")
	}

	// --force replaces it; one end alone writes where -o says.
	if _, errs, code = ocfw(t, "tunnel", "psk", "--site", a, "--site", b, "--force"); code != 0 || mustRead(t, psk) == first {
		t.Errorf("--force: exit %d, changed %v\n%s", code, mustRead(t, psk) != first, errs)
	}
	other := filepath.Join(dir, "peer.psk")
	if _, errs, code = ocfw(t, "tunnel", "psk", "--site", a, "-o", other); code != 0 {
		t.Errorf("one site, -o: exit %d\n%s", code, errs)
	}
	if q, perrs := site.ReadTunnelPSK(other, []byte(mustRead(t, other))); len(perrs) != 0 || q.Tunnel != "a-b" {
		t.Errorf("-o file: %v", perrs)
	}
}

// Each command refuses the other keying's tunnel, saying which to use.
func TestTunnelCommandsKeying(t *testing.T) {
	a, b := ikePair(t, false)
	_, errs, code := ocfw(t, "tunnel", "keys", "--site", a, "--site", b)
	if want := a + ": tunnel a-b has keying: ikev2 (no keys, cipher or auth): it needs a PSK file, made by ocfw tunnel psk"; code == 0 || !strings.Contains(errs, want) {
		t.Errorf("tunnel keys on IKEv2: exit %d, want %q in\n%s", code, want, errs)
	}
	ma, mb := filepath.Join(filepath.Dir(a), "site-a.yaml"), filepath.Join(filepath.Dir(a), "site-b.yaml")
	for _, c := range [][2]string{{"site-a.yaml", ma}, {"site-b.yaml", mb}} {
		data, err := os.ReadFile(filepath.Join("../../examples/sites", c[0]))
		must(t, err)
		must(t, os.WriteFile(c[1], data, 0o644))
	}
	for _, args := range [][]string{{"--site", ma, "--site", mb}, {"--site", ma}} {
		_, errs, code = ocfw(t, append([]string{"tunnel", "psk"}, args...)...)
		if code == 0 || !strings.Contains(errs, "tunnel a-b has manual keys: its key file is made by ocfw tunnel keys") {
			t.Errorf("tunnel psk %v on manual keys: exit %d\n%s", args, code, errs)
		}
	}
}

// validate's refusals for IKEv2 tunnels, each at its file, line, column
// and field: a weak PSK, two ends with different PSKs, a PSK file of
// another tunnel, ends whose ids, proposals or PFS do not mirror, and a
// field of the wrong keying.
func TestValidateIKERefusals(t *testing.T) {
	strong := func(tunnel string) string {
		p, err := site.NewTunnelPSK(strings.NewReader(strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyzABCDEF", 20)), tunnel, time.Unix(0, 0))
		must(t, err)
		data, err := p.JSON()
		must(t, err)
		return string(data)
	}
	for _, tc := range []struct {
		name  string
		edit  func(a, b string) // the two site configs' paths, their PSK files beside them
		wants func(a, b string) []string
	}{
		{"weak PSK", func(a, b string) {
			writePSK(t, a, `{"kind": "tunnel-psk", "version": 1, "tunnel": "a-b", "secret": "correct horse battery staple and friends"}`)
			writePSK(t, b, strong("a-b"))
		}, func(a, b string) []string {
			return []string{pskPath(a) + ": secret: a passphrase of 40 characters (words, or letters only): want at least 64, or a random key: make a strong one with ocfw tunnel psk"}
		}},
		{"different PSKs", func(a, b string) {
			writePSK(t, a, strong("a-b"))
			writePSK(t, b, strings.Replace(strong("a-b"), `"secret": "`, `"secret": "X`, 1))
		}, func(a, b string) []string {
			return []string{a + ":31:10: tunnel a-b: PSK file " + pskPath(a) + " and " + b + "'s " + pskPath(b) + " hold different keys: both ends need the same file"}
		}},
		{"another tunnel's PSK", func(a, b string) {
			writePSK(t, a, strong("a-c"))
			writePSK(t, b, strong("a-b"))
		}, func(a, b string) []string {
			return []string{a + `:31:10: PSK file ` + pskPath(a) + ` is for tunnel "a-c", this is a-b`}
		}},
		{"ends that do not mirror", func(a, b string) {
			same := strong("a-b")
			writePSK(t, a, same)
			writePSK(t, b, same)
			edit(t, b, "local_id: ike-b.example", "local_id: other.example")
			edit(t, b, "esp_proposals: [aes128-sha256, aes256-sha256]", "esp_proposals: [3des-sha1]\n    pfs: false")
		}, func(a, b string) []string {
			return []string{
				a + ":33:16: tunnel a-b: remote_id ike-b.example, but " + b + "'s id is other.example",
				a + ":35:20: tunnel a-b: aes128-sha256, aes256-sha256 and " + b + "'s 3des-sha1 share no proposal: no CHILD SA would come up",
				a + ":39:10: tunnel a-b: pfs true, but " + b + "'s is false: the first rekey would fail",
			}
		}},
		{"fields of the other keying", func(a, b string) {
			edit(t, a, "keying: ikev2 ", "keying: manual")
			edit(t, b, "psk: a-b.psk", "psk: a-b.psk\n    keying: ikev2\n    cipher: aes-128-cbc")
		}, func(a, b string) []string {
			return []string{
				a + ":31:10: psk is for keying: ikev2; this tunnel has manual keys",
				a + ":39:10: pfs is for keying: ikev2",
				b + ":27:13: cipher is for keying: manual",
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := ikePair(t, true)
			tc.edit(a, b)
			_, errs, code := ocfw(t, "validate", a, b)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range tc.wants(a, b) {
				if !strings.Contains(errs, w) {
					t.Errorf("lacks %q in\n%s", w, errs)
				}
			}
		})
	}
}

func pskPath(siteFile string) string { return filepath.Join(filepath.Dir(siteFile), "a-b.psk") }

func writePSK(t *testing.T, siteFile, data string) {
	t.Helper()
	must(t, os.WriteFile(pskPath(siteFile), []byte(data), 0o600))
}

func edit(t *testing.T, file, old, new string) {
	t.Helper()
	s := mustRead(t, file)
	if !strings.Contains(s, old) {
		t.Fatalf("%s has no %q", file, old)
	}
	must(t, os.WriteFile(file, []byte(strings.Replace(s, old, new, 1)), 0o644))
}
