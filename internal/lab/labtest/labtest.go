// Package labtest is for tests only: the rule every test that needs QEMU,
// the cached kernel package or another host tool follows when the piece
// is missing. It is a package of its own, not a part of the lab's, so
// that no production binary links package testing (internal/layers
// checks that only tests and test-helper packages import it).
package labtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// EnvRequire, set to "1", turns a missing QEMU, kernel package or other
// host prerequisite of a test into a failure instead of a skip. CI sets
// it, so that CI never passes by skipping.
const EnvRequire = "OCFW_REQUIRE_KERNEL"

// Required reports whether EnvRequire is set to "1".
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// SkipOrFail skips t with the message, which says what is skipped and
// what is missing, or fails t with it when EnvRequire is set.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (%s=1: required)", msg, EnvRequire)
	}
	t.Skip(msg)
}

// SharedDep is the path of a file in the project's shared/deps: the
// shared/ directory beside the checkout (../shared/deps from the module
// root; for a git worktree, beside an ancestor directory), which holds
// third-party sources tests use without downloading them
// (cryptodev-linux). A missing file skips t, or fails it under
// EnvRequire.
func SharedDep(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("no go.mod above the test's directory: cannot find shared/deps/%s", name)
		}
		dir = up
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		p := filepath.Join(d, "shared", "deps", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	SkipOrFail(t, "shared/deps/%s not found beside %s or above it (a copy of shared/ belongs beside the checkout)", name, dir)
	return ""
}
