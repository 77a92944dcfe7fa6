// Package boot is the firmware's boot sequence, run on the board by
// `ocf boot` as u-root's uinit: mount the kernel file systems, find the
// data partition, read the plan, detect the hardware, load the planned
// kernel modules, self-test and measure the engines, derive the policy,
// keep the report on the card (or in RAM) and return, so that init hands
// the console to the shell. Every step is time-bounded and a panic in one
// is recovered: whatever fails, the board ends at a shell.
//
// It holds no host-only code: cmd/ocf links it into the board's userland.
package boot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/fault"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/ocf/probe"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/store"
)

// DefaultSpeedBudget bounds the speed table when boot.json gives none.
// A full plan on a Geode board has about 21 (engine, cipher) pairs that
// pass, times 6 sizes = 126 cells: 15 s gives ~120 ms a cell, above the
// 50 ms floor below which timer granularity dominates on a 500 MHz CPU.
// With the kernel's ~10 s to uinit, module loading, about 10 s of
// self-tests and the writes, a boot stays within 60 s.
const DefaultSpeedBudget = 15 * time.Second

// Config says where the sequence finds things. The zero value (with
// Defaults) is the board; tests point Root at a fake tree.
type Config struct {
	Root        string // prefix for /proc, /sys, /dev, /etc, /lib/modules, /run, /data; "" means "/"
	Console     io.Writer
	Mount       bool          // mount proc/sys/devtmpfs and the data partition (false in tests)
	DataWait    time.Duration // how long to wait for the data partition to appear; 0 means 6 s
	StepTimeout time.Duration // bound of each step but the crypto run; 0 means 30 s
	// DataDevice, when set, is used as the data partition without
	// looking for one by its label (tests give an image file).
	DataDevice string
	// Loader loads a kernel module with its dependencies; nil means
	// u-root's kmodule on the running kernel.
	Loader ModuleLoader
	// NoNetwork skips the router (tests on a fake root).
	NoNetwork bool
	// LinkWait bounds the wait for the ports' interfaces; 0 means 10 s.
	LinkWait time.Duration
	// Engines changes the kernel's choice of engine; nil means package
	// kcrypto on the running kernel, or nothing at all on a fake Root.
	Engines KernelChoice
	// TrafficCiphers are the ciphers the kernel's own users (IPsec)
	// carry, which the kernel's engine choice is made for; nil means
	// every cipher of the plan.
	TrafficCiphers []string
}

// Outcome is what a boot did; the console has the same in words.
type Outcome struct {
	Boot       int            // boot counter, 0 when there is no data partition
	Report     *report.Report // nil when the crypto run did not finish
	ReportPath string         // on the data partition ("/ocfw/report-0001.json") or in RAM
	InRAM      string         // why the report is in RAM only, "" when on the card
	Modules    ModuleResults
	Problems   []string // steps that failed or timed out
	// Router is the running router (nil without a site config or when
	// it could not start); it keeps running after Run returns.
	Router *router.Router
	// Upgrade is the boot's part of an upgrade (nil without slots).
	Upgrade *Upgrade
	// Log batches the card's log writes (nil without a data partition);
	// Run flushes it when the boot is done, the daemon closes it when
	// the board goes down.
	Log *store.LogWriter
}

func (c *Config) path(p string) string {
	if c.Root == "" || c.Root == "/" {
		return p
	}
	return filepath.Join(c.Root, p)
}

func (c *Config) printf(format string, args ...any) {
	fmt.Fprintf(c.Console, format+"\n", args...)
}

// Run is the boot sequence. It always returns (within the step bounds
// plus the crypto run's budget), never panics, and prints the console
// markers; the caller then exits so init starts the shell.
func Run(ctx context.Context, cfg Config) *Outcome {
	cfg.setDefaults()
	start := time.Now()
	b := &sequence{ctx: ctx, cfg: &cfg, out: &Outcome{}, start: start}
	cfg.printf("ocfw: boot sequence starting")
	b.readPlan()
	b.openData()
	b.loadPlanModules()
	b.armTrialWatchdog()
	b.testHang()
	b.demoteEngines()
	b.startNetwork()
	b.selfTestAndSpeed()
	b.espThroughput()
	b.devCryptoEngines()
	b.finishReport()
	summary(&cfg, b.out.Report)
	if b.out.Log != nil {
		// The boot's lines are on the card before it says it is done.
		b.out.Log.Flush()
	}
	cfg.printf("ocfw: boot sequence took %v", time.Since(start).Round(100*time.Millisecond))
	cfg.printf("%s", plan.MarkDone)
	return b.out
}

