package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/lab/labtest"
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
		labtest.SkipOrFail(t, "qemu-arm not installed (apt-get install qemu-user)")
	}
	p := resolve(t, "nslu2")
	for i := range p.Ciphers {
		var keep []plan.Route
		for _, r := range p.Ciphers[i].Routes {
			if r.API == catalog.APIGo || r.Engine == "ixp4xx" {
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

// TestSuperviseDaemon: `ocf boot` returns when the daemon says it is done,
// and when the daemon dies first it says so, with the exit status, and
// still prints the done marker (the console must not wait for minutes on a
// sequence no one runs any more).
func TestSuperviseDaemon(t *testing.T) {
	// The backstop is short only where it is what the case checks: a
	// loaded machine takes seconds to start the helper.
	for _, tc := range []struct {
		mode     string
		backstop time.Duration
		want     []string // in the console
		not      []string
	}{
		{"done", time.Minute, nil, []string{"BUG", plan.MarkDone}},
		{"killed", time.Minute, []string{plan.MarkDaemonDied + " (signal: killed)", plan.MarkDone}, nil},
		{"exit", time.Minute, []string{"ended before the boot sequence was done (exit status 3)", plan.MarkDone}, nil},
		{"hang", 1500 * time.Millisecond, []string{"boot sequence still running after 1.5s: giving up", plan.MarkDone}, []string{"BUG"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			var out strings.Builder
			t.Setenv("OCF_TEST_DAEMON", tc.mode)
			if err := superviseDaemon(&out, os.Args[0], []string{"ocf", "-test.run=^TestDaemonHelper$"}, tc.backstop); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("console lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("console has %q:\n%s", n, out.String())
				}
			}
		})
	}
}

// TestDaemonHelper is the daemon TestSuperviseDaemon starts.
func TestDaemonHelper(t *testing.T) {
	mode := os.Getenv("OCF_TEST_DAEMON")
	if mode == "" {
		t.Skip("only as TestSuperviseDaemon's daemon")
	}
	status := os.NewFile(3, "status")
	switch mode {
	case "done":
		fmt.Fprintln(status, doneLine)
		time.Sleep(3 * time.Second) // a daemon goes on running
	case "killed":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "exit":
		os.Exit(3)
	case "hang":
		time.Sleep(5 * time.Second)
	}
	os.Exit(0)
}
