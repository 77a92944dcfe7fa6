package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ocfw/ocfw/internal/cli"
)

// A library says what is wrong with an input; the CLI knows which flag
// gave it (internal/cli's flagWords). So no string in a library names an
// ocfw flag: it would be wrong for every other caller (try, the
// benchmarks, the tests) and go stale when a flag is renamed.
func TestLibrariesNameNoFlags(t *testing.T) {
	flags := ocfwFlags(cli.NewRootCmd())
	if !flags["board"] || !flags["kernel"] || !flags["require-hw"] {
		t.Fatalf("found only flags %v in the ocfw command tree", flags)
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Dir}} {{join .GoFiles " "}}`, mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	flagWord := regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
	var leaks []string
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || commandLine(f[0]) || notYet[strings.TrimPrefix(f[0], mod)] != "" {
			continue
		}
		checked++
		for _, name := range f[2:] {
			path := filepath.Join(f[1], name)
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for _, m := range flagWord.FindAllStringSubmatch(s, -1) {
					if flags[m[1]] {
						leaks = append(leaks, fset.Position(lit.Pos()).String()+": --"+m[1])
					}
				}
				return true
			})
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d packages", checked)
	}
	sort.Strings(leaks)
	for _, l := range leaks {
		t.Errorf("%s: a library names an ocfw flag; return a typed error or fact and let internal/cli word it", l)
	}
}

// notYet are packages that still name flags, and why they wait (issue
// 19): each entry is work left, not a licence.
var notYet = map[string]string{
	"boot":                 "a note names ocfw build's --site; boot.Run is being split (issue 19 point 3)",
	"internal/lab/boardvm": "the QEMU lab's run options name ocfw run's flags; the lab is being reworked (issue 19 point 4)",
	"ocf/fault":            "fault specs are --inject/--test-inject values of both CLIs (ocf and ocfw)",
	"ocf/probe":            "the shared selftest/speed commands' --cipher (ocf and ocfw)",
}

// commandLine reports whether pkg is a command line, whose words may
// name flags: the host's and the board's CLI, and what sits on top.
func commandLine(pkg string) bool {
	return under(strings.TrimPrefix(pkg, mod), "cmd", "internal/cli", "internal/ocfcmd", "e2e", "bench")
}

// ocfwFlags is every flag name in the command tree below c.
func ocfwFlags(c *cobra.Command) map[string]bool {
	names := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(c)
	// cobra's own: every command has them, and no library says them.
	delete(names, "help")
	return names
}