func (c *Config) setDefaults() {
	if c.Console == nil {
		c.Console = os.Stdout
	}
	if c.DataWait == 0 {
		c.DataWait = 6 * time.Second
	}
	if c.StepTimeout == 0 {
		c.StepTimeout = 30 * time.Second
	}
	if c.LinkWait == 0 {
		c.LinkWait = 10 * time.Second
	}
}

// sequence is one run of the boot sequence: its steps, in Run's order,
// and what they hand on to the later ones.
type sequence struct {
	ctx context.Context
	cfg *Config
	out *Outcome

	pl      *plan.Plan
	opts    plan.Options
	storage ModuleResults
	st      *store.Store
	why     string // why there is no store

	engineNotes []string
	choice      *report.EngineChoice
	devCrypto   *devCryptoResult // each engine through /dev/crypto (step 6)
	netNotes    []string
	site        *site.Site
	start       time.Time // when the sequence started
}

// problem records a step that failed, and says so on the console.
func (b *sequence) problem(err error) {
	if err != nil {
		b.out.Problems = append(b.out.Problems, err.Error())
		b.cfg.printf("ocfw: %v", err)
	}
}

// readPlan is step 1: kernel file systems; plan and boot options.
func (b *sequence) readPlan() {
	ctx, cfg := b.ctx, b.cfg
	if cfg.Mount {
		b.problem(step(ctx, "mounting proc, sys, devtmpfs", cfg.StepTimeout, func() error { return mountKernelFS(cfg) }))
	}
	b.problem(step(ctx, "reading the plan", cfg.StepTimeout, func() error {
		var err error
		b.pl, err = plan.Read(cfg.path(plan.File))
		if err != nil {
			return err
		}
		b.opts, err = plan.ReadOptions(cfg.path(plan.OptionsFile))
		return err
	}))
}

// openData is step 2: storage drivers, the data partition and its store
// (the boot takes its number before it writes anything else); then the
// plan's hardware is listed.
func (b *sequence) openData() {
	ctx, cfg := b.ctx, b.cfg
	b.problem(step(ctx, "loading storage modules", cfg.StepTimeout, func() error {
		names, err := readLines(cfg.path(plan.StorageModulesFile))
		if err != nil || len(names) == 0 {
			return nil // a board without a storage stack in the initramfs
		}
		b.storage = loadModules(cfg, names, nil)
		return nil
	}))
	b.problem(step(ctx, "opening the data partition", cfg.StepTimeout+cfg.DataWait, func() error {
		b.st, b.why = openStore(cfg, b.pl, b.opts)
		return nil
	}))
	if b.st == nil && b.why == "" {
		b.why = "opening the data partition did not finish"
	}
	if b.st != nil {
		// Each line says what it means: a torn copy a power cut left,
		// or damage (a lost state); the log keeps them too, once the
		// boot has its number.
		c := b.st.Contents()
		lines := append(append([]string(nil), c.Problems...), c.Notes...)
		for _, p := range lines {
			cfg.printf("ocfw: store: %s", p)
		}
		b.problem(step(ctx, "taking the boot number", cfg.StepTimeout, func() error {
			n, err := b.st.BeginBoot()
			if err != nil {
				b.why = "writing the boot counter failed: " + err.Error()
				b.st = nil
				return err
			}
			b.out.Boot = n
			b.out.Log = store.NewLogWriter(b.st, store.LogWriterOptions{})
			cfg.printf("ocfw: boot %d; the data partition is written in place, never mounted", n)
			for _, p := range lines {
				b.st.Log("store: " + p)
			}
			return nil
		}))
	}
	if b.st == nil {
		cfg.printf("ocfw: no data partition (%s): reports stay in RAM (%s) and on this console", b.why, plan.RunDir)
	}
	b.upgradeEarly()

	if pl := b.pl; pl != nil {
		cfg.printf("ocfw: plan for %s: %d engines, %d ciphers, %d modules", pl.Board, len(pl.Engines), len(pl.Ciphers), len(pl.Modules))
		b.problem(step(ctx, "detecting hardware", cfg.StepTimeout, func() error {
			for _, l := range DetectPCI(cfg.path("/sys/bus/pci/devices"), pl) {
				cfg.printf("ocfw: hardware: %s", l)
			}
			return nil
		}))
	}
}

