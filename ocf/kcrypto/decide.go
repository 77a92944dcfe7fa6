package kcrypto

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/plan"
)

// Demoted is the priority a hardware driver is given to put it below
// software: Linux's software implementations register at 100 (generic C)
// and above (assembler, fixed-time). A name whose software is registered
// at 1 or less gets its hardware demoted to one less, down to 0.
const Demoted = 1

// Step separates the priorities of promoted engines from software and
// from each other, so that the order is plain to read in /proc/crypto.
const Step = 100

// MTU is the packet size the kernel's engine choice is made for: IPsec
// carries MTU-sized packets (1500 bytes less the ESP and IP overhead).
const MTU = 1400

// HWEngine is a hardware engine of the plan as the kernel knows it.
type HWEngine struct {
	ID       string `json:"id"` // catalog id, e.g. "geode-aes"
	Instance int    `json:"instance"`
	Module   string `json:"module"` // kernel module, e.g. "geode_aes"
	// Drivers maps each catalog cipher the engine serves to the driver
	// name it registers (instance expanded), e.g. {"aes-128-cbc":
	// "cbc-aes-geode"}: the names the self-test proves.
	Drivers map[string]string `json:"drivers"`
}

// PlanEngines returns the plan's hardware engines that the kernel crypto
// API drives (AF_ALG): the ones whose kernel priority matters.
func PlanEngines(p *plan.Plan) []HWEngine {
	if p == nil {
		return nil
	}
	var out []HWEngine
	for _, e := range p.Engines {
		if !e.Hardware || e.API != catalog.APIAFALG {
			continue
		}
		h := HWEngine{ID: e.ID, Instance: e.Instance, Module: e.Module, Drivers: map[string]string{}}
		for _, c := range p.Ciphers {
			for _, r := range c.Routes {
				if r.Engine == e.ID && r.Instance == e.Instance {
					h.Drivers[c.Cipher] = r.Driver
				}
			}
		}
		out = append(out, h)
	}
	return out
}

// Change is one priority change, or a flush, with why.
type Change struct {
	Driver string `json:"driver"`
	Name   string `json:"name"` // the generic name it serves, e.g. "cbc(aes)"
	From   int    `json:"from"`
	To     int    `json:"to"`
	// Flush leaves the priority alone and only drops the instances the
	// kernel built on Driver, so templates are rebuilt on the new choice.
	Flush  bool   `json:"flush,omitempty"`
	Reason string `json:"reason"`
}

func (c Change) String() string {
	if c.Flush {
		return fmt.Sprintf("%s (%s): drop instances built on it: %s", c.Driver, c.Name, c.Reason)
	}
	return fmt.Sprintf("%s (%s): priority %d -> %d: %s", c.Driver, c.Name, c.From, c.To, c.Reason)
}

// hardware tells the kernel's hardware registrations from software.
type hardware struct {
	base map[string]string // driver -> engine id, for drivers a plan engine registers
}

func classify(engines []HWEngine, algs []Alg) hardware {
	h := hardware{base: map[string]string{}}
	for _, e := range engines {
		for _, a := range algs {
			if (e.Module != "" && a.Module == e.Module) || slices.Contains(mapValues(e.Drivers), a.Driver) {
				h.base[a.Driver] = e.ID
			}
		}
	}
	return h
}

