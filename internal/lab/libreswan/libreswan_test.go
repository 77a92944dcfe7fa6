package libreswan

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
)

// fetchTest fetches the tree for t: without apt-get (not a Debian host)
// the test skips, or fails under OCFW_REQUIRE_KERNEL=1.
func fetchTest(t *testing.T) *worldvm.Tree {
	t.Helper()
	if _, err := exec.LookPath("apt-get"); err != nil {
		labtest.SkipOrFail(t, "fetching Libreswan needs apt-get: %v", err)
	}
	start := time.Now()
	r, err := Fetch(context.Background(), "", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Libreswan tree %s (%d packages) ready in %v", r.Dir, len(r.Debs), time.Since(start).Round(time.Millisecond))
	return r
}

func TestLibreswanTree(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads Debian packages; skipped with -short")
	}
	fetchTest(t)
}