// loadPlanModules is step 3: the planned modules.
func (b *sequence) loadPlanModules() {
	cfg := b.cfg
	b.out.Modules = b.storage
	if pl := b.pl; pl != nil {
		var names []string
		for _, m := range pl.Modules {
			names = append(names, m.Name)
		}
		var res ModuleResults
		// Twice a step's bound: some 40 modules, one finit_module each,
		// take over 30 s under QEMU TCG on a loaded host, and a step cut
		// off leaves the network and the trial's watchdog without theirs.
		b.problem(step(b.ctx, "loading the plan's kernel modules", 2*cfg.StepTimeout, func() error {
			res = loadModules(cfg, names, pl)
			return nil
		}))
		b.out.Modules = append(b.out.Modules, res...)
	}
	for _, l := range b.out.Modules.Lines() {
		cfg.printf("ocfw: module %s", l)
	}
}

// demoteEngines keeps the kernel's own users (IPsec) off every hardware
// engine until the self-test has proved it: demoted before any interface
// is up.
func (b *sequence) demoteEngines() {
	cfg, pl := b.cfg, b.pl
	if pl == nil {
		return
	}
	// The step's results come back over a channel: a step that
	// overruns is left running, and must not write into what the
	// report is made of.
	res := make(chan engineStep, 1)
	b.problem(step(b.ctx, "demoting the hardware engines", cfg.StepTimeout, func() error {
		ec := &report.EngineChoice{Ciphers: cfg.trafficCiphers(pl), Size: kcrypto.MTU}
		res <- engineStep{ec, demoteHardware(cfg, pl, ec)}
		return nil
	}))
	select {
	case s := <-res:
		b.choice, b.engineNotes = s.choice, s.notes
	default:
		b.engineNotes = append(b.engineNotes, "engine choice: demoting the hardware engines did not finish: the kernel chooses by its drivers' own priorities")
	}
}

// startNetwork is step 4, the network, before the crypto checks: a
// router that is down for the length of a benchmark at every boot is a
// bad router.
func (b *sequence) startNetwork() {
	if b.pl == nil {
		return
	}
	b.problem(step(b.ctx, "bringing the network up", b.cfg.StepTimeout+b.cfg.LinkWait, func() error {
		var err error
		b.out.Router, b.site, b.netNotes, err = startRouter(b.ctx, b.cfg, b.pl, b.opts, b.st, b.out.Log)
		return err
	}))
}

// selfTestAndSpeed is step 5: self-test, speed, policy.
func (b *sequence) selfTestAndSpeed() {
	budget, err := b.opts.SpeedBudgetOr(DefaultSpeedBudget)
	if err != nil {
		b.problem(fmt.Errorf("%w; using %v", err, budget))
	}
	// The crypto run's own bound: self-tests time out per request, the
	// speed table has its budget; this is the backstop for a wedged
	// engine.
	runBound := b.cfg.StepTimeout + 3*budget + 2*time.Minute
	b.problem(step(b.ctx, "self-test and speed", runBound, func() error {
		r, err := runCrypto(b.ctx, b.cfg, b.pl, b.opts, budget)
		b.out.Report = r
		return err
	}))
}

