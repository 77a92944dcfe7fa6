package sshd

import (
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/site"
)

// AuthorizedKey is one key allowed to log in.
type AuthorizedKey struct {
	Key     ssh.PublicKey
	Comment string // what the line ended with, for the login log
}

// LineError is a bad authorized_keys line, at its index in the list (the
// site config's ssh.authorized_keys[i]).
type LineError struct {
	Index int
	Err   error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("ssh.authorized_keys[%d]: %v", e.Index, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// ParseAuthorizedKeys reads the site config's authorized_keys lines, one
// key each, with site.ParseAuthorizedKey: the host's validate judges each
// line by the same code, so a line it passed is never refused here. Blank
// lines and # comments are skipped. Options (from=, command=,
// restrict...) are refused rather than ignored: this server honours none,
// so the key would get more than its line says; certificates too (no CA
// is trusted); and keys this server cannot verify (DSA, short RSA). Every
// bad line is returned, so the caller can report all of them; the good
// ones still work.
func ParseAuthorizedKeys(lines []string) ([]AuthorizedKey, []error) {
	var keys []AuthorizedKey
	var bad []error
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, comment, err := site.ParseAuthorizedKey(line)
		if err != nil {
			bad = append(bad, &LineError{i, err})
			continue
		}
		keys = append(keys, AuthorizedKey{Key: key, Comment: comment})
	}
	return keys, bad
}
