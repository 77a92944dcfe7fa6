package layers

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const mod = "github.com/ocfw/ocfw/"

// pkg is one package of the module as `go list` sees it, tests excluded.
type pkg struct {
	imports []string // direct imports
	deps    []string // transitive dependencies
}

// load lists every package of the module (tests excluded), keyed by its
// path relative to the module ("ocf/kcrypto").
func load(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}\t{{.Dir}}", mod+"...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	m := map[string]pkg{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		m[strings.TrimPrefix(f[0], mod)] = pkg{imports: strings.Fields(f[1]), deps: strings.Fields(f[2])}
		watch(t, f[3])
	}
	if len(m) < 20 {
		t.Fatalf("go list found only %d packages", len(m))
	}
	return m
}

// watch reads dir and stats its Go files, so that go test's result cache
// (which sees the files a test opens, not what go list read) runs the
// rules again when a package's files or imports change.
func watch(t *testing.T, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") {
			if _, err := os.Stat(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// full is an import path from a rule's name: ocfw packages are named
// relative to the module ("internal/lab"), others in full
// ("github.com/spf13/cobra"). The standard library is not named here.
func full(p string) string {
	if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
		return p
	}
	return mod + p
}

// under says whether path is one of roots or inside one.
func under(path string, roots ...string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r+"/") {
			return true
		}
	}
	return false
}

// A rule: the packages under pkgs (but not under except) may not import
// anything under forbid, and, when only is set, import no ocfw package
// outside only. direct checks the package's own imports; otherwise all
// it depends on.
type rule struct {
	name   string
	pkgs   []string // roots, relative to the module; nil means every package
	except []string
	direct bool
	forbid []string // roots: relative to the module for ocfw, else in full
	only   []string // roots, relative to the module
}

// Helpers: leaves that import no other ocfw package.
var helpers = []string{"internal/atomicfile", "internal/cabi", "internal/fat", "internal/regfile",
	"internal/progress", "internal/buildinfo", "internal/jsonfile"}

// Test-only packages: helpers for tests, imported by tests, by each
// other, and by the benchmarks; package testing is theirs only.
var testOnly = []string{"internal/lab/labtest", "internal/lab/vmtest", "internal/lab/kerneltest", "internal/lab/worldvm",
	"internal/lab/strongswan", "internal/lab/libreswan", "internal/lab/isp6", "internal/lab/refspeed", "internal/lab/proctest", "internal/lab/realclient", "ocf/ocftest"}

// Board side: what goes into the firmware.
var boardSide = []string{"boot", "router", "store", "ocf", "plan", "site", "internal/ocfcmd", "cmd/ocf", "cmd/ocfsh", "cmd/ping"}

// host packages the board side does without.
var host = []string{"gopkg.in/yaml.v3", "github.com/diskfs/go-diskfs", "github.com/u-root/mkuimage",
	"github.com/u-root/gobusybox", "internal/lab", "internal/build", "internal/cli", "firmware", "rootfs",
	"kernel", "boards", "internal/chart", "internal/debian", "internal/kbuild"}

