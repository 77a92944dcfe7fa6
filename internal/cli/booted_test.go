package cli

import (
	"testing"

	"github.com/ocfw/ocfw/internal/lab/boardvm"
)

// A stand-in's boot is not the board's: the summary says which booted.
func TestBootedName(t *testing.T) {
	for _, tc := range []struct {
		res  boardvm.RunResult
		want string
	}{
		{boardvm.RunResult{Board: "alix2d13"}, "alix2d13"},
		{boardvm.RunResult{Board: "nslu2", StandIn: "raspi1ap"}, "nslu2's stand-in (raspi1ap)"},
	} {
		if got := bootedName(&tc.res); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}
