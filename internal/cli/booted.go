package cli

import (
	"fmt"

	"github.com/ocfw/ocfw/internal/lab/boardvm"
)

// bootedName is what booted: the board, or its stand-in, which a user
// must not take for the board ("nslu2 booted" when raspi1ap did).
func bootedName(res *boardvm.RunResult) string {
	if res.StandIn != "" {
		return fmt.Sprintf("%s's stand-in (%s)", res.Board, res.StandIn)
	}
	return res.Board
}
