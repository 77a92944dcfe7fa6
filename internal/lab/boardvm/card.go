package boardvm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/store"
)

// Card is the CF card ocfw run keeps beside an image (StatePath): a
// sparse raw disk image of the whole card, written from the image once
// and then booted by every run of that image, as a board boots its card.
// What the board writes anywhere on it survives from run to run: its
// data partition (SSH host key, DHCP leases, boot counter, reports,
// pushed configs) and its boot partition (an upgrade's new slot, the
// slot that boots). The image itself is never written.
type Card struct {
	Path  string // StatePath(image)
	Image string
	// Kept says an earlier run's card is booted; false: the card was
	// written from the image now.
	Kept bool
	// Notes say what became of an earlier card that did not fit: an
	// old ocfw's data-partition-only state, or a card written from an
	// image since rebuilt.
	Notes []string
	// Pushed is the pushed config (ocfw push) the card boots with,
	// nil when it boots the image's own.
	Pushed *config.Gen

	lock *os.File // the image, locked while the card is in use
}

// Close lets another run use the card.
func (c *Card) Close() error {
	if c.lock == nil {
		return nil
	}
	err := c.lock.Close()
	c.lock = nil
	return err
}

// lockImage takes the lock of the card kept for image: an exclusive
// flock(2) on the image file, held until Close. Two runs booting one
// card would corrupt it, as two boards cannot share one CF card.
func lockImage(image string) (*os.File, error) {
	f, err := os.Open(image)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: another ocfw run is booting its card %s: end that run first, or boot a copy of the image as built with --keep-copy FILE", image, StatePath(image))
		}
		return nil, fmt.Errorf("%s: locking its card: %w", image, err)
	}
	return f, nil
}

// SourcePath is the file beside a kept card that names the image it was
// written from, in sha256sum's format: a card written from another image
// (rebuilt since) must not be booted as if it were this one's.
func SourcePath(state string) string { return state + ".from" }

// removeCard deletes the card kept for image (--fresh), so that a new
// one is written from the image.
func removeCard(image string) error {
	state := StatePath(image)
	for _, f := range []string{SourcePath(state), state} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// OpenCard returns the card kept for image, writing it first when there
// is none yet or the one there does not fit the image:
//   - none: a new card, the image's bytes;
//   - one written from this image: booted as it is;
//   - one written from another image (rebuilt since), or with no record
//     of its image: a new card from the image carrying the old card's
//     data partition over, as writing a new image to a card and keeping
//     its data would (the host key and a pushed config stay);
//   - the data partition alone (IMAGE.state of an older ocfw): a new card
//     from the image with that data partition.
//
// A state whose data partition does not fit the image's is refused,
// naming --fresh. With fresh, the card kept is deleted first (under the
// lock) and a new one written. The card is locked until Close: another
// run of the image is refused meanwhile.
func OpenCard(image string, fresh bool) (c *Card, err error) {
	lock, err := lockImage(image)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	if fresh {
		if err := removeCard(image); err != nil {
			return nil, fmt.Errorf("--fresh: %w", err)
		}
	}
	info, err := firmware.Inspect(image)
	if err != nil {
		return nil, err
	}
	if info.Manifest == nil || info.Manifest.Plan == nil {
		return nil, fmt.Errorf("%s: no ocfw manifest in or beside the image: build it with ocfw build", image)
	}
	off, size, err := dataRange(info, info.Manifest.Plan)
	if err != nil {
		return nil, err
	}
	sum, err := fileSum(image)
	if err != nil {
		return nil, err
	}
	pl := info.Manifest.Plan
	g := cardGeometry{size: info.Size, dataOff: off, dataSize: size, oldData: func(state string) (int64, int64, error) {
		old, err := firmware.Inspect(state)
		if err != nil {
			return 0, 0, err
		}
		return dataRange(old, pl)
	}}
	if c, err = openCard(image, StatePath(image), sum, g); err != nil {
		return nil, err
	}
	c.Pushed, c.lock = pushedConfig(c.Path, off, size), lock
	return c, nil
}

// cardGeometry is where an image's data partition lies.
type cardGeometry struct {
	size, dataOff, dataSize int64
	// oldData finds the data partition on a kept card of the image's
	// size (nil: where the image's is).
	oldData func(state string) (off, size int64, err error)
}

func openCard(image, state, sum string, g cardGeometry) (*Card, error) {
	c := &Card{Path: state, Image: image}
	fi, err := os.Stat(state)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, writeCard(image, state, sum, g, nil, 0)
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: not a regular file (ocfw run keeps the card of %s there)", state, image)
	}
	old, err := os.Open(state)
	if err != nil {
		return nil, err
	}
	defer old.Close()
	switch {
	case fi.Size() == g.size:
		if from, _ := os.ReadFile(SourcePath(state)); sumLine(from) == sum {
			c.Kept = true
			return c, nil
		}
		from, size := g.dataOff, g.dataSize
		if g.oldData != nil {
			if from, size, err = g.oldData(state); err != nil {
				return nil, fmt.Errorf("%s was written from another build of %s, and its data partition does not read (%v): give --fresh to start over with the image's own (it deletes %s)", state, image, err, state)
			}
		}
		if size != g.dataSize {
			return nil, &StateMismatchError{State: state, Size: size, Partition: g.dataSize}
		}
		c.Notes = append(c.Notes, fmt.Sprintf("%s was written from another build of %s: a new card from the image, with the old card's data partition (host key, leases, reports, pushed config); its boot partition and slots are the image's", state, image))
		return c, writeCard(image, state, sum, g, old, from)
	case fi.Size() == g.dataSize:
		c.Notes = append(c.Notes, fmt.Sprintf("%s held only the data partition (an older ocfw): now the whole card, written from %s with that data partition", state, image))
		return c, writeCard(image, state, sum, g, old, 0)
	}
	return nil, &StateMismatchError{State: state, Size: fi.Size(), Partition: g.dataSize, Card: g.size}
}

