package sshd

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
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
// key each. Blank lines and # comments are skipped. A line with options
// (from=, command=, restrict...) is refused rather than read without
// them: this server honours none, so the key would get more than its line
// says. Certificates are refused for the same reason (no CA is trusted).
// Every bad line is returned, so the caller can report all of them; the
// good ones still work.
func ParseAuthorizedKeys(lines []string) ([]AuthorizedKey, []error) {
	var keys []AuthorizedKey
	var bad []error
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, "\r\n") {
			bad = append(bad, &LineError{i, errors.New("one key per line")})
			continue
		}
		key, comment, options, _, err := ssh.ParseAuthorizedKey([]byte(line))
		switch {
		case err != nil:
			bad = append(bad, &LineError{i, fmt.Errorf("not a public key line (want e.g. ssh-ed25519 AAAA... comment): %v", err)})
		case len(options) > 0:
			bad = append(bad, &LineError{i, fmt.Errorf("options %s are not supported: the key would log in without them", strings.Join(options, ","))})
		default:
			if _, ok := key.(*ssh.Certificate); ok {
				bad = append(bad, &LineError{i, errors.New("certificates are not supported: give the plain public key")})
				continue
			}
			keys = append(keys, AuthorizedKey{Key: key, Comment: comment})
		}
	}
	return keys, bad
}
