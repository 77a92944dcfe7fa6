package boot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/store"
)

// loadSite finds the site config: the copy a user put on the data
// partition (ocfw/site.json) when there is one and it is valid, else the
// one built into the image. A broken card copy is reported and the
// built-in one used: the router never comes up without a network because
// of a typo, nor with a config it applies only in part. notes say what
// was used and why.
func loadSite(cfg *Config, pl *plan.Plan, st *store.Store) (sc *site.Site, notes []string) {
	if st != nil {
		// A config pushed over SSH and confirmed wins (router/config);
		// one still provisional is rolled back here.
		if s, note := pushedSite(st, pl); note != "" {
			if s != nil {
				return s, []string{"site config: " + note}
			}
			notes = append(notes, note)
		}
		data, err := st.ReadFile(site.CardFile, plan.MaxFileSize)
		switch {
		case err == nil:
			// router.ReadSite refuses what the router would apply only in
			// part (no firewall, no DHCP server, no SSH): such a copy is
			// refused whole, like a typo, and the built-in one runs.
			s, errs := router.ReadSite("data partition "+store.Dir+"/"+site.CardFile, data, pl.Ports)
			if len(errs) == 0 {
				return s, []string{"site config: the copy on the data partition (" + store.Dir + "/" + site.CardFile + ")"}
			}
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			notes = append(notes, "site config on the data partition is invalid, the built-in one is used: "+strings.Join(msgs, "; "))
		case !errors.Is(err, fs.ErrNotExist):
			notes = append(notes, "site config on the data partition unreadable, the built-in one is used: "+err.Error())
		}
	}
	data, err := os.ReadFile(cfg.path(site.File))
	if errors.Is(err, os.ErrNotExist) {
		return nil, append(notes, "no site config in this image: the firmware does not route (ocfw build --site FILE)")
	}
	if err != nil {
		return nil, append(notes, "site config: "+err.Error())
	}
	s, errs := router.ReadSite(site.File, data, pl.Ports)
	if len(errs) > 0 {
		return nil, append(notes, fmt.Sprintf("the built-in site config is invalid (%v): the firmware does not route", errs[0]))
	}
	return s, append(notes, "site config: the one built into the image")
}

// startRouter loads the site and starts the router. The router logs to
// the console and, when there is a data partition, to its log through
// lw, which batches the card's writes. The site is returned whether or
// not the router starts (the ESP run measures its tunnels' algorithms).
func startRouter(ctx context.Context, cfg *Config, pl *plan.Plan, opts plan.Options, st *store.Store, lw *store.LogWriter) (*router.Router, *site.Site, []string, error) {
	sc, notes := loadSite(cfg, pl, st)
	booted := bootedGen(st)
	for _, n := range notes {
		n = store.Printable(n)
		cfg.printf("ocfw: %s", n)
		if lw != nil {
			lw.AddNow(n)
		}
	}
	if sc == nil || cfg.NoNetwork {
		return nil, sc, notes, nil
	}
	// WaitForCrypto: the tunnels come up once Run calls CryptoSettled,
	// after the engines' self-test, so that their SAs bind to engines it
	// proved.
	rc := router.Config{Site: sc, Ports: pl.Ports, Root: cfg.Root, LinkWait: cfg.LinkWait, WaitForCrypto: true,
		TestWANDown: opts.TestBreak == plan.TestBreakNoWAN}
	rc.FilesView, rc.StagingDir = cardView(cfg, st), cfg.path(StagingDir)
	rc.Log, rc.EventLog, rc.QuietLog = logSinks(cfg, lw)
	if st != nil {
		rc.Values = st
		rc.Files = st // the tunnels' key files, beside site.json
		if booted != nil {
			rc.Files = config.Files(booted, st)
		}
	} else {
		notes = append(notes, "no data partition: SSH host keys and DHCP leases live in RAM only, new at every boot")
	}
	r, err := router.Start(ctx, rc)
	if r != nil {
		ctxStatus := context.Background()
		go r.ServeStatus(ctxStatus, cfg.path(router.StatusSocket))
		startConfig(cfg, r, pl, st, booted, rc.Log)
	}
	return r, sc, notes, err
}

// logSinks are the router's three log callbacks: rare events go to the
// console and promptly to the card; client-caused events (already
// rate-limited by the router) to the console and the card's next batch;
// repeats (NTP's retries) to the card's next batch only — on the console
// they broke into the prompt. Every line is made printable here too: the
// sink is the last place a control character can be stopped.
func logSinks(cfg *Config, lw *store.LogWriter) (log, event, quiet func(format string, args ...any)) {
	sink := func(console, urgent bool) func(format string, args ...any) {
		return func(format string, args ...any) {
			line := store.Printable(fmt.Sprintf(format, args...))
			if console {
				cfg.printf("ocfw: %s", line)
			}
			switch {
			case lw == nil:
			case urgent:
				lw.AddNow(line)
			default:
				lw.Add(line)
			}
		}
	}
	return sink(true, true), sink(true, false), sink(false, false)
}

// pushedSite is the confirmed pushed config (router/config), with a note
// for the log; nil and a note when one could not be used, nil and ""
// when none was pushed.
func pushedSite(st *store.Store, pl *plan.Plan) (*site.Site, string) {
	g, note, err := config.AtBoot(st)
	if err != nil {
		return nil, "pushed site config unreadable, the card's or the built-in one is used: " + err.Error()
	}
	if g == nil {
		return nil, note
	}
	s, errs := router.ReadSite("pushed config", []byte(g.Site), pl.Ports)
	if len(errs) > 0 {
		return nil, fmt.Sprintf("pushed config %d is invalid, the card's or the built-in one is used: %v", g.N, errs[0])
	}
	return s, note
}

// bootedGen is the pushed generation loadSite chose, if any.
func bootedGen(st *store.Store) *config.Gen {
	if st == nil {
		return nil
	}
	r, err := config.Load(st)
	if err != nil || r.State == config.StateProvisional {
		return nil
	}
	return r.Confirmed
}

// startConfig serves `ocf config` (ocfw push) for the running router.
func startConfig(cfg *Config, r *router.Router, pl *plan.Plan, st *store.Store, booted *config.Gen, logf func(string, ...any)) {
	opts := config.Options{Router: r, Ports: pl.Ports, Booted: booted, Log: logf, ApplyDelay: config.ApplyDelay}
	if st != nil {
		opts.Values, opts.Files = st, st
	}
	m, err := config.New(opts)
	if err != nil {
		logf("config: %v: ocf config (ocfw push) is off", err)
		return
	}
	go m.Serve(context.Background(), cfg.path(config.Socket))
}
