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

	// validate refuses the placeholder as the build does, with the
	// build's words and the key's line, and says no "ok" for it.
	exLine := 0
	for i, l := range strings.Split(string(ex), "\n") {
		if strings.Contains(l, placeholder) {
			exLine = i + 1
		}
	}
	var stdout string
	stdout, errs, code = ocfw(t, "validate", "../../examples/sites/alix2d13.yaml")
	if want := "../../examples/sites/alix2d13.yaml:" + strconv.Itoa(exLine) + ":"; code != 1 || !strings.Contains(errs, want) ||
		!strings.Contains(errs, placeholderKeyProblem()) || strings.Contains(stdout, "ok") {
		t.Errorf("validate with the placeholder key: exit %d, stdout %q, stderr %s; want a refusal at %s with the build's words", code, stdout, errs, want)
	}
	stdout, errs, code = ocfw(t, "validate", "--allow-placeholder-key", "../../examples/sites/alix2d13.yaml")
	if code != 0 || !strings.Contains(stdout, ": ok (site") {
		t.Errorf("validate --allow-placeholder-key: exit %d, %s%s", code, stdout, errs)
	}

	out := filepath.Join(dir, "x.img")
	_, errs, code = ocfw(t, "build", "--board", "alix2d13", "--site", "../../examples/sites/alix2d13.yaml", "-o", out)
	if code == 0 || !strings.Contains(errs, placeholderKeyProblem()) {
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
