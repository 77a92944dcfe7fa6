package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/plan"
)

// A build into a directory that does not exist makes it, and a failed
// build removes it again.
func TestBuildOutputDirectory(t *testing.T) {
	if err := firmware.CheckTools(plan.BootBIOSCF); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := cat.Resolve(boards.Request{Board: "alix2d13"})
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	out := filepath.Join(base, "new", "dir", "x.img")
	_, err = Build(context.Background(), pl, Options{Output: out, Kernel: filepath.Join(base, "no-such-kernel.deb")})
	if err == nil || !strings.Contains(err.Error(), "no-such-kernel") {
		t.Fatalf("error %v; want the missing kernel's (the step after the output directory is made)", err)
	}
	if _, serr := os.Stat(filepath.Join(base, "new")); !os.IsNotExist(serr) {
		t.Errorf("the failed build left its new directory behind (%v); error was %v", serr, err)
	}
}
