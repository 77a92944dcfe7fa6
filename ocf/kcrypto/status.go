package kcrypto

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// CatalogEngines returns the catalog's hardware engines driven through
// the kernel crypto API (instance 0's driver names): what `ocf engines`
// marks as hardware besides the plan's own.
func CatalogEngines() []HWEngine {
	var out []HWEngine
	for _, e := range catalog.Engines() {
		if !e.Hardware || e.API != catalog.APIAFALG {
			continue
		}
		h := HWEngine{ID: e.ID, Module: e.Module, Drivers: map[string]string{}}
		for _, c := range e.Ciphers {
			h.Drivers[c.Cipher] = strings.ReplaceAll(c.Driver, "%d", "0")
		}
		out = append(out, h)
	}
	return out
}

// Candidate is one registered implementation of a name.
type Candidate struct {
	Alg
	Hardware bool   `json:"hardware"`
	Engine   string `json:"engine,omitempty"` // catalog id of a hardware engine
}

// NameStatus is the kernel's choice for one generic name.
type NameStatus struct {
	Name    string   `json:"name"`    // e.g. "cbc(aes)"
	Type    string   `json:"type"`    // AF_ALG socket type
	Ciphers []string `json:"ciphers"` // catalog ciphers over it
	// Resolved is what a new user gets now (nil when it could not be
	// checked; Error says why).
	Resolved *Resolution `json:"resolved,omitempty"`
	Error    string      `json:"error,omitempty"`
	// Candidates are registered under Name, highest priority first.
	Candidates []Candidate `json:"candidates"`
	// Bases are the implementations of the template's argument ("aes"
	// for cbc(aes)) a new template instance would be built on.
	Bases []Candidate `json:"bases,omitempty"`
}

// Status lists, per catalog kernel name (only those of ciphers when
// given), the implementations and what the kernel resolves now. With
// resolve, each name is bound once over AF_ALG first (which may build a
// template instance, as any user's bind would).
func Status(engines []HWEngine, ciphers []string, resolve bool) ([]NameStatus, error) {
	var out []NameStatus
	index := map[string]int{}
	for _, c := range catalog.Ciphers() {
		if len(ciphers) > 0 && !contains(ciphers, c.Name) {
			continue
		}
		if i, ok := index[c.Kernel]; ok {
			out[i].Ciphers = append(out[i].Ciphers, c.Name)
			continue
		}
		index[c.Kernel] = len(out)
		out = append(out, NameStatus{Name: c.Kernel, Type: c.KernelType, Ciphers: []string{c.Name}})
	}
	if resolve {
		for i := range out {
			r, err := Resolve(out[i].Name, out[i].Type)
			if err != nil {
				out[i].Error = err.Error()
				continue
			}
			out[i].Resolved = &r
		}
	}
	algs, err := List("")
	if err != nil {
		return out, err
	}
	fill(out, engines, algs)
	return out, nil
}

func fill(out []NameStatus, engines []HWEngine, algs []Alg) {
	h := classify(engines, algs)
	cand := func(a Alg) Candidate {
		c := Candidate{Alg: a, Hardware: h.isHW(a.Driver)}
		for base, id := range h.base {
			if a.Driver == base || strings.Contains(a.Driver, "("+base+")") || strings.Contains(a.Driver, ","+base+")") {
				c.Engine = id
			}
		}
		return c
	}
	for i := range out {
		_, arg := inner(out[i].Name)
		for _, a := range algs {
			switch {
			case a.Internal:
			case a.Name == out[i].Name:
				out[i].Candidates = append(out[i].Candidates, cand(a))
			case arg != "" && a.Name == arg:
				out[i].Bases = append(out[i].Bases, cand(a))
			}
		}
		byPrio := func(cs []Candidate) {
			sort.SliceStable(cs, func(a, b int) bool { return cs[a].Priority > cs[b].Priority })
		}
		byPrio(out[i].Candidates)
		byPrio(out[i].Bases)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// WriteStatus prints the status as `ocf engines` shows it: per name, the
// implementations best first, "*" marking what the kernel resolves now.
func WriteStatus(w io.Writer, st []NameStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, s := range st {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		now := "not checked"
		switch {
		case s.Resolved != nil:
			now = s.Resolved.Driver
		case s.Error != "":
			now = "? (" + s.Error + ")"
		}
		fmt.Fprintf(tw, "%s\t(%s)\tkernel resolves: %s\n", s.Name, strings.Join(s.Ciphers, ", "), now)
		if len(s.Candidates) == 0 {
			fmt.Fprintf(tw, "  nothing registered yet: the first user's bind builds it from a template\n")
		}
		row := func(c Candidate) {
			mark := " "
			if s.Resolved != nil && s.Resolved.Driver == c.Driver {
				mark = "*"
			}
			kind := "software"
			if c.Hardware {
				kind = "hardware"
				if c.Engine != "" {
					kind += " (" + c.Engine + ")"
				}
			}
			if c.SelfTest != "passed" {
				kind += ", kernel self-test " + c.SelfTest
			}
			fmt.Fprintf(tw, "  %s %d\t%s\t%s\t%s\n", mark, c.Priority, c.Driver, c.Module, kind)
		}
		for _, c := range s.Candidates {
			row(c)
		}
		if len(s.Bases) > 0 {
			_, arg := inner(s.Name)
			fmt.Fprintf(tw, "  new %s instances are built on the best %s:\n", s.Name, arg)
			for _, c := range s.Bases {
				row(c)
			}
		}
	}
	return tw.Flush()
}

// WriteOutcome prints what a change did.
func WriteOutcome(w io.Writer, o *Outcome) error {
	if len(o.Changes) == 0 {
		fmt.Fprintln(w, "no priority changed")
	}
	for _, c := range o.Changes {
		fmt.Fprintln(w, c.String())
	}
	for _, c := range o.Kept {
		fmt.Fprintf(w, "%s (%s): stays at priority %d: %s\n", c.Driver, c.Name, c.To, c.Reason)
	}
	for _, n := range o.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range o.Ciphers {
		got := c.Driver
		if c.Error != "" {
			got = "ERROR: " + c.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t-> %s\t%s\n", c.Cipher, c.Kernel, got, c.Why)
	}
	return tw.Flush()
}
