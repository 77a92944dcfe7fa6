package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/build"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/kernel"
	"github.com/ocfw/ocfw/rootfs"
)

// The libraries' typed errors come out with the flags a user typed, in
// the words ocfw used before the libraries stopped naming flags; wrapped,
// they keep the wrappers' words.
func TestFlagWords(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&boards.RequestError{Field: "card", Value: "vpn-1411", Msg: "unknown card"}, "--card vpn-1411: unknown card"},
		{&boards.RequestError{Field: "stand-in", Msg: "x86"}, "--stand-in: x86"},
		{&boards.RequireHWError{Cipher: "aes-256-cbc", Board: "alix2d13", Fits: []string{"vpn1411", "vpn1401"}},
			"--require-hw aes-256-cbc: no selected engine on alix2d13 does aes-256-cbc in hardware; a free slot takes a card that does: --card vpn1411 or --card vpn1401"},
		{&boards.RequireHWError{Cipher: "hmac-sha256", Board: "alix2d13"},
			"--require-hw hmac-sha256: no selected engine on alix2d13 does hmac-sha256 in hardware; no card that fits a free slot does it either: drop --require-hw hmac-sha256"},
		{fmt.Errorf("embedded: %w", &boards.ProfilesError{Dir: "d", Err: errors.New("gone")}), "embedded: --profiles d: gone"},
		{boards.ErrorList{{File: "a.yaml", Line: 3, Col: 4, Msg: "key file k not found: make it with ocfw tunnel keys",
			MissingKeys: &boards.MissingKeys{Site: "a.yaml", Peer: "b.yaml", Tunnel: "a-b"}}, {File: "b.yaml", Msg: "bad"}},
			"a.yaml:3:4: key file k not found: make it with ocfw tunnel keys --site a.yaml --site b.yaml --tunnel a-b\nb.yaml: bad"},
		{&boards.TunnelChoiceError{A: "a", B: "b", Shared: []string{"x", "y"}}, "a and b share tunnels x, y: say which with --tunnel"},
		{&kernel.NoKernelError{Board: "nslu2", Note: "none"}, "board nslu2 has no Debian kernel package: give its kernel with --kernel (none)"},
		{&kernel.SpecError{Spec: "z:m", Err: errors.New("bad")}, "--kernel z:m: bad"},
		{&rootfs.FirmwareFileError{Err: errors.New("open x: gone")}, "--firmware-file: open x: gone"},
		{&firmware.SizeError{Msg: "CF data image of 8 MiB: need at least 16 MiB"}, "CF data image of 8 MiB: need at least 16 MiB (--size)"},
		{&firmware.SizeError{Msg: "SD card image of 8 MiB: want a power of 2", Sizes: "16, 32...", Why: "QEMU says so"},
			"SD card image of 8 MiB: want a power of 2 (--size 16, 32...): QEMU says so"},
		{&firmware.SizeError{Msg: "image too large", TooLarge: true}, "image too large: use a smaller --size, or --card-mb for a larger card"},
		{&firmware.InitramfsBoardError{Path: "i", Built: "net5501", Board: "alix2d13"},
			`--initramfs i was built for board "net5501" (its /etc/ocfw/plan.json), not alix2d13: build the image for alix2d13 without --initramfs, or give an initramfs built for alix2d13`},
		{&firmware.NotCardError{Path: "/dev/sda"}, "refusing /dev/sda: not a removable disk; if it really is the card (some USB readers say otherwise), use --force"},
		{&firmware.NotConfirmedError{}, "not confirmed: nothing written (use --yes to skip the question)"},
		{&build.InitramfsGivenError{Input: build.InputSite}, "--site goes into the initramfs ocfw builds: it cannot change a given --initramfs"},
		{&build.InitramfsGivenError{Input: build.InputTestEngine}, "--card testaes: its module ocfw_testaes goes into the initramfs ocfw builds: it cannot change a given --initramfs"},
		{&build.TestEngineError{Built: "6.1.0-1", Boots: "6.6.0"}, "--card testaes: its module ocfw_testaes is built for Debian's kernel 6.1.0-1, but this image boots kernel 6.6.0 (--kernel): the test engine needs the board's Debian kernel"},
		{fmt.Errorf("fetching: %w", &debian.OldVersionError{Err: errors.New("E: no such version")}),
			"fetching: E: no such version (the archive keeps only current versions: refresh the kernel package, e.g. ocfw kernel fetch --refresh, to match)"},
		{errors.New("plain"), "plain"},
	} {
		if got := flagWords(tc.err); got != tc.want {
			t.Errorf("flagWords(%T)\n got %q\nwant %q", tc.err, got, tc.want)
		}
		if lib := tc.err.Error(); tc.want != "plain" && strings.Contains(lib, "--") {
			t.Errorf("%T says %q: a flag in a library's words", tc.err, lib)
		}
	}
}
