package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// completionLines is what `ocfw __complete ...` printed, less the
// directive line: for tests.
func completionLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, ":") {
			break
		}
		if name, _, _ := strings.Cut(l, "\t"); name != "" {
			lines = append(lines, name)
		}
	}
	return lines
}

// The shell completes names ocfw knows, not file names, for the flags and
// the argument that take them.
func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../boards/profiles/net5501.yaml")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte(strings.Replace(string(b), "name: net5501\n", "name: myboard\n", 1)), 0o644))
	for _, tc := range []struct {
		args    []string
		want    []string
		notWant string
	}{
		{[]string{"plan", "--board", ""}, []string{"alix2d13", "alix2d3", "net5501", "nslu2", "avila-gw2348", "gw2348-4"}, "vpn1411"},
		{[]string{"build", "--board", "a"}, []string{"alix2d13"}, ""},
		{[]string{"--profiles", dir, "plan", "--board", ""}, []string{"myboard", "alix2d13"}, ""},
		{[]string{"plan", "--board", "alix2d13", "--card", ""}, []string{"vpn1401", "vpn1411", "hifn7956", "safenet1141"}, "alix2d13"},
		{[]string{"plan", "--cipher", ""}, []string{"aes-128-cbc", "hmac-sha256", "null"}, ""},
		{[]string{"plan", "--require-hw", ""}, []string{"aes-256-cbc"}, ""},
		{[]string{"try", "--card", ""}, []string{"vpn1411"}, ""},
		{[]string{"kernel", "check", "--board", ""}, []string{"nslu2"}, ""},
		{[]string{"selftest", "--board", ""}, []string{"net5501"}, ""},
		{[]string{"selftest", "--cipher", ""}, []string{"des-cbc"}, ""},
		{[]string{"board", "show", ""}, []string{"alix2d3", "vpn1411"}, ""},
	} {
		out, errs, code := ocfw(t, append([]string{"__complete"}, tc.args...)...)
		got := completionLines(out)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", tc.args, code, errs)
		}
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%v: completions %v lack %q", tc.args, got, w)
			}
		}
		if tc.notWant != "" && slices.Contains(got, tc.notWant) {
			t.Errorf("%v: completions %v include %q", tc.args, got, tc.notWant)
		}
		// ShellCompDirectiveNoFileComp (4): no file names offered.
		if !strings.Contains(out, "\n:4\n") {
			t.Errorf("%v: directive is not NoFileComp:\n%s", tc.args, out)
		}
	}
}

// The completion help says what bash needs: without Debian's
// bash-completion package the bash script does nothing.
func TestCompletionHelpNamesBashCompletion(t *testing.T) {
	for _, args := range [][]string{{"completion", "--help"}, {"completion", "bash", "--help"}} {
		out, errs, code := ocfw(t, args...)
		if code != 0 || !strings.Contains(out, "Debian's bash-completion package") {
			t.Errorf("%v: exit %d, help lacks Debian's bash-completion package:\n%s%s", args, code, out, errs)
		}
	}
}
