package firmware

import (
	"fmt"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/plan"
)

// The errors below name an input by what it is (an image size, a card, a
// given initramfs), not by how a user gave it: a command line words them
// with its flags.

// SizeError is an image size (ImageOptions.SizeMiB) that cannot work.
type SizeError struct {
	// Msg is what is wrong and what size would do.
	Msg string
	// Sizes lists the sizes that would do ("16, 32, 64..."); "" when Msg
	// says it.
	Sizes string
	// Why is the reason the sizes are limited, or "".
	Why string
	// TooLarge is an image larger than the card (ImageOptions.CardMB):
	// a smaller image or a larger card would do.
	TooLarge bool
}

func (e *SizeError) Error() string {
	return e.Worded("the image size", "a smaller image, or a larger card")
}

// Worded is the message with the size's name (or flag) and, for an
// image too large, the advice given by the caller.
func (e *SizeError) Worded(size, tooLarge string) string {
	msg := e.Msg
	switch {
	case e.TooLarge:
		msg += ": use " + tooLarge
	case e.Sizes != "":
		msg += " (" + size + " " + e.Sizes + ")"
	default:
		msg += " (" + size + ")"
	}
	if e.Why != "" {
		msg += ": " + e.Why
	}
	return msg
}

// InitramfsError is a given initramfs (Options.Initramfs) that is not
// usable; Path is "" when it could not be opened (Err names it).
type InitramfsError struct {
	Path string
	Err  error
}

func (e *InitramfsError) Error() string {
	return strings.TrimSpace("initramfs "+e.Path) + ": " + e.Err.Error()
}

func (e *InitramfsError) Unwrap() error { return e.Err }

// InitramfsBoardError is a given initramfs built for another board.
type InitramfsBoardError struct {
	Path  string
	Built string // the board its plan names
	Board string // the board of the image being built
}

func (e *InitramfsBoardError) Error() string { return e.Worded("initramfs") }

// Worded is the message with the given initramfs named as initramfs
// (a flag, or a word).
func (e *InitramfsBoardError) Worded(initramfs string) string {
	return fmt.Sprintf("%s %s was built for board %s (its %s), not %s: build the image for %s without %s, or give an initramfs built for %s",
		initramfs, e.Path, catalog.Quote(e.Built), plan.File, e.Board, e.Board, initramfs, e.Board)
}

// NotCardError is a flash target that does not look like a card for
// these boards: not removable, or too large. Forcing it is the user's
// call.
type NotCardError struct {
	Path      string
	Removable bool
	Size      int64
}

func (e *NotCardError) Error() string { return e.Worded("forcing it") }

// Worded is the message with the way to force it named by force.
func (e *NotCardError) Worded(force string) string {
	if !e.Removable {
		return fmt.Sprintf("refusing %s: not a removable disk; if it really is the card (some USB readers say otherwise), use %s", e.Path, force)
	}
	return fmt.Sprintf("refusing %s: %.1f GB is more than a CF card for these boards (64 GiB); use %s if it is the card", e.Path, float64(e.Size)/1e9, force)
}

// NotConfirmedError is a flash the user did not confirm.
type NotConfirmedError struct{}

func (e *NotConfirmedError) Error() string { return "not confirmed: nothing written" }

// ImageChangedError is an image that no longer matches its manifest's
// block map; it is ErrImageChanged.
type ImageChangedError struct {
	Image, Manifest string
	Bad             []string // the first ranges that differ
	Differ, Ranges  int
}

func (e *ImageChangedError) Error() string {
	return e.Worded("booting it in place")
}

// Worded is the message with the way of booting that changes an image
// named by persist.
func (e *ImageChangedError) Worded(persist string) string {
	return fmt.Sprintf("%v: %s differs from %s in %d of its %d mapped ranges (%s), so nothing was written; "+
		"rebuild it with 'ocfw build' (%s, or writing to it, changes it; plain 'ocfw run' boots a copy)",
		ErrImageChanged, e.Image, e.Manifest, e.Differ, e.Ranges, strings.Join(e.Bad, "; "), persist)
}

func (e *ImageChangedError) Is(target error) bool { return target == ErrImageChanged }
