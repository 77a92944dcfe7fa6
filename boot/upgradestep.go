package boot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/ocfw/ocfw/boot/upgrade"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/plan/slots"
	"github.com/ocfw/ocfw/site"
)

// Upgrade is the boot's part of an upgrade (package boot/upgrade): nil
// on a board without slots (an IXP4xx flash image, an old CF image).
type Upgrade struct {
	Board   *upgrade.Board
	Action  upgrade.Action
	Message string // the record as this boot left it, for `ocf net`
	sshAddr string // where the router's SSH listens (host:port)
	// wait bounds the trial's network checks; 0 is upgrade.Checks'
	// default. Only a test image's no-wan break shortens it.
	wait time.Duration
	// Watchdog is the trial's hardware watchdog (nil: not a trial, or
	// no watchdog): the daemon disarms it once the trial committed.
	Watchdog *Watchdog
}

// UpgradeStatusFile is where the boot leaves the upgrade's message for
// `ocf net` (RAM).
const UpgradeStatusFile = plan.RunDir + "/upgrade.txt"

// upgradeEarly runs once the store is open: it finds the boot
// partition's slots and settles the upgrade record (boot/upgrade.Early).
func (b *sequence) upgradeEarly() {
	cfg := b.cfg
	if b.st == nil || b.pl == nil {
		return
	}
	cmdline, err := os.ReadFile(cfg.path("/proc/cmdline"))
	if err != nil {
		return
	}
	booted := slots.BootedSlot(string(cmdline))
	if booted == "" {
		return // not booted from a slot: nothing to settle
	}
	b.problem(step(b.ctx, "settling the upgrade record", cfg.StepTimeout, func() error {
		dev, err := FindLabel(cfg.path("/sys/class/block"), cfg.path("/dev"), plan.BootLabel)
		if err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
		f, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
		size, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			f.Close()
			return err
		}
		card, err := upgrade.OpenCard(f, size)
		if err != nil {
			// A card edited by hand (a longer syslinux.cfg) boots as
			// before; it only takes no upgrade. A note, not a problem.
			f.Close()
			cfg.printf("ocfw: upgrade: %s: %v; this card takes no upgrade", dev, err)
			return nil
		}
		u := &Upgrade{Board: &upgrade.Board{Card: card, Store: b.st, Booted: booted, Name: b.pl.Board, Logf: cfg.printf}}
		u.Action, u.Message = u.Board.Early()
		cfg.printf("ocfw: system %s from slot %s", u.Board.Revision(), booted)
		if u.Message != "" {
			cfg.printf("ocfw: %s", u.Message)
			b.st.Log(u.Message)
		}
		b.out.Upgrade = u
		return nil
	}))
}

// armTrialWatchdog runs right after the plan's modules are loaded (the
// watchdog's driver is one of them): on a trial it opens the hardware
// watchdog, so that from here on a hang resets into the old system.
func (b *sequence) armTrialWatchdog() {
	u := b.out.Upgrade
	if !u.Trial() {
		return
	}
	dev := b.cfg.path(WatchdogDevice)
	if b.watchdogPending() {
		// The module step ran out of time before the watchdog's driver
		// (it loads last): give it the step's time again.
		for deadline := time.Now().Add(b.cfg.StepTimeout); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if _, err := os.Stat(dev); err == nil {
				break
			}
		}
	}
	timeout := WatchdogTimeout
	if b.opts.TestBreak == plan.TestBreakHang {
		timeout = TestHangWatchdogTimeout
	}
	w, err := ArmWatchdog(dev, timeout, WatchdogPet, TrialLimit)
	if err != nil {
		b.cfg.printf("ocfw: upgrade trial: no watchdog (%v): a hang in the trial waits for a power cycle", err)
		return
	}
	u.Watchdog = w
	b.cfg.printf("ocfw: upgrade trial: %v", w)
}

// watchdogPending says whether a watchdog driver of the plan has no load
// result yet: the module step was cut off before it.
func (b *sequence) watchdogPending() bool {
	if b.pl == nil {
		return false
	}
	done := map[string]bool{}
	for _, r := range b.out.Modules {
		done[r.Name] = true
	}
	for _, m := range b.pl.Modules {
		if m.IfDevice && !done[m.Name] {
			return true
		}
	}
	return false
}

