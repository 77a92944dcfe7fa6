package kcrypto

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf/afalg"
)

// Outcome is what one change of the kernel's engine choice did: the
// changes made and, per cipher, the driver the kernel resolves afterwards
// and why. It is the record the boot report keeps.
type Outcome struct {
	// Phase is "demote-hardware" (at boot, before any interface carries
	// traffic), "promote" (after the self-test and speed report),
	// "prefer" or "demote" (by hand, `ocf engines`).
	Phase   string   `json:"phase"`
	Changes []Change `json:"changes"`
	// Kept are hardware drivers left below software without a change
	// (Decision.Kept), with why.
	Kept    []Change `json:"kept,omitempty"`
	Ciphers []Choice `json:"ciphers"`
	Notes   []string `json:"notes,omitempty"`
}

// Failed reports whether a cipher's check failed or resolved other than
// decided.
func (o *Outcome) Failed() bool {
	return slices.ContainsFunc(o.Ciphers, func(c Choice) bool { return c.Error != "" })
}

// Apply makes the changes in order. It stops at the first refused one
// (crypto_user missing, no CAP_NET_ADMIN): the changes before it stay.
func Apply(changes []Change) error {
	for _, c := range changes {
		var err error
		if c.Flush {
			err = Flush(c.Driver)
		} else {
			if c.To < 0 {
				return fmt.Errorf("kcrypto: %s: negative priority %d", c.Driver, c.To)
			}
			err = SetPriority(c.Driver, uint32(c.To))
		}
		// An instance the kernel dropped since it was listed (a
		// flush of its base takes it along) is not an error.
		if err != nil && !(c.Flush && errors.Is(err, unix.ENOENT)) {
			return err
		}
	}
	return nil
}

// DemoteHardware is the boot sequence's first call, before any interface
// carries traffic: every registration of the plan's hardware engines goes
// below the kernel's software, and each of ciphers (empty: those the
// engines serve) is checked to resolve to software, a software instance
// being built where only hardware was registered under the name.
func DemoteHardware(engines []HWEngine, ciphers []string) (*Outcome, error) {
	algs, err := List("")
	if err != nil {
		return nil, err
	}
	o := &Outcome{Phase: "demote-hardware", Changes: Demotions(engines, algs)}
	if err := Apply(o.Changes); err != nil {
		return o, err
	}
	if len(ciphers) == 0 {
		ciphers = engineCiphers(engines)
	}
	for _, c := range ciphers {
		if cat, ok := catalog.LookupCipher(c); ok {
			o.Ciphers = append(o.Ciphers, Choice{Cipher: c, Kernel: cat.Kernel, Why: "hardware engines stay below software until the firmware's self-test proves them"})
		}
	}
	o.check(engines)
	return o, nil
}

// Promote is the boot sequence's call after the self-test and speed
// report: Promotions' changes applied, and each cipher checked to resolve
// to the driver decided. in.Algs is read from the kernel when nil.
func Promote(in Input) (*Outcome, error) {
	if in.Algs == nil {
		algs, err := List("")
		if err != nil {
			return nil, err
		}
		in.Algs = algs
	}
	d := Promotions(in)
	o := &Outcome{Phase: "promote", Changes: d.Changes, Kept: d.Kept, Ciphers: d.Ciphers}
	if err := Apply(o.Changes); err != nil {
		return o, err
	}
	o.check(in.Engines)
	return o, nil
}

