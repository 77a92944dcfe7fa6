package build

import (
	"fmt"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/lab/testengine"
)

// Input names what a build is given, for errors a command line words
// with its own flags.
type Input string

const (
	InputSite          Input = "site config"        // Options.Site
	InputFirmwareFiles Input = "firmware files"     // Options.FirmwareFiles
	InputTestEngine    Input = "test engine's card" // a plan naming catalog.TestAES
)

// InitramfsGivenError is an input that goes into the initramfs a build
// makes, given with an initramfs (Options.Initramfs) it cannot change.
type InitramfsGivenError struct{ Input Input }

func (e *InitramfsGivenError) Error() string {
	return e.Worded(string(e.Input), "initramfs")
}

// Worded is the message with the input and the given initramfs named by
// the caller (its flags, or words).
func (e *InitramfsGivenError) Worded(input, initramfs string) string {
	what := input
	if e.Input == InputTestEngine {
		what += ": its module " + testengine.Module
	}
	return what + " goes into the initramfs ocfw builds: it cannot change a given " + initramfs
}

// TestEngineError is the test engine's module (catalog.TestAES) that
// could not be built (Err), or was built for kernel Built while the image
// boots kernel Boots.
type TestEngineError struct {
	Err          error
	Built, Boots string
}

func (e *TestEngineError) Error() string {
	return e.Worded("card "+catalog.TestAES, "the kernel given")
}

// Worded is the message with the card and the kernel given named by the
// caller.
func (e *TestEngineError) Worded(card, kernel string) string {
	if e.Err != nil {
		return card + ": " + e.Err.Error()
	}
	return fmt.Sprintf("%s: its module %s is built for Debian's kernel %s, but this image boots kernel %s (%s): the test engine needs the board's Debian kernel",
		card, testengine.Module, e.Built, e.Boots, kernel)
}

func (e *TestEngineError) Unwrap() error { return e.Err }
