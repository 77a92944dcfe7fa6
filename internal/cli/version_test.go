package cli

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	out, errs, code := ocfw(t, "version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{"ocfw ", "\nrevision  ", "\ngo        go1.", "github.com/u-root/u-root v", "github.com/u-root/mkuimage v",
		"github.com/u-root/gobusybox/src v", "github.com/diskfs/go-diskfs v"} {
		if !strings.Contains(out, w) {
			t.Errorf("version lacks %q:\n%s", w, out)
		}
	}
	js, _, code := ocfw(t, "version", "--json")
	var v buildinfo.Info
	if code != 0 || json.Unmarshal([]byte(js), &v) != nil || v.Go == "" || len(v.Modules) != 4 {
		t.Fatalf("version --json: exit %d\n%s", code, js)
	}
	// go test stamps no revision: it comes from git in this checkout.
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("git: %v", err)
	}
	if want := strings.TrimSpace(string(head)); v.Revision != want || !strings.Contains(out, want) {
		t.Errorf("revision %q, git says %q", v.Revision, want)
	}
}
