package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/drivers"
	"github.com/ocfw/ocfw/internal/qemu"
	"github.com/ocfw/ocfw/plan"
)

func resolve(t *testing.T, board string, ciphers ...string) *plan.Plan {
	t.Helper()
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Resolve(boards.Request{Board: board, Ciphers: ciphers})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// `ocf boot` on a tree without modules or a data partition still runs
// the whole sequence, prints the markers and exits 0 for init's shell.
func TestBootCommand(t *testing.T) {
	root := t.TempDir()
	writeJSON(t, filepath.Join(root, plan.File), resolve(t, "alix2d13", "aes-128-cbc"))
	writeJSON(t, filepath.Join(root, plan.OptionsFile), plan.Options{SpeedBudget: "0s"})
	out, errs, code := ocf("boot", "--root", root, "--no-mount")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{plan.MarkReportRAM, plan.MarkSelfTest, plan.MarkDone, "module geode_aes        missing"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// The ARM (GOARM=5) build of `ocf selftest` runs under qemu-arm user
// mode and passes: the IXP4xx engine is absent, Go software passes every
// cipher. The plan keeps Go routes only: qemu-user's translation of
// AF_ALG's control messages is not something the test should depend on.
func TestARMSelftestUnderQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds ocf")
	}
	qemuArm, err := exec.LookPath("qemu-arm")
	if err != nil {
		qemu.SkipOrFail(t, "qemu-arm not installed (apt-get install qemu-user)")
	}
	p := resolve(t, "nslu2")
	for i := range p.Ciphers {
		var keep []plan.Route
		for _, r := range p.Ciphers[i].Routes {
			if r.API == drivers.APIGo || r.Engine == "ixp4xx" {
				keep = append(keep, r)
			}
		}
		p.Ciphers[i].Routes = keep
	}
	dir := t.TempDir()
	planFile := filepath.Join(dir, "plan.json")
	writeJSON(t, planFile, p)
	bin := filepath.Join(dir, "ocf-arm")
	// go test puts its own GOROOT/bin first on PATH: this is that go.
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), p.Go.Env()...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(p.Go.Env(), " "), err, out)
	}
	cmd := exec.Command(qemuArm, bin, "--plan", planFile, "selftest")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-arm ocf selftest: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "ABSENT") || !strings.Contains(s, "ixp4xx") {
		t.Errorf("the IXP4xx engine is not reported absent:\n%s", s)
	}
	want := len(p.Ciphers)
	if !strings.Contains(s, "self-test: "+strconv.Itoa(want)+" passed, 0 failed") {
		t.Errorf("want %d Go passes and no failures:\n%s", want, s)
	}
}
