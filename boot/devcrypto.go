package boot

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/cryptodev"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
	"github.com/ocfw/ocfw/plan"
)

// DevCryptoEngine prefixes the self-test rows of /dev/crypto: the
// kernel driver that answered follows ("/dev/crypto:cbc-aes-geode").
const DevCryptoEngine = "/dev/crypto:"

// devCryptoSelfTest adds the /dev/crypto rows to the report: every
// planned cipher through cryptodev-linux, self-tested (KATs and the
// cross-check against Go) after the engine choice, since /dev/crypto
// asks the kernel by generic name and so gets the engine the choice
// left on top. An engine the self-test caught is below software by
// then, so its rows are software's and pass; a row that fails is an
// engine corrupting through /dev/crypto that the choice did not keep
// off, and counts as a failure like any other.
func (b *sequence) devCryptoSelfTest(r *report.Report) {
	if b.pl == nil || !plansModule(b.pl, catalog.DevCryptoModule) {
		return
	}
	path := b.cfg.path("/dev/crypto")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		r.Notes = append(r.Notes, "no /dev/crypto: cryptodev.ko is not in this image or did not load")
		return
	}
	// A quarter of the speed table's budget measures /dev/crypto: one
	// row per cipher (the kernel's driver on top), not one per engine.
	budget, _ := b.opts.SpeedBudgetOr(DefaultSpeedBudget)
	type result struct {
		rows  []selftest.Result
		speed []speed.Row
	}
	res := make(chan result, 1)
	b.problem(step(b.ctx, "self-testing /dev/crypto", b.cfg.StepTimeout, func() error {
		rows, sp, err := devCryptoRows(path, b.pl, budget/4)
		res <- result{rows, sp}
		return err
	}))
	select {
	case got := <-res:
		for _, row := range got.rows {
			b.cfg.printf("ocfw: /dev/crypto: %s via %s: %s", row.Cipher, row.Engine[len(DevCryptoEngine):], row.Status)
		}
		r.SelfTest = append(r.SelfTest, got.rows...)
		r.DevCryptoSpeed = append(r.DevCryptoSpeed, got.speed...)
	default:
		r.Notes = append(r.Notes, "/dev/crypto: the self-test did not finish")
	}
}

// DevCryptoSizes are the speed sizes through /dev/crypto: the issue's
// (and the seeds' tables') 16 to 8192 bytes.
var DevCryptoSizes = []int{16, 64, 256, 1024, 8192}

// devCryptoRows self-tests each planned cipher the device offers and,
// with a speed budget, measures those that passed at DevCryptoSizes
// (rows named like the self-test's). The dialect is detected: an OCF
// kernel's /dev/crypto (module "cryptodev" too) is tested the same way.
func devCryptoRows(path string, pl *plan.Plan, budget time.Duration) ([]selftest.Result, []speed.Row, error) {
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
