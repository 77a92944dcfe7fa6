package cli

// The commands the README and docs/ show must be real: every ocfw
// invocation they contain names an existing subcommand and only flags that
// command takes. The docs are found from the module root (go.mod), so the
// test keeps working when the CLI's package moves.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docCommand is one ocfw invocation found in a document.
type docCommand struct {
	where string // file:line
	line  string // the invocation, starting at "ocfw"
}

func TestDocsCommands(t *testing.T) {
	root := moduleRoot(t)
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, more...)
	cli := docsRootCmd()
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) && filepath.Base(f) == "CONTRIBUTING.md" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, c := range extractDocCommands(rel, string(b)) {
			n++
			if err := checkDocCommand(cli, c.line); err != nil {
				t.Errorf("%s: %q: %v", c.where, c.line, err)
			}
		}
	}
	if n < 20 {
		t.Errorf("found only %d ocfw commands in %d documents: is the extraction broken?", n, len(files))
	}
	t.Logf("%d ocfw commands checked in %d documents", n, len(files))
}

func TestCheckDocCommand(t *testing.T) {
	cli := docsRootCmd()
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"ocfw plan --board alix2d13 --card vpn1411 --cipher aes-128-cbc", true},
		{"ocfw --profiles DIR build --board B -o FILE", true},
		{"ocfw build --board=B --card C]... [--kernel K] [-o FILE]", true},
		{"ocfw run IMAGE [--poweroff-after-report] [--keep-copy F | --persist]", true},
		{"ocfw kernel check --board nslu2 --kernel zImage:out/lib/modules/VERSION:.config", true},
		{"ocfw completion bash", true},
		{"ocfw completion bash|zsh|fish|powershell", true},
		{"ocfw completion bash|tcsh", false},
		{"ocfw board show NAME --json", true},
		{"ocfw plan --help", true},
		{"ocfw", true},
		{"ocfw nosuch --board B", false},
		{"ocfw kernel bogus --board B", false},
		{"ocfw plan --board B --no-such-flag", false},
		{"ocfw build -Z", false},
		{"ocfw boards --stand-in", false},
	} {
		err := checkDocCommand(cli, tc.line)
		if (err == nil) != tc.ok {
			t.Errorf("checkDocCommand(%q) = %v, want ok=%v", tc.line, err, tc.ok)
		}
	}
}