var rules = []rule{
	{
		// (a) The firmware carries no CLI, YAML, image-writing, build or
		// VM code. (cobra: rule (i); the board's own command uses it.)
		name: "board side imports no host package",
		pkgs: boardSide, forbid: host,
	},
	{
		// (b) The crypto framework knows nothing of the router or the
		// boot that use it (ocf/esp holds the ESP result it reads).
		name: "ocf imports no router, boot or store",
		pkgs: []string{"ocf"}, forbid: []string{"router", "boot", "store"},
	},
	{
		// (c) Boards resolve profiles against the catalog; the stand-in
		// machine and the tunnel modules are catalog facts.
		name: "boards import no lab, router, crypto framework or boot",
		pkgs: []string{"boards"}, forbid: []string{"internal/lab", "router", "ocf", "boot", "store"},
	},
	{
		// (d) firmware lays out, inspects and flashes images; booting
		// them is the lab's.
		name: "firmware does not boot images",
		pkgs: []string{"firmware"}, forbid: []string{"internal/lab", "boot"},
	},
	{
		// (e) The QEMU lab is for tests, the benchmarks, `ocfw run` and
		// `try` (internal/cli: boardvm, qemu), and the build of the
		// test engine's module for --card testaes (internal/build:
		// testengine).
		name:   "only the lab, the CLI, the build, bench and e2e import the lab",
		except: []string{"internal/lab", "internal/cli", "internal/build", "bench", "e2e"},
		direct: true, forbid: []string{"internal/lab"},
	},
	{
		name: "the CLI imports of the lab only boardvm and qemu",
		pkgs: []string{"internal/cli"}, direct: true,
		forbid: []string{"internal/lab/kerneltest", "internal/lab/labtest", "internal/lab/proctest",
			"internal/lab/testengine", "internal/lab/worldvm"},
	},
	{
		name: "the build imports of the lab only testengine",
		pkgs: []string{"internal/build"}, direct: true,
		forbid: []string{"internal/lab/boardvm", "internal/lab/kerneltest", "internal/lab/labtest",
			"internal/lab/proctest", "internal/lab/qemu", "internal/lab/worldvm"},
	},
	{
		// (f) Test helpers stay out of production code (with rule
		// TestTestingOnlyInTestHelpers).
		name:   "no production package depends on a test-only package",
		except: append([]string{"internal/lab/worldvm/agent", "bench", "e2e"}, testOnly...),
		forbid: testOnly,
	},
	{
		// (g) The contract and the catalog: read by both sides, they
		// build on helpers only.
		name: "the catalog imports only helpers",
		pkgs: []string{"drivers/catalog"}, direct: true, only: helpers,
	},
	{
		name: "plan imports only helpers and the catalog",
		pkgs: []string{"plan"}, direct: true, only: append([]string{"drivers/catalog"}, helpers...),
	},
	{
		name: "site imports only helpers, the catalog and plan",
		pkgs: []string{"site"}, direct: true, only: append([]string{"drivers/catalog", "plan"}, helpers...),
	},
	{
		// (h) Helpers are leaves.
		name: "helpers import no other ocfw package",
		pkgs: helpers, direct: true, only: []string{},
	},
	{
		// (i) Libraries return errors and facts; flags are the CLIs'.
		name:   "only the CLIs import cobra",
		except: []string{"internal/cli", "internal/ocfcmd", "cmd"},
		forbid: []string{"github.com/spf13/cobra"},
	},
}

func TestImportRules(t *testing.T) {
	all := load(t)
	names := slices.Sorted(maps.Keys(all))
	exists := func(root string) bool {
		for _, p := range names {
			if under(p, root) {
				return true
			}
		}
		return false
	}
	for _, r := range rules {
		// A rule naming an ocfw package that is gone checks nothing
		// there: fail, so that a move updates the rules.
		for _, list := range [][]string{r.pkgs, r.except, r.forbid, r.only} {
			for _, root := range list {
				// e2e holds tests only: go list shows no package there.
				if full(root) == mod+root && !exists(root) && root != "e2e" {
					t.Errorf("rule %q: no package %s: update the rule", r.name, root)
				}
			}
		}
		checked := 0
		for _, p := range names {
			if (r.pkgs != nil && !under(p, r.pkgs...)) || under(p, r.except...) {
				continue
			}
			checked++
			deps, verb := all[p].deps, "depends on"
			if r.direct {
				deps, verb = all[p].imports, "imports"
			}
			for _, d := range deps {
				for _, f := range r.forbid {
					if under(d, full(f)) {
						t.Errorf("rule %q: %s %s %s", r.name, p, verb, d)
					}
				}
				if own, ok := strings.CutPrefix(d, mod); ok && r.only != nil && !under(own, r.only...) {
					allowed := "no ocfw package"
					if len(r.only) > 0 {
						allowed = strings.Join(r.only, ", ")
					}
					t.Errorf("rule %q: %s imports %s; it may import only %s", r.name, p, own, allowed)
				}
			}
		}
		if checked == 0 {
			t.Errorf("rule %q: no package matched; the rule checks nothing", r.name)
		}
	}
}

// floors are docs/architecture.md's floor plan, lowest first: a package
// imports from its own floor or the floors below.
var floors = [][]string{
	helpers,
	{"drivers/catalog", "plan", "site"},
	{"ocf"},
	{"store", "router", "boot"},
	{"internal/debian", "internal/kbuild", "kernel", "rootfs", "boards", "firmware", "internal/chart", "internal/build", "internal/lab", "internal/push", "internal/sshclient", "internal/upgrade"},
	{"internal/cli", "internal/ocfcmd", "cmd"},
	{"bench", "e2e", "internal/layers"},
}

