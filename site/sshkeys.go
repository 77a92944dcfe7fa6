package site

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// PlaceholderKey is the public key in examples/sites/*.yaml: nobody holds
// its private half on purpose, so an image whose only key it is lets no
// one log in. Build refuses it unless asked explicitly.
const PlaceholderKey = "AAAAC3NzaC1lZDI1NTE5AAAAIKBwJBsFLsyeu0X2x0QRAdxj8oBbJzXpNHzV8QkGZtxv"

// MinRSABits is the smallest RSA key that may log in: shorter ones are
// within reach of factoring, and OpenSSH refuses them too.
const MinRSABits = 2048

// loginKeyTypes are the key types the router's SSH server verifies
// signatures of (golang.org/x/crypto/ssh's public key methods). DSA is not
// among them: a DSA key would be accepted here and never log in.
var loginKeyTypes = []string{
	ssh.KeyAlgoED25519, ssh.KeyAlgoSKED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoSKECDSA256,
	ssh.KeyAlgoRSA,
	ssh.KeyAlgoMLDSA44, ssh.KeyAlgoMLDSA65, ssh.KeyAlgoMLDSA87,
}

// keyTypeDSA is ssh-dss, which the server cannot verify.
const keyTypeDSA = "ssh-dss"

var errDSA = errors.New("a DSA (ssh-dss) key cannot log in: the router's SSH server does not accept DSA; make an ed25519 key (ssh-keygen -t ed25519) and give its .pub line")

// ParseAuthorizedKey reads one ssh.authorized_keys line: one plain public
// key of a type the server can verify (RSA of MinRSABits or more), no
// options, no certificate; it returns the key and the line's comment. The
// host's Validate and the board's SSH server (router/sshd) both take keys
// through it, so a line passes on one side exactly when it works on the
// other. A key that only looks right (a bad base64 body, a truncated key)
// is caught on the host, not at the first login.
func ParseAuthorizedKey(line string) (ssh.PublicKey, string, error) {
	line = strings.TrimSpace(line)
	if strings.ContainsAny(line, "\r\n") {
		return nil, "", errors.New("one key per line")
	}
	if f := strings.Fields(line); len(f) > 0 && (f[0] == keyTypeDSA || len(f) > 1 && f[1] == keyTypeDSA) {
		return nil, "", errDSA // the parser no longer reads DSA: say why
	}
	key, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("not a public key (%v): want a line as in authorized_keys, e.g. ssh-ed25519 AAAA... me@laptop, as ssh-keygen wrote it into ~/.ssh/id_ed25519.pub", err)
	case len(options) > 0:
		return nil, "", fmt.Errorf("options %s are not supported: give the key line without them (the server honours none, so the key would log in without them)", strings.Join(options, ","))
	case len(strings.TrimSpace(string(rest))) > 0:
		return nil, "", errors.New("one key per line")
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return nil, "", errors.New("certificates are not supported: give the plain public key")
	}
	if err := checkKeyType(key); err != nil {
		return nil, "", err
	}
	return key, comment, nil
}

// checkKeyType refuses keys the server cannot or should not verify.
func checkKeyType(key ssh.PublicKey) error {
	t := key.Type()
	switch {
	case t == keyTypeDSA:
		return errDSA
	case !contains(loginKeyTypes, t):
		return fmt.Errorf("%s keys cannot log in: want one of %s", t, strings.Join(loginKeyTypes, ", "))
	case t == ssh.KeyAlgoRSA:
		ck, ok := key.(ssh.CryptoPublicKey)
		if !ok {
			return errors.New("an RSA key that cannot be read")
		}
		if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); !ok || rk.N.BitLen() < MinRSABits {
			bits := 0
			if ok {
				bits = rk.N.BitLen()
			}
			return fmt.Errorf("an RSA key of %d bits is too weak: want %d bits or more (ssh-keygen -t rsa -b 3072), or an ed25519 key (ssh-keygen -t ed25519)", bits, MinRSABits)
		}
	}
	return nil
}

func checkAuthorizedKey(line string) error {
	_, _, err := ParseAuthorizedKey(line)
	return err
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
