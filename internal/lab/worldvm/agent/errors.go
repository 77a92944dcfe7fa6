package main

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
)

// kindError is an error with the one-word kind a reply starts with.
type kindError struct {
	kind string
	err  error
}

func (e *kindError) Error() string { return e.kind + ": " + e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

func kinded(kind string, err error) error { return &kindError{kind, err} }

// withKind gives err a kind if it has none: a network kind when it is a
// network failure, else "failed".
func withKind(err error) error {
	var ke *kindError
	if errors.As(err, &ke) {
		return err
	}
	return kinded(netKind(err, "failed"), err)
}

// netKind classifies a network error: refused, timeout, no-route,
// unreachable, or def.
func netKind(err error, def string) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ENETUNREACH):
		return "no-route"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "unreachable"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, syscall.ETIMEDOUT), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return def
}
