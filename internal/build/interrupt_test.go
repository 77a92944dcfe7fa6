package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/proctest"
	"github.com/ocfw/ocfw/plan"
)

// interruptCase cancels a build at one point: when the build logs a
// line containing onLog, or once a process working in the output
// directory has all of onProc in its command line.
type interruptCase struct {
	name      string
	onLog     string
	onProc    []string
	initramfs bool // a stand-in initramfs: no userland build
	// coldGo builds with an empty Go build cache: from a warm one the
	// userland's go build links without running the compiler.
	coldGo bool
}

// interruptBuild runs Build into a directory holding one file of the
// user's, cancels it per tc, and checks that the build failed with the
// cancellation and left the directory, and $TMPDIR, as they were, with no
// process still working there.
func interruptBuild(t *testing.T, tc interruptCase) {
	t.Helper()
	if err := firmware.CheckTools(plan.BootBIOSCF); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	deb, err := debian.CachedKernel("linux-image-686", "i386", "")
	if err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := cat.Resolve(boards.Request{Board: "alix2d13", Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	dir, tmp := filepath.Join(base, "out"), filepath.Join(base, "tmp")
	for _, d := range []string{dir, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the user's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	if tc.coldGo {
		t.Setenv("GOCACHE", filepath.Join(base, "gocache"))
	}
	before := proctest.Tree(dir)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	var cancelled string
	stop := func(why string) { once.Do(func() { cancelled = why; cancel() }) }
	// NoCache: a userland from the cache would end the build before the
	// compile this interrupts.
	opts := Options{Output: filepath.Join(dir, "alix.img"), Kernel: deb, SourceDateEpoch: 1700000000, Tool: "ocfw test", NoCache: true,
		Log: func(format string, args ...any) {
			if tc.onLog != "" && strings.Contains(format, tc.onLog) {
				stop("log: " + tc.onLog)
			}
		}}
	if tc.initramfs {
		opts.Initramfs = filepath.Join(base, "initrd.xz")
		stub := append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 1000)...)
		if err := os.WriteFile(opts.Initramfs, stub, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	watching := make(chan struct{})
	if len(tc.onProc) > 0 {
		go func() {
			defer close(watching)
			for ctx.Err() == nil {
				for _, p := range proctest.Using(dir) {
					if all(p, tc.onProc) {
						stop("process " + p)
						return
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	} else {
		close(watching)
	}
	_, err = Build(ctx, pl, opts)
	cancel()
	<-watching
	if cancelled == "" {
		t.Fatalf("the build ended (%v) before the point to interrupt it", err)
	}
	t.Logf("cancelled at %s", cancelled)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Build returned %v, want the cancellation", err)
	}
	if after := proctest.Tree(dir); !slices.Equal(after, before) {
		t.Errorf("the output directory held %q before the build and %q after it", before, after)
	}
	if left := proctest.Tree(tmp); len(left) > 0 {
		t.Errorf("left in $TMPDIR: %q", left)
	}
	if ps := proctest.Using(base); len(ps) > 0 {
		t.Errorf("still running after Build returned:\n%s", strings.Join(ps, "\n"))
	}
}

func all(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// An interrupted image step removes the half-written image and its work
// directory.
func TestImageStepInterrupted(t *testing.T) {
	for _, tc := range []interruptCase{
		{name: "formatting", onLog: "formatting the boot", initramfs: true},
		{name: "syslinux", onLog: "installing SYSLINUX", initramfs: true},
	} {
		t.Run(tc.name, func(t *testing.T) { interruptBuild(t, tc) })
	}
}

// An interrupted userland build stops its go build, compilers included,
// and removes the initramfs work directory and go build's own. (Before,
// mkuimage's go build ran on for a minute after ocfw was gone.)
func TestUserlandBuildInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the userland build (go list, go build) three times; -short")
	}
	for _, tc := range []interruptCase{
		{name: "before-generating", onLog: "building the Go userland"},
		{name: "go-build-started", onProc: []string{" build ", "-trimpath"}},
		{name: "compiling", onProc: []string{"/compile ", "-p "}, coldGo: true},
	} {
		t.Run(tc.name, func(t *testing.T) { interruptBuild(t, tc) })
	}
}
