package boards

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/plan"
)

// Request is what a user asks a plan for.
type Request struct {
	Board string
	Cards []string
	// Ciphers restricts the firmware to these ciphers; empty means all.
	Ciphers []string
	// RequireHW names ciphers that must be done in hardware by some
	// selected engine.
	RequireHW []string
	// StandIn builds the plan for QEMU's ARM stand-in for an IXP4xx
	// board (catalog.RaspiStandIn) instead of for the board.
	StandIn bool
}

// RequestError is a problem with one value of a Request: Field names
// the request's field as a user gives it ("board", "card", "cipher",
// "require-hw", "stand-in"), Value the value ("" for stand-in). A CLI
// words it with its own flag names.
type RequestError struct {
	Field string
	Value string
	Msg   string
}

func (e *RequestError) Error() string {
	return catalog.Clip(strings.TrimSpace(e.Field+" "+e.Value)) + ": " + e.Msg
}

// RequireHWError is a cipher required in hardware that no selected
// engine does there: Partial says which engines do it only in part, Fits
// the cards a free slot takes that would (none: drop the requirement).
type RequireHWError struct {
	Cipher  string
	Board   string
	Partial []string
	Fits    []string
}

// Problem is the error without the advice: what is missing, and why.
func (e *RequireHWError) Problem() string {
	msg := fmt.Sprintf("no selected engine on %s does %s in hardware", e.Board, e.Cipher)
	if len(e.Partial) > 0 {
		msg += " (" + strings.Join(e.Partial, "; ") + ")"
	}
	return msg
}

func (e *RequireHWError) Error() string {
	msg := "require-hw " + e.Cipher + ": " + e.Problem()
	if len(e.Fits) > 0 {
		return msg + "; a free slot takes a card that does: " + strings.Join(e.Fits, " or ")
	}
	return msg + "; no card that fits a free slot does it either"
}

