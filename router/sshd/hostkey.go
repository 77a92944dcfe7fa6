package sshd

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// KeyStore keeps the host key's private half, as LoadHostKey encodes it
// (an OpenSSH private key file, PEM). The board keeps it in its
// power-safe store on the data partition, never in the image: two boxes
// flashed from one image must not share a host key.
type KeyStore interface {
	// Load returns the stored key and true, or false when none was
	// ever saved. An error means the store could not be read.
	Load() (key []byte, ok bool, err error)
	// Save replaces the stored key.
	Save(key []byte) error
}

// ErrStoreLost, wrapped by a KeyStore's Load, says the store that kept
// the key was lost (a damaged card): the key is made anew, and the log
// says loudly that it is NEW, not that this is a first boot.
var ErrStoreLost = errors.New("the card's state was lost")

// LoadHostKey returns the host key kept in ks, making and saving an
// ed25519 key when there is none.
//
// A stored key that does not parse is replaced by a new one, and logf
// says so loudly, with the new fingerprint: refusing to
// start would lock the administrator out of SSH over a damaged record,
// while a new key only makes clients warn that the host key changed —
// which is the truth. A key that was made but could not be saved is
// still returned (logged: it will change at the next start). A store
// that cannot be read at all is an error, though: the key in it may be
// fine, and replacing it over a passing read error would change the
// router's identity for nothing.
//
// The first call on a new box draws 32 bytes from the kernel's random
// generator, which may wait until the kernel has seeded it; call it from
// the service's goroutine, not the boot path.
func LoadHostKey(ks KeyStore, logf func(format string, args ...any)) (ssh.Signer, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	stored, ok, err := ks.Load()
	if err != nil && !errors.Is(err, ErrStoreLost) {
		return nil, fmt.Errorf("reading the SSH host key: %w", err)
	}
	why := "made a new host key"
	if err != nil {
		why = lostKeyWarning
	}
	if ok {
		s, err := ssh.ParsePrivateKey(stored)
		if err == nil {
			return s, nil
		}
		why = fmt.Sprintf("WARNING: the stored host key (%d bytes) is unreadable (%v): replaced it with a new one, clients will say the host key changed;", len(stored), err)
	}
	s, pemBytes, err := newHostKey()
	if err != nil {
		return nil, err
	}
	if err := ks.Save(pemBytes); err != nil {
		logf("ssh: %s %s, but WARNING: could not save it (%v): it will change at the next start", why, Fingerprint(s.PublicKey()), err)
	} else if why == lostKeyWarning {
		logf("ssh: %s", LostKeyMessage(Fingerprint(s.PublicKey())))
	} else {
		logf("ssh: %s %s", why, Fingerprint(s.PublicKey()))
	}
	return s, nil
}

const lostKeyWarning = "WARNING: the card's state was lost; made a NEW SSH host key"

// LostKeyMessage is what the console, the log and the status say of a
// key made anew after the store was lost.
func LostKeyMessage(fingerprint string) string {
	return fmt.Sprintf("%s %s: SSH clients will warn that the host key changed", lostKeyWarning, fingerprint)
}

func newHostKey() (ssh.Signer, []byte, error) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("making an SSH host key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "ocfw host key")
	if err != nil {
		return nil, nil, err
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return s, pem.EncodeToMemory(block), nil
}

// Fingerprint is the key's SHA256 fingerprint as ssh-keygen -l prints it
// ("SHA256:" and unpadded base64), for the console and the status page,
// so a user can check what their client shows at the first login.
func Fingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }

// RSAHostKeyBits is the size of the second host key: 3072 bits, as
// ssh-keygen makes, which ssh-audit accepts (2048 it warns about).
const RSAHostKeyBits = 3072

