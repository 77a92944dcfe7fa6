package cli

import (
	"path/filepath"

	"github.com/ocfw/ocfw/plan"
)

// defaultImage is where build and try write the image when -o is not
// given: under out/, so the image, its manifest and sha256sums do not
// land in the current directory (often the repository's root).
func defaultImage(pl *plan.Plan) string {
	if pl.StandIn != nil {
		return filepath.Join("out", "ocfw-"+pl.Board+"-stand-in.img")
	}
	return filepath.Join("out", "ocfw-"+pl.Board+".img")
}
