package upgrade

import (
	"fmt"

	"github.com/ocfw/ocfw/plan/slots"
)

// RecordName is the store value (package store) holding the upgrade's
// record: it is power-safe, so every step below survives a cut.
const RecordName = "upgrade"

// States of an upgrade, in order.
const (
	Writing    = "writing"     // the inactive slot is being written; not armed
	Pending    = "pending"     // written, verified, boot-once armed: not yet proven
	Committed  = "committed"   // the new system proved itself and is the default
	RolledBack = "rolled back" // the old system booted again; Reason says why
	// Refused: the stream was cut short or its sha256 did not match; the
	// old system runs on, nothing armed; Reason says why.
	Refused = "refused"
)

// StillBooting is how the box answers an upgrade asked before its boot
// sequence is done; ocfw upgrade waits while it reads it.
const StillBooting = "the box is still booting"

// Record is the upgrade's power-safe record.
type Record struct {
	State    string `json:"state"`
	To       string `json:"to"`   // the new system's revision
	Slot     string `json:"slot"` // where it was written
	From     string `json:"from"` // the system that received it
	FromSlot string `json:"from_slot"`
	// OldFailed and OldPassed are the old system's last self-test
	// tally, which the new one must not fall behind.
	OldFailed int `json:"old_selftest_failed"`
	OldPassed int `json:"old_selftest_passed"`
	// Trial is how far the new system got on its one-time boot; the old
	// system reports it when it boots again.
	Trial  string `json:"trial,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Slots names the revision in each slot ("" while being written).
	Slots map[string]string `json:"slots,omitempty"`
}

// Message is the record as `ocf net`, the report and `ocfw upgrade`
// say it.
func (r *Record) Message() string {
	if r == nil || r.State == "" {
		return ""
	}
	switch r.State {
	case RolledBack:
		return fmt.Sprintf("upgrade to %s rolled back: %s", r.To, r.Reason)
	case Refused:
		return fmt.Sprintf("upgrade to %s refused: %s; nothing armed, this system runs on", r.To, r.Reason)
	case Writing:
		return fmt.Sprintf("upgrade to %s being written to slot %s", r.To, r.Slot)
	}
	return fmt.Sprintf("upgrade to %s %s", r.To, r.State)
}

// Action is what a boot does about the record.
type Action int

// The actions Decide returns.
const (
	Nothing  Action = iota // no upgrade under way
	Prove                  // this is the new system's one-time boot: prove it
	Commit                 // the new system is the default already: record it
	RollBack               // the old system booted again: record why
)

// Reasons when the new system left no word of its own.
const (
	// NoStart: it never reached its boot sequence, which records Started.
	NoStart = "the new system did not reach its boot sequence (kernel panic, init exited, or a hang reset by the watchdog)"
	// Started is the trial's record from its boot sequence's start until
	// it proved itself or said why not.
	Started = "the new system started its boot sequence but did not finish proving itself (crash, hang or reset)"
)

// Decide is the state machine: from the record, the slot this system
// booted from and syslinux.cfg's default, what this boot must do, and
// the rollback's reason.
func Decide(r *Record, booted, def string) (Action, string) {
	if r == nil || !slots.ValidSlot(booted) || !slots.ValidSlot(r.Slot) {
		return Nothing, ""
	}
	switch r.State {
	case Writing:
		if booted != r.Slot {
			return RollBack, "the new system's write was cut off before it was verified"
		}
		// Never armed while writing: only a hand-picked label gets here.
		return Nothing, ""
	case Pending:
		if booted == r.Slot {
			if def == r.Slot {
				return Commit, "" // cut between the commit and its record
			}
			return Prove, ""
		}
		if def == r.Slot {
			return Nothing, "" // committed, yet the old label was picked by hand
		}
		if r.Trial != "" {
			return RollBack, r.Trial
		}
		return RollBack, NoStart
	}
	return Nothing, ""
}