// Resolve turns a request into a Plan, or explains why the combination
// cannot work.
func (c *Catalog) Resolve(req Request) (*plan.Plan, error) {
	b, err := c.Board(req.Board)
	if err != nil {
		return nil, &RequestError{Field: "board", Value: req.Board, Msg: err.Error()}
	}
	p := &plan.Plan{
		Version:     plan.Version,
		Board:       b.Name,
		Description: b.Description,
		Cards:       []plan.Card{},
		Go:          goTarget(b.CPU.Arch),
		Console: plan.Console{Device: b.Console.Device, Baud: b.Console.Baud,
			KernelArg: fmt.Sprintf("console=%s,%dn8", b.Console.Device, b.Console.Baud)},
		Boot:    b.Boot,
		Image:   b.Image,
		Storage: b.Storage,
		RAMMB:   b.RAMMB,
		Kernel:  b.Kernel,
		Ports:   b.Ports,
	}
	if p.Image.DataLabel == "" && (b.Boot == plan.BootBIOSCF || b.Storage.CF) {
		p.Image.DataLabel = plan.DataLabel
	}

	// Place cards in the board's slots, in the order given.
	free := map[string]int{}
	for _, s := range b.Slots {
		free[s.Form] += s.Count
	}
	used := map[string]int{}
	for i, name := range req.Cards {
		card, err := c.Card(name)
		if err != nil {
			return nil, &RequestError{Field: "card", Value: name, Msg: err.Error()}
		}
		if card.Form == FormQEMU {
			// A stand-in takes no slot; ocfw run boots x86 boards only.
			if b.CPU.Arch != ArchI586 {
				return nil, &RequestError{Field: "card", Value: name, Msg: fmt.Sprintf("%s is a stand-in that exists only in QEMU runs, and ocfw runs only the x86 boards in QEMU, not %s", card.Name, b.Name)}
			}
			for _, pc := range p.Cards {
				if pc.Name == card.Name {
					return nil, &RequestError{Field: "card", Value: name, Msg: fmt.Sprintf("%s given twice: a QEMU run has one %s", card.Name, card.Engine)}
				}
			}
			p.Cards = append(p.Cards, plan.Card{Name: card.Name, Slot: FormQEMU, Engine: card.Engine, Chip: card.Chip, PCI: card.PCI})
			continue
		}
		if free[card.Form] == 0 {
			return nil, &RequestError{Field: "card", Value: name, Msg: c.slotMessage(b, card, i, used, free)}
		}
		free[card.Form]--
		p.Cards = append(p.Cards, plan.Card{Name: card.Name, Slot: fmt.Sprintf("%s%d", card.Form, used[card.Form]),
			Engine: card.Engine, Chip: card.Chip, PCI: card.PCI})
		used[card.Form]++
	}

	// Engines: on-chip, then cards in slot order, then software.
	instances := map[string]int{}
	addEngine := func(id, from string) {
		e, _ := catalog.LookupEngine(id)
		p.Engines = append(p.Engines, plan.Engine{ID: e.ID, Instance: instances[id], From: from, Hardware: e.Hardware,
			API: e.API, Module: e.Module, Async: e.Async, Mainline: e.Mainline, Requires: e.Requires, Quirks: e.Quirks})
		instances[id]++
	}
	if b.Engine != "" {
		addEngine(b.Engine, "on-chip")
	}
	for _, pc := range p.Cards {
		from := fmt.Sprintf("card %s in %s", pc.Name, pc.Slot)
		if pc.Slot == FormQEMU {
			from = fmt.Sprintf("card %s (QEMU stand-in, no slot)", pc.Name)
		}
		addEngine(pc.Engine, from)
	}
	addEngine(catalog.KernelSoft, "software")
	addEngine(catalog.GoSoft, "software")

	// Ciphers.
	names := req.Ciphers
	if len(names) == 0 {
		names = catalog.CipherNames()
	}
	seen := map[string]bool{}
	var chosen []*catalog.Cipher
	for _, n := range append(append([]string(nil), names...), req.RequireHW...) {
		ci, ok := catalog.LookupCipher(n)
		if !ok {
			field := "cipher"
			if !contains(names, n) {
				field = "require-hw"
			}
			return nil, &RequestError{Field: field, Value: n, Msg: fmt.Sprintf("unknown cipher %s%s; known ciphers: %s", quote(n), suggest(n, catalog.CipherNames()), strings.Join(catalog.CipherNames(), ", "))}
		}
		if !seen[n] {
			seen[n] = true
			chosen = append(chosen, ci)
		}
	}
	// Catalog order keeps the plan independent of flag order.
	sort.SliceStable(chosen, func(i, j int) bool { return cipherIndex(chosen[i].Name) < cipherIndex(chosen[j].Name) })
	for _, ci := range chosen {
		p.Ciphers = append(p.Ciphers, plan.Cipher{Cipher: ci.Name, KeyBits: keyBits(ci), Routes: routes(p.Engines, ci)})
	}
	for _, n := range req.RequireHW {
		if !contains(p.RequireHW, n) {
			p.RequireHW = append(p.RequireHW, n)
		}
	}
	sort.Strings(p.RequireHW)
	for _, n := range p.RequireHW {
		if err := c.checkHW(p, b, n, free); err != nil {
			return nil, err
		}
	}

	p.Modules = append(modules(p, chosen), watchdogModules(p, b)...)
	p.Notes = notes(p, b)
	if req.StandIn {
		if err := standIn(p, b); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func goTarget(arch string) plan.GoTarget {
	switch arch {
	case ArchARMv5TE:
		return plan.GoTarget{GOOS: "linux", GOARCH: "arm", GOARM: "5"}
	default:
		// Geode LX has no SSE2: a default GOARCH=386 binary dies with SIGILL.
		return plan.GoTarget{GOOS: "linux", GOARCH: "386", GO386: "softfloat"}
	}
}

func keyBits(c *catalog.Cipher) int {
	if c.Kind == catalog.KindCipher {
		return c.KeyBits()
	}
	return 0
}

func cipherIndex(name string) int {
	for i, n := range catalog.CipherNames() {
		if n == name {
			return i
		}
	}
	return len(catalog.CipherNames())
}

// routes orders the engines that can serve c: engines doing it in
// hardware (highest kernel priority first), then hardware engines that
// accept it but fall back to software inside the driver, then kernel
// software, then Go software — the firmware's final fallback.
func routes(engines []plan.Engine, c *catalog.Cipher) []plan.Route {
	type ranked struct {
		r    plan.Route
		tier int
		idx  int
	}
	var rs []ranked
	for i, pe := range engines {
		e, _ := catalog.LookupEngine(pe.ID)
		cs, ok := e.Serves(c.Name)
		if !ok {
			continue
		}
		driver := cs.Driver
		if strings.Contains(driver, "%d") {
			driver = fmt.Sprintf(driver, pe.Instance)
		}
		hw := e.Hardware && containsInt(cs.HWKeyBits, keyBits(c))
		if e.Hardware && c.Kind == catalog.KindMAC {
			hw = true // hardware MACs take any key length
		}
		tier := 3
		switch {
		case hw:
			tier = 0
		case e.Hardware:
			tier = 1
		case e.ID == catalog.KernelSoft:
			tier = 2
		}
		rs = append(rs, ranked{plan.Route{Engine: pe.ID, Instance: pe.Instance, Driver: driver, API: e.API, Priority: cs.Priority,
			Hardware: hw, HWKeyBits: cs.HWKeyBits, Note: cs.Note}, tier, i})
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].tier != rs[j].tier {
			return rs[i].tier < rs[j].tier
		}
		if rs[i].r.Priority != rs[j].r.Priority {
			return rs[i].r.Priority > rs[j].r.Priority
		}
		return rs[i].idx < rs[j].idx
	})
	out := make([]plan.Route, len(rs))
	for i, r := range rs {
		out[i] = r.r
	}
	return out
}

