// Package buildinfo says which source ocfw was built from, so that an
// image can be traced back to it: the VCS revision and whether the tree
// had uncommitted changes, the Go version, and the versions of the
// modules that shape the image (u-root, mkuimage, gobusybox, go-diskfs).
//
// `go build` stamps the revision into the binary (runtime/debug's
// vcs.revision and vcs.modified); `go run` and `go test` do not, and then
// the revision comes from git in the ocfw source tree the command runs
// in — the tree `ocfw build` compiles the firmware's userland from.
//
// Nothing here depends on the time: two builds from the same commit and
// tree state record the same facts, so images stay reproducible.
package buildinfo

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// ModulePath is ocfw's module.
const ModulePath = "github.com/ocfw/ocfw"

// KeyModules are the modules whose versions shape an image, in the order
// they are shown.
var KeyModules = []string{
	"github.com/u-root/u-root",
	"github.com/u-root/mkuimage",
	"github.com/u-root/gobusybox/src",
	"github.com/diskfs/go-diskfs",
}

// Unknown is the revision when neither the binary nor git tells it.
const Unknown = "unknown"

// Source is what an image's manifest records about the ocfw that built
// it.
type Source struct {
	// Revision is the VCS commit, or Unknown.
	Revision string `json:"revision"`
	// Modified says the tree had uncommitted changes: from a binary,
	// go build's vcs.modified; from git, changes to tracked files
	// (untracked files, such as images built in the checkout, do not
	// count).
	Modified bool `json:"modified"`
	// Go is the Go version ocfw was built with.
	Go string `json:"go"`
	// Modules are KeyModules with their versions (those known).
	Modules []Module `json:"modules,omitempty"`
}

// Module is a module and its version.
type Module struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// Info is Source plus what `ocfw version` says about where it came from.
type Info struct {
	// Version is the main module's version: "(devel)" from a checkout.
	Version string `json:"version"`
	Source
	// RevisionFrom is where Revision came from: "binary" (stamped by go
	// build), "git" (the source tree at dir) or "" (unknown).
	RevisionFrom string `json:"revision_from,omitempty"`
	// ModulesFromGoMod says some module versions come from the source
	// tree's go.mod, not from the binary.
	ModulesFromGoMod bool `json:"modules_from_go_mod,omitempty"`
	// Dir is the ocfw source tree found from the working directory, ""
	// when there is none.
	Dir string `json:"dir,omitempty"`
}

// Get returns the facts for this process, gathered once: a build that
// creates files in the tree while it runs still records the state it
// started from.
var Get = sync.OnceValue(func() Info {
	return collect(readBuildInfo(), sourceDir(), runGit)
})

// ShortRevision is the first 12 digits of a revision, with "+modified"
// when the tree had changes.
func (s Source) ShortRevision() string {
	r := s.Revision
	if len(r) > 12 {
		r = r[:12]
	}
	if s.Modified && s.Revision != Unknown {
		r += "+modified"
	}
	return r
}

// Tool is the builder's name for a manifest: "ocfw REVISION", e.g. "ocfw
// 941d15b6c2a1+modified"; a released version when there is no revision;
// "ocfw (devel)" when nothing is known.
func (i Info) Tool() string {
	switch {
	case i.Revision != Unknown:
		return "ocfw " + i.ShortRevision()
	case i.Version != "":
		return "ocfw " + i.Version
	}
	return "ocfw (devel)"
}

// String is the text `ocfw version` prints.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ocfw %s\n", i.Version)
	rev := i.Revision
	switch {
	case i.Revision == Unknown:
		rev += " (the binary carries no revision and there is no ocfw git checkout here)"
	case i.Modified:
		rev += " (modified: uncommitted changes)"
	}
	if i.RevisionFrom == "git" {
		rev += ", from git in " + i.Dir
	}
	fmt.Fprintf(&b, "revision  %s\n", rev)
	fmt.Fprintf(&b, "go        %s\n", i.Go)
	label := "modules"
	for _, m := range i.Modules {
		fmt.Fprintf(&b, "%-9s %s %s\n", label, m.Path, m.Version)
		label = ""
	}
	if i.ModulesFromGoMod {
		fmt.Fprintf(&b, "          (versions the binary does not carry are from %s)\n", filepath.Join(i.Dir, "go.mod"))
	}
	return b.String()
}

// gitFunc runs git with args in dir and returns its output.
type gitFunc func(dir string, args ...string) ([]byte, error)

func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// collect gathers Info from the binary's build info (nil: none), else
// from git and go.mod in dir ("" means no source tree).
func collect(bi *debug.BuildInfo, dir string, git gitFunc) Info {
	i := Info{Version: "(devel)", Source: Source{Revision: Unknown, Go: runtime.Version()}, Dir: dir}
	deps := map[string]string{}
	if bi != nil {
		if bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			i.Go = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision, i.RevisionFrom = s.Value, "binary"
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Version
			}
			deps[d.Path] = v
		}
	}
	if i.RevisionFrom == "" && dir != "" && git != nil {
		if out, err := git(dir, "rev-parse", "HEAD"); err == nil && len(bytes.TrimSpace(out)) > 0 {
			// Without optional locks git status does not refresh the
			// index, so it writes nothing into the tree. Untracked files
			// do not count: they are mostly outputs (an image built in
			// the checkout, its manifest and sha256sums), and counting
			// them would make the next build of the same source differ.
			if st, err := git(dir, "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"); err == nil {
				i.Revision, i.RevisionFrom = string(bytes.TrimSpace(out)), "git"
				i.Modified = len(bytes.TrimSpace(st)) > 0
			}
		}
	}
	if i.RevisionFrom == "" {
		i.Modified = false
	}
	// A module the binary does not link (a test binary links few) comes
	// from the source tree's go.mod, which the userland is built with.
	var gomod map[string]string
	if dir != "" {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			gomod = requires(b)
		}
	}
	for _, p := range KeyModules {
		if v, ok := deps[p]; ok {
			i.Modules = append(i.Modules, Module{Path: p, Version: v})
		} else if v, ok := gomod[p]; ok {
			i.Modules = append(i.Modules, Module{Path: p, Version: v})
			i.ModulesFromGoMod = true
		}
	}
	return i
}

// requires reads the required module versions from a go.mod: lines
// "require PATH VERSION" and "PATH VERSION" inside require blocks.
func requires(gomod []byte) map[string]string {
	out := map[string]string{}
	block := false
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "require" && len(f) == 2 && f[1] == "(":
			block = true
		case block && f[0] == ")":
			block = false
		case f[0] == "require" && len(f) == 3:
			out[f[1]] = f[2]
		case block && len(f) == 2:
			out[f[0]] = f[1]
		}
	}
	return out
}

// sourceDir finds the ocfw module's root from the working directory, ""
// when the command does not run inside an ocfw source tree.
func sourceDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == ModulePath {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// runGit runs git in dir, bounded in time; a missing git is an error.
func runGit(dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	return cmd.Output()
}
