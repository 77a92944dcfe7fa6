package catalog

import (
	"fmt"
	"strings"
)

// Suggest returns ` (did you mean "x"?)` for Nearest(got, candidates),
// or "" when nothing is close enough to be a likely typo.
func Suggest(got string, candidates []string) string {
	if n := Nearest(got, candidates); n != "" {
		return fmt.Sprintf(" (did you mean %q?)", n)
	}
	return ""
}

// Nearest returns the candidate got is most likely a typo of, or "". A
// name that got begins (got is a shortening of it: "ram" for "ram_mb",
// "aes128" for "aes-128-cbc") comes first, the shortest such; then the
// candidate fewest edits away, allowing about one edit per three
// characters.
func Nearest(got string, candidates []string) string {
	if len(got) > 2*MaxShown {
		return "" // not a typo of a name
	}
	if g := alnum(got); len(g) >= 3 {
		best := ""
		for _, c := range candidates {
			if a := alnum(c); strings.HasPrefix(a, g) && a != g && (best == "" || len(a) < len(alnum(best))) {
				best = c
			}
		}
		if best != "" {
			return best
		}
	}
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(got), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" && bestD <= len(got)/3+1 {
		return best
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

// MaxShown is how many characters of a value a message repeats.
const MaxShown = 60

// Quote quotes a value for a message as %q does, cut to MaxShown
// characters with "..." and its full length when longer, so that a
// mistaken 20 MB value is not echoed back in full.
func Quote(s string) string {
	if c, n, cut := clip(s); cut {
		return fmt.Sprintf("%q (%d bytes)", c+"...", n)
	}
	return fmt.Sprintf("%q", s)
}

// Clip is Quote without the quotes: s, or its first MaxShown characters
// with "..." and its length.
func Clip(s string) string {
	if c, n, cut := clip(s); cut {
		return fmt.Sprintf("%s... (%d bytes)", c, n)
	}
	return s
}

func clip(s string) (string, int, bool) {
	n := 0
	for i := range s {
		if n == MaxShown {
			return s[:i], len(s), true
		}
		n++
	}
	return s, len(s), false
}
