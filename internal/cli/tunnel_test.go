package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

	out, errs, code := ocfw(t, "validate", "--allow-placeholder-key", a, b)
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

// --peer-commands prints the second end's ip xfrm commands from the key
// file it keeps (an existing one is read, not replaced): the SAs mirrored
// with the file's SPIs and keys, ESN, the 128-packet window, truncated
// HMAC, and the three policies.
func TestTunnelKeysPeerCommands(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"site-a.yaml", "site-b.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/sites", n))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, n), data, 0o644))
	}
	a, b := filepath.Join(dir, "site-a.yaml"), filepath.Join(dir, "site-b.yaml")
	out, errs, code := ocfw(t, "tunnel", "keys", "--site", a, "--site", b, "--peer-commands")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	data, err := os.ReadFile(filepath.Join(dir, "a-b.keys"))
	must(t, err)
	k, kerrs := site.ReadTunnelKeys("a-b.keys", data)
	if len(kerrs) != 0 {
		t.Fatal(kerrs)
	}
	// SAs[0] runs A -> B: the peer (B) receives with it.
	ab, ba := k.SAs[0], k.SAs[1]
	if ab.From != "198.51.100.2" {
		t.Fatalf("key file's first SA from %s", ab.From)
	}
	hexSPI := func(s string) string { // the file's 0x… as %08x
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
		must(t, err)
		return fmt.Sprintf("0x%08x", v)
	}
	want := []string{
		"ip xfrm state add src 203.0.113.2 dst 198.51.100.2 proto esp spi " + hexSPI(ba.SPI) + " reqid " + hexSPI(ba.SPI) +
			" mode tunnel replay-window 128 flag esn enc 'cbc(aes)' 0x" + ba.EncKey + " auth-trunc 'hmac(sha256)' 0x" + ba.AuthKey + " 128",
		"ip xfrm state add src 198.51.100.2 dst 203.0.113.2 proto esp spi " + hexSPI(ab.SPI) + " reqid " + hexSPI(ab.SPI) +
			" mode tunnel replay-window 128 flag esn enc 'cbc(aes)' 0x" + ab.EncKey + " auth-trunc 'hmac(sha256)' 0x" + ab.AuthKey + " 128",
		"ip xfrm policy add src 192.168.2.0/24 dst 192.168.1.0/24 dir out priority 4048 tmpl src 203.0.113.2 dst 198.51.100.2 proto esp reqid " + hexSPI(ba.SPI) + " mode tunnel",
		"ip xfrm policy add src 192.168.1.0/24 dst 192.168.2.0/24 dir in priority 4048 tmpl src 198.51.100.2 dst 203.0.113.2 proto esp reqid " + hexSPI(ab.SPI) + " mode tunnel",
		"ip xfrm policy add src 192.168.1.0/24 dst 192.168.2.0/24 dir fwd priority 4048 tmpl src 198.51.100.2 dst 203.0.113.2 proto esp reqid " + hexSPI(ab.SPI) + " mode tunnel",
	}
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "#") {
			cmds = append(cmds, l)
		}
	}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Errorf("peer commands:\n%s\nwant:\n%s", strings.Join(cmds, "\n"), strings.Join(want, "\n"))
	}

	// Again: the file is read, not replaced, and gives the same text.
	again, errs, code := ocfw(t, "tunnel", "keys", "--site", a, "--site", b, "--peer-commands")
	data2, err := os.ReadFile(filepath.Join(dir, "a-b.keys"))
	must(t, err)
	if code != 0 || again != out || string(data2) != string(data) || !strings.Contains(errs, "read ") {
		t.Errorf("second run: exit %d, same output %v, same file %v\n%s", code, again == out, string(data2) == string(data), errs)
	}
}