// PreferChanges makes driver the kernel's choice for its generic name:
// its priority goes above every other implementation of the name, and
// the others are flushed so that instances built on them are rebuilt
// (cbc(aes-generic) gives way to cbc(aes-fixed-time) when aes-fixed-time
// is preferred).
func PreferChanges(algs []Alg, driver string) ([]Change, error) {
	a, err := lookup(algs, driver)
	if err != nil {
		return nil, err
	}
	top := -1
	for _, o := range algs {
		if o.Name == a.Name && o.Driver != a.Driver && !o.Internal && o.Priority > top {
			top = o.Priority
		}
	}
	var out []Change
	if a.Priority <= top {
		out = append(out, Change{Driver: a.Driver, Name: a.Name, From: a.Priority, To: top + 1, Reason: "preferred by hand: above every other implementation of " + a.Name})
	}
	for _, o := range algs {
		if o.Name == a.Name && o.Driver != a.Driver && !o.Internal {
			out = append(out, Change{Driver: o.Driver, Name: o.Name, From: o.Priority, To: o.Priority, Flush: true,
				Reason: "drop what the kernel built on it so it is rebuilt on " + a.Driver})
		}
	}
	return out, nil
}

// DemoteChanges puts driver below every other implementation of its name
// (at Demoted, or lower when another is registered that low).
func DemoteChanges(algs []Alg, driver string) ([]Change, error) {
	a, err := lookup(algs, driver)
	if err != nil {
		return nil, err
	}
	self := hardware{base: map[string]string{a.Driver: "by hand"}}
	to := self.demotedFor(algs, a.Name)
	if a.Priority <= to {
		return nil, nil
	}
	return []Change{{Driver: a.Driver, Name: a.Name, From: a.Priority, To: to, Reason: "demoted by hand: below " + softwareText(self, algs, a.Name)}}, nil
}

func lookup(algs []Alg, driver string) (Alg, error) {
	if a, ok := Find(algs, driver); ok {
		if a.Internal {
			return a, fmt.Errorf("kcrypto: %s is internal to the kernel (never handed to users): changing it changes nothing", driver)
		}
		return a, nil
	}
	var near []string
	for _, a := range algs {
		if !a.Internal && (a.Name == driver || strings.Contains(a.Driver, driver) || strings.Contains(driver, a.Name)) && !slices.Contains(near, a.Driver) {
			near = append(near, a.Driver)
		}
	}
	msg := fmt.Sprintf("kcrypto: the kernel has no driver named %q (an exact driver name from /proc/crypto, not a generic name like cbc(aes))", driver)
	if len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, ", ") + "?"
	}
	return Alg{}, errors.New(msg)
}

// Prefer applies PreferChanges and checks the ciphers over driver's name.
func Prefer(driver string, engines []HWEngine) (*Outcome, error) {
	return byHand("prefer", driver, engines, PreferChanges)
}

// Demote applies DemoteChanges and checks the ciphers over driver's name.
func Demote(driver string, engines []HWEngine) (*Outcome, error) {
	return byHand("demote", driver, engines, DemoteChanges)
}

func byHand(phase, driver string, engines []HWEngine, plan func([]Alg, string) ([]Change, error)) (*Outcome, error) {
	algs, err := List("")
	if err != nil {
		return nil, err
	}
	changes, err := plan(algs, driver)
	if err != nil {
		return nil, err
	}
	o := &Outcome{Phase: phase, Changes: changes}
	if len(changes) == 0 || changes[0].Flush {
		o.Notes = append(o.Notes, fmt.Sprintf("%s already has the priority asked for", driver))
	}
	if err := Apply(changes); err != nil {
		return o, err
	}
	a, _ := Find(algs, driver)
	for _, c := range catalog.Ciphers() {
		if _, arg := inner(c.Kernel); c.Kernel == a.Name || arg == a.Name {
			want := ""
			if phase == "prefer" && c.Kernel == a.Name {
				want = driver
			}
			o.Ciphers = append(o.Ciphers, Choice{Cipher: c.Name, Kernel: c.Kernel, Want: want, Why: phase + " " + driver + " by hand"})
		}
	}
	o.check(engines)
	return o, nil
}

