package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/proctest"
	"github.com/ocfw/ocfw/plan"
)

// envMain makes the test binary run ocfw's main with its arguments, so a
// test can send a real signal to a real ocfw process.
const envMain = "OCFW_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		os.Unsetenv(envMain)
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// ocfwProcess starts ocfw (this test binary running main) with args.
func ocfwProcess(t *testing.T, stderr *bytes.Buffer, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), envMain+"=1")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// SIGINT or SIGTERM during the userland build: ocfw stops the go build,
// compilers included, removes every temporary file, and exits 128+signal.
func TestBuildSignalled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the userland build twice; -short")
	}
	if err := firmware.CheckTools(plan.BootBIOSCF); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	if _, err := debian.CachedKernel("linux-image-686", "i386", ""); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			base := t.TempDir()
			dir, tmp := filepath.Join(base, "out"), filepath.Join(base, "tmp")
			must(t, os.Mkdir(dir, 0o755))
			must(t, os.Mkdir(tmp, 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "sha256sums"), []byte("an earlier build's\n"), 0o644))
			t.Setenv("TMPDIR", tmp)
			// An empty Go build cache: from a warm one the userland's go
			// build links without running the compiler this waits for.
			t.Setenv("GOCACHE", filepath.Join(base, "gocache"))
			before := proctest.Tree(dir)

			var stderr bytes.Buffer
			// --no-cache: the signal goes to the userland's compile.
			cmd := ocfwProcess(t, &stderr, "build", "--no-cache", "--board", "alix2d13", "--cipher", "aes-128-cbc", "-o", filepath.Join(dir, "alix.img"))
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Signal once a compiler runs for the userland.
			var seen string
		wait:
			for seen == "" {
				select {
				case err := <-exited:
					t.Fatalf("ocfw build ended (%v) before the go build started:\n%s", err, stderr.String())
				case <-time.After(20 * time.Millisecond):
				}
				for _, p := range proctest.Using(dir) {
					if strings.Contains(p, "/compile ") && strings.Contains(p, " -p ") {
						seen = p
						break wait
					}
				}
			}
			t.Logf("%v while %.200s", tc.sig, seen)
			must(t, cmd.Process.Signal(tc.sig))
			err := <-exited
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Errorf("ocfw exited with %v, want status %d\n%s", err, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "stopping and removing temporary files") {
				t.Errorf("stderr does not say the build is stopping:\n%s", stderr.String())
			}
			if after := proctest.Tree(dir); !slices.Equal(after, before) {
				t.Errorf("the output directory held %q before the build and %q after it", before, after)
			}
			// goimports/ is golang.org/x/tools' index directory, made in
			// $TMPDIR when the program starts if it is a test binary (in
			// the user's cache directory otherwise): not the build's.
			if left := slices.DeleteFunc(proctest.Tree(tmp), func(p string) bool { return strings.HasPrefix(p, "goimports/") }); len(left) > 0 {
				t.Errorf("left in $TMPDIR: %q", left)
			}
			if ps := proctest.Using(base); len(ps) > 0 {
				t.Errorf("still running after ocfw exited:\n%s", strings.Join(ps, "\n"))
			}
		})
	}
}
