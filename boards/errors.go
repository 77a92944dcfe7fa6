package boards

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a profile, located in its file. Line and Col
// are 1-based; 0 means unknown (e.g. an empty file).
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// ErrorList is every problem found in one pass, so a user fixes them all
// at once rather than one per run.
type ErrorList []*Error

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// err returns nil for an empty list, so callers can return it directly.
func (l ErrorList) err() error {
	if len(l) == 0 {
		return nil
	}
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].File != l[j].File {
			return l[i].File < l[j].File
		}
		if l[i].Line != l[j].Line {
			return l[i].Line < l[j].Line
		}
		return l[i].Col < l[j].Col
	})
	return l
}

// suggest returns ` (did you mean "x"?)` for the candidate nearest to
// got, or "" when nothing is close enough to be a likely typo.
func suggest(got string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(got), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	// Allow about one edit per three characters: catches typos, not
	// unrelated names.
	if best != "" && bestD <= len(got)/3+1 {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	// "aes128" for "aes-128-cbc": the same letters and digits, shortened.
	g := alnum(got)
	if len(g) >= 3 {
		for _, c := range candidates {
			if strings.HasPrefix(alnum(c), g) {
				return fmt.Sprintf(" (did you mean %q?)", c)
			}
		}
	}
	return ""
}

func alnum(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Suggest is suggest for other packages' flag errors.
func Suggest(got string, candidates []string) string { return suggest(got, candidates) }

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// quoteList formats names for "valid values are ..." messages.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
