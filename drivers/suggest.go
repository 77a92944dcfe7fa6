package drivers

import (
	"fmt"
	"strings"
)

// Suggest returns ` (did you mean "x"?)` for the candidate nearest to
// got, or "" when nothing is close enough to be a likely typo.
func Suggest(got string, candidates []string) string {
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
