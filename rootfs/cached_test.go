package rootfs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/rootfs/usercache"
	"github.com/ocfw/ocfw/site"
)

func testSite(t *testing.T, hostname string) *site.Site {
	t.Helper()
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../examples/sites/alix2d13.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte("\nhostname: alix\n"), []byte("\nhostname: "+hostname+"\n"), 1)
	s, _, err := cat.ParseSite("alix2d13.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if s.Hostname != hostname {
		t.Fatalf("site hostname %q, want %q", s.Hostname, hostname)
	}
	return s
}

// A build with an empty userland cache compiles the userland and stores
// it; the same build again takes it from the cache and gives the same
// initramfs bytes; a build with another site config reuses it too (same
// key), and NoCache neither reads nor writes the cache.
func TestUserlandCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the userland; -short")
	}
	needGo(t)
	p := testPlan(t)
	k := debianKernel(t, p)
	cacheDir := t.TempDir()
	t.Setenv("OCFW_CACHE", cacheDir)
	build := func(sc *site.Site, noCache bool) (*Result, string) {
		t.Helper()
		var log strings.Builder
		dir := t.TempDir()
		r, err := Build(context.Background(), p, Options{Kernel: k, WorkDir: dir, SourceDateEpoch: 1700000000,
			Boot: plan.Options{SpeedBudget: "1s"}, Site: sc, NoCache: noCache,
			Log: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }})
		if err != nil {
			t.Fatal(err)
		}
		return r, log.String()
	}
	entries := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(cacheDir, "userland", "*.entry"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	cold, log := build(testSite(t, "alix"), false)
	t.Logf("cold build: %v", cold.Took)
	if cold.UserlandCached || cold.UserlandKey == "" {
		t.Fatalf("first build: cached %v, key %q; want built and keyed\n%s", cold.UserlandCached, cold.UserlandKey, log)
	}
	if !strings.Contains(log, "userland: built in") || !strings.Contains(log, "cached (key "+cold.UserlandKey[:12]) {
		t.Errorf("first build's log does not say it built and cached the userland:\n%s", log)
	}
	// Two entries: mkuimage's archive, and the xz block of the
	// initramfs's userland part (xzjoin.go).
	if e := entries(); len(e) != 2 || !slices.Contains(e, filepath.Join(cacheDir, "userland", cold.UserlandKey+".entry")) {
		t.Fatalf("cache holds %q, want the userland %s and its xz block", e, cold.UserlandKey)
	}

	warm, log := build(testSite(t, "alix"), false)
	t.Logf("warm build: %v", warm.Took)
	if !warm.UserlandCached || warm.UserlandKey != cold.UserlandKey {
		t.Fatalf("second build: cached %v, key %.12s; want reused %.12s\n%s", warm.UserlandCached, warm.UserlandKey, cold.UserlandKey, log)
	}
	if !strings.Contains(log, "userland: reused from cache (key "+cold.UserlandKey[:12]) || !strings.Contains(log, "xz block reused from cache") {
		t.Errorf("second build's log does not say it reused the userland and its xz block:\n%s", log)
	}
	if fileSum(t, cold.Initramfs) != fileSum(t, warm.Initramfs) {
		t.Fatalf("the initramfs from the cache (%d bytes) differs from the cold build's (%d bytes)", warm.Size, cold.Size)
	}

	other, log := build(testSite(t, "other"), false)
	if !other.UserlandCached || other.UserlandKey != cold.UserlandKey || !strings.Contains(log, "xz block reused from cache") {
		t.Errorf("a build with another site config: cached %v, key %.12s; want reused %.12s\n%s", other.UserlandCached, other.UserlandKey, cold.UserlandKey, log)
	}
	if fileSum(t, other.Initramfs) == fileSum(t, cold.Initramfs) {
		t.Errorf("another site config gave the same initramfs: the site is not in it")
	}

	// NoCache: builds (its userland is the same) and leaves the cache
	// alone, even an emptied one. Its go build takes the compiler's
	// outputs from Go's build cache as every build does: that a compile
	// from an empty GOCACHE gives the same bytes was checked by hand
	// (docs/benchmarks.md); here it cost ~45 s of CPU in every run.
	for _, e := range entries() {
		os.Remove(e)
	}
	nc, log := build(testSite(t, "alix"), true)
	if nc.UserlandCached || nc.UserlandKey != "" || !strings.Contains(log, "cache not used") {
		t.Errorf("NoCache build: cached %v, key %q\n%s", nc.UserlandCached, nc.UserlandKey, log)
	}
	if e := entries(); len(e) != 0 {
		t.Errorf("a NoCache build stored %q", e)
	}
	if fileSum(t, nc.Initramfs) != fileSum(t, cold.Initramfs) {
		t.Errorf("two builds of the userland differ: the NoCache build's initramfs is not the cold build's")
	}
}

// The key of the firmware's userland differs between the Geode and the
// XScale targets, and is the same for every board of one target.
func TestUserlandKeyTargets(t *testing.T) {
	needGo(t)
	src, err := sourceDir("")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[plan.GoTarget]string{}
	for _, tg := range []plan.GoTarget{
		{GOOS: "linux", GOARCH: "386", GO386: "softfloat"},
		{GOOS: "linux", GOARCH: "arm", GOARM: "5"},
	} {
		in, err := userlandInputs(tg, src)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(in.Flags, " "), "-trimpath") || len(in.Commands) != len(Commands) {
			t.Fatalf("inputs miss the build's flags or commands: %+v", in)
		}
		k, err := usercache.Key(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		keys[tg] = k
	}
	if len(keys) != 2 || keys[plan.GoTarget{GOOS: "linux", GOARCH: "386", GO386: "softfloat"}] == keys[plan.GoTarget{GOOS: "linux", GOARCH: "arm", GOARM: "5"}] {
		t.Errorf("the 386 and arm userlands share a key: %v", keys)
	}
}
