package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ocfw/ocfw/internal/lab/boardvm"
)

// boardState says which file keeps the board's data partition between
// runs of image (boardvm.StatePath), after deleting it for --fresh, and
// tells the user on w. "" means none: --persist boots the image itself,
// and --keep-copy's copy keeps what the board wrote.
func boardState(w io.Writer, image string, f *runFlags) (string, error) {
	if f.persist || f.keepCopy != "" {
		return "", nil // the image itself, or the kept copy, is the state
	}
	state := boardvm.StatePath(image)
	if f.fresh {
		if err := os.Remove(state); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("--fresh: %w", err)
		}
	}
	if _, err := os.Stat(state); err == nil {
		fmt.Fprintf(w, "ocfw run: the board's state (SSH host key, DHCP leases, reports) from the earlier runs is in %s: booting with it (--fresh starts over)\n", state)
	} else {
		fmt.Fprintf(w, "ocfw run: keeping the board's state (SSH host key, DHCP leases, reports) in %s for the next run (--fresh starts over)\n", state)
	}
	return state, nil
}

// reportsFrom is where ocfw report reads an image's reports: the state
// ocfw run kept beside it when there is one (the image itself stays as
// built, so its own data partition holds none), said on w.
func reportsFrom(w io.Writer, src string) string {
	fi, err := os.Stat(src)
	if err != nil || !fi.Mode().IsRegular() {
		return src
	}
	state := boardvm.StatePath(src)
	if si, err := os.Stat(state); err == nil && si.Mode().IsRegular() {
		fmt.Fprintf(w, "%s: reading the board's state that ocfw run kept in %s (the image itself is as built)\n", src, state)
		return state
	}
	return src
}
