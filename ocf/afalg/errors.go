package afalg

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/ocf"
)

// KernelError is a failed system call on an AF_ALG socket, with what was
// being done and a hint at the usual cause. errors.Is matches the errno
// and, where one applies, an ocf error (ErrUnsupported, ErrKeySize, ...).
type KernelError struct {
	Op    string // e.g. "bind skcipher cbc-aes-hifn0"
	Errno unix.Errno
	Hint  string // e.g. "is hifn_795x loaded?"
	Kind  error  // ocf error class, or nil
}

func (e *KernelError) Error() string {
	var b strings.Builder
	b.WriteString("afalg: ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	b.WriteString(explain(e.Errno))
	if name := unix.ErrnoName(e.Errno); name != "" {
		b.WriteString(" (" + name + ")")
	}
	if e.Hint != "" {
		b.WriteString(": " + e.Hint)
	}
	return b.String()
}

func (e *KernelError) Unwrap() []error {
	if e.Kind != nil {
		return []error{e.Errno, e.Kind}
	}
	return []error{e.Errno}
}

// explain says what an errno means on an AF_ALG socket, where the generic
// texts mislead ("no such file or directory" for a missing algorithm).
func explain(e unix.Errno) string {
	switch e {
	case unix.ENOENT:
		return "no such algorithm or driver"
	case unix.EAFNOSUPPORT:
		return "kernel has no AF_ALG"
	case unix.ELIBBAD:
		return "implementation failed its self-test"
	case unix.ENOKEY:
		return "key not set"
	case unix.EBADMSG:
		return "bad message (input length or padding)"
	}
	return e.Error()
}

// kernelErr wraps err (normally a unix.Errno) with context.
func kernelErr(op string, err error, hint string, kind error) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		if kind != nil {
			return fmt.Errorf("afalg: %s: %w: %w", op, err, kind)
		}
		return fmt.Errorf("afalg: %s: %w", op, err)
	}
	return &KernelError{Op: op, Errno: errno, Hint: hint, Kind: kind}
}

// moduleFor guesses which module provides a kernel name, for hints.
func moduleFor(name string) string {
	for _, m := range []struct{ sub, mod string }{
		{"hifn", "hifn_795x"},
		{"geode", "geode_aes"},
		{"ixp4xx", "ixp4xx_crypto"},
		{"virtio_crypto", "virtio_crypto"},
		{"ocfw_testaes", "ocfw_testaes"},
		{"des", "des_generic"},
		{"cipher_null", "crypto_null"},
		{"md5", "md5"},
		{"sha256", "sha256_generic"},
		{"sha1", "sha1_generic"},
	} {
		if strings.Contains(name, m.sub) {
			return m.mod
		}
	}
	return ""
}

// bindErr explains a failed bind using what /proc/crypto lists.
func bindErr(sock, name string, err error, entries []Entry) error {
	op := "bind " + sock + " " + name
	var hint string
	var kind error
	switch {
	case errors.Is(err, unix.ENOENT):
		kind = ocf.ErrUnsupported
		impls := Implementations(entries, sock, name)
		switch {
		case len(impls) > 0 && !impls[0].Tested():
			hint = fmt.Sprintf("%s is listed but has not passed its self-test", impls[0].Driver)
		case len(impls) > 0:
			hint = fmt.Sprintf("%s is listed: is algif_%s loaded?", impls[0].Driver, sock)
		case moduleFor(name) != "":
			hint = fmt.Sprintf("is %s loaded? (and algif_%s)", moduleFor(name), sock)
		default:
			hint = fmt.Sprintf("is the module providing it loaded? (and algif_%s)", sock)
		}
	case errors.Is(err, unix.ELIBBAD):
		kind = ocf.ErrUnsupported
	}
	return kernelErr(op, err, hint, kind)
}
