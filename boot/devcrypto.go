package boot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/cryptodev"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
	"github.com/ocfw/ocfw/plan"
)

// DevCryptoEngine prefixes the self-test rows of /dev/crypto: the
// kernel driver that answered follows ("/dev/crypto:cbc-aes-geode").
const DevCryptoEngine = "/dev/crypto:"

// devCryptoEngines is step 6's second half, with the ESP run's premise:
// every hardware engine is still demoted and no tunnel is up, so each
// kernel engine of each planned cipher, software included, can be made
// the kernel's choice in turn (kcrypto.MakeChoice; /dev/crypto asks by
// generic name, as ESP does) and self-tested (KATs and the cross-check
// against Go) and measured through /dev/crypto: the seeds' columns (the
// kernel's software and each engine; Go's row is the user software) at
// DevCryptoSizes. An engine that failed through AF_ALG is tested too, so
// a corrupting engine is caught through /dev/crypto itself; only engines
// that passed are measured. The kernel's choice is put back after
// (kcrypto.Restore) for the promotion to make.
func (b *sequence) devCryptoEngines() {
	cfg := b.cfg
	if b.pl == nil || b.out.Report == nil || !plansModule(b.pl, catalog.DevCryptoModule) || (cfg.Root != "" && cfg.Root != "/") {
		return
	}
	path := cfg.path("/dev/crypto")
	if _, err := os.Stat(path); err != nil {
		return // devCryptoSelfTest says so in the report
	}
	// A quarter of the speed table's budget measures /dev/crypto.
	budget, _ := b.opts.SpeedBudgetOr(DefaultSpeedBudget)
	tests := b.out.Report.SelfTest
	res := make(chan devCryptoResult, 1)
	// The run's own context ends before the step's bound, so that a run
	// that overruns stops and puts the kernel's choice back rather than
	// changing priorities under the promotion.
	mctx, cancel := context.WithTimeout(b.ctx, cfg.StepTimeout+budget/4)
	b.problem(step(b.ctx, "self-testing each engine through /dev/crypto", cfg.StepTimeout+budget/2+30*time.Second, func() error {
		got, err := devCryptoPerEngine(mctx, path, b.pl, tests, budget/4)
		res <- got
		return err
	}))
	cancel()
	select {
	case got := <-res:
		b.devCrypto = &got
		for _, row := range got.rows {
			if row.Status == selftest.Absent {
				cfg.printf("ocfw: /dev/crypto: %s on %s: not tested: %s", row.Cipher, row.Engine[len(DevCryptoEngine):], row.Reason)
			} else {
				cfg.printf("ocfw: /dev/crypto: %s on %s: %s", row.Cipher, row.Engine[len(DevCryptoEngine):], row.Status)
			}
		}
	default:
		b.engineNotes = append(b.engineNotes, "/dev/crypto: the self-test of each engine did not finish")
	}
}

// devCryptoResult is what devCryptoPerEngine found.
type devCryptoResult struct {
	rows  []selftest.Result
	speed []speed.Row
	notes []string
}

// devCryptoEngine is one kernel engine of one cipher, by driver name.
type devCryptoEngine struct {
	cipher, kernel, typ, driver string
	hardware, passed            bool
}

// devCryptoTargets lists, per planned cipher the catalog names a kernel
// algorithm for, the kernel engines the AF_ALG self-test found present
// (passed or failed; rows of a driver /proc/crypto lists under the
// cipher's generic name), in the self-test's order.
func devCryptoTargets(pl *plan.Plan, tests []selftest.Result, algs []kcrypto.Alg) []devCryptoEngine {
	hw := map[string]bool{}
	for _, e := range kcrypto.PlanEngines(pl) {
		for _, d := range e.Drivers {
			hw[d] = true
		}
	}
	var out []devCryptoEngine
	for _, c := range pl.Ciphers {
		cat, ok := catalog.LookupCipher(c.Cipher)
		if !ok || cat.Kernel == "" {
			continue
		}
		for _, t := range tests {
			if t.Cipher != c.Cipher || (t.Status != selftest.Pass && t.Status != selftest.Fail) || strings.HasPrefix(t.Engine, DevCryptoEngine) {
				continue
			}
			if a, ok := kcrypto.Find(algs, t.Engine); !ok || a.Name != cat.Kernel || a.Internal {
				continue
			}
			out = append(out, devCryptoEngine{cipher: c.Cipher, kernel: cat.Kernel, typ: cat.KernelType, driver: t.Engine,
				hardware: hw[t.Engine], passed: t.Status == selftest.Pass})
		}
	}
	return out
}