// isHW reports whether driver is a hardware registration or an instance
// built on one, e.g. cbc(geode-aes) or authenc(hmac(sha1-generic),cbc-aes-geode).
func (h hardware) isHW(driver string) bool {
	if _, ok := h.base[driver]; ok {
		return true
	}
	for _, tok := range strings.FieldsFunc(driver, func(r rune) bool { return r == '(' || r == ')' || r == ',' }) {
		if _, ok := h.base[tok]; ok {
			return true
		}
	}
	return false
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// software returns the best and the lowest priority of the software
// registrations of name (or of the implementations a template over it
// would be built from), and the best one's driver.
func (h hardware) software(algs []Alg, name string) (best Alg, lowest int, ok bool) {
	lowest = -1
	consider := func(a Alg, prio int) {
		if a.Internal || h.isHW(a.Driver) {
			return
		}
		if !ok || prio > best.Priority {
			best, ok = a, true
			best.Priority = prio
		}
		if lowest < 0 || prio < lowest {
			lowest = prio
		}
	}
	for _, a := range algs {
		if a.Name == name {
			consider(a, a.Priority)
		}
	}
	if tmpl, arg := inner(name); tmpl != "" {
		for _, a := range algs {
			if a.Name == arg {
				// The instance the template would build: named by its
				// driver, at the inner implementation's priority.
				b := a
				b.Name, b.Driver = name, tmpl+"("+a.Driver+")"
				consider(b, a.Priority)
			}
		}
	}
	return best, lowest, ok
}

// demotedFor is the priority that puts a driver of name below all its
// software.
func (h hardware) demotedFor(algs []Alg, name string) int {
	_, lowest, ok := h.software(algs, name)
	if !ok || lowest > Demoted {
		return Demoted
	}
	return max(lowest-1, 0)
}

// Demotions lists the changes that put every registration of the plan's
// hardware engines below the kernel's software, so that no kernel user
// (IPsec above all) touches an engine before the firmware's self-test has
// proved it. Instances built on them (cbc(geode-aes), authenc(...)) need
// no change: the kernel drops them with the change.
func Demotions(engines []HWEngine, algs []Alg) []Change {
	h := classify(engines, algs)
	var out []Change
	seen := map[string]bool{}
	for _, a := range algs {
		id, ok := h.base[a.Driver]
		if !ok || a.Internal || seen[a.Driver] {
			continue
		}
		seen[a.Driver] = true
		to := h.demotedFor(algs, a.Name)
		if a.Priority <= to {
			continue
		}
		out = append(out, Change{Driver: a.Driver, Name: a.Name, From: a.Priority, To: to,
			Reason: fmt.Sprintf("hardware engine %s (module %s) not yet proven by the firmware's self-test: below %s", id, a.Module, softwareText(h, algs, a.Name))})
	}
	return out
}

func softwareText(h hardware, algs []Alg, name string) string {
	best, _, ok := h.software(algs, name)
	if !ok {
		return "software (none registered for " + name + ")"
	}
	return fmt.Sprintf("software (%s, %d)", best.Driver, best.Priority)
}

// Input is what Promotions decides from.
type Input struct {
	Engines []HWEngine
	Algs    []Alg // the kernel's registrations now (List)
	Policy  ocf.Policy
	// Speeds are the measurements the policy came from (optional): they
	// order engines beyond the policy's one choice and show which are
	// slower than software.
	Speeds []ocf.Measurement
	// Ciphers are the ciphers the traffic uses (the tunnels'); empty
	// means every cipher the plan's engines serve. The kernel chooses
	// by name, not key size: aes-128-cbc and aes-256-cbc share cbc(aes).
	Ciphers []string
	// Size is the traffic's packet size; 0 means MTU.
	Size int
	// Margin an engine must beat software by; 0 means ocf.DefaultMargin.
	Margin float64
}

// Choice is, for one cipher, what the kernel resolves after a change and
// why: the record the report keeps.
type Choice struct {
	Cipher string `json:"cipher"`
	Kernel string `json:"kernel_name"` // generic name, e.g. "cbc(aes)"
	// Want is the hardware driver the decision made the kernel's choice;
	// empty when software should serve.
	Want string `json:"want,omitempty"`
	Why  string `json:"why"`
	// Driver, Priority and Hardware are what the kernel resolved after the
	// change, checked by binding the generic name (Apply fills them).
	Driver   string `json:"driver,omitempty"`
	Priority int    `json:"priority,omitempty"`
	Hardware bool   `json:"hardware"`
	How      string `json:"how,omitempty"` // Resolution.How
	// Error says why the check failed, or that the kernel resolved
	// something other than decided.
	Error string `json:"error,omitempty"`
}

// Decision is a planned set of changes and, per cipher, the intent.
type Decision struct {
	Changes []Change `json:"changes"`
	Ciphers []Choice `json:"ciphers"`
	// Kept are the hardware drivers of the traffic's names left below
	// software with no change needed (demoted at boot already), with
	// why: a failed engine is named here, not only in Changes.
	Kept []Change `json:"kept,omitempty"`
}

// Promotions decides, after the self-test and speed report, which
// hardware engines the kernel uses: per generic name, the engine the
// policy chose at the traffic's packet size goes first; other engines
// that passed and beat software at that size follow, fastest first; the
// engines that failed, were not tested, are denied, or are not faster
// than software stay (or are put) below software. Every other
// implementation of a promoted name is flushed so that instances built on
// it (authenc for IPsec) are rebuilt on the promoted engine.
func Promotions(in Input) Decision {
	size := in.Size
	if size <= 0 {
		size = MTU
	}
	margin := ocf.Margin(in.Margin)
	h := classify(in.Engines, in.Algs)
	ciphers := in.Ciphers
	if len(ciphers) == 0 {
		ciphers = engineCiphers(in.Engines)
	}
	// Group the ciphers by the kernel name they share.
	var names []string
	byName := map[string][]string{}
	for _, c := range ciphers {
		cat, ok := catalog.LookupCipher(c)
		if !ok {
			continue
		}
		if _, ok := byName[cat.Kernel]; !ok {
			names = append(names, cat.Kernel)
		}
		byName[cat.Kernel] = append(byName[cat.Kernel], c)
	}
	var d Decision
	promoted := map[string]bool{}
	for _, name := range names {
		ch, cs, kept := promoteName(in, h, name, byName[name], size, margin)
		d.Changes = append(d.Changes, ch...)
		d.Ciphers = append(d.Ciphers, cs...)
		d.Kept = append(d.Kept, kept...)
		for _, c := range ch {
			if !c.Flush && c.To > c.From {
				promoted[c.Driver] = true
			}
		}
	}
	// Every other hardware registration (geode-aes as a plain cipher,
	// ecb-aes-geode, engines for ciphers the traffic does not use) stays
	// below software: the self-test did not prove it for this use.
	for _, a := range in.Algs {
		id, ok := h.base[a.Driver]
		if !ok || a.Internal || promoted[a.Driver] || changed(d.Changes, a.Driver) {
			continue
		}
		if to := h.demotedFor(in.Algs, a.Name); a.Priority > to {
			d.Changes = append(d.Changes, Change{Driver: a.Driver, Name: a.Name, From: a.Priority, To: to,
				Reason: fmt.Sprintf("%s of engine %s was not chosen for the traffic's ciphers: kept below software", a.Driver, id)})
		}
	}
	return d
}

func changed(cs []Change, driver string) bool {
	for _, c := range cs {
		if c.Driver == driver {
			return true
		}
	}
	return false
}

type candidate struct {
	driver, engine string
	alg            Alg
	kbps           float64 // at the traffic size, the slowest over the ciphers
}

// promotion is promoteName's work on one kernel name: what it reads and
// the changes it gathers.
type promotion struct {
	in      Input
	h       hardware
	name    string
	ciphers []string
	size    int
	margin  float64
	soft    string // what serves name in software, for reasons
	changes []Change
	kept    []Change
}

func promoteName(in Input, h hardware, name string, ciphers []string, size int, margin float64) (changes []Change, choices []Choice, kept []Change) {
	pr := &promotion{in: in, h: h, name: name, ciphers: ciphers, size: size, margin: margin}
	cands := pr.candidates()
	choices = make([]Choice, len(ciphers))
	for i, c := range ciphers {
		choices[i] = Choice{Cipher: c, Kernel: name}
	}
	pr.soft = softwareText(h, in.Algs, name)
	if len(cands) == 0 {
		for i := range choices {
			choices[i].Why = "no hardware engine of the plan serves " + name + " in this kernel: " + pr.soft
		}
		return nil, choices, nil
	}
	pick, why := pr.policyPicks(cands)
	chosen := pick[0]
	for _, x := range pick[1:] {
		if x != chosen {
			chosen = ""
		}
	}
	if chosen != "" && !permitted(in.Policy, chosen) {
		chosen = ""
	}
	order := pr.rank(cands, chosen)
	pr.prioritize(order, chosen)
	disagree := slices.ContainsFunc(pick, func(x string) bool { return x != "" }) && chosen == ""
	for i := range choices {
		choices[i].Why = why[i]
		switch {
		case chosen != "":
			choices[i].Want = chosen
		case disagree:
			choices[i].Why += "; the ciphers sharing " + name + " do not agree on one engine (the kernel cannot choose by key size): " + pr.soft
		default:
			choices[i].Why += ": " + pr.soft
		}
	}
	return pr.changes, choices, pr.kept
}

// candidates are the hardware drivers of the plan registered under the
// name.
func (pr *promotion) candidates() []candidate {
	var cands []candidate
	for _, e := range pr.in.Engines {
		for _, c := range pr.ciphers {
			drv, ok := e.Drivers[c]
			if !ok {
				continue
			}
			a, ok := Find(pr.in.Algs, drv)
			if !ok || a.Name != pr.name || slices.ContainsFunc(cands, func(x candidate) bool { return x.driver == drv }) {
				continue
			}
			cands = append(cands, candidate{driver: drv, engine: e.ID, alg: a})
		}
	}
	return cands
}

// policyPicks are the policy's choice at the traffic size per cipher
// ("" for none) and why.
func (pr *promotion) policyPicks(cands []candidate) (pick, why []string) {
	p := pr.in.Policy
	pick = make([]string, len(pr.ciphers))
	why = make([]string, len(pr.ciphers))
	for i, c := range pr.ciphers {
		cp, ok := p.Ciphers[c]
		switch {
		case !ok:
			why[i] = "the policy says nothing about " + c
		case cp.SoftwareOnly:
			why[i] = fmt.Sprintf("the policy keeps %s in software: no engine beat it by %.0f%%", c, pr.margin*100)
		case cp.Driver == "":
			why[i] = "the policy names no engine for " + c
		case !slices.ContainsFunc(cands, func(x candidate) bool { return x.driver == cp.Driver }):
			why[i] = fmt.Sprintf("the policy chose %s for %s, which is not a kernel driver of %s", cp.Driver, c, pr.name)
		case cp.MinHardware > pr.size:
			why[i] = fmt.Sprintf("the policy uses %s for %s only from %d bytes, above the traffic's %d-byte packets", cp.Driver, c, cp.MinHardware, pr.size)
		default:
			pick[i] = cp.Driver
			why[i] = fmt.Sprintf("the policy chose %s for %s from %d-byte requests; the traffic's packets are %d bytes", cp.Driver, c, cp.MinHardware, pr.size)
		}
	}
	return pick, why
}

// keep puts a candidate below software (or records that it is already),
// with why.
func (pr *promotion) keep(c candidate, reason string) {
	ch := Change{Driver: c.driver, Name: pr.name, From: c.alg.Priority, To: pr.h.demotedFor(pr.in.Algs, pr.name), Reason: reason + ": below " + pr.soft}
	if c.alg.Priority > ch.To {
		pr.changes = append(pr.changes, ch)
	} else {
		ch.To = c.alg.Priority
		pr.kept = append(pr.kept, ch)
	}
}

// rank orders the candidates to promote: the policy's choice first, then
// the others that passed, are permitted and beat software at the size,
// fastest first; the rest are kept below software.
func (pr *promotion) rank(cands []candidate, chosen string) []candidate {
	p := pr.in.Policy
	var order []candidate
	for _, c := range cands {
		switch {
		case c.driver == chosen:
			order = append([]candidate{c}, order...)
			continue
		case p.Failed[c.driver] != "":
			pr.keep(c, "failed its self-test ("+p.Failed[c.driver]+")")
			continue
		case !slices.Contains(p.Trusted, c.driver):
			pr.keep(c, "not proven by the firmware's self-test")
			continue
		case !permitted(p, c.driver):
			pr.keep(c, "not permitted by the policy (allow/deny)")
			continue
		case chosen == "":
			pr.keep(c, "the policy does not choose hardware for "+strings.Join(pr.ciphers, ", ")+" at "+fmt.Sprint(pr.size)+" bytes")
			continue
		}
		fast, text := faster(pr.in.Speeds, c.driver, pr.ciphers, pr.size, pr.margin)
		if !fast {
			pr.keep(c, text)
			continue
		}
		c.kbps = kbpsAt(pr.in.Speeds, c.driver, pr.ciphers, pr.size)
		order = append(order, c)
	}
	if len(order) > 1 { // order[0] is the policy's choice; the rest by speed
		rest := order[1:]
		sort.SliceStable(rest, func(i, j int) bool { return rest[i].kbps > rest[j].kbps })
	}
	return order
}

// prioritize sets the ranked drivers' priorities above everything else
// registered (or buildable) under the name, Step apart, the first
// highest, and flushes the name's other implementations.
func (pr *promotion) prioritize(order []candidate, chosen string) {
	if len(order) == 0 {
		return
	}
	name := pr.name
	base := 0
	inOrder := func(drv string) bool {
		return slices.ContainsFunc(order, func(x candidate) bool { return x.driver == drv })
	}
	for _, a := range pr.in.Algs {
		if a.Name == name && !a.Internal && !inOrder(a.Driver) && !changed(pr.changes, a.Driver) && a.Priority > base {
			base = a.Priority
		}
	}
	if best, _, ok := pr.h.software(pr.in.Algs, name); ok && best.Priority > base {
		base = best.Priority
	}
	for i, c := range order {
		to := base + Step*(len(order)-i)
		reason := fmt.Sprintf("passed its self-test and beats software at %d bytes: choice %d of %d for %s", pr.size, i+1, len(order), name)
		if c.driver == chosen {
			reason = fmt.Sprintf("the policy's choice for %s at %d-byte packets: the kernel's choice for %s", strings.Join(pr.ciphers, ", "), pr.size, name)
		}
		if c.alg.Priority != to {
			pr.changes = append(pr.changes, Change{Driver: c.driver, Name: name, From: c.alg.Priority, To: to, Reason: reason})
		}
	}
	for _, a := range pr.in.Algs {
		if a.Name == name && !a.Internal && !inOrder(a.Driver) {
			pr.changes = append(pr.changes, Change{Driver: a.Driver, Name: name, From: a.Priority, To: a.Priority, Flush: true,
				Reason: fmt.Sprintf("drop what the kernel built on it (authenc for IPsec) so it is rebuilt on %s", order[0].driver)})
		}
	}
}

func permitted(p ocf.Policy, driver string) bool {
	if len(p.Allow) > 0 && !slices.Contains(p.Allow, driver) {
		return false
	}
	return !slices.Contains(p.Deny, driver)
}

// sizeAt is the largest measured size not above size (the smallest
// measured when all are above): the speed table has 1024 and 8192, not
// 1400.
func sizeAt(sizes []int, size int) int {
	at := -1
	for _, s := range sizes {
		if s <= size && s > at {
			at = s
		}
	}
	if at < 0 && len(sizes) > 0 {
		at = slices.Min(sizes)
	}
	return at
}

func measured(speeds []ocf.Measurement, engine, cipher string, size int) (float64, int, bool) {
	for i := range speeds {
		m := &speeds[i]
		if m.Engine == engine && m.Cipher == cipher && len(m.Sizes) == len(m.KBps) {
			at := sizeAt(m.Sizes, size)
			for j, s := range m.Sizes {
				if s == at {
					return m.KBps[j], at, true
				}
			}
		}
	}
	return 0, 0, false
}

// reference is the software measurement the kernel would fall back to:
// a kernel software row (not hardware, not Go) if measured, else Go.
func reference(speeds []ocf.Measurement, cipher string, size int) (string, float64, bool) {
	var goKB float64
	goOK := false
	for i := range speeds {
		m := &speeds[i]
		if m.Cipher != cipher || m.Hardware {
			continue
		}
		kb, _, ok := measured(speeds[i:i+1], m.Engine, cipher, size)
		if !ok {
			continue
		}
		if m.Engine == "go" {
			goKB, goOK = kb, true
			continue
		}
		return m.Engine, kb, true
	}
	return "go", goKB, goOK
}

// faster reports whether driver beats software by margin at size for
// every cipher, and if not, why.
func faster(speeds []ocf.Measurement, driver string, ciphers []string, size int, margin float64) (bool, string) {
	for _, c := range ciphers {
		kb, at, ok := measured(speeds, driver, c, size)
		if !ok {
			return false, fmt.Sprintf("passed, but has no %s measurement to rank it against software", c)
		}
		ref, rkb, ok := reference(speeds, c, size)
		if !ok {
			return false, fmt.Sprintf("passed, but no software %s measurement to compare with", c)
		}
		if !ocf.Beats(kb, rkb, margin) {
			return false, fmt.Sprintf("passed, but not %.0f%% faster than software for %s at %d bytes (%.0f vs %s %.0f kB/s)", margin*100, c, at, kb, ref, rkb)
		}
	}
	return true, ""
}

func kbpsAt(speeds []ocf.Measurement, driver string, ciphers []string, size int) float64 {
	low := -1.0
	for _, c := range ciphers {
		if kb, _, ok := measured(speeds, driver, c, size); ok && (low < 0 || kb < low) {
			low = kb
		}
	}
	return low
}