// A test image's break is proved rolled back the same way whatever the
// trial's bounds, so its image waits less for what it knows will not
// come: the no-wan image's WAN address (two minutes otherwise) and the
// kernel-hang image's watchdog reset (two pets, not six: the guest spins in
// the panic until the reset, a core of the host's CPU under QEMU).
const (
	TestNoWANWait           = 20 * time.Second
	TestHangWatchdogTimeout = 20 * time.Second
)

// testHang is a test image's kernel-hang (plan.TestBreakHang): with the
// panic reset turned off, the kernel is crashed and stops for good; only
// a hardware watchdog resets the board.
func (b *sequence) testHang() {
	if b.opts.TestBreak != plan.TestBreakHang || !b.cfg.Mount {
		return
	}
	b.cfg.printf("ocfw: TEST IMAGE: stopping the kernel for good (%s)", plan.TestBreakHang)
	if b.out.Log != nil {
		b.out.Log.Flush()
	}
	if err := os.WriteFile("/proc/sys/kernel/panic", []byte("0\n"), 0o644); err != nil {
		b.problem(fmt.Errorf("%s: %w", plan.TestBreakHang, err))
		return
	}
	if err := os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0o200); err != nil {
		b.problem(fmt.Errorf("%s: %w", plan.TestBreakHang, err))
	}
}

// writeUpgradeStatus leaves the message for `ocf net`.
func (u *Upgrade) writeStatus(cfg *Config) {
	if u == nil || u.Message == "" {
		return
	}
	_ = os.MkdirAll(cfg.path(plan.RunDir), 0o755)
	_ = os.WriteFile(cfg.path(UpgradeStatusFile), []byte(u.Message+"\n"), 0o644)
}

// Trial reports whether this boot is a new system's one-time boot.
func (u *Upgrade) Trial() bool { return u != nil && u.Action == upgrade.Prove }

// Prove runs the new system's checks once its boot is done: the self-test
// no worse than the old system's, the WAN up (when the site has one),
// SSH answering. It commits the slot or returns why not; the caller then
// resets the board so the loader boots the old default.
func (u *Upgrade) Prove(ctx context.Context, o *Outcome, cfg *Config) error {
	c := upgrade.Checks{Wait: u.wait}
	if o.Report != nil && len(o.Report.SelfTest) > 0 {
		t := report.TallyOf(o.Report.SelfTest)
		c.SelfTest = &upgrade.Tally{Passed: t.Passed, Failed: t.Failed}
	} else if o.Report != nil {
		c.SelfTest = &upgrade.Tally{}
	}
	if r := o.Router; r != nil {
		if r.Status().WAN.Interface != "" {
			c.WAN = func(ctx context.Context) error {
				for {
					st := r.Status()
					if st.WAN.Address != "" {
						return nil
					}
					select {
					case <-ctx.Done():
						return fmt.Errorf("the WAN (%s) has no address", st.WAN.Interface)
					case <-time.After(time.Second):
					}
				}
			}
		}
		addr := u.sshAddr
		if addr == "" {
			addr = fmt.Sprintf("127.0.0.1:%d", site.DefaultSSHPort)
		}
		c.SSH = func(ctx context.Context) error { return sshAnswers(ctx, addr) }
	} else {
		c.SSH = func(context.Context) error { return errors.New("the router did not start") }
	}
	err := u.Board.Prove(ctx, c)
	if err == nil {
		r, _ := u.Board.Record()
		u.Message = r.Message()
	}
	u.writeStatus(cfg)
	return err
}

// sshAddr is where the router's SSH listens: the LAN address, or every
// address (dialled on the loopback) when the WAN may reach it.
func sshAddr(s *site.Site) string {
	port := s.SSH.SSHPort()
	if lan, err := s.LAN.Address.Prefix(); err == nil && lan.IsValid() && !slices.Contains(s.Firewall.WANServices, "ssh") {
		return netip.AddrPortFrom(lan.Addr(), uint16(port)).String()
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// sshAnswers dials the router's SSH and reads the banner.
func sshAnswers(ctx context.Context, addr string) error {
	var last error
	for {
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 4)
			_, err = io.ReadFull(conn, buf)
			conn.Close()
			if err == nil && string(buf) == "SSH-" {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("%s answers %q, not SSH", addr, buf)
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %v", addr, last)
		case <-time.After(2 * time.Second):
		}
	}
}

// Tally is this boot's self-test tally, which a new system must match.
func (o *Outcome) Tally() upgrade.Tally {
	if o.Report == nil {
		return upgrade.Tally{}
	}
	t := report.TallyOf(o.Report.SelfTest)
	return upgrade.Tally{Passed: t.Passed, Failed: t.Failed}
}