// devCryptoPerEngine runs devCryptoEngines' tests: the kernel's choice
// made each engine in turn, /dev/crypto opened afresh (its probe session
// must be served by that engine, or the row says what served it), the
// self-test, and for an engine that passed both ways the speed.
func devCryptoPerEngine(ctx context.Context, path string, pl *plan.Plan, tests []selftest.Result, budget time.Duration) (devCryptoResult, error) {
	var res devCryptoResult
	before, err := kcrypto.List("")
	if err != nil {
		return res, err
	}
	targets := devCryptoTargets(pl, tests, before)
	built := map[string]int{}
	names := map[string]bool{}
	defer func() {
		for name := range names {
			res.notes = append(res.notes, kcrypto.Restore(name, before, built)...)
		}
	}()
	measured := 0
	for _, e := range targets {
		if e.passed {
			measured++
		}
	}
	cell := report.CellTime(budget, measured*len(DevCryptoSizes))
	for _, e := range targets {
		row := selftest.Result{Engine: DevCryptoEngine + e.driver, Cipher: e.cipher, Status: selftest.Absent}
		if ctx.Err() != nil {
			row.Reason = "not tested: the step's time was spent"
			res.rows = append(res.rows, row)
			continue
		}
		names[e.kernel] = true
		if err := kcrypto.MakeChoice(e.kernel, e.typ, e.driver, built); err != nil {
			row.Reason = "could not make it the kernel's choice: " + err.Error()
			res.rows = append(res.rows, row)
			continue
		}
		row, sp := devCryptoOne(path, e, budget > 0 && e.passed, cell)
		res.rows = append(res.rows, row)
		if sp != nil {
			res.speed = append(res.speed, *sp)
		}
	}
	return res, nil
}

// devCryptoOne tests one engine, the kernel's choice now, through a
// fresh /dev/crypto descriptor.
func devCryptoOne(path string, e devCryptoEngine, measure bool, cell time.Duration) (selftest.Result, *speed.Row) {
	row := selftest.Result{Engine: DevCryptoEngine + e.driver, Cipher: e.cipher, Status: selftest.Absent}
	d, err := cryptodev.Open(path, cryptodev.Auto)
	if err != nil {
		row.Reason = err.Error()
		return row, nil
	}
	defer d.Close()
	served := ""
	for _, en := range d.Engines() {
		if en.Cipher == e.cipher {
			served = en.Driver
		}
	}
	if served != e.driver {
		row.Reason = fmt.Sprintf("/dev/crypto served %s by %q, not by the kernel's choice %s", e.cipher, served, e.driver)
		return row, nil
	}
	row = selftest.Check(d, e.cipher, selftest.Options{Timeout: 5 * time.Second})
	row.Engine = DevCryptoEngine + e.driver
	if !measure || row.Status != selftest.Pass {
		return row, nil
	}
	m := speed.Measure(d, e.cipher, speed.Options{Duration: cell, Sizes: DevCryptoSizes})
	m.Engine, m.Hardware = row.Engine, e.hardware
	return row, &m
}