// LoadHostKeys returns LoadHostKey's ed25519 key and, second, an RSA key
// for clients without ed25519, making and saving it when there is none.
// (The NIST-curve ECDSA keys would be quicker to make, but are what
// ssh-audit fails.)
//
// Both keys are kept in the one stored document, the ed25519 key's PEM
// block first and the RSA key's after it: a store written before the
// RSA key existed is read as it was (its ed25519 key is kept, the RSA
// key is added), and an older firmware reading the new document sees
// its ed25519 key, as it parses the first block only. Each key is made
// once and saved at once; a power cut between the two saves of a first
// start leaves the ed25519 key kept and the RSA key made again.
//
// An RSA key that cannot be made or saved does not stop the server: it
// serves with ed25519 alone (or an unsaved RSA key), and logf says so.
// Making a 3072-bit key takes seconds to a minute on a slow board, once.
func LoadHostKeys(ks KeyStore, logf func(format string, args ...any)) ([]ssh.Signer, error) {
	ed, err := LoadEd25519HostKey(ks, logf)
	if err != nil {
		return nil, err
	}
	s, err := LoadRSAHostKey(ks, logf)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return []ssh.Signer{ed}, nil
	}
	return []ssh.Signer{ed, s}, nil
}

// LoadEd25519HostKey is LoadHostKeys' first half: the ed25519 key, the
// first block of the stored document. The router serves with it at once
// and adds the RSA key (Server.AddHostKey) once LoadRSAHostKey has it:
// making a 3072-bit key at a first start must not keep SSH closed.
func LoadEd25519HostKey(ks KeyStore, logf func(format string, args ...any)) (ssh.Signer, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return LoadHostKey(firstKey{ks}, logf)
}

// LoadRSAHostKey is LoadHostKeys' second half: the stored RSA key, or a
// new one saved after the ed25519 key. It returns no key and no error
// when one cannot be made (logged): the server then serves ed25519 only.
func LoadRSAHostKey(ks KeyStore, logf func(format string, args ...any)) (ssh.Signer, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	stored, _, err := ks.Load()
	if err != nil {
		return nil, fmt.Errorf("reading the SSH host keys: %w", err)
	}
	first, rest := splitFirst(stored)
	if block, _ := pem.Decode(rest); block != nil {
		if s, err := ssh.ParsePrivateKey(pem.EncodeToMemory(block)); err == nil && s.PublicKey().Type() == ssh.KeyAlgoRSA {
			return s, nil
		}
		logf("ssh: WARNING: the stored RSA host key is unreadable: replacing it")
	}
	priv, err := rsa.GenerateKey(rand.Reader, RSAHostKeyBits)
	if err != nil {
		logf("ssh: WARNING: could not make an RSA host key (%v): ed25519 only", err)
		return nil, nil
	}
	block, err := ssh.MarshalPrivateKey(priv, "ocfw host key")
	if err != nil {
		return nil, err
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	if err := ks.Save(append(first, pem.EncodeToMemory(block)...)); err != nil {
		logf("ssh: made an RSA host key %s, but WARNING: could not save it (%v): it will change at the next start", Fingerprint(s.PublicKey()), err)
	} else {
		logf("ssh: made an RSA host key %s", Fingerprint(s.PublicKey()))
	}
	return s, nil
}

// splitFirst splits a stored document after its first PEM block. A
// document that is not PEM at all is all first: LoadHostKey sees it
// whole, as before the RSA key.
func splitFirst(b []byte) (first, rest []byte) {
	block, after := pem.Decode(b)
	if block == nil {
		return b, nil
	}
	n := len(b) - len(after)
	return b[:n:n], after
}

// firstKey shows LoadHostKey the first key of the stored document only,
// and keeps the rest when it saves.
type firstKey struct{ ks KeyStore }

func (f firstKey) Load() ([]byte, bool, error) {
	b, ok, err := f.ks.Load()
	first, _ := splitFirst(b)
	return first, ok, err
}

func (f firstKey) Save(key []byte) error {
	b, _, err := f.ks.Load()
	if err != nil {
		b = nil
	}
	_, rest := splitFirst(b)
	return f.ks.Save(append(append([]byte(nil), key...), rest...))
}