func floorOf(p string) int {
	for i, roots := range floors {
		if under(p, roots...) {
			return i + 1
		}
	}
	return 0
}

func TestFloors(t *testing.T) {
	for p, k := range load(t) {
		f := floorOf(p)
		if f == 0 {
			t.Errorf("%s is on no floor: add it to the floor plan (docs/architecture.md and floors here)", p)
			continue
		}
		for _, d := range k.imports {
			if own, ok := strings.CutPrefix(d, mod); ok && floorOf(own) > f {
				t.Errorf("%s (floor %d) imports %s from floor %d above it", p, f, own, floorOf(own))
			}
		}
	}
}

// TestTestingOnlyInTestHelpers: only the test-only packages import
// package testing, so production code reaches it at most through
// third-party modules (mkuimage brings it to ocfw and rootfs through
// u-root's llog and golang.org/x/tools); the board's binary not at all.
func TestTestingOnlyInTestHelpers(t *testing.T) {
	all := load(t)
	allowed := append([]string{"internal/lab/worldvm/agent", "bench", "e2e"}, testOnly...)
	checked := 0
	for p, k := range all {
		if under(p, allowed...) {
			continue
		}
		checked++
		if slices.Contains(k.imports, "testing") {
			t.Errorf("%s imports testing: it is not a test-only package (%v)", p, testOnly)
		}
	}
	if checked == 0 {
		t.Error("no package checked")
	}
	for _, bin := range []string{"cmd/ocfw", "cmd/ocf"} {
		k, ok := all[bin]
		if !ok {
			t.Errorf("no package %s", bin)
			continue
		}
		for _, d := range k.deps {
			if own, ok := strings.CutPrefix(d, mod); ok && slices.Contains(all[own].imports, "testing") {
				t.Errorf("%s links testing through %s", bin, own)
			}
		}
	}
	if slices.Contains(all["cmd/ocf"].deps, "testing") {
		t.Error("the board's binary cmd/ocf links package testing")
	}
}

// TestArchitectureNamesEveryPackage: docs/architecture.md is where a
// change finds its package, so its package tables say what each one
// holds, named as `path`.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Packages\n")
	if !ok {
		t.Fatal(`docs/architecture.md: no section "## Packages"`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9/_.]+)`").FindAllStringSubmatch(section, -1) {
		named[m[1]] = true
	}
	var missing []string
	for p := range load(t) {
		if !named[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/architecture.md's package tables do not name these packages (as `path`): %s", strings.Join(missing, ", "))
	}
}

// TestArchitectureGraph: the document's import graph is the one go list
// shows. Each package has one row; the row lists its direct ocfw imports.
func TestArchitectureGraph(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### The import graph as it is\n")
	if !ok {
		t.Fatal(`docs/architecture.md: no section "### The import graph as it is"`)
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	quoted := regexp.MustCompile("`([a-z0-9/_.]+)`")
	names := func(cell string) []string {
		var out []string
		for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
			out = append(out, m[1])
		}
		sort.Strings(out)
		return out
	}
	rows := map[string][]string{} // package -> its imports in the table
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 || strings.HasPrefix(cells[1], "---") || strings.TrimSpace(cells[1]) == "package" {
			continue
		}
		for _, p := range names(cells[1]) {
			if _, dup := rows[p]; dup {
				t.Errorf("docs/architecture.md: %s has two rows in the import graph", p)
			}
			rows[p] = names(cells[2])
		}
	}
	all := load(t)
	for p, k := range all {
		var want []string
		for _, d := range k.imports {
			if own, ok := strings.CutPrefix(d, mod); ok {
				want = append(want, own)
			}
		}
		sort.Strings(want)
		got, ok := rows[p]
		switch {
		case !ok:
			t.Errorf("docs/architecture.md's import graph has no row for %s; go list: %s", p, list(want))
		case !slices.Equal(got, want):
			t.Errorf("docs/architecture.md's import graph: %s imports %s, go list: %s", p, list(got), list(want))
		}
	}
	for p := range rows {
		if _, ok := all[p]; !ok && p != "e2e" {
			t.Errorf("docs/architecture.md's import graph has a row for %s, which go list does not show", p)
		}
	}
}

// list is names as a table cell writes them.
func list(names []string) string {
	if len(names) == 0 {
		return "no ocfw package"
	}
	return "`" + strings.Join(names, "`, `") + "`"
}