// devCryptoSelfTest adds the /dev/crypto rows to the report after the
// engine choice: each engine's from devCryptoEngines, and what
// /dev/crypto answers now for each planned cipher (the engine the choice
// left on top), which must be an engine that passed through /dev/crypto:
// one that failed and is still what /dev/crypto answers is a problem. An
// answer no per-engine row covers (no engine choice here, or not on the
// board) is self-tested and measured now, one row per cipher.
func (b *sequence) devCryptoSelfTest(r *report.Report) {
	if b.pl == nil || !plansModule(b.pl, catalog.DevCryptoModule) {
		return
	}
	path := b.cfg.path("/dev/crypto")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		r.Notes = append(r.Notes, "no /dev/crypto: cryptodev.ko is not in this image or did not load")
		return
	}
	tested := map[string]selftest.Status{} // engine/cipher -> status
	if got := b.devCrypto; got != nil {
		for _, row := range got.rows {
			tested[row.Engine+"/"+row.Cipher] = row.Status
		}
		r.SelfTest = append(r.SelfTest, got.rows...)
		r.DevCryptoSpeed = append(r.DevCryptoSpeed, got.speed...)
		r.Notes = append(r.Notes, got.notes...)
	}
	budget, _ := b.opts.SpeedBudgetOr(DefaultSpeedBudget)
	type result struct {
		rows  []selftest.Result
		speed []speed.Row
		lines []string
		bad   []string
	}
	res := make(chan result, 1)
	b.problem(step(b.ctx, "self-testing /dev/crypto", b.cfg.StepTimeout, func() error {
		var out result
		answers, err := devCryptoAnswers(path, b.pl)
		if err != nil {
			res <- out
			return err
		}
		var untested []string
		for _, a := range answers {
			key := DevCryptoEngine + a.Driver + "/" + a.Cipher
			st, ok := tested[key]
			switch {
			case !ok || st == selftest.Absent:
				untested = append(untested, a.Cipher)
			case st == selftest.Fail:
				out.bad = append(out.bad, fmt.Sprintf("/dev/crypto answers %s with %s, which failed its self-test through /dev/crypto", a.Cipher, a.Driver))
			default:
				out.lines = append(out.lines, fmt.Sprintf("ocfw: /dev/crypto: %s answers with %s: %s", a.Cipher, a.Driver, st))
			}
		}
		if len(untested) > 0 {
			rows, sp, err := devCryptoRows(path, b.pl, untested, budget/4)
			out.rows, out.speed = rows, sp
			for _, row := range rows {
				out.lines = append(out.lines, fmt.Sprintf("ocfw: /dev/crypto: %s answers with %s: %s", row.Cipher, row.Engine[len(DevCryptoEngine):], row.Status))
			}
			res <- out
			return err
		}
		res <- out
		return nil
	}))
	select {
	case got := <-res:
		for _, l := range got.lines {
			b.cfg.printf("%s", l)
		}
		for _, bad := range got.bad {
			b.problem(errors.New(bad))
			r.Notes = append(r.Notes, bad)
		}
		r.SelfTest = append(r.SelfTest, got.rows...)
		r.DevCryptoSpeed = append(r.DevCryptoSpeed, got.speed...)
	default:
		r.Notes = append(r.Notes, "/dev/crypto: the self-test did not finish")
	}
}

// devCryptoAnswers is, per planned cipher /dev/crypto offers, the
// kernel driver it answers with now.
func devCryptoAnswers(path string, pl *plan.Plan) ([]cryptodev.Engine, error) {
	d, err := cryptodev.Open(path, cryptodev.Auto)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	by := map[string]cryptodev.Engine{}
	for _, e := range d.Engines() {
		by[e.Cipher] = e
	}
	var out []cryptodev.Engine
	for _, c := range pl.Ciphers {
		if e, ok := by[c.Cipher]; ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// DevCryptoSizes are the speed sizes through /dev/crypto: the issue's
// (and the seeds' tables') 16 to 8192 bytes.
var DevCryptoSizes = []int{16, 64, 256, 1024, 8192}

// devCryptoRows self-tests each of ciphers (planned ones) the device offers and,
// with a speed budget, measures those that passed at DevCryptoSizes
// (rows named like the self-test's). The dialect is detected: an OCF
// kernel's /dev/crypto (module "cryptodev" too) is tested the same way.
func devCryptoRows(path string, pl *plan.Plan, ciphers []string, budget time.Duration) ([]selftest.Result, []speed.Row, error) {
	d, err := cryptodev.Open(path, cryptodev.Auto)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	answers := map[string]string{}
	for _, e := range d.Engines() {
		answers[e.Cipher] = e.Driver
	}
	var rows []selftest.Result
	for _, c := range pl.Ciphers {
		if !slices.Contains(ciphers, c.Cipher) {
			continue
		}
		driver, ok := answers[c.Cipher]
		if !ok {
			continue
		}
		if _, err := ocf.LookupCipher(c.Cipher); err != nil {
			continue
		}
		row := selftest.Check(d, c.Cipher, selftest.Options{Timeout: 5 * time.Second})
		row.Engine = DevCryptoEngine + driver
		rows = append(rows, row)
	}
	var passed []selftest.Result
	for _, row := range rows {
		if row.Status == selftest.Pass {
			passed = append(passed, row)
		}
	}
	var sp []speed.Row
	if budget <= 0 {
		return rows, nil, nil
	}
	cell := report.CellTime(budget, len(passed)*len(DevCryptoSizes))
	for _, row := range passed {
		m := speed.Measure(d, row.Cipher, speed.Options{Duration: cell, Sizes: DevCryptoSizes})
		m.Engine = row.Engine
		sp = append(sp, m)
	}
	return rows, sp, nil
}

func plansModule(pl *plan.Plan, name string) bool {
	for _, m := range pl.Modules {
		if m.Name == name {
			return true
		}
	}
	return false
}
