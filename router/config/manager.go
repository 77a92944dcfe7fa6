package config

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/site"
)

// Limits of the confirm timeout.
const (
	DefaultWithin = 120 * time.Second
	MinWithin     = 10 * time.Second
	MaxWithin     = time.Hour
	// ApplyDelay lets the reply to apply reach the client before the
	// services restart: a restarted SSH server closes its connections.
	ApplyDelay = time.Second
)

// Applier is the running router (router.Router).
type Applier interface {
	Site() *site.Site
	Reconfigure(s *site.Site, files router.Files, parts []string) error
}

// Clock is time as the manager sees it (a fake one in tests).
type Clock interface {
	Now() time.Time
	// AfterFunc runs f after d; the func it returns cancels that.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Options configure a Manager.
type Options struct {
	Values Values       // the store; nil refuses every push (nothing would survive a reboot)
	Router Applier      // the running router
	Ports  []plan.Port  // the board's ports, for the checks
	Files  router.Files // the card's key files (beside site.json); may be nil
	// Booted is the pushed generation the box booted (AtBoot), nil for
	// the config from before any push.
	Booted *Gen
	Clock  Clock // nil: the real one
	Log    func(format string, args ...any)
	// ApplyDelay: 0 in tests applies at once.
	ApplyDelay time.Duration
}

// Manager is the state machine of pushed configs: apply, then confirm or
// roll back (by itself at the deadline). It is safe for concurrent use.
type Manager struct {
	opts Options

	mu       sync.Mutex
	rec      Record
	base     *site.Site // the config from before any push
	curFiles map[string]string
	stop     func() bool   // the deadline's timer
	applied  chan struct{} // closed once the candidate is applied (or given up)
}

// New makes the manager for the running router.
func New(opts Options) (*Manager, error) {
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	m := &Manager{opts: opts, base: opts.Router.Site()}
	if opts.Values != nil {
		r, err := Load(opts.Values)
		if err != nil {
			return nil, err
		}
		m.rec = r
	}
	if opts.Booted != nil {
		m.curFiles = opts.Booted.Files
		// The base is what a rollback to "before any push" means: the
		// card's or the built-in config, which the boot did not load.
		m.base = nil
	}
	return m, nil
}

// ApplyRequest is a pushed config.
type ApplyRequest struct {
	Site   []byte            `json:"site"`  // site.json
	Files  map[string]string `json:"files"` // key files by name
	Within time.Duration     `json:"within"`
	Conn   string            `json:"conn"` // the SSH connection asking
}

// ApplyReply says what apply does.
type ApplyReply struct {
	Gen      int       `json:"gen"`
	Parts    []string  `json:"parts"`
	Deadline time.Time `json:"deadline"`
	Message  string    `json:"message"`
}

// Check reads a pushed config and its key files as the box will run
// them: every problem, each naming its file.
func Check(data []byte, files map[string]string, ports []plan.Port, card router.Files) (*site.Site, []error) {
	s, errs := router.ReadSite("pushed "+site.CardFile, data, ports)
	if len(errs) > 0 {
		return nil, errs
	}
	named := map[string]bool{}
	for _, t := range s.Tunnels {
		name := t.Keys
		if t.Mode() == site.KeyingIKEv2 {
			name = t.PSK
		}
		named[name] = true
		text, ok := files[name]
		if !ok {
			if card == nil {
				errs = append(errs, fmt.Errorf("tunnel %s: key file %s was not pushed and there is no card to read it from", t.Name, name))
				continue
			}
			b, err := card.ReadFile(name, site.MaxTunnelKeysSize)
			if errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("tunnel %s: key file %s was not pushed and is not on the card: push it with the site config", t.Name, name))
				continue
			} else if err != nil {
				errs = append(errs, fmt.Errorf("tunnel %s: key file %s on the card: %w", t.Name, name, err))
				continue
			}
			text = string(b)
		}
		if t.Mode() == site.KeyingIKEv2 {
			_, es := site.TunnelPSKFor(t, []byte(text))
			errs = append(errs, es...)
			continue
		}
		keys, es := site.ReadTunnelKeys(name, []byte(text))
		if len(es) == 0 {
			_, es = t.Setup(s, keys)
		}
		errs = append(errs, es...)
	}
	var extra []string
	for n := range files {
		if !named[n] {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	for _, n := range extra {
		errs = append(errs, fmt.Errorf("%s: no tunnel of the pushed config names this key file", n))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

// Apply checks a pushed config, keeps it in the store as provisional and
// applies it live (after ApplyDelay). Unless Confirm comes by the
// deadline, the previous config comes back by itself.
func (m *Manager) Apply(req ApplyRequest) (ApplyReply, error) {
	if m.opts.Values == nil {
		return ApplyReply{}, errors.New("this box has no data partition: a pushed config could not survive a reboot; put site.json on the card instead")
	}
	within := req.Within
	if within == 0 {
		within = DefaultWithin
	}
	if within < MinWithin || within > MaxWithin {
		return ApplyReply{}, fmt.Errorf("--confirm-within %v: give %v to %v", within, MinWithin, MaxWithin)
	}
	s, errs := Check(req.Site, req.Files, m.opts.Ports, m.opts.Files)
	if len(errs) > 0 {
		return ApplyReply{}, joinErrs(errs)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec.State == StateProvisional {
		return ApplyReply{}, fmt.Errorf("pushed config %d is waiting for its confirm until %s: confirm it (ocf config confirm %d) or let it roll back first",
			m.rec.Candidate.N, m.rec.Deadline.UTC().Format(time.RFC3339), m.rec.Candidate.N)
	}
	cur := m.opts.Router.Site()
	if PortsChanged(cur, s) {
		return ApplyReply{}, errors.New("the pushed config changes the board or the ports (board, wan.port, lan.ports): that cannot be applied live; put it on the card and reboot")
	}
	parts := Diff(cur, s, m.curFiles, req.Files)
	if len(parts) == 0 {
		return ApplyReply{Message: "nothing changed: the pushed config is the one running"}, nil
	}
	now := m.opts.Clock.Now()
	gen := &Gen{N: m.rec.Last + 1, Site: string(req.Site), Files: req.Files, Time: now.UTC()}
	next := Record{State: StateProvisional, Confirmed: m.rec.Confirmed, Candidate: gen, Deadline: now.Add(within).UTC(),
		ApplyConn: req.Conn, Last: gen.N, Note: fmt.Sprintf("pushed config %d applied, provisional", gen.N)}
	if err := m.opts.Values.SetValue(ValueName, next); err != nil {
		return ApplyReply{}, fmt.Errorf("keeping the pushed config in the store: %w (nothing was changed)", err)
	}
	m.rec = next
	m.opts.Log("config: pushed config %d accepted, changes %v; rolled back at %s unless confirmed over a new SSH connection",
		gen.N, parts, next.Deadline.Format(time.RFC3339))
	applied := make(chan struct{})
	m.applied = applied
	m.stop = m.opts.Clock.AfterFunc(within, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.rec.State == StateProvisional && m.rec.Candidate.N == gen.N {
			m.rollback(fmt.Sprintf("pushed config %d was not confirmed within %v: rolled back", gen.N, within))
		}
	})
	run := func() {
		defer close(applied)
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.rec.State != StateProvisional || m.rec.Candidate.N != gen.N {
			return
		}
		if err := m.opts.Router.Reconfigure(s, m.files(req.Files), parts); err != nil {
			m.curFiles = req.Files
			m.rollback(fmt.Sprintf("pushed config %d could not be applied whole (%v): rolled back", gen.N, err))
			return
		}
		m.curFiles = req.Files
		m.opts.Log("config: pushed config %d applied", gen.N)
	}
	if m.opts.ApplyDelay <= 0 {
		// Run needs the lock this call holds: after it returns.
		go run()
	} else {
		m.opts.Clock.AfterFunc(m.opts.ApplyDelay, run)
	}
	return ApplyReply{Gen: gen.N, Parts: parts, Deadline: next.Deadline,
		Message: fmt.Sprintf(appliedWords+" (%s); it is rolled back at %s unless confirmed over a new SSH connection (ocf config confirm %d)",
			gen.N, strings.Join(parts, ", "), next.Deadline.Format(time.RFC3339), gen.N)}, nil
}

// appliedWords begin apply's answer; AppliedGen reads them back.
const appliedWords = "pushed config %d applies now"

// AppliedGen reads the generation out of apply's answer as `ocf config
// apply` prints it: ocfw push confirms that generation and no other.
func AppliedGen(out string) (int, bool) {
	for _, line := range strings.Split(out, "\n") {
		var n int
		if _, err := fmt.Sscanf(line, appliedWords, &n); err == nil && n > 0 {
			return n, true
		}
	}
	return 0, false
}

// files is where the router reads key files for a generation's files.
func (m *Manager) files(pushed map[string]string) router.Files {
	return overlay{pushed: pushed, card: m.opts.Files}
}

// rollback goes back to the confirmed config. The store learns it first:
// a power cut during the restarts then boots the old config too.
func (m *Manager) rollback(why string) {
	cand := m.rec.Candidate
	next := Record{State: StateRolledBack, Confirmed: m.rec.Confirmed, Last: m.rec.Last, Note: why}
	if err := m.opts.Values.SetValue(ValueName, next); err != nil {
		m.opts.Log("config: WARNING: writing the rollback down failed (%v); the next boot rolls back too", err)
	}
	m.rec = next
	if m.stop != nil {
		m.stop()
	}
	old, oldFiles, err := m.confirmedSite()
	if err != nil {
		m.opts.Log("config: %s, but the previous config cannot be read back (%v): reboot the box to run it", why, err)
		return
	}
	var candFiles map[string]string
	if cand != nil {
		candFiles = cand.Files
	}
	cur := m.opts.Router.Site()
	parts := Diff(cur, old, candFiles, oldFiles)
	if err := m.opts.Router.Reconfigure(old, m.files(oldFiles), parts); err != nil {
		m.opts.Log("config: rolling back: %v", err)
	}
	m.curFiles = oldFiles
	m.opts.Log("config: %s", why)
}

// confirmedSite is the config a rollback returns to.
func (m *Manager) confirmedSite() (*site.Site, map[string]string, error) {
	g := m.rec.Confirmed
	if g == nil {
		if m.base == nil {
			return nil, nil, errors.New("the box booted a pushed config, and the one from before any push is not loaded")
		}
		return m.base, nil, nil
	}
	s, errs := router.ReadSite("pushed config", []byte(g.Site), m.opts.Ports)
	if len(errs) > 0 {
		return nil, nil, joinErrs(errs)
	}
	return s, g.Files, nil
}

// Confirm keeps the provisional config: it boots from now on. conn is the
// SSH connection asking ("" from the console); it must not be the one
// that applied the config. gen is the generation the caller pushed, and
// only that one is confirmed: a push whose config was rolled back (a
// power cut) must not confirm another config pushed since. 0 confirms
// whichever waits; only a person at a terminal may ask that (ocf config
// confirm), who sees which one it was.
func (m *Manager) Confirm(conn string, gen int) (string, error) {
	m.mu.Lock()
	applied := m.applied
	m.mu.Unlock()
	if applied != nil {
		<-applied
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if gen < 0 {
		return "", fmt.Errorf("pushed config %d: generations count from 1", gen)
	}
	if gen > 0 && m.rec.State == StateConfirmed && m.rec.Confirmed != nil && m.rec.Confirmed.N == gen {
		// A confirm sent again (its answer was lost): it holds.
		return m.rec.Note + "; the box boots it from now on", nil
	}
	if m.rec.State != StateProvisional {
		what := "nothing to confirm"
		if gen > 0 {
			what = fmt.Sprintf("pushed config %d is not waiting for a confirm: nothing confirmed", gen)
		}
		if m.rec.Note != "" {
			return "", fmt.Errorf("%s: %s", what, m.rec.Note)
		}
		return "", fmt.Errorf("%s: no pushed config is waiting", what)
	}
	if gen > 0 && gen != m.rec.Candidate.N {
		return "", fmt.Errorf("pushed config %d is not the one waiting for a confirm, pushed config %d is: nothing confirmed (config %d was rolled back or replaced; ocf config status says more)",
			gen, m.rec.Candidate.N, gen)
	}
	if conn != "" && conn == m.rec.ApplyConn {
		return "", errors.New("confirm over a new SSH connection, not the one that applied the config: only a new login proves the new config lets you in")
	}
	cand := m.rec.Candidate
	next := Record{State: StateConfirmed, Confirmed: cand, Last: m.rec.Last,
		Note: fmt.Sprintf("pushed config %d confirmed at %s", cand.N, m.opts.Clock.Now().UTC().Format(time.RFC3339))}
	if err := m.opts.Values.SetValue(ValueName, next); err != nil {
		return "", fmt.Errorf("keeping the confirm in the store: %w (still provisional)", err)
	}
	m.rec = next
	if m.stop != nil {
		m.stop()
	}
	m.opts.Log("config: %s", next.Note)
	return next.Note + "; the box boots it from now on", nil
}

// Status is the record as it is now.
func (m *Manager) Status() Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec
}

func joinErrs(errs []error) error {
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// overlay reads pushed key files first, then the card's.
type overlay struct {
	pushed map[string]string
	card   router.Files
}

func (o overlay) ReadFile(name string, max int64) ([]byte, error) {
	if t, ok := o.pushed[name]; ok {
		if int64(len(t)) > max {
			return nil, fmt.Errorf("%s: larger than %d bytes", name, max)
		}
		return []byte(t), nil
	}
	if o.card == nil {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return o.card.ReadFile(name, max)
}

// Files is where the router reads key files for the booted generation.
func Files(g *Gen, card router.Files) router.Files {
	if g == nil {
		return card
	}
	return overlay{pushed: g.Files, card: card}
}
