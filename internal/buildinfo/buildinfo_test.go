package buildinfo

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

const gomod = `module github.com/ocfw/ocfw

go 1.26.8

require (
	github.com/diskfs/go-diskfs v1.9.4
	github.com/u-root/u-root v0.16.0 // a comment
)

require github.com/u-root/mkuimage v0.0.0-20250905073043-9a40452f5d3b

require (
	golang.org/x/term v0.37.0 // indirect
)
`

func tree(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fakeGit answers rev-parse and status as git would in a checkout.
func fakeGit(rev, status string) gitFunc {
	return func(dir string, args ...string) ([]byte, error) {
		switch strings.Join(args, " ") {
		case "rev-parse HEAD":
			return []byte(rev + "\n"), nil
		case "--no-optional-locks status --porcelain --untracked-files=no":
			return []byte(status), nil
		}
		return nil, errors.New("unexpected git " + strings.Join(args, " "))
	}
}

func noGit(string, ...string) ([]byte, error) { return nil, errors.New("git: not found") }

const rev = "941d15b6c2a1e0f1a2b3c4d5e6f708192a3b4c5d"

// A binary stamped by go build: its revision and modules, not git's.
func TestStampedBinary(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: ModulePath, Version: "v0.0.0-20261202170000-941d15b6c2a1+dirty"},
		Deps: []*debug.Module{
			{Path: "github.com/u-root/u-root", Version: "v0.16.0"},
			{Path: "github.com/u-root/mkuimage", Version: "v0.0.0-1", Replace: &debug.Module{Path: "../mkuimage", Version: "v0.0.0-2"}},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-12-02T17:00:00Z"}}}
	i := collect(bi, tree(t), fakeGit("0000000000000000000000000000000000000000", ""))
	if i.Revision != rev || !i.Modified || i.RevisionFrom != "binary" {
		t.Errorf("revision %s modified %v from %q", i.Revision, i.Modified, i.RevisionFrom)
	}
	want := []Module{
		{"github.com/u-root/u-root", "v0.16.0"},
		{"github.com/u-root/mkuimage", "v0.0.0-2"},
		{"github.com/diskfs/go-diskfs", "v1.9.4"}, // not linked: from go.mod
	}
	if !slices.Equal(i.Modules, want) || !i.ModulesFromGoMod {
		t.Errorf("modules %v (from go.mod %v), want %v", i.Modules, i.ModulesFromGoMod, want)
	}
	if got := i.Tool(); got != "ocfw 941d15b6c2a1+modified" {
		t.Errorf("tool %q", got)
	}
}

// go run and go test stamp no revision: git in the source tree says.
func TestRevisionFromGit(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: ModulePath, Version: "(devel)"}}
	dir := tree(t)
	clean := collect(bi, dir, fakeGit(rev, ""))
	if clean.Revision != rev || clean.Modified || clean.RevisionFrom != "git" || clean.Tool() != "ocfw 941d15b6c2a1" {
		t.Errorf("clean tree: %+v, tool %q", clean, clean.Tool())
	}
	dirty := collect(bi, dir, fakeGit(rev, " M README.md\n"))
	if !dirty.Modified || dirty.Tool() != "ocfw 941d15b6c2a1+modified" {
		t.Errorf("changed tree: %+v", dirty)
	}
	if len(clean.Modules) != 3 || clean.Modules[0].Version != "v0.16.0" {
		t.Errorf("modules from go.mod: %v", clean.Modules)
	}
	text := dirty.String()
	for _, w := range []string{"ocfw (devel)\n", "revision  " + rev + " (modified: uncommitted changes), from git in " + dir, "go        go1.26.8\n",
		"modules   github.com/u-root/u-root v0.16.0\n", "          github.com/diskfs/go-diskfs v1.9.4\n"} {
		if !strings.Contains(text, w) {
			t.Errorf("text lacks %q:\n%s", w, text)
		}
	}
}

// No revision in the binary and no git (or no checkout): "unknown".
func TestUnknown(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: ModulePath, Version: "(devel)"}}
	for name, i := range map[string]Info{
		"no git":      collect(bi, tree(t), noGit),
		"no checkout": collect(bi, "", fakeGit(rev, "")),
		"git fails":   collect(bi, tree(t), fakeGit("", "")),
	} {
		if i.Revision != Unknown || i.Modified || i.Tool() != "ocfw (devel)" || !strings.Contains(i.String(), "revision  unknown") {
			t.Errorf("%s: %+v, tool %q\n%s", name, i, i.Tool(), i)
		}
	}
	if i := collect(&debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, "", nil); i.Tool() != "ocfw v1.2.0" {
		t.Errorf("a released version without a revision: tool %q", i.Tool())
	}
}

// In this checkout (go test stamps nothing), Get finds the revision with
// git, as `ocfw build` under go run does.
func TestGetInCheckout(t *testing.T) {
	i := Get()
	if i.Dir == "" {
		t.Fatal("no ocfw source tree found from the package directory")
	}
	if _, err := os.Stat(filepath.Join(i.Dir, ".git")); err != nil {
		t.Skipf("%s is not a git checkout", i.Dir)
	}
	if out, err := runGit(i.Dir, "rev-parse", "HEAD"); err != nil {
		t.Skipf("git: %v", err)
	} else if want := strings.TrimSpace(string(out)); i.Revision != want {
		t.Errorf("revision %q, git says %q", i.Revision, want)
	}
	if len(i.Modules) != len(KeyModules) {
		t.Errorf("modules %v", i.Modules)
	}
}

// With a real git: an image and its sidecars built in the checkout do
// not make the tree "modified" (the next build would differ from the
// first); a change to a tracked file does.
func TestGitUntrackedOutputs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := tree(t)
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "go.mod"},
		{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "go.mod"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	if i := collect(bi, dir, runGit); i.RevisionFrom != "git" || len(i.Revision) != 40 || i.Modified {
		t.Fatalf("fresh checkout: %+v", i)
	}
	for _, f := range []string{"ocfw-alix2d13.img", "ocfw-alix2d13.img.manifest.json", "sha256sums"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if i := collect(bi, dir, runGit); i.Modified {
		t.Errorf("outputs beside the source count as changes: %+v", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod+"\n// changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if i := collect(bi, dir, runGit); !i.Modified {
		t.Errorf("a changed go.mod does not count: %+v", i)
	}
}
