package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/ocfw/ocfw/ocf/kcrypto"
)

// EngineChoice is what the boot did to the kernel crypto API's choice of
// engine (package kcrypto): the kernel's own users — IPsec above all —
// get the implementation of a name with the highest priority, so the
// firmware demotes every hardware engine before the network comes up and
// promotes the ones its self-test and measurements chose afterwards.
type EngineChoice struct {
	// Demote is the change made right after the modules loaded, before
	// any interface carried traffic: hardware below software.
	Demote *kcrypto.Outcome `json:"demote,omitempty"`
	// Promote is the change made after the self-test, the speed report
	// and the policy: per cipher, what the kernel resolves now and why.
	Promote *kcrypto.Outcome `json:"promote,omitempty"`
	// Ciphers are the ciphers the choice was made for: the traffic's.
	Ciphers []string `json:"ciphers,omitempty"`
	// Size is the packet size the choice was made for.
	Size int `json:"size,omitempty"`
}

// Now is the latest outcome: the promotion, or the demotion when the
// boot got no further.
func (e *EngineChoice) Now() *kcrypto.Outcome {
	if e == nil {
		return nil
	}
	if e.Promote != nil {
		return e.Promote
	}
	return e.Demote
}

// WriteEngineChoice prints the "engine choice" section: per cipher the
// driver the kernel resolves now and why, then what was demoted and
// promoted, and what stayed below software and why.
func WriteEngineChoice(w io.Writer, e *EngineChoice) {
	fmt.Fprintf(w, "engine choice (what the kernel hands IPsec and other users")
	if e.Size > 0 {
		fmt.Fprintf(w, ", for %d-byte packets", e.Size)
	}
	fmt.Fprintln(w, "):")
	now := e.Now()
	if now == nil {
		fmt.Fprintln(w, "  not changed: the kernel chooses by its drivers' own priorities")
		return
	}
	if e.Promote == nil {
		fmt.Fprintln(w, "  not promoted after the self-test: every hardware engine stays below software")
	}
	for _, c := range now.Ciphers {
		got := c.Driver
		switch {
		case c.Error != "" && c.Driver == "":
			got = "?"
		case c.Hardware:
			got += fmt.Sprintf(" (hardware, priority %d)", c.Priority)
		default:
			got += fmt.Sprintf(" (software, priority %d)", c.Priority)
		}
		fmt.Fprintf(w, "  %-12s %s -> %s: %s\n", c.Cipher, c.Kernel, got, c.Why)
		if c.Error != "" {
			fmt.Fprintf(w, "  %-12s PROBLEM: %s\n", "", c.Error)
		}
	}
	for _, o := range []*kcrypto.Outcome{e.Demote, e.Promote} {
		if o == nil {
			continue
		}
		what := "demoted before the network"
		if o.Phase == "promote" {
			what = "after the self-test"
		}
		for _, c := range o.Changes {
			fmt.Fprintf(w, "  %s: %s\n", what, changeText(c))
		}
		for _, c := range o.Kept {
			fmt.Fprintf(w, "  %s: %s stays at %d: %s\n", what, c.Driver, c.To, c.Reason)
		}
		for _, n := range o.Notes {
			fmt.Fprintf(w, "  %s: note: %s\n", what, n)
		}
	}
}

func changeText(c kcrypto.Change) string {
	if c.Flush {
		return fmt.Sprintf("%s rebuilt (%s)", c.Driver, c.Reason)
	}
	verb := "promoted"
	if c.To < c.From {
		verb = "demoted"
	}
	return fmt.Sprintf("%s %s %d -> %d: %s", c.Driver, verb, c.From, c.To, strings.TrimSpace(c.Reason))
}
