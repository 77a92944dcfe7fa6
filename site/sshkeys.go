package site

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// PlaceholderKey is the public key in examples/sites/*.yaml: nobody holds
// its private half on purpose, so an image whose only key it is lets no
// one log in. Build refuses it unless asked explicitly.
const PlaceholderKey = "AAAAC3NzaC1lZDI1NTE5AAAAIKBwJBsFLsyeu0X2x0QRAdxj8oBbJzXpNHzV8QkGZtxv"

// checkAuthorizedKey parses one ssh.authorized_keys line as the router's
// SSH server will (router/sshd): one plain public key, no options, no
// certificate. A key that only looks right (a bad base64 body, a truncated
// key) is caught here, on the host, not at the first login.
func checkAuthorizedKey(line string) error {
	line = strings.TrimSpace(line)
	if strings.ContainsAny(line, "\r\n") {
		return errors.New("one key per line")
	}
	key, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	switch {
	case err != nil:
		return fmt.Errorf("not a public key (%v): want a line as in authorized_keys, e.g. ssh-ed25519 AAAA... me@laptop, as ssh-keygen wrote it into ~/.ssh/id_ed25519.pub", err)
	case len(options) > 0:
		return fmt.Errorf("options %s are not supported: give the key line without them", strings.Join(options, ","))
	case len(strings.TrimSpace(string(rest))) > 0:
		return errors.New("one key per line")
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return errors.New("certificates are not supported: give the plain public key")
	}
	return nil
}

// OnlyPlaceholderKey says whether the examples' placeholder is the only
// key that may log in (and there is one).
func (s *Site) OnlyPlaceholderKey() bool {
	n := 0
	for _, k := range s.SSH.AuthorizedKeys {
		f := strings.Fields(k)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 2 || f[1] != PlaceholderKey {
			return false
		}
		n++
	}
	return n > 0
}