// check resolves every cipher's generic name (once per name) and fills
// in what the kernel chose. A name that still resolves to a hardware
// driver it should not use gets a software instance built first.
func (o *Outcome) check(engines []HWEngine) {
	algs, _ := List("")
	h := classify(engines, algs)
	done := map[string]Resolution{}
	errs := map[string]error{}
	for i := range o.Ciphers {
		c := &o.Ciphers[i]
		cat, ok := catalog.LookupCipher(c.Cipher)
		if !ok {
			c.Error = "not a catalog cipher"
			continue
		}
		r, seen := done[c.Kernel]
		err := errs[c.Kernel]
		if !seen && err == nil {
			r, err = Resolve(c.Kernel, cat.KernelType)
			if err == nil && (o.wrong(c, r, h) || belowSoftware(r, algs, h)) {
				if note := buildSoftware(c.Kernel, cat.KernelType, algs, h); note != "" {
					o.Notes = append(o.Notes, note)
					r, err = Resolve(c.Kernel, cat.KernelType)
				}
			}
			done[c.Kernel], errs[c.Kernel] = r, err
		}
		if err != nil {
			c.Error = err.Error()
			continue
		}
		c.Driver, c.Priority, c.How = r.Driver, r.Priority, r.How
		c.Hardware = h.isHW(r.Driver)
		switch {
		case o.wrong(c, r, h) && c.Want != "":
			c.Error = fmt.Sprintf("the kernel resolves %s to %s, not %s as decided", c.Kernel, r.Driver, c.Want)
		case o.wrong(c, r, h):
			c.Error = fmt.Sprintf("the kernel still resolves %s to hardware (%s)", c.Kernel, r.Driver)
		case belowSoftware(r, algs, h):
			c.Error = fmt.Sprintf("the kernel resolves %s to %s (priority %d) although software ranks higher", c.Kernel, r.Driver, r.Priority)
		}
	}
}

// belowSoftware reports whether the kernel handed out an implementation
// ranked below the best software one — which happens when that software
// is only buildable (a template instance nobody has asked for yet) and
// a demoted driver is the only one registered under the name.
func belowSoftware(r Resolution, algs []Alg, h hardware) bool {
	best, _, ok := h.software(algs, r.Name)
	return ok && r.Driver != best.Driver && r.Priority < best.Priority
}

// wrong reports whether r is not what the decision for c wanted.
func (o *Outcome) wrong(c *Choice, r Resolution, h hardware) bool {
	switch {
	case c.Want != "":
		return r.Driver != c.Want
	case o.Phase == "demote-hardware" || o.Phase == "promote":
		return h.isHW(r.Driver)
	}
	return false
}

// buildSoftware makes the kernel register a software instance of a
// template name (cbc(aes)) by binding its driver name over the best
// software implementation of the inner name (cbc(aes-generic)): while
// only a hardware cbc(aes) is registered, the kernel keeps returning it
// whatever its priority.
func buildSoftware(name, typ string, algs []Alg, h hardware) string {
	tmpl, arg := inner(name)
	if tmpl == "" {
		return ""
	}
	var best *Alg
	for i := range algs {
		a := &algs[i]
		if a.Name == arg && !a.Internal && a.SelfTest == "passed" && !h.isHW(a.Driver) && (best == nil || a.Priority > best.Priority) {
			best = a
		}
	}
	if best == nil {
		return ""
	}
	drv := tmpl + "(" + best.Driver + ")"
	fd, err := afalg.Bind(typ, drv)
	if err != nil {
		return fmt.Sprintf("could not build the software %s (%s): %v", name, drv, err)
	}
	unix.Close(fd)
	return fmt.Sprintf("built the software %s instance %s: only hardware was registered under %s", name, drv, name)
}

func engineCiphers(engines []HWEngine) []string {
	seen := map[string]bool{}
	for _, e := range engines {
		for c := range e.Drivers {
			seen[c] = true
		}
	}
	var out []string
	for _, c := range catalog.CipherNames() {
		if seen[c] {
			out = append(out, c)
		}
	}
	return out
}
