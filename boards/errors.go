package boards

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// Error is one problem in a profile, located in its file. Line and Col
// are 1-based; 0 means unknown (e.g. an empty file).
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
	// MissingKeys, on a tunnel's key file not found, is what makes it.
	MissingKeys *MissingKeys
}

// MissingKeys is the tunnel whose key file is missing, and the site
// configs of its two ends (the peer's as a placeholder when it was not
// given): what 'ocfw tunnel keys' needs to make it.
type MissingKeys struct {
	Site, Peer, Tunnel string
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
// got, or "".
func suggest(got string, candidates []string) string { return catalog.Suggest(got, candidates) }

// quote quotes a user's value for a message, cut to catalog.MaxShown
// characters.
func quote(s string) string { return catalog.Quote(s) }

// Suggest is suggest for other packages' flag errors.
func Suggest(got string, candidates []string) string { return catalog.Suggest(got, candidates) }

// quoteList quotes each name: "a", "b".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
