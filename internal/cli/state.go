package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ocfw/ocfw/internal/lab/boardvm"
)

// boardState is the card kept beside image between runs (boardvm.Card,
// IMAGE.state), after deleting it for --fresh, and tells the user on w,
// on the run's first line, which card boots and whether a pushed config
// on it overrides the image's own site config. nil means none: --persist
// boots the image itself, and --keep-copy a copy of the image as built.
func boardState(w io.Writer, image string, f *runFlags) (*boardvm.Card, error) {
	if f.persist {
		return nil, nil // the image itself is the card
	}
	state := boardvm.StatePath(image)
	if f.keepCopy != "" {
		if _, err := os.Stat(state); err == nil {
			fmt.Fprintf(w, "ocfw run: --keep-copy boots a copy of %s as built, in %s: the card kept in %s is neither booted nor changed (without --keep-copy, run boots it)\n", image, f.keepCopy, state)
		}
		return nil, nil
	}
	c, err := boardvm.OpenCard(image, f.fresh)
	if err != nil {
		return nil, err
	}
	line := fmt.Sprintf("ocfw run: booting the card kept in %s from earlier runs (SSH host key, leases, reports, upgrades; the image stays as built)", state)
	if !c.Kept {
		line = fmt.Sprintf("ocfw run: booting a card written from the image to %s, kept for the next run (the image stays as built)", state)
	}
	if c.Pushed != nil {
		line += fmt.Sprintf("; it holds pushed config %d (ocfw push, %s), which the router runs instead of the image's own site config", c.Pushed.N, c.Pushed.Time.UTC().Format(time.DateTime+" UTC"))
	}
	fmt.Fprintf(w, "%s; --fresh starts over from the image's own\n", line)
	for _, n := range c.Notes {
		fmt.Fprintf(w, "ocfw run: %s\n", n)
	}
	return c, nil
}

// reportsFrom is where ocfw report reads an image's reports: the card
// ocfw run kept beside it when there is one (the image itself stays as
// built, so its own data partition holds none), said on w.
func reportsFrom(w io.Writer, src string) string {
	fi, err := os.Stat(src)
	if err != nil || !fi.Mode().IsRegular() {
		return src
	}
	state := boardvm.StatePath(src)
	if si, err := os.Stat(state); err == nil && si.Mode().IsRegular() {
		fmt.Fprintf(w, "%s: reading the card that ocfw run kept in %s (the image itself is as built)\n", src, state)
		return state
	}
	return src
}
