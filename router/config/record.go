package config

import (
	"fmt"
	"time"
)

// ValueName is the store value that holds the pushed configs. It is one
// document, written by one store commit (the store's two state copies,
// the newer valid one winning): a power cut during any write leaves the
// record as it was before or as it is after, never a mix.
const ValueName = "site_push"

// States of the newest pushed config.
const (
	StateProvisional = "provisional" // applied, waiting for a confirm
	StateConfirmed   = "confirmed"   // kept, booted from now on
	StateRolledBack  = "rolled back" // given up: the previous config runs
)

// Gen is one pushed site config with the key files pushed with it.
type Gen struct {
	N     int               `json:"n"`
	Site  string            `json:"site"`            // site.json's text
	Files map[string]string `json:"files,omitempty"` // key file name -> text
	Time  time.Time         `json:"time"`
}

// Record is what the store keeps.
type Record struct {
	State string `json:"state"`
	// Confirmed is what the box boots; nil is the config it had before
	// any push (the card's site.json, else the one built in).
	Confirmed *Gen `json:"confirmed,omitempty"`
	// Candidate is the config being tried, while State is provisional.
	Candidate *Gen `json:"candidate,omitempty"`
	// Deadline ends the try: rolled back unless confirmed by then.
	Deadline time.Time `json:"deadline,omitzero"`
	// ApplyConn is the SSH connection that applied the candidate: the
	// confirm must come over another one.
	ApplyConn string `json:"apply_conn,omitempty"`
	// Last is the newest generation number handed out.
	Last int `json:"last"`
	// Note says what happened last (why a config was rolled back).
	Note string `json:"note,omitempty"`
}

// Values is the board's store (store.Store).
type Values interface {
	SetValue(name string, v any) error
	Value(name string, v any) (bool, error)
}

// Load reads the record; a zero one when there is none.
func Load(v Values) (Record, error) {
	var r Record
	if v == nil {
		return r, nil
	}
	if _, err := v.Value(ValueName, &r); err != nil {
		return Record{}, fmt.Errorf("config: the store's %s: %w", ValueName, err)
	}
	return r, nil
}

// AtBoot reads the record as the boot does: a config still provisional
// was never confirmed (the power went, or the box was reset, before its
// confirm), so it is rolled back — the record says so and the previous
// config boots. It returns the generation to boot (nil: the config from
// before any push) and a line for the log when there is something to
// say.
func AtBoot(v Values) (*Gen, string, error) {
	r, err := Load(v)
	if err != nil {
		return nil, "", err
	}
	note := ""
	if r.State == StateProvisional {
		gen := 0
		if r.Candidate != nil {
			gen = r.Candidate.N
		}
		note = fmt.Sprintf("pushed config %d was still provisional at boot (not confirmed before the power went or the box restarted): rolled back to %s", gen, genName(r.Confirmed))
		r.State, r.Candidate, r.Deadline, r.ApplyConn, r.Note = StateRolledBack, nil, time.Time{}, "", note
		if err := v.SetValue(ValueName, r); err != nil {
			// The candidate is not booted either way: the next boot
			// tries to write this again.
			note += fmt.Sprintf(" (writing that down failed: %v)", err)
		}
	} else if r.Confirmed != nil {
		note = fmt.Sprintf("pushed config %d (confirmed %s)", r.Confirmed.N, r.Confirmed.Time.UTC().Format(time.RFC3339))
	}
	return r.Confirmed, note, nil
}

func genName(g *Gen) string {
	if g == nil {
		return "the config from before any push"
	}
	return fmt.Sprintf("pushed config %d", g.N)
}
