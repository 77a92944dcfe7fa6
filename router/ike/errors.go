package ike

import (
	"errors"
	"fmt"
)

// ParseError is a message that does not decode. Notify is what a responder
// answers with (INVALID_SYNTAX, UNSUPPORTED_CRITICAL_PAYLOAD or
// INVALID_MAJOR_VERSION); Payload is the payload type being decoded, if
// any. Reason never holds packet contents beyond type codes and lengths.
type ParseError struct {
	Notify  NotifyType
	Payload PayloadType
	Reason  string
}

func (e *ParseError) Error() string {
	if e.Payload != PayloadNone {
		return fmt.Sprintf("ike: %s payload: %s (%s)", e.Payload, e.Reason, e.Notify)
	}
	return fmt.Sprintf("ike: %s (%s)", e.Reason, e.Notify)
}

func syntaxErr(p PayloadType, format string, args ...any) error {
	return &ParseError{Notify: INVALID_SYNTAX, Payload: p, Reason: fmt.Sprintf(format, args...)}
}

// AuthenticError is a message whose ICV verified but whose encrypted
// payloads do not parse: it comes from the holder of the SA's keys, so
// a request gets the ParseError's Notify as its answer (RFC 7296 2.21.2,
// 3.10.1), where a forged or damaged one (ErrIntegrity, or an SK payload
// too malformed to check) gets none. errors.As finds the *ParseError.
type AuthenticError struct{ Err *ParseError }

func (e *AuthenticError) Error() string { return "ike: authenticated message: " + e.Err.Error() }
func (e *AuthenticError) Unwrap() error { return e.Err }

// authentic marks a parse error found after the ICV verified.
func authentic(err error) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		return &AuthenticError{Err: pe}
	}
	return err
}

// ErrIntegrity is the SK payload's ICV not matching: the packet is dropped
// without an answer (RFC 7296 2.21.2).
var ErrIntegrity = errors.New("ike: integrity check failed on the encrypted payload")

// ErrUnsupported names a transform, group or method this package does not
// implement.
var ErrUnsupported = errors.New("ike: unsupported")
