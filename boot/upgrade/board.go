package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ocfw/ocfw/plan/slots"
)

// Store is where the record is kept: the board's store (package store),
// whose log (ocf log) also gets the upgrade's outcomes.
type Store interface {
	SetValue(name string, v any) error
	Value(name string, v any) (bool, error)
	Log(text string) error
}

// Board is the upgrade on a running board: its boot partition, its
// store, the slot it booted from and its board name.
type Board struct {
	Card   *Card
	Store  Store
	Booted string // from the kernel command line (slots.BootedSlot)
	Name   string // the plan's board name
	Logf   func(format string, args ...any)
}

func (b *Board) logf(format string, args ...any) {
	if b.Logf != nil {
		b.Logf(format, args...)
	}
}

// Record reads the record, nil when there has been no upgrade.
func (b *Board) Record() (*Record, error) {
	var r Record
	ok, err := b.Store.Value(RecordName, &r)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

func (b *Board) put(r *Record) error {
	if err := b.Store.SetValue(RecordName, r); err != nil {
		return fmt.Errorf("recording the upgrade: %w", err)
	}
	return nil
}

// Revision is the running system's revision.
func (b *Board) Revision() string {
	if r, _ := b.Record(); r != nil && r.Slots[b.Booted] != "" {
		return r.Slots[b.Booted]
	}
	return b.Card.FactoryRevision()
}

// Early runs once per boot, as soon as the store is open: it does what
// Decide says (records a rollback or a commit that a cut left
// unrecorded; marks the new system's trial as started) and returns the
// action and the record's message for the console and the report.
func (b *Board) Early() (Action, string) {
	r, err := b.Record()
	if err != nil {
		return Nothing, fmt.Sprintf("upgrade record unreadable: %v", err)
	}
	def, err := b.Card.Default()
	if err != nil {
		return Nothing, err.Error()
	}
	act, reason := Decide(r, b.Booted, def)
	switch act {
	case RollBack:
		r.State, r.Reason = RolledBack, reason
		if err := b.put(r); err != nil {
			return act, err.Error()
		}
	case Commit:
		r.State = Committed
		if err := b.put(r); err != nil {
			return act, err.Error()
		}
	case Prove:
		r.Trial = Started
		if err := b.put(r); err != nil {
			return act, err.Error()
		}
		return act, fmt.Sprintf("upgrade to %s on trial: it commits itself once its boot proves itself", r.To)
	}
	return act, r.Message()
}

// Tally is a self-test tally.
type Tally struct{ Passed, Failed int }

// Receive writes the system read from r (after its header h) into the
// slot this system did not boot from, verifies it, records it pending
// and arms a one-time boot of it. Another board's system is refused
// before anything is written. old is this system's last self-test
// tally, which the new one must not fall behind.
func (b *Board) Receive(h Header, r io.Reader, old Tally) (*Record, error) {
	if h.Board != b.Name {
		return nil, fmt.Errorf("the image is for board %s, this is a %s: nothing written", h.Board, b.Name)
	}
	if !slots.ValidSlot(b.Booted) {
		return nil, errors.New("this system did not boot from a slot (no " + slots.CmdlineArg + "= on the kernel command line): nothing written")
	}
	target := slots.Other(b.Booted)
	kroom, iroom := b.Card.Room(target)
	if h.Kernel.Size > kroom || h.Initrd.Size > iroom {
		return nil, fmt.Errorf("the new system (kernel %d bytes, initramfs %d) does not fit slot %s (%d and %d bytes): nothing written",
			h.Kernel.Size, h.Initrd.Size, target, kroom, iroom)
	}
	prev, err := b.Record()
	if err != nil {
		return nil, err
	}
	rec := &Record{State: Writing, To: h.Revision, Slot: target, From: b.Revision(), FromSlot: b.Booted,
		OldFailed: old.Failed, OldPassed: old.Passed, Slots: map[string]string{}}
	if prev != nil {
		for k, v := range prev.Slots {
			rec.Slots[k] = v
		}
	}
	if rec.Slots[b.Booted] == "" {
		rec.Slots[b.Booted] = rec.From
	}
	rec.Slots[target] = ""
	if err := b.put(rec); err != nil {
		return nil, err
	}
	b.logf("upgrade: writing %s into slot %s", h.Revision, target)
	if err := b.Card.writeFiles(target, h, r); err != nil {
		return nil, b.refuse(rec, err)
	}
	// Each step says so on the console before it starts: the QEMU
	// power-cut test (e2e TestUpgradePowerCuts) kills at these lines.
	b.logf("upgrade: %s written to slot %s; reading it back to check its sha256", h.Revision, target)
	if err := b.Card.Verify(target, h); err != nil {
		return nil, b.refuse(rec, err)
	}
	rec.State, rec.Slots[target] = Pending, h.Revision
	if err := b.put(rec); err != nil {
		return nil, err
	}
	b.logf("upgrade: %s verified; arming the one-time boot of slot %s", h.Revision, target)
	if err := b.Card.ArmOnce(target); err != nil {
		return nil, fmt.Errorf("arming the one-time boot of slot %s: %w", target, err)
	}
	b.logf("upgrade to %s pending: slot %s boots once at the next reset", h.Revision, target)
	return rec, nil
}

// refuse records a stream that was cut short or did not verify, so that
// `ocf upgrade status` says refused and why rather than "being written"
// (a cut before this record is written still reads as a write cut off:
// Decide). It returns why.
func (b *Board) refuse(rec *Record, why error) error {
	rec.State, rec.Reason = Refused, why.Error()
	if err := b.put(rec); err != nil {
		return errors.Join(why, err)
	}
	b.note(rec.Message())
	return why
}

// note says msg on the console and in the card's log (ocf log).
func (b *Board) note(msg string) {
	b.logf("%s", msg)
	if err := b.Store.Log(msg); err != nil {
		b.logf("upgrade: the card's log: %v", err)
	}
}

// Checks are how the new system proves itself.
type Checks struct {
	// SelfTest is this boot's tally (nil: the self-test did not finish).
	SelfTest *Tally
	// WAN waits for the WAN's address; nil means the site has no WAN.
	WAN func(ctx context.Context) error
	// SSH checks the SSH server answers.
	SSH func(ctx context.Context) error
	// Wait bounds WAN and SSH; 0 means 2 minutes.
	Wait time.Duration
}

// Prove runs the checks on the new system's one-time boot: if all pass
// it commits the slot (the DEFAULT line, then the record) and returns
// nil; otherwise it records why (for the old system to report) and
// returns the reason: the caller resets the board and the loader boots
// the old default.
func (b *Board) Prove(ctx context.Context, c Checks) error {
	r, err := b.Record()
	if err != nil || r == nil {
		return fmt.Errorf("no upgrade record: %v", err)
	}
	why := prove(ctx, r, c)
	if why != nil {
		r.Trial = why.Error()
		if err := b.put(r); err != nil {
			return errors.Join(why, err)
		}
		return why
	}
	b.logf("upgrade: %s proved itself; making slot %s the default", r.To, b.Booted)
	if err := b.Card.SetDefault(b.Booted); err != nil {
		return fmt.Errorf("committing slot %s: %w", b.Booted, err)
	}
	r.State, r.Trial = Committed, ""
	if err := b.put(r); err != nil {
		return err
	}
	b.note(r.Message())
	return nil
}

func prove(ctx context.Context, r *Record, c Checks) error {
	if c.SelfTest == nil {
		return errors.New("the new system's self-test did not finish")
	}
	if c.SelfTest.Failed > r.OldFailed || c.SelfTest.Passed < r.OldPassed {
		return fmt.Errorf("the new system's self-test is worse than the old one's (%d passed, %d failed; before: %d passed, %d failed)",
			c.SelfTest.Passed, c.SelfTest.Failed, r.OldPassed, r.OldFailed)
	}
	wait := c.Wait
	if wait == 0 {
		wait = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if c.WAN != nil {
		if err := c.WAN(ctx); err != nil {
			return fmt.Errorf("no network: %v", err)
		}
	}
	if c.SSH != nil {
		if err := c.SSH(ctx); err != nil {
			return fmt.Errorf("SSH does not answer: %v", err)
		}
	}
	return nil
}
