package cli

import (
	"testing"

	"github.com/ocfw/ocfw/plan"
)

// build without -o writes under out/, as try does, never into the
// current directory.
func TestDefaultImage(t *testing.T) {
	for _, c := range []struct {
		pl   plan.Plan
		want string
	}{
		{plan.Plan{Board: "alix2d13"}, "out/ocfw-alix2d13.img"},
		{plan.Plan{Board: "nslu2", StandIn: &plan.StandIn{}}, "out/ocfw-nslu2-stand-in.img"},
	} {
		if got := defaultImage(&c.pl); got != c.want {
			t.Errorf("%s: %s, want %s", c.pl.Board, got, c.want)
		}
	}
}