func TestExtractDocCommands(t *testing.T) {
	doc := "Run `ocfw plan --board B` or `go run ./cmd/ocfw boards --json`;\n" +
		"not `ocfw: stopped`, `ocf net` or `tool: ocfw REVISION`; `ocfw run\n" +
		"--persist x.img`.\n" +
		"```sh\n" +
		"SOURCE_DATE_EPOCH=1 ocfw build --board alix2d13 \\\n" +
		"  -o alix.img   # a comment --bogus\n" +
		"go test ./...\n" +
		"source <(ocfw completion bash)\n" +
		"```\n" +
		"```\n" +
		"$ ocfw inspect alix.img\n" +
		"ocfw nosuch: console output, not a command\n" +
		"```\n" +
		"```go\n" +
		"x := `ocfw nosuch`\n" +
		"```\n"
	var got []string
	for _, c := range extractDocCommands("x.md", doc) {
		got = append(got, c.where+" "+c.line)
	}
	want := []string{
		"x.md:5 ocfw build --board alix2d13 -o alix.img",
		"x.md:8 ocfw completion bash",
		"x.md:11 ocfw inspect alix.img",
		"x.md:1 ocfw plan --board B",
		"x.md:1 ocfw boards --json",
		"x.md:2 ocfw run --persist x.img",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("extracted:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// moduleRoot walks up from the test's directory to the one holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// docsRootCmd is the CLI's command tree with what cobra adds only when it
// executes (help flags, the help and completion commands).
func docsRootCmd() *cobra.Command {
	root := NewRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return root
}

var (
	inlineCode = regexp.MustCompile("`([^`]+)`")
	envAssign  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S*$`)
	// segment separators in a shell line: the command after each may be ocfw
	shellSep = regexp.MustCompile(`&&|\|\||;|\s\|\s|\$\(|<\(|\)`)
)

// extractDocCommands finds the ocfw invocations in a markdown document:
// the commands of ```sh blocks, "$ ocfw ..." lines in any block, and
// inline code that starts with "ocfw " or "go run ./cmd/ocfw".
func extractDocCommands(name, doc string) []docCommand {
	var out []docCommand
	lines := strings.Split(doc, "\n")
	prose := make([]string, len(lines)) // the lines outside code blocks; "" inside
	fence := ""                         // the open fence's info string
	inFence := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		where := fmt.Sprintf("%s:%d", name, i+1)
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			if inFence {
				inFence = false
			} else {
				inFence, fence = true, strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
			}
			continue
		}
		if !inFence {
			prose[i] = l
			continue
		}
		if strings.HasPrefix(trimmed, "$ ") {
			if c, ok := ocfwInvocation(strings.TrimPrefix(trimmed, "$ "), false); ok {
				out = append(out, docCommand{where, c})
			}
			continue
		}
		if fence != "sh" && fence != "bash" && fence != "shell" {
			continue
		}
		for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, `\`) + " " + strings.TrimSpace(lines[i])
		}
		if j := strings.Index(l, "#"); j >= 0 && (j == 0 || l[j-1] == ' ' || l[j-1] == '\t') {
			l = l[:j]
		}
		for _, seg := range shellSep.Split(l, -1) {
			if c, ok := ocfwInvocation(seg, true); ok {
				out = append(out, docCommand{where, c})
			}
		}
	}
	// Inline code in prose, which may wrap onto the next line (never past
	// a paragraph's end).
	text := strings.Join(prose, "\n")
	for _, m := range inlineCode.FindAllStringSubmatchIndex(text, -1) {
		span := text[m[2]:m[3]]
		if strings.Contains(span, "\n\n") {
			continue
		}
		span = strings.ReplaceAll(span, `\|`, "|")
		if c, ok := ocfwInvocation(span, true); ok {
			line := strings.Count(text[:m[0]], "\n") + 1
			out = append(out, docCommand{fmt.Sprintf("%s:%d", name, line), c})
		}
	}
	return out
}

// ocfwInvocation returns s from "ocfw" on when s is an ocfw command:
// it starts with "ocfw " or "go run ./cmd/ocfw" (in a shell line also after
// environment assignments, sudo or time).
func ocfwInvocation(s string, shell bool) (string, bool) {
	f := strings.Fields(s)
	for shell && len(f) > 0 && (envAssign.MatchString(f[0]) || f[0] == "sudo" || f[0] == "time" || f[0] == "exec") {
		f = f[1:]
	}
	switch {
	case len(f) >= 2 && f[0] == "ocfw":
	case len(f) >= 3 && f[0] == "go" && f[1] == "run" && f[2] == "./cmd/ocfw":
		f = append([]string{"ocfw"}, f[3:]...)
	default:
		return "", false
	}
	return strings.Join(f, " "), true
}

// checkDocCommand checks that an invocation ("ocfw SUB... ARGS") names a
// subcommand of root and gives only flags that command takes (its own,
// its persistent ones and those it inherits).
func checkDocCommand(root *cobra.Command, line string) error {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "ocfw" {
		return fmt.Errorf("not an ocfw command")
	}
	cmd := root
	positional := false // past the subcommand path
	for i := 1; i < len(f); i++ {
		tok := strings.Trim(f[i], "[]{}.…")
		switch {
		case tok == "" || tok == "|":
			continue
		case tok == "--":
			return nil
		case strings.HasPrefix(tok, "-") && len(tok) > 1:
			fl, err := lookupFlag(cmd, tok)
			if err != nil {
				return err
			}
			if fl.Value.Type() != "bool" && !strings.Contains(tok, "=") && !(len(tok) > 2 && tok[1] != '-') {
				i++ // its value
			}
		case !positional && cmd.HasSubCommands():
			// "bash|zsh|fish": each alternative must be a subcommand
			var sub *cobra.Command
			for _, alt := range strings.Split(tok, "|") {
				if sub = findSub(cmd, alt); sub == nil {
					break
				}
			}
			if sub != nil {
				cmd = sub
				continue
			}
			if !cmd.Runnable() {
				return fmt.Errorf("%q has no subcommand %q", cmd.CommandPath(), tok)
			}
			positional = true
		default:
			positional = true
		}
	}
	return nil
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, s := range cmd.Commands() {
		if s.Name() == name || s.HasAlias(name) {
			return s
		}
	}
	return nil
}

func lookupFlag(cmd *cobra.Command, tok string) (*pflag.Flag, error) {
	cmd.InheritedFlags() // merges the parents' persistent flags into Flags()
	var fl *pflag.Flag
	if strings.HasPrefix(tok, "--") {
		name, _, _ := strings.Cut(strings.TrimPrefix(tok, "--"), "=")
		fl = cmd.Flags().Lookup(name)
	} else {
		fl = cmd.Flags().ShorthandLookup(tok[1:2])
	}
	if fl == nil {
		return nil, fmt.Errorf("%q takes no flag %s", cmd.CommandPath(), tok)
	}
	return fl, nil
}

// Every command a user runs shows examples in its --help, and each
// example is a command the CLI takes (as TestDocsCommands checks the
// docs'); cobra's own completion and help commands aside.
func TestHelpExamples(t *testing.T) {
	root := docsRootCmd()
	var walk func(*cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			walk(s)
		}
		if !c.Runnable() || c.Hidden || c == root {
			return
		}
		if p := c.CommandPath(); p == "ocfw help" || strings.HasPrefix(p, "ocfw completion") {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s --help shows no example", c.CommandPath())
			return
		}
		for _, line := range strings.Split(c.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			for _, seg := range shellSep.Split(line, -1) {
				if seg = strings.TrimSpace(seg); !strings.HasPrefix(seg, "ocfw ") {
					continue
				}
				n++
				if err := checkDocCommand(root, seg); err != nil {
					t.Errorf("%s --help: example %q: %v", c.CommandPath(), seg, err)
				}
			}
		}
	}
	walk(root)
	if n < 20 {
		t.Errorf("only %d examples checked: is the walk broken?", n)
	}
}