// checkHW explains a cipher required in hardware no selected engine does in
// hardware, and which card would.
func (c *Catalog) checkHW(p *plan.Plan, b *Board, cipher string, free map[string]int) error {
	for _, pc := range p.Ciphers {
		if pc.Cipher != cipher {
			continue
		}
		var partial []string
		for _, r := range pc.Routes {
			if r.Hardware {
				return nil
			}
			if e, _ := catalog.LookupEngine(r.Engine); e.Hardware {
				partial = append(partial, fmt.Sprintf("%s does only %s-bit keys in hardware; %s runs in its software fallback", r.Engine, intList(r.HWKeyBits), cipher))
			}
		}
		var fits []string
		for _, card := range c.Cards() {
			e, _ := catalog.LookupEngine(card.Engine)
			cs, ok := e.Serves(cipher)
			ci, _ := catalog.LookupCipher(cipher)
			if ok && free[card.Form] > 0 && (containsInt(cs.HWKeyBits, keyBits(ci)) || ci.Kind == catalog.KindMAC) {
				fits = append(fits, card.Name)
			}
		}
		return &RequireHWError{Cipher: cipher, Board: b.Name, Partial: partial, Fits: fits}
	}
	return nil
}

func (c *Catalog) slotMessage(b *Board, card *Card, i int, used, free map[string]int) string {
	var have []string
	for _, s := range b.Slots {
		have = append(have, fmt.Sprintf("%d %s", s.Count, formName(s.Form)))
	}
	slots := "no expansion slots"
	if len(have) > 0 {
		slots = strings.Join(have, " and ") + " slot(s)"
	}
	var msg string
	if used[card.Form] > 0 {
		msg = fmt.Sprintf("card %d (%s) needs a %s slot, but the %d %s slot(s) of %s are taken by earlier cards (%s has %s)",
			i+1, card.Name, formName(card.Form), used[card.Form], formName(card.Form), b.Name, b.Name, slots)
	} else {
		msg = fmt.Sprintf("%s is a %s card, but %s has %s", card.Name, formName(card.Form), b.Name, slots)
	}
	// Point at a card with the same engine that fits a free slot.
	for _, alt := range c.Cards() {
		if alt.Engine == card.Engine && alt.Form != card.Form && free[alt.Form] > 0 {
			return msg + fmt.Sprintf("; the %s engine also comes as %s, a %s card that fits", card.Engine, alt.Name, formName(alt.Form))
		}
	}
	return msg
}

