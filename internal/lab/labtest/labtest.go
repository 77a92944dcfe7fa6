// Package labtest is for tests only: the rule every test that needs QEMU,
// the cached kernel package or another host tool follows when the piece
// is missing. It is a package of its own, not a part of the lab's, so
// that no production binary links package testing (internal/layers
// checks that only tests and test-helper packages import it).
package labtest

import (
	"fmt"
	"os"
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
