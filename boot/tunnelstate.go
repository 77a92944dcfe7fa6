package boot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/site"
	"github.com/ocfw/ocfw/store"
)

// The report is written before the tunnels come up (they wait for the
// engine choice the report holds). With IKEv2 tunnels the boot follows
// them, and once every one is up — or TunnelSettle has passed — writes
// the report again with their state as `ocf net` shows it (report
// version 4's tunnels): through the store, which replaces the boot's
// report in one commit, so a power cut leaves the first report or the
// second, and in RAM for the shell.

// TunnelSettle bounds the wait for the IKEv2 tunnels, counted from the
// report's first write: a tunnel still down then is kept with why.
const TunnelSettle = 3 * time.Minute

// tunnelPoll is how often the tunnels are read while waiting (the
// router follows its IKEv2 tunnels every 2 s).
const tunnelPoll = 2 * time.Second

// keepTunnelState starts the wait in the background when the router
// runs IKEv2 tunnels; the boot sequence does not wait for it.
func (b *sequence) keepTunnelState() {
	out := b.out
	if out.Router == nil || out.Report == nil || b.site == nil || !hasIKEv2(b.site) {
		return
	}
	rep := *out.Report // the boot's report as written; the copy gets the tunnels
	cfg, st, boot, start, rt := b.cfg, b.st, out.Boot, b.start, out.Router
	go func() {
		list, settled := settleTunnels(b.ctx, rt.Tunnels, tunnelPoll, TunnelSettle)
		if list == nil {
			return
		}
		now := time.Now()
		rep.Tunnels = &report.Tunnels{At: now.UTC().Format(time.RFC3339), AfterBoot: now.Sub(start).Round(time.Second).String(),
			Settled: settled, List: reportTunnels(list)}
		where, err := writeTunnelReport(cfg, st, boot, &rep)
		if err != nil {
			cfg.printf("ocfw: keeping the tunnels' state in the report: %v", err)
			return
		}
		cfg.printf("ocfw: report of boot %d written again with the tunnels' state (%s) to %s: %s", boot, rep.Tunnels.AfterBoot, where, tunnelSummary(rep.Tunnels))
	}()
}

func hasIKEv2(s *site.Site) bool {
	for _, t := range s.Tunnels {
		if t.Mode() == site.KeyingIKEv2 {
			return true
		}
	}
	return false
}

// settleTunnels reads the tunnels every poll until every IKEv2 tunnel is
// up (settled) or bound has passed (or ctx is done), and returns the
// last reading; nil when there are no IKEv2 tunnels.
func settleTunnels(ctx context.Context, read func() []router.TunnelState, poll, bound time.Duration) ([]router.TunnelState, bool) {
	deadline := time.Now().Add(bound)
	for {
		list := read()
		ike, up := 0, 0
		for _, t := range list {
			if t.Keying == site.KeyingIKEv2 {
				ike++
				if t.State == "up" {
					up++
				}
			}
		}
		if ike == 0 {
			return nil, false
		}
		if up == ike {
			return list, true
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return list, false
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}

// reportTunnels is the router's tunnel state as the report keeps it: the
// owner's view, without the counters of the moment.
func reportTunnels(list []router.TunnelState) []report.Tunnel {
	var out []report.Tunnel
	for _, t := range list {
		rt := report.Tunnel{Name: t.Name, Keying: t.Keying, State: t.State}
		if rt.Keying == "" {
			rt.Keying = site.KeyingManual
		}
		for _, sa := range t.IKE {
			rs := report.IKESA{State: sa.State, Role: sa.Role, PeerID: sa.PeerID, Remote: sa.Remote, Proposal: sa.Proposal,
				Established: sa.Established, LastRekey: sa.LastRekey, Liveness: sa.Liveness, NAT: sa.NAT, Error: sa.Error}
			for _, c := range sa.Children {
				rc := report.ChildSA{Proposal: c.Proposal, Driver: c.Driver, Created: c.Created, Encap: c.Encap}
				if c.Out != nil {
					rc.OutSPI = c.Out.SPI
				}
				if c.In != nil {
					rc.InSPI = c.In.SPI
				}
				rs.Children = append(rs.Children, rc)
			}
			rt.IKE = append(rt.IKE, rs)
		}
		out = append(out, rt)
	}
	return out
}

// tunnelSummary is "a-b up, a-c down: why" for the console.
func tunnelSummary(t *report.Tunnels) string {
	var parts []string
	for _, x := range t.List {
		parts = append(parts, x.Name+" "+x.State)
	}
	return strings.Join(parts, "; ")
}

// writeTunnelReport writes the boot's report again: into the store when
// there is one (replacing the boot's first report), and in RAM. It
// returns where the card's copy went (or the RAM copy without a store).
func writeTunnelReport(cfg *Config, st *store.Store, boot int, r *report.Report) (string, error) {
	j, err := r.JSON()
	if err != nil {
		return "", err
	}
	where := filepath.Join(plan.RunDir, "report.json")
	var werr error
	if st != nil && boot > 0 {
		if slot, err := st.PutReport(boot, j); err != nil {
			werr = fmt.Errorf("on the card: %w", err)
		} else {
			where = store.Dir + "/" + slot.File
		}
	}
	ram := cfg.path(plan.RunDir)
	if err := os.MkdirAll(ram, 0o755); err != nil {
		return where, errors.Join(werr, err)
	}
	return where, errors.Join(werr, atomicfile.WriteFile(filepath.Join(ram, "report.json"), j, 0o644))
}
