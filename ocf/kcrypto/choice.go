package kcrypto

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/ocf/afalg"
)

// MakeChoice makes driver the kernel's choice for the generic name (typ
// the AF_ALG type, "skcipher" or "hash"), for a measurement that must go
// through one engine although its users (ESP, /dev/crypto) ask by generic
// name. A template instance not built yet (cbc(aes-fixed-time)) is built
// by binding its driver name, as any user's first bind would, and
// recorded in built with the priority the kernel gave it, for Restore.
// Then driver goes above every other implementation of name, the others
// are flushed (PreferChanges), and the kernel must resolve name to it.
// Only for a moment no tunnel can start in: an SA made meanwhile keeps
// the engine it was made with.
func MakeChoice(name, typ, driver string, built map[string]int) error {
	algs, err := List("")
	if err != nil {
		return err
	}
	if _, ok := Find(algs, driver); !ok {
		if !strings.Contains(driver, "(") {
			return fmt.Errorf("the kernel has no driver %s registered (module not loaded, or the device absent?)", driver)
		}
		fd, err := afalg.Bind(typ, driver)
		if err != nil {
			return fmt.Errorf("building %s: %w", driver, err)
		}
		unix.Close(fd)
		if algs, err = List(""); err != nil {
			return err
		}
		a, ok := Find(algs, driver)
		if !ok {
			return fmt.Errorf("bound %s, but /proc/crypto does not list it", driver)
		}
		built[a.Driver] = a.Priority
	}
	changes, err := PreferChanges(algs, driver)
	if err != nil {
		return err
	}
	if err := Apply(changes); err != nil {
		return fmt.Errorf("making %s the kernel's choice: %w", driver, err)
	}
	r, err := Resolve(name, typ)
	if err != nil {
		return err
	}
	if r.Driver != driver {
		return fmt.Errorf("preferred %s, but the kernel resolves %s to %s", driver, name, r.Driver)
	}
	return nil
}

// Restore undoes MakeChoice for name: every implementation of it goes
// back to its priority in before (listed before the first MakeChoice),
// an instance MakeChoice built to the priority it was built with, and an
// instance something else built meanwhile to its inner implementation's
// (what the kernel gives it); then each is flushed, so that what was
// built on the temporary choices is rebuilt on the kernel's own. It
// returns notes for what did not go back.
func Restore(name string, before []Alg, built map[string]int) []string {
	now, err := List("")
	if err != nil {
		return []string{"restoring the kernel's choice: " + err.Error()}
	}
	var notes, drvs []string
	for _, a := range now {
		if a.Name != name || a.Internal || slices.Contains(drvs, a.Driver) {
			continue
		}
		drvs = append(drvs, a.Driver)
		want := a.Priority
		if b, ok := Find(before, a.Driver); ok {
			want = b.Priority
		} else if p, ok := built[a.Driver]; ok {
			want = p
		} else if _, arg := inner(a.Driver); arg != "" {
			if in, ok := Find(now, arg); ok {
				want = in.Priority
			}
		}
		if want != a.Priority {
			if err := SetPriority(a.Driver, uint32(want)); err != nil {
				notes = append(notes, fmt.Sprintf("could not put %s back at priority %d: %v", a.Driver, want, err))
			}
		}
	}
	for _, d := range drvs {
		if err := Flush(d); err != nil && !errors.Is(err, unix.ENOENT) {
			notes = append(notes, fmt.Sprintf("could not flush %s: %v", d, err))
		}
	}
	return notes
}