// writeCard writes a new card for image to state: the image's bytes,
// with data (when not nil) at dataFrom as its data partition. The card is
// whole before it is renamed into place, and the record of its image is
// written after: an interrupted write leaves the old card, or a new one
// that the next run does not take for the image's own.
func writeCard(image, state, sum string, g cardGeometry, data *os.File, dataFrom int64) (err error) {
	src, err := os.Open(image)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(state), "."+filepath.Base(state)+"-*")
	if err != nil {
		return fmt.Errorf("writing the card kept for %s: %w", image, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = copySparse(tmp, src); err != nil {
		return fmt.Errorf("writing %s from %s: %w", state, image, err)
	}
	if data != nil {
		if err = punchRange(tmp, g.dataOff, g.dataSize); err == nil {
			err = copyAt(tmp, g.dataOff, data, dataFrom, g.dataSize)
		}
		if err != nil {
			return fmt.Errorf("carrying the data partition of %s over: %w", state, err)
		}
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	from := SourcePath(state)
	if err = os.Remove(from); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err = os.Rename(tmp.Name(), state); err != nil {
		return err
	}
	return atomicfile.WriteFile(from, []byte(sum+"  "+filepath.Base(image)+"\n"), 0o644)
}

// sumLine is the checksum of a sha256sum line ("" when none).
func sumLine(b []byte) string {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func fileSum(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pushedConfig is the pushed config the card at path boots with (as the
// boot reads it: a provisional one is rolled back), nil when none or
// when the store does not read.
func pushedConfig(path string, off, size int64) *config.Gen {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fsys, err := fat.Open(f, off, size)
	if err != nil {
		return nil
	}
	c, err := store.Load(func(name string) ([]byte, error) { return fsys.ReadFile(store.Dir+"/"+name, 4<<20) })
	if err != nil {
		return nil
	}
	var r config.Record
	if _, err := c.State.Value(config.ValueName, &r); err != nil {
		return nil
	}
	// A provisional config is rolled back at boot: the card boots the
	// confirmed one either way.
	return r.Confirmed
}
