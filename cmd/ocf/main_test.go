package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boards"
)

func ocf(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestPlanFile(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Resolve(boards.Request{Board: "net5501", Cards: []string{"vpn1401"}, Ciphers: []string{"des-ede3-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	j, _ := p.JSON()
	dir := t.TempDir()
	planFile := filepath.Join(dir, "plan.json")
	os.WriteFile(planFile, j, 0o644)
	out, errs, code := ocf("--plan", planFile, "selftest")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	// The plan's engines for the one cipher, absent ones named.
	for _, w := range []string{"cbc-3des-hifn0", "go", "self-test: 1 passed"} {
		if !strings.Contains(out, w) {
			t.Errorf("lacks %q:\n%s", w, out)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{nope"), 0o644)
	_, errs, code = ocf("--plan", bad, "selftest")
	if code == 0 || !strings.Contains(errs, "not a plan written by ocfw") {
		t.Errorf("bad plan: %d %q", code, errs)
	}
	_, errs, code = ocf("--plan", filepath.Join(dir, "missing.json"), "selftest")
	if code == 0 || !strings.Contains(errs, "--plan") {
		t.Errorf("missing plan: %d %q", code, errs)
	}
}