func formName(form string) string {
	switch form {
	case FormPCI:
		return "PCI"
	case FormMiniPCI:
		return "mini-PCI"
	}
	return form
}

// modules lists kernel modules to load, in order: the AF_ALG socket
// stack, software algorithms the kernel needs as modules, then engine
// drivers. Modules built into a given kernel are resolved later, against
// its modules.builtin.
func modules(p *plan.Plan, chosen []*catalog.Cipher) []plan.Module {
	var mods []plan.Module
	have := map[string]bool{}
	add := func(m plan.Module) {
		if !have[m.Name] {
			have[m.Name] = true
			mods = append(mods, m)
		}
	}
	add(plan.Module{Name: "af_alg", For: "AF_ALG socket family (kernel crypto API from user space)"})
	var skc, hash, des, aes bool
	for _, c := range chosen {
		switch c.KernelType {
		case "skcipher":
			skc = true
		case "hash":
			hash = true
		}
		if strings.HasPrefix(c.Name, "des") {
			des = true
		}
		if strings.HasPrefix(c.Name, "aes") {
			aes = true
		}
	}
	if skc {
		add(plan.Module{Name: "algif_skcipher", For: "AF_ALG skcipher sockets"})
	}
	if hash {
		add(plan.Module{Name: "algif_hash", For: "AF_ALG hash sockets"})
	}
	// The crypto user API (NETLINK_CRYPTO): the boot sequence keeps the
	// kernel's own users (IPsec) off hardware engines until the self-test
	// proves them, and then puts the proven ones in the policy's order.
	add(plan.Module{Name: "crypto_user", For: "kernel engine choice (NETLINK_CRYPTO): demote hardware until proven, then promote"})
	if des {
		add(plan.Module{Name: "des_generic", For: "kernel software DES/3DES (cross-check and fallback)"})
	}
	// Debian's 686 kernel has no assembler AES (aes-i586 needs an i686
	// build); aes_ti's fixed-time AES ranks above aes-generic and is
	// what the kernel falls back to while hardware is demoted.
	if aes && p.Go.GOARCH == "386" {
		add(plan.Module{Name: "aes_ti", For: "kernel software AES, fixed-time (the fallback while hardware is demoted)", Optional: true})
	}
	cryptodev := false
	for _, e := range p.Engines {
		if e.Module == "" {
			continue
		}
		if e.API == catalog.APICryptodev {
			cryptodev = true
			continue
		}
		if ce, ok := catalog.LookupEngine(e.ID); ok {
			for _, m := range ce.LoadFirst {
				add(plan.Module{Name: m, For: e.ID + " engine's bus driver"})
			}
		}
		add(plan.Module{Name: e.Module, For: e.ID + " engine driver", OutOfTree: !e.Mainline})
	}
	for _, port := range p.Ports {
		add(plan.Module{Name: port.Driver, For: "Ethernet ports (" + port.Name + ")"})
	}
	if len(p.Ports) > 0 {
		if p.Go.GOARCH == "386" {
			add(plan.Module{Name: catalog.QEMUNIC, For: "QEMU's emulated NIC, so ocfw run has ports (the board has none)"})
		}
		for _, m := range catalog.RouterModules {
			add(plan.Module{Name: m.Name, For: m.For})
		}
		for _, m := range catalog.TunnelModules {
			add(plan.Module{Name: m.Name, For: m.For})
		}
	}
	// The boot measures ESP per engine that passed (router/ipsec/espspeed)
	// and makes the kernel's engine choice on it: a tunnel's modules and
	// a veth pair between two namespaces. Optional: without them the
	// choice is made on the speed table, and the report says so.
	if kernelEngines(p) {
		for _, m := range append(catalog.TunnelModuleNames(), "veth") {
			add(plan.Module{Name: m, For: "ESP throughput per engine at boot (the kernel's engine choice)", Optional: true})
		}
	}
	// /dev/crypto (cryptodev-linux) on x86, where ocfw build compiles it
	// for Debian's kernel: only with a hardware engine, since it exists
	// to let userland (openssl, ssh, ocf's own driver) reach one; the
	// kernel's software alone is slower through it than Go in-process.
	if !cryptodev && p.Go.GOARCH == "386" && hardwareEngine(p) {
		add(plan.Module{Name: catalog.DevCryptoModule, For: "/dev/crypto (cryptodev-linux 1.14, built by ocfw build): the engines for userland", OutOfTree: true})
	}
	if cryptodev {
		add(plan.Module{Name: "ocf", For: "OCF framework (OCF-patched kernel)", OutOfTree: true})
		add(plan.Module{Name: "cryptodev", For: "OCF /dev/crypto (BSD dialect)", OutOfTree: true})
		for _, e := range p.Engines {
			if e.API == catalog.APICryptodev {
				add(plan.Module{Name: e.Module, For: e.ID + " engine driver (OCF)", OutOfTree: true})
			}
		}
	}
	return mods
}