// espThroughput is step 6: ESP throughput per engine that passed,
// software included, each made the kernel's choice in turn: what the
// engine choice is made on. Before any tunnel is up (new SAs bind the
// engine measured) and before the promotion (it leaves the kernel's
// choice as it found it).
func (b *sequence) espThroughput() {
	cfg, out := b.cfg, b.out
	if out.Report == nil || b.pl == nil || b.choice == nil || b.choice.Demote == nil {
		return
	}
	eb, err := espBudget(b.opts)
	b.problem(err)
	res := make(chan *report.ESP, 1)
	rep := out.Report
	// The run's own context ends before the step's bound, so that a
	// run that overruns stops (and restores the kernel's choice)
	// rather than changing priorities under the promotion.
	mctx, cancel := context.WithTimeout(b.ctx, cfg.StepTimeout+eb)
	b.problem(step(b.ctx, "ESP throughput per engine", cfg.StepTimeout+2*eb, func() error {
		res <- measureESP(mctx, cfg, b.pl, rep, out.Modules, b.site, eb)
		return nil
	}))
	cancel()
	select {
	case e := <-res:
		out.Report.ESP = e
	default:
		out.Report.ESP = &report.ESP{Basis: report.BasisSpeed, Why: "the ESP run did not finish"}
	}
	if e := out.Report.ESP; e.Basis != report.BasisESP {
		cfg.printf("ocfw: engine choice on the speed table, not ESP: %s", e.Why)
	} else {
		cfg.printf("ocfw: engine choice on ESP throughput at %d bytes", kcrypto.MTU)
	}
}

// finishReport is step 7: the engine choice, the tunnels, the report's
// notes, and the report written.
func (b *sequence) finishReport() {
	cfg, out := b.cfg, b.out
	if out.Report == nil {
		out.Report = &report.Report{Version: report.Version, Env: report.HostEnvironment()}
	}
	r := out.Report
	if b.pl != nil && r.Env.Board == "" {
		// The report names its board: ocfw report --list showed "?".
		r.Env.Board = b.pl.Board
	}
	b.promoteEngines(r)
	b.devCryptoSelfTest(r)
	// The router's tunnels install their SAs now, binding them to the
	// kernel's engines as they are: this stays after the engine choice is
	// applied (an SA keeps the transform it was made with). The tunnels
	// come up in the background.
	if out.Router != nil {
		out.Router.SetCipherDrivers(cipherDrivers(r.EngineChoice))
		out.Router.CryptoSettled()
	}
	r.Notes = append(r.Notes, out.Modules.Notes()...)
	r.Notes = append(r.Notes, b.netNotes...)
	r.Notes = append(r.Notes, b.engineNotes...)
	if b.st == nil {
		r.Notes = append(r.Notes, "no data partition: "+b.why)
	}
	if u := out.Upgrade; u != nil && b.site != nil {
		u.sshAddr = sshAddr(b.site)
		if b.opts.TestBreak == plan.TestBreakNoWAN {
			u.wait = TestNoWANWait
		}
	}
	if u := out.Upgrade; u != nil && u.Message != "" {
		r.Notes = append(r.Notes, u.Message)
		u.writeStatus(cfg)
	}
	b.problem(step(b.ctx, "writing the report", cfg.StepTimeout+3*b.opts.TestWriteTimeOrZero(), func() error {
		return writeAll(cfg, out, b.st, b.why)
	}))
	b.keepTunnelState()
}

// cipherDrivers is the engine choice as the router takes it: per cipher
// the driver the kernel resolves now, and whether it is hardware (a
// proven engine: its IKEv2 tunnels propose that cipher first).
func cipherDrivers(e *report.EngineChoice) []router.CipherDriver {
	now := e.Now()
	if now == nil {
		return nil
	}
	var out []router.CipherDriver
	for _, c := range now.Ciphers {
		if c.Driver == "" || c.Error != "" {
			continue
		}
		out = append(out, router.CipherDriver{Cipher: c.Cipher, Driver: c.Driver, Hardware: c.Hardware})
	}
	return out
}

