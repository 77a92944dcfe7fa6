package boot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/esp"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router/ipsec"
	"github.com/ocfw/ocfw/router/ipsec/espspeed"
)

// DefaultESPBudget bounds the ESP run when boot.json gives none: three
// engines at three sizes get ~0.6 s a cell, enough for MB/s to settle
// at MTU size on a Geode.
const DefaultESPBudget = 8 * time.Second

// espModules are what espspeed.Measure needs in the kernel, loaded or
// built in: a tunnel's modules, a veth pair, the engine choice's netlink
// and AF_ALG (it checks the SAs' transforms through both).
func espModules() []string {
	return append(append([]string(nil), ipsec.Modules...), "veth", "crypto_user", "af_alg", "algif_skcipher")
}

// espMissing lists the ESP run's modules neither loaded nor built in.
// des_generic serves only 3DES tunnels and is not needed for AES ones.
func espMissing(mods ModuleResults, builtin map[string]bool, cipher string) []string {
	have := map[string]bool{}
	for _, m := range mods {
		if m.Status == ModLoaded || m.Status == ModBuiltin {
			have[canonical(m.Name)] = true
		}
	}
	var missing []string
	for _, n := range espModules() {
		if n == "des_generic" && !strings.HasPrefix(cipher, "des") {
			continue
		}
		if !have[canonical(n)] && !builtin[canonical(n)] {
			missing = append(missing, n)
		}
	}
	return missing
}

// espAlgorithms are the cipher and auth the ESP run measures: the site's
// first tunnel's (a manual tunnel's, or the first of an IKEv2 tunnel's
// ESP proposals), else aes-128-cbc with hmac-sha1.
func espAlgorithms(s *site.Site) (cipher, auth string) {
	if s != nil {
		for _, t := range s.Tunnels {
			if t.Mode() == site.KeyingIKEv2 {
				if p, err := site.ParseProposal(t.ESPProposalList()[0], true); err == nil {
					return p.Encr[0].Cipher, p.Integ[0].Cipher
				}
				continue
			}
			if t.Cipher != "" && t.Auth != "" {
				return t.Cipher, t.Auth
			}
		}
	}
	return espspeed.DefaultCipher, espspeed.DefaultAuth
}

// espEngines are the plan's kernel-API hardware engines whose driver for
// cipher passed the self-test; software is measured by espspeed anyway.
// Failed and absent engines are not measured.
func espEngines(pl *plan.Plan, tests []selftest.Result, cipher string) []espspeed.Engine {
	passed := map[string]bool{}
	for _, t := range tests {
		if t.Cipher == cipher && t.Status == selftest.Pass {
			passed[t.Engine] = true
		}
	}
	out := []espspeed.Engine{{ID: esp.Software}}
	for _, h := range kcrypto.PlanEngines(pl) {
		drv := h.Drivers[cipher]
		if drv == "" || !passed[drv] {
			continue
		}
		id := h.ID
		if h.Instance > 0 {
			id = fmt.Sprintf("%s#%d", h.ID, h.Instance)
		}
		out = append(out, espspeed.Engine{ID: id, Driver: drv, Hardware: true})
	}
	return out
}

// espBudget is boot.json's esp_budget, else DefaultESPBudget.
func espBudget(opts plan.Options) (time.Duration, error) {
	d, err := opts.ESPBudgetOr(DefaultESPBudget)
	if err != nil {
		return d, fmt.Errorf("%w; using %v", err, d)
	}
	return d, nil
}

// measureESP runs the ESP throughput per engine that passed, or says in
// the result why not. It runs before any tunnel is installed (the router
// installs none before Run returns): new SAs bind whichever engine is
// being measured.
func measureESP(ctx context.Context, cfg *Config, pl *plan.Plan, r *report.Report, mods ModuleResults, site *site.Site, budget time.Duration) *report.ESP {
	cipher, auth := espAlgorithms(site)
	switch {
	case budget == 0:
		return &report.ESP{Basis: report.BasisSpeed, Why: "the ESP run is off (esp_budget 0s)"}
	case cfg.Root != "" && cfg.Root != "/":
		return &report.ESP{Basis: report.BasisSpeed, Why: "not on the board (a fake root)"}
	}
	if missing := espMissing(mods, builtinModules(cfg), cipher); len(missing) > 0 {
		return &report.ESP{Basis: report.BasisSpeed, Why: "this kernel lacks the ESP run's modules " + strings.Join(missing, ", ")}
	}
	engines := espEngines(pl, r.SelfTest, cipher)
	cfg.printf("ocfw: ESP throughput of %d engines (%s with %s), budget %v", len(engines), cipher, auth, budget)
	res, err := espspeed.Measure(ctx, espspeed.Config{Engines: engines, Cipher: cipher, Auth: auth, Budget: budget})
	if err != nil {
		return &report.ESP{Result: res, Basis: report.BasisSpeed, Why: "the ESP run failed: " + err.Error()}
	}
	e := &report.ESP{Result: res, Basis: report.BasisESP}
	if !hasReference(esp.Measurements(res, kcrypto.MTU)) {
		e.Basis, e.Why = report.BasisSpeed, fmt.Sprintf("no software ESP row at %d bytes to compare with", kcrypto.MTU)
	}
	return e
}

func hasReference(ms []ocf.Measurement) bool {
	for _, m := range ms {
		if !m.Hardware && len(m.Sizes) > 0 {
			return true
		}
	}
	return false
}

// espChoiceInput is the policy and measurements kcrypto.Promote ranks
// engines on (report.Derive's Kernel): the ESP rows at MTU size when the
// choice is made on ESP, else the speed table alone.
func espChoiceInput(r *report.Report) (ocf.Policy, []ocf.Measurement) {
	var rows []ocf.Measurement
	if e := r.ESP; e != nil && e.Basis == report.BasisESP && e.Result != nil {
		rows = esp.Measurements(e.Result, kcrypto.MTU)
	}
	p := report.Derive(r.SelfTest, r.Speed, rows, report.DefaultMargin)
	return p.Kernel, p.KernelSpeeds
}
