package probe

import (
	"fmt"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf/soft"
	"github.com/ocfw/ocfw/plan"
)

// Wants lists the (engine, cipher) pairs of a plan, or the host default
// when p is nil, limited to ciphers when that is not empty.
func Wants(p *plan.Plan, ciphers []string) ([]Want, error) {
	for _, c := range ciphers {
		if _, ok := catalog.LookupCipher(c); !ok {
			return nil, fmt.Errorf("--cipher %s: unknown cipher%s; known: %s", c, catalog.Suggest(c, catalog.CipherNames()), strings.Join(catalog.CipherNames(), ", "))
		}
	}
	keep := func(c string) bool {
		if len(ciphers) == 0 {
			return true
		}
		for _, x := range ciphers {
			if x == c {
				return true
			}
		}
		return false
	}
	var out []Want
	if p == nil {
		for _, c := range catalog.CipherNames() {
			if !keep(c) {
				continue
			}
			out = append(out,
				Want{Engine: catalog.KernelSoft, Driver: "kernel", API: catalog.APIAFALG, Cipher: c},
				Want{Engine: catalog.GoSoft, Driver: soft.Name, API: catalog.APIGo, Cipher: c})
		}
		return out, nil
	}
	absent := map[string]string{}
	for _, e := range p.Engines {
		if e.Absent != "" {
			absent[fmt.Sprintf("%s#%d", e.ID, e.Instance)] = e.Absent
		}
	}
	for _, pc := range p.Ciphers {
		if !keep(pc.Cipher) {
			continue
		}
		for _, r := range pc.Routes {
			out = append(out, Want{Engine: r.Engine, Instance: r.Instance, Driver: r.Driver, API: r.API, Cipher: pc.Cipher, Hardware: r.Hardware,
				Absent: absent[fmt.Sprintf("%s#%d", r.Engine, r.Instance)]})
		}
	}
	return out, nil
}