// promoteEngines gives the kernel the engines the self-test proved, in
// the policy's order; failed and slower ones stay below software.
func (b *sequence) promoteEngines(r *report.Report) {
	if b.choice == nil || b.choice.Demote == nil {
		return
	}
	res := make(chan engineStep, 1)
	choice := b.choice
	b.problem(step(b.ctx, "promoting the engines that passed", b.cfg.StepTimeout, func() error {
		ec := *choice
		res <- engineStep{&ec, promoteEngines(b.cfg, b.pl, r, &ec)}
		return nil
	}))
	select {
	case s := <-res:
		b.choice = s.choice
		b.engineNotes = append(b.engineNotes, s.notes...)
	default:
		b.engineNotes = append(b.engineNotes, "engine choice: promoting did not finish: hardware stays below software")
	}
	r.EngineChoice = b.choice
}

// step runs fn with a time bound, turning a panic into an error. A step
// that overruns is left running in the background: the sequence goes on.
func step(ctx context.Context, name string, bound time.Duration, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("%s: panic: %v\n%s", name, p, debug.Stack())
			}
		}()
		if err := fn(); err != nil {
			done <- fmt.Errorf("%s: %w", name, err)
			return
		}
		done <- nil
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%s: still running after %v; going on without it", name, bound)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", name, ctx.Err())
	}
}

func readLines(name string) ([]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, nil
}

func runCrypto(ctx context.Context, cfg *Config, pl *plan.Plan, opts plan.Options, budget time.Duration) (*report.Report, error) {
	wants, err := probe.Wants(pl, nil)
	if err != nil {
		return nil, err
	}
	var extra []ocf.Driver
	for _, spec := range opts.Inject {
		d, err := fault.Parse(ctx, spec)
		if err != nil {
			return nil, err
		}
		extra = append(extra, d)
	}
	targets := probe.Find(wants, probe.Options{ProcCrypto: cfg.path("/proc/crypto"), Extra: extra, Depth: 4})
	cfg.printf("ocfw: self-testing %d (engine, cipher) pairs; speed budget %v", len(targets), budget)
	r := report.Run(targets, report.RunOptions{
		SelfTest:    selftest.Options{Timeout: 5 * time.Second},
		SpeedBudget: budget,
		NoSpeed:     budget == 0,
		Progress:    cfg.Console,
	})
	return r, nil
}

// summary prints the whole report and the self-test marker.
func summary(cfg *Config, r *report.Report) {
	cfg.printf("")
	if err := r.WriteText(cfg.Console); err != nil {
		cfg.printf("ocfw: printing the report: %v", err)
	}
	cfg.printf("%s%s", plan.MarkSelfTest, r.Tally())
}

// writeAll keeps the report and the policy in the store when there is
// one, and always in RAM (plan.RunDir) for the shell's `ocf policy`.
func writeAll(cfg *Config, out *Outcome, st *store.Store, why string) error {
	r := out.Report
	var werr error
	if st != nil {
		r.Boot = out.Boot
		j, err := r.JSON()
		if err == nil {
			var slot store.Slot
			if slot, err = st.PutReport(out.Boot, j); err == nil {
				out.ReportPath = store.Dir + "/" + slot.File
				err = st.SetValue("policy", r.Policy)
				cfg.printf("%s%s (boot %d)", plan.MarkReportWritten, out.ReportPath, out.Boot)
			}
		}
		if err != nil {
			werr = err
			why = "writing to the data partition failed: " + err.Error()
		}
	}
	ram := cfg.path(plan.RunDir)
	if err := os.MkdirAll(ram, 0o755); err != nil {
		return errors.Join(werr, err)
	}
	j, jerr := r.JSON()
	if jerr != nil {
		return errors.Join(werr, jerr)
	}
	if err := atomicfile.WriteFile(filepath.Join(ram, "report.json"), j, 0o644); err != nil {
		return errors.Join(werr, err)
	}
	var pj strings.Builder
	if err := r.Policy.WriteJSON(&pj); err == nil {
		if err := atomicfile.WriteFile(filepath.Join(ram, "policy.json"), []byte(pj.String()), 0o644); err != nil {
			return errors.Join(werr, err)
		}
	}
	if out.ReportPath == "" {
		out.InRAM = why
		out.ReportPath = filepath.Join(plan.RunDir, "report.json")
		cfg.printf("%s%s", plan.MarkReportRAM, why)
	}
	return werr
}
