package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/site"
)

type rig struct {
	clock  *fakeClock
	router *fakeRouter
	values *memValues
	m      *config.Manager
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{clock: newClock(), router: &fakeRouter{site: baseSite(nil)}, values: &memValues{}}
	m, err := config.New(config.Options{Values: r.values, Router: r.router, Ports: ports, Clock: r.clock,
		Log: func(f string, a ...any) { t.Logf(f, a...) }, ApplyDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	return r
}

func (r *rig) stored(t *testing.T) config.Record {
	t.Helper()
	rec, err := config.Load(r.values)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// apply pushes a site with a port forward from connection "c1" and lets
// the apply delay pass.
func (r *rig) apply(t *testing.T, within time.Duration) config.ApplyReply {
	t.Helper()
	s := baseSite(func(s *site.Site) {
		s.Firewall.PortForwards = []site.PortForward{{Proto: "tcp", Port: 8080, To: "192.168.1.10"}}
	})
	rep, err := r.m.Apply(config.ApplyRequest{Site: siteJSON(t, s), Within: within, Conn: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.stored(t); rec.State != config.StateProvisional || rec.Candidate == nil || rec.Confirmed != nil {
		t.Fatalf("after apply the store holds %+v, want the candidate, provisional", rec)
	}
	if len(r.router.Calls()) != 0 {
		t.Fatal("applied before the reply had time to reach the client")
	}
	r.clock.Advance(time.Second)
	if got := r.router.Calls(); len(got) != 1 || !reflect.DeepEqual(got[0], []string{"firewall"}) {
		t.Fatalf("restarts %v, want [[firewall]]", got)
	}
	return rep
}

func TestApplyThenConfirm(t *testing.T) {
	r := newRig(t)
	rep := r.apply(t, time.Minute)
	if rep.Gen != 1 || !rep.Deadline.Equal(r.clock.Now().Add(time.Minute-time.Second)) {
		t.Errorf("reply %+v", rep)
	}
	if _, err := r.m.Confirm("c1", 0); err == nil || !strings.Contains(err.Error(), "new SSH connection") {
		t.Fatalf("confirm over the applying connection: %v, want refused", err)
	}
	msg, err := r.m.Confirm("c2", 0)
	if err != nil || !strings.Contains(msg, "confirmed") {
		t.Fatalf("confirm: %q, %v", msg, err)
	}
	rec := r.stored(t)
	if rec.State != config.StateConfirmed || rec.Confirmed == nil || rec.Confirmed.N != 1 || rec.Candidate != nil {
		t.Fatalf("after confirm the store holds %+v", rec)
	}
	// The deadline passes: nothing happens any more.
	r.clock.Advance(time.Hour)
	if n := len(r.router.Calls()); n != 1 {
		t.Fatalf("%d reconfigurations after a confirm and the deadline, want 1", n)
	}
	// It boots from now on.
	g, note, err := config.AtBoot(r.values)
	if err != nil || g == nil || g.N != 1 || !strings.Contains(note, "confirmed") {
		t.Fatalf("AtBoot = %v, %q, %v", g, note, err)
	}
	if _, err := r.m.Confirm("c3", 0); err == nil {
		t.Error("a second confirm passed")
	}
}

func TestNoConfirmRollsBackAtTheDeadline(t *testing.T) {
	r := newRig(t)
	r.apply(t, 30*time.Second)
	r.clock.Advance(28 * time.Second)
	if r.stored(t).State != config.StateProvisional {
		t.Fatal("rolled back before the deadline")
	}
	r.clock.Advance(2 * time.Second)
	rec := r.stored(t)
	if rec.State != config.StateRolledBack || rec.Candidate != nil || rec.Confirmed != nil || !strings.Contains(rec.Note, "not confirmed within 30s") {
		t.Fatalf("after the deadline the store holds %+v", rec)
	}
	calls := r.router.Calls()
	if len(calls) != 2 || !reflect.DeepEqual(calls[1], []string{"firewall"}) {
		t.Fatalf("restarts %v, want the firewall again for the rollback", calls)
	}
	if !reflect.DeepEqual(r.router.Site(), baseSite(nil)) {
		t.Error("the router does not run the old config after the rollback")
	}
	if _, err := r.m.Confirm("c2", 0); err == nil || !strings.Contains(err.Error(), "not confirmed within") {
		t.Errorf("confirm after the rollback: %v", err)
	}
	// A new push may follow.
	if _, err := r.m.Apply(config.ApplyRequest{Site: siteJSON(t, baseSite(func(s *site.Site) { s.Hostname = "gw3" })), Conn: "c4"}); err != nil {
		t.Fatalf("apply after a rollback: %v", err)
	}
	if g := r.stored(t).Candidate; g == nil || g.N != 2 {
		t.Errorf("the next push is generation %v, want 2", g)
	}
}

func TestApplyRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		site  []byte
		files map[string]string
		want  string
	}{
		{"malformed", []byte(`{"kind": "site", "hostname": `), nil, "pushed site.json"},
		{"unknown field", []byte(`{"kind": "site", "colour": "red"}`), nil, "colour"},
		{"invalid LAN", nil, nil, "lan.address"},
		{"moved ports", nil, nil, "ports"},
		{"stray key file", nil, map[string]string{"x.json": "{}"}, "no tunnel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			data := c.site
			switch c.name {
			case "invalid LAN":
				data = siteJSON(t, baseSite(func(s *site.Site) { s.LAN.Address = "192.168.1.0/33" }))
			case "moved ports":
				data = siteJSON(t, baseSite(func(s *site.Site) { s.WAN.Port, s.LAN.Ports = "lan1", []string{"wan"} }))
			case "stray key file":
				data = siteJSON(t, baseSite(nil))
			}
			_, err := r.m.Apply(config.ApplyRequest{Site: data, Files: c.files, Conn: "c1"})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Apply: %v, want an error about %q", err, c.want)
			}
			if rec := r.stored(t); rec.State != "" {
				t.Errorf("a refused config was recorded: %+v", rec)
			}
			r.clock.Advance(time.Hour)
			if n := len(r.router.Calls()); n != 0 {
				t.Errorf("a refused config was applied")
			}
		})
	}
	t.Run("while provisional", func(t *testing.T) {
		r := newRig(t)
		r.apply(t, time.Minute)
		_, err := r.m.Apply(config.ApplyRequest{Site: siteJSON(t, baseSite(nil)), Conn: "c2"})
		if err == nil || !strings.Contains(err.Error(), "waiting for its confirm") {
			t.Fatalf("second apply: %v", err)
		}
	})
	t.Run("timeout out of range", func(t *testing.T) {
		r := newRig(t)
		_, err := r.m.Apply(config.ApplyRequest{Site: siteJSON(t, baseSite(func(s *site.Site) { s.Hostname = "x" })), Within: time.Second})
		if err == nil || !strings.Contains(err.Error(), "--confirm-within") {
			t.Fatalf("Apply with 1s: %v", err)
		}
	})
	t.Run("no change", func(t *testing.T) {
		r := newRig(t)
		rep, err := r.m.Apply(config.ApplyRequest{Site: siteJSON(t, baseSite(nil))})
		if err != nil || !strings.Contains(rep.Message, "nothing changed") || r.stored(t).State != "" {
			t.Fatalf("Apply of the running config: %+v, %v", rep, err)
		}
	})
	t.Run("store fails", func(t *testing.T) {
		r := newRig(t)
		r.values.fail = errors.New("card gone")
		_, err := r.m.Apply(config.ApplyRequest{Site: siteJSON(t, baseSite(func(s *site.Site) { s.Hostname = "x" }))})
		if err == nil || !strings.Contains(err.Error(), "nothing was changed") {
			t.Fatalf("Apply with a failing store: %v", err)
		}
		r.clock.Advance(time.Hour)
		if len(r.router.Calls()) != 0 {
			t.Error("applied a config the store did not keep")
		}
	})
}

func TestFailedApplyRollsBackAtOnce(t *testing.T) {
	r := newRig(t)
	r.router.fail = errors.New("nft says no")
	_, err := r.m.Apply(config.ApplyRequest{Site: siteJSON(t, baseSite(func(s *site.Site) { s.Hostname = "x" })), Conn: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Second)
	rec := r.stored(t)
	if rec.State != config.StateRolledBack || !strings.Contains(rec.Note, "nft says no") {
		t.Fatalf("after a failed apply the store holds %+v", rec)
	}
}

func TestProvisionalAtBootIsRolledBack(t *testing.T) {
	r := newRig(t)
	r.apply(t, time.Minute)
	if _, err := r.m.Confirm("c2", 0); err != nil {
		t.Fatal(err)
	}
	// Generation 2, then the power goes before its confirm.
	if _, err := r.m.Apply(config.ApplyRequest{Site: siteJSON(t, baseSite(func(s *site.Site) { s.Hostname = "gw2" })), Conn: "c3"}); err != nil {
		t.Fatal(err)
	}
	g, note, err := config.AtBoot(r.values)
	if err != nil || g == nil || g.N != 1 || !strings.Contains(note, "still provisional") {
		t.Fatalf("AtBoot = %+v, %q, %v; want generation 1 and the rollback said", g, note, err)
	}
	if rec := r.stored(t); rec.State != config.StateRolledBack || rec.Confirmed.N != 1 || rec.Last != 2 {
		t.Fatalf("after the boot the store holds %+v", rec)
	}
	// The booted manager rolls back to generation 1, not before it.
	m, err := config.New(config.Options{Values: r.values, Router: &fakeRouter{site: baseSite(nil)}, Ports: ports, Clock: r.clock, Booted: g})
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.Confirmed == nil || st.Confirmed.N != 1 {
		t.Fatalf("status %+v", st)
	}
}

// A push confirms only the generation it pushed: push A (1) is rolled
// back, B (2) is applied, and A's confirm is refused, naming both, while
// B is still provisional; B's own confirm passes, also when sent again.
func TestConfirmGeneration(t *testing.T) {
	r := newRig(t)
	a := r.apply(t, 30*time.Second)
	if n, ok := config.AppliedGen("staged [site.json]\n" + a.Message + "\n"); !ok || n != a.Gen {
		t.Fatalf("AppliedGen(%q) = %d, %v, want %d", a.Message, n, ok, a.Gen)
	}
	r.clock.Advance(30 * time.Second) // A rolls back
	b, err := r.m.Apply(config.ApplyRequest{Site: siteJSON(t, baseSite(func(s *site.Site) { s.Hostname = "gw3" })), Conn: "c3"})
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Second)
	for _, tc := range []struct {
		gen  int
		want string
	}{
		{a.Gen, "pushed config 1 is not the one waiting for a confirm, pushed config 2 is: nothing confirmed"},
		{7, "pushed config 7 is not the one waiting"},
		{-1, "count from 1"},
	} {
		if _, err := r.m.Confirm("c4", tc.gen); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("confirm %d while %d waits: %v, want %q", tc.gen, b.Gen, err, tc.want)
		}
	}
	if rec := r.stored(t); rec.State != config.StateProvisional || rec.Candidate.N != b.Gen {
		t.Fatalf("a refused confirm changed the record: %+v", rec)
	}
	for i := 0; i < 2; i++ {
		if msg, err := r.m.Confirm("c4", b.Gen); err != nil || !strings.Contains(msg, "pushed config 2 confirmed") {
			t.Fatalf("confirm %d (try %d): %q, %v", b.Gen, i, msg, err)
		}
	}
	if _, err := r.m.Confirm("c5", a.Gen); err == nil || !strings.Contains(err.Error(), "pushed config 1 is not waiting for a confirm") {
		t.Errorf("confirm of rolled-back %d once %d is kept: %v", a.Gen, b.Gen, err)
	}
	if _, ok := config.AppliedGen("nothing changed: the box runs this config already"); ok {
		t.Error("AppliedGen found a generation in an answer without one")
	}
}
