package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/ocfw/ocfw/"

// pkgs maps every package of the module (tests excluded) to its
// transitive dependencies, as `go list -deps` sees them.
func pkgs(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", mod+"...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[f[0]] = f[1:]
	}
	if len(m) < 20 {
		t.Fatalf("go list found only %d packages", len(m))
	}
	return m
}

func under(pkg string, roots ...string) bool {
	for _, r := range roots {
		if pkg == mod+r || strings.HasPrefix(pkg, mod+r+"/") {
			return true
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	all := pkgs(t)
	rules := []struct {
		name      string
		applies   func(pkg string) bool
		forbidden []string // import paths or prefixes ending in "/"
	}{
		{
			// Board-side code and the contract build into the firmware:
			// no CLI, YAML, image-writing or VM code.
			name:    "board side imports no host package",
			applies: func(p string) bool { return under(p, "boot", "router", "ocf", "store", "plan", "site") },
			forbidden: []string{mod + "internal/ocfcmd", mod + "internal/cli", "github.com/spf13/cobra", "gopkg.in/yaml.v3",
				"github.com/diskfs/go-diskfs", "github.com/u-root/mkuimage", mod + "internal/lab",
				mod + "internal/build", mod + "firmware", mod + "rootfs", mod + "boards"},
		},
		{
			// firmware lays out, inspects and flashes images; booting
			// them is internal/lab/boardvm's job.
			name:      "firmware does not boot images",
			applies:   func(p string) bool { return under(p, "firmware") },
			forbidden: []string{mod + "internal/lab", mod + "boot", mod + "internal/lab/boardvm"},
		},
		{
			// The charts and the 42 KB reference table stay on the host.
			name:      "the board binary carries no host-only tables",
			applies:   func(p string) bool { return p == mod+"cmd/ocf" },
			forbidden: []string{mod + "internal/chart", "github.com/diskfs/go-diskfs", "gopkg.in/yaml.v3"},
		},
	}
	for _, r := range rules {
		checked := 0
		for pkg, deps := range all {
			if !r.applies(pkg) {
				continue
			}
			checked++
			for _, d := range deps {
				for _, f := range r.forbidden {
					if d == f || strings.HasPrefix(d, f+"/") {
						t.Errorf("%s: %s imports %s", r.name, pkg, d)
					}
				}
			}
		}
		if checked == 0 {
			t.Errorf("%s: no package matched; the rule checks nothing", r.name)
		}
	}
}

// TestOcftestIsTestOnly: ocf/ocftest holds test helpers; production code
// that needs shipped fault injection uses ocf/fault.
func TestOcftestIsTestOnly(t *testing.T) {
	for pkg, deps := range pkgs(t) {
		if pkg == mod+"ocf/ocftest" {
			continue
		}
		for _, d := range deps {
			if d == mod+"ocf/ocftest" {
				t.Errorf("%s imports ocf/ocftest, a test-only package", pkg)
			}
		}
	}
}
