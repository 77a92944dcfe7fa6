package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/atomicfile"
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

// checkOut checks the file a flag names before anything is made
// (atomicfile.CheckTarget): devices, FIFOs, sockets and directories are
// refused, an existing file is replaced only with --force. It returns the
// path to write (a symbolic link's file, the link kept).
func checkOut(path, flag string, force bool) (string, error) {
	p, err := atomicfile.CheckTarget(path, flag+" "+path, force)
	if errors.Is(err, atomicfile.ErrExists) {
		return "", fmt.Errorf("%w: add --force to replace it", err)
	}
	return p, err
}

// checkImageOut checks build's image file and the sidecars written
// beside it. Replacing an earlier build's image (its manifest beside it)
// is what a rebuild does, so it needs no --force; any other existing
// file does.
func checkImageOut(out string, force bool) (string, error) {
	earlier := false
	if fi, err := os.Stat(firmware.ManifestPath(out)); err == nil && fi.Mode().IsRegular() {
		earlier = true
	}
	p, err := atomicfile.CheckTarget(out, "-o "+out, force || earlier)
	if errors.Is(err, atomicfile.ErrExists) {
		return "", fmt.Errorf("%w and is not an earlier ocfw build (no %s beside it): add --force to replace it", err, filepath.Base(firmware.ManifestPath(out)))
	}
	if err != nil {
		return "", err
	}
	for _, side := range []string{firmware.ManifestPath(p), firmware.SumsPath(p)} {
		if _, err := atomicfile.CheckTarget(side, "-o "+out+": "+side, true); err != nil {
			return "", err
		}
	}
	return p, nil
}
