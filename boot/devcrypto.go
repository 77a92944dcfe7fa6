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
	res := make(chan []selftest.Result, 1)
	b.problem(step(b.ctx, "self-testing /dev/crypto", b.cfg.StepTimeout, func() error {
		rows, err := devCryptoRows(path, b.pl)
		res <- rows
		return err
	}))
	select {
	case rows := <-res:
		for _, row := range rows {
			b.cfg.printf("ocfw: /dev/crypto: %s via %s: %s", row.Cipher, row.Engine[len(DevCryptoEngine):], row.Status)
		}
		r.SelfTest = append(r.SelfTest, rows...)
	default:
		r.Notes = append(r.Notes, "/dev/crypto: the self-test did not finish")
	}
}

// devCryptoRows self-tests each planned cipher the device offers. The
// dialect is detected: an OCF kernel's /dev/crypto (module "cryptodev"
// too) is self-tested the same way.
func devCryptoRows(path string, pl *plan.Plan) ([]selftest.Result, error) {
	d, err := cryptodev.Open(path, cryptodev.Auto)
	if err != nil {
		return nil, err
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
	return rows, nil
}

func plansModule(pl *plan.Plan, name string) bool {
	for _, m := range pl.Modules {
		if m.Name == name {
			return true
		}
	}
	return false
}