// hardwareEngine reports whether the plan has a hardware engine behind
// the kernel's crypto API (a stand-in counts: it is what tests meet).
func hardwareEngine(p *plan.Plan) bool {
	for _, e := range p.Engines {
		if e.Hardware && e.API == catalog.APIAFALG {
			return true
		}
	}
	return false
}

// watchdogModules are the board's hardware watchdog (its profile's) and,
// on x86, QEMU's, for ocfw run and the VM tests: whichever finds its
// device gives /dev/watchdog, which an upgrade's trial boot keeps petted.
// The other finds none, which is not a problem (IfDevice); a kernel
// without them boots with no watchdog (Optional).
func watchdogModules(p *plan.Plan, b *Board) []plan.Module {
	var mods []plan.Module
	if w, ok := catalog.LookupWatchdog(b.Watchdog); ok {
		for _, m := range w.LoadFirst {
			mods = append(mods, plan.Module{Name: m, For: "the device of the " + w.Module + " watchdog", Optional: true, IfDevice: true})
		}
		mods = append(mods, plan.Module{Name: w.Module, For: "hardware watchdog: " + w.Timer, Optional: true, IfDevice: true})
	}
	if p.Go.GOARCH == "386" {
		w, _ := catalog.LookupWatchdog(catalog.QEMUWatchdog)
		mods = append(mods, plan.Module{Name: w.Module, For: "hardware watchdog under QEMU: " + w.Timer, Optional: true, IfDevice: true})
	}
	return mods
}

// kernelEngines says whether the plan has a hardware engine behind the
// kernel crypto API: the engines ocf/kcrypto ranks (kcrypto.PlanEngines)
// and the ESP run measures.
func kernelEngines(p *plan.Plan) bool {
	for _, e := range p.Engines {
		if e.Hardware && e.API == catalog.APIAFALG {
			return true
		}
	}
	return false
}

func notes(p *plan.Plan, b *Board) []string {
	var ns []string
	seen := map[string]bool{}
	for _, e := range p.Engines {
		if e.Requires != "" && !seen[e.ID] {
			seen[e.ID] = true
			ns = append(ns, fmt.Sprintf("%s: needs %s", e.ID, e.Requires))
		}
		if ce, ok := catalog.LookupEngine(e.ID); ok && !seen[e.ID+"/stand-in"] {
			seen[e.ID+"/stand-in"] = true
			switch {
			case ce.Emulated():
				ns = append(ns, fmt.Sprintf("%s is a QEMU stand-in: ocfw run and ocfw try attach QEMU's device for it; on a real board it is reported absent", e.ID))
			case ce.TestOnly:
				ns = append(ns, fmt.Sprintf("%s is ocfw's test engine, for tests and benchmarks only", e.ID))
			}
		}
		if e.API == catalog.APICryptodev && !seen[e.ID+"/api"] {
			seen[e.ID+"/api"] = true
			ns = append(ns, fmt.Sprintf("%s is reached through /dev/crypto, not AF_ALG: with a Debian kernel it is reported absent", e.ID))
		}
	}
	if b.Kernel.Note != "" {
		ns = append(ns, "kernel: "+b.Kernel.Note)
	}
	return ns
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
