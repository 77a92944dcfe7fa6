package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/build"
	"github.com/ocfw/ocfw/internal/chart"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/kernel"
	"github.com/ocfw/ocfw/rootfs"
)

// flagWords is err's message for the command line. The library packages
// return typed errors that name an input (a board, a card, a kernel, an
// image size) without knowing how a user gave it; here each is said with
// the flag that gave it. A typed error wrapped in others keeps the
// wrappers' words around it.
func flagWords(err error) string {
	msg := err.Error()
	for _, w := range wordings {
		if inner, worded, ok := w(err); ok {
			msg = strings.Replace(msg, inner, worded, 1)
		}
	}
	return msg
}

// wordings each find one typed error in a chain and give its message
// and the message with flags.
var wordings = []func(error) (inner, worded string, ok bool){
	wording(func(e *debian.OldVersionError) string { return e.Worded("ocfw kernel fetch --refresh") }),
	wording(func(e *chart.ReferenceError) string { return e.Worded("--reference") }),
	wording(func(l boards.ErrorList) string {
		lines := make([]string, len(l))
		for i, e := range l {
			lines[i] = errorLine(e)
		}
		return strings.Join(lines, "\n")
	}),
	wording(func(e *build.InitramfsGivenError) string {
		input := map[build.Input]string{build.InputSite: "--site", build.InputFirmwareFiles: "--firmware-file",
			build.InputTestEngine: "--card " + catalog.TestAES}[e.Input]
		return e.Worded(input, "--initramfs")
	}),
	wording(func(e *build.TestEngineError) string { return e.Worded("--card "+catalog.TestAES, "--kernel") }),
	wording(func(e *rootfs.FirmwareFileError) string {
		return strings.TrimSpace("--firmware-file "+e.File) + ": " + e.Err.Error()
	}),
	wording(func(e *firmware.SizeError) string {
		return e.Worded("--size", "a smaller --size, or --card-mb for a larger card")
	}),
	wording(func(e *firmware.InitramfsError) string {
		return strings.TrimSpace("--initramfs "+e.Path) + ": " + e.Err.Error()
	}),
	wording(func(e *firmware.InitramfsBoardError) string { return e.Worded("--initramfs") }),
	wording(func(e *firmware.NotCardError) string { return e.Worded("--force") }),
	wording(func(e *firmware.NotConfirmedError) string { return e.Error() + " (use --yes to skip the question)" }),
	wording(func(e *firmware.ImageChangedError) string { return e.Worded("booting it with 'ocfw run --persist'") }),
	wording(func(e *kernel.NoKernelError) string {
		msg := "board " + e.Board + " has no Debian kernel package: give its kernel with --kernel"
		if e.Note != "" {
			msg += " (" + e.Note + ")"
		}
		return msg
	}),
	wording(func(e *kernel.SpecError) string { return "--kernel " + e.Spec + ": " + e.Err.Error() }),
	wording(func(e *boards.RequestError) string {
		return catalog.Clip(strings.TrimSpace("--"+e.Field+" "+e.Value)) + ": " + e.Msg
	}),
	wording(func(e *boards.RequireHWError) string {
		msg := "--require-hw " + e.Cipher + ": " + e.Problem()
		if len(e.Fits) > 0 {
			return msg + "; a free slot takes a card that does: --card " + strings.Join(e.Fits, " or --card ")
		}
		return msg + "; no card that fits a free slot does it either: drop --require-hw " + e.Cipher
	}),
	wording(func(e *boards.ProfilesError) string { return "--profiles " + e.Dir + ": " + e.Err.Error() }),
	wording(func(e *boards.SameSiteError) string {
		return fmt.Sprintf("--site %s and --site %s are the same site: give the two ends", e.A, e.B)
	}),
	wording(func(e *boards.TunnelChoiceError) string {
		return fmt.Sprintf("%s and %s share tunnels %s: say which with --tunnel", e.A, e.B, strings.Join(e.Shared, ", "))
	}),
	wording(func(e *boards.KeysExistError) string {
		return e.Path + " exists: the boxes may be using those keys; give --force to replace them (then install the new file on both ends)"
	}),
}

// wording makes a wordings entry for the error type E.
func wording[E error](word func(E) string) func(error) (string, string, bool) {
	return func(err error) (string, string, bool) {
		var e E
		if !errors.As(err, &e) {
			return "", "", false
		}
		return e.Error(), word(e), true
	}
}

// errorLine is one located problem, with the flags that fix it when it
// says how.
func errorLine(e *boards.Error) string {
	if k := e.MissingKeys; k != nil {
		return fmt.Sprintf("%v --site %s --site %s --tunnel %s", e, k.Site, k.Peer, k.Tunnel)
	}
	return e.Error()
}
