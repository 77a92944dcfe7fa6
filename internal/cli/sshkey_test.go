package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// validate parses each SSH key and names the bad one's file, line and
// column; build refuses the examples' placeholder key unless asked.
func TestValidateSSHKeys(t *testing.T) {
	ex, err := os.ReadFile("../../examples/sites/alix2d13.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const placeholder = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKBwJBsFLsyeu0X2x0QRAdxj8oBbJzXpNHzV8QkGZtxv me@laptop"
	if !strings.Contains(string(ex), placeholder) {
		t.Fatalf("the example site no longer holds the placeholder key %q", placeholder)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	src := strings.Replace(string(ex), placeholder, "ssh-ed25519 !!!notbase64!!! me\n    - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKBwJBsF me", 1)
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	line := 0
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, "!!!notbase64!!!") {
			line = i + 1
		}
	}
	_, errs, code := ocfw(t, "validate", bad)
	for _, want := range []string{
		bad + ":" + strconv.Itoa(line) + ":7: not a public key",
		bad + ":" + strconv.Itoa(line+1) + ":7: not a public key",
	} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("exit %d; stderr lacks %q:\n%s", code, want, errs)
		}
	}

	out := filepath.Join(dir, "x.img")
	_, errs, code = ocfw(t, "build", "--board", "alix2d13", "--site", "../../examples/sites/alix2d13.yaml", "-o", out)
	if code == 0 || !strings.Contains(errs, "examples' placeholder") || !strings.Contains(errs, "--allow-placeholder-key") {
		t.Errorf("build with the placeholder key: exit %d, %s; want a refusal naming --allow-placeholder-key", code, errs)
	}
	_, errs, code = ocfw(t, "try", "--board", "alix2d13", "--site", "../../examples/sites/alix2d13.yaml", "-o", out)
	if code == 0 || !strings.Contains(errs, "--allow-placeholder-key") {
		t.Errorf("try with the placeholder key: exit %d, %s; want a refusal naming --allow-placeholder-key", code, errs)
	}
	// Allowed explicitly, the build gets past the check: to the kernel,
	// which this test does not have.
	_, errs, _ = ocfw(t, "build", "--board", "alix2d13", "--site", "../../examples/sites/alix2d13.yaml", "--allow-placeholder-key", "--kernel", filepath.Join(dir, "no-kernel.deb"), "-o", out)
	if strings.Contains(errs, "placeholder") || !strings.Contains(errs, "no-kernel.deb") {
		t.Errorf("--allow-placeholder-key: %s; want the build to go on to the (missing) kernel", errs)
	}
}
