// Package boardvm boots an ocfw image in QEMU the way its board would boot
// it, with the console here, and reads back what the boot left on the
// image. It is what `ocfw run` and `ocfw try` use; package firmware only
// lays out, inspects and flashes images.
//
// The firmware writes into its card (reports, host key, an upgrade's
// slot), so Run never boots the image itself unless asked (Persist): it
// boots the card kept beside the image (OpenCard, what ocfw run does),
// or else a copy. The image stays byte-identical to its manifest and
// sha256sums, ready for `ocfw flash`.
package boardvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
)

// RunOptions say how to boot an image in QEMU.
type RunOptions struct {
	// Timeout is the watchdog: a guest still running after it (a silent
	// hang, or a boot that never finishes) is killed and Run returns a
	// *WatchdogError. 0 means qemu.DefaultTimeout; negative, no watchdog
	// (for a person at the console).
	Timeout time.Duration
	// Until ends the run as soon as the console shows this text.
	Until string
	// PoweroffAfterReport types `poweroff` at the shell once the boot
	// sequence is done, so a scripted run ends by itself.
	PoweroffAfterReport bool
	// Console gets the guest's serial console as it comes, through a
	// TermFilter: without the sequences that would reset or reconfigure
	// the user's terminal.
	Console io.Writer
	// Input, when set, is typed on the guest's console (a terminal's
	// keystrokes for interactive use).
	Input io.Reader
	// MemoryMB overrides the board's RAM.
	MemoryMB int
	// Persist boots the image itself, as a board would: the boot writes
	// its report into the image, which then no longer matches its
	// manifest and sha256sums (`ocfw flash` refuses it). By default Run
	// boots a copy and reads the report back from the copy.
	Persist bool
	// KeepCopy, when set, is where the copy goes; it stays after the run
	// (for `ocfw inspect`, or more boots with Persist). "" means a
	// temporary file, removed after the run. Ignored with Persist.
	KeepCopy string
	// Network wires the board's ports (see NICs).
	Network Network
	// StandInSaid says the caller already told the user what the
	// stand-in does not prove (try does, before its build): Log then
	// gets the QEMU command line without that list again.
	StandInSaid bool
	// Card, when set, is the card kept beside the image (OpenCard):
	// booted instead of a copy, so everything the board writes on it
	// stays for the next run. Ignored with Persist and KeepCopy.
	Card *Card
	// Log gets a line for each port saying what it is wired to, and for
	// a stand-in image the QEMU command line.
	Log func(format string, args ...any)
	// Script, when set, runs once the boot sequence is done (the
	// console showed plan.MarkDone), before PoweroffAfterReport types
	// poweroff: it drives the shell (tests type commands and check
	// what comes back). Its error ends the run.
	Script func(ctx context.Context, vm *qemu.VM) error
}

// RunResult is what a run left behind.
type RunResult struct {
	Board   string
	Console string
	// Report is the newest report on the image's data partition after the
	// run, nil when the run wrote none.
	Report *report.Report
	// NewReport says whether Report was written by this run.
	NewReport bool
	Elapsed   time.Duration
	// Booted is the file QEMU booted: the image with Persist, else the
	// copy (already removed unless it was RunOptions.KeepCopy).
	Booted string
	// Copy says whether Booted is a copy of the image.
	Copy bool
	// State is the kept card booted (RunOptions.Card), and StateLoaded
	// whether an earlier run had written it.
	State       string
	StateLoaded bool
	// StandIn is the QEMU machine an IXP4xx board's stand-in image
	// booted on (e.g. raspi1ap); "" for an image of the board itself.
	StandIn string
}

// WatchdogError is a guest killed by the watchdog (RunOptions.Timeout).
// Its message ends with the watchdog's verdict, after the last console
// lines: a tail ending in the shell's prompt must not look like a live
// guest.
type WatchdogError struct {
	After time.Duration
	Tail  string // the last console lines, as the guest printed them
}

func (e *WatchdogError) Error() string {
	var b strings.Builder
	b.WriteString("the guest's last console lines:\n")
	for _, line := range strings.Split(Sanitize(e.Tail), "\n") {
		b.WriteString("  | " + line + "\n")
	}
	fmt.Fprintf(&b, "watchdog fired after %v (--timeout): the guest was killed; a hang prints nothing, so the lines above are the last it got to", e.After)
	return b.String()
}

// ErrNoReport is returned when a run that should have written a report
// (PoweroffAfterReport) left none on the data partition.
var ErrNoReport = errors.New("no new report on the image's data partition")

// Run boots an x86 CF image the way the board would: QEMU's emulated
// Pentium II has no SSE2, like the Geode LX, so a userland built without
// softfloat dies here as it would there; the board's RAM; the image (by
// default a copy of it, see RunOptions.Persist) as the first IDE disk;
// the serial console on Console. An IXP4xx image built for the ARM
// stand-in (plan.BootQEMUARM) boots on the plan's QEMU machine instead:
// the kernel, device tree and initramfs beside the image, the image (or
// its copy) as the machine's SD card; Log gets what the stand-in does not
// prove and the QEMU command line.
func Run(ctx context.Context, image string, opt RunOptions) (*RunResult, error) {
	info, err := firmware.Inspect(image)
	if err != nil {
		return nil, err
	}
	if info.Manifest == nil || info.Manifest.Plan == nil {
		return nil, fmt.Errorf("%s: no ocfw manifest in or beside the image: build it with ocfw build", image)
	}
	pl := info.Manifest.Plan
	if pl.Boot != plan.BootBIOSCF && pl.Boot != plan.BootQEMUARM {
		return nil, fmt.Errorf("%s: a %s image for %s: QEMU has no IXP4xx machine, so it runs x86 CF images (bios-cf) and IXP4xx firmware built for its ARM stand-in (ocfw build --stand-in); write this one to the board", image, pl.Boot, pl.Board)
	}
	var side firmware.StandInFiles
	if pl.Boot == plan.BootQEMUARM {
		if pl.StandIn == nil {
			return nil, fmt.Errorf("%s: a %s image whose plan names no stand-in machine", image, pl.Boot)
		}
		side = firmware.StandInSidecars(image)
		for _, f := range []string{side.Kernel, side.DTB, side.Initramfs} {
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("%s: the stand-in boots the kernel, device tree and initramfs built beside the image: %w", image, err)
			}
		}
	}
	before := latestBoot(info)
	mem := opt.MemoryMB
	if mem == 0 {
		mem = pl.RAMMB
	}
	disk := image
	stateLoaded := false
	switch {
	case opt.Persist:
	case opt.Card != nil && opt.KeepCopy == "":
		disk, stateLoaded = opt.Card.Path, opt.Card.Kept
		if kept, err := firmware.Inspect(disk); err == nil {
			before = latestBoot(kept) // the boot counter to compare with is the card's
		}
	default:
		var remove func()
		disk, remove, err = copyForBoot(image, opt.KeepCopy)
		if err != nil {
			return nil, err
		}
		defer remove()
	}
	// Deferred after the copy's removal, so it runs first: QEMU lets go
	// of the disk before it is removed.
	var echo io.Writer
	if opt.Console != nil {
		echo = NewTermFilter(opt.Console)
	}
	var site *site.Site
	if len(pl.Ports) > 0 && !opt.Network.None {
		read := firmware.ImageSite
		if pl.StandIn != nil {
			read = firmware.StandInSite
		}
		if site, err = read(image); err != nil {
			return nil, err
		}
	}
	nics, notes, err := NICs(pl, site, opt.Network)
	if err != nil {
		return nil, err
	}
	if opt.Log != nil {
		for _, n := range notes {
			opt.Log("%s", n)
		}
	}
	devices, notes := StandInArgs(pl)
	if opt.Log != nil {
		for _, n := range notes {
			opt.Log("%s", n)
		}
	}
	qc := x86Config(pl, mem, disk, nics, devices)
	if pl.StandIn != nil {
		// The stand-in keeps -no-reboot: its power-off does not stop
		// QEMU, so a scripted run ends it with a restart (stopCommand).
		qc, err = standInConfig(pl, side, disk, nics, opt)
		if err != nil {
			return nil, err
		}
	}
	qc.Timeout, qc.Echo = opt.Timeout, echo
	vm, err := qemu.Start(ctx, qc)
	if err != nil {
		return nil, err
	}
	defer vm.Kill()
	res := &RunResult{Board: pl.Board, Booted: disk, Copy: !opt.Persist, StateLoaded: stateLoaded}
	if opt.Card != nil && disk == opt.Card.Path {
		res.State = disk
	}
	if pl.StandIn != nil {
		res.StandIn = pl.StandIn.Machine
	}
	if opt.Input != nil {
		go forward(vm, opt.Input)
	}
	switch {
	case opt.Until != "":
		err = vm.WaitFor(ctx, opt.Until)
		vm.Kill()
	case opt.PoweroffAfterReport || opt.Script != nil:
		if err = vm.WaitFor(ctx, plan.MarkDone); err == nil {
			// Give the shell a moment to take the console.
			time.Sleep(500 * time.Millisecond)
			if opt.Script != nil {
				err = opt.Script(ctx, vm)
			}
			switch {
			case err != nil:
			case opt.PoweroffAfterReport:
				if err = vm.Send(stopCommand(pl)); err == nil {
					err = vm.Wait()
				}
			default:
				err = vm.Wait()
			}
		}
	default:
		err = vm.Wait()
	}
	res.Console, res.Elapsed = vm.Console(), vm.Elapsed()
	if err != nil {
		var te *qemu.TimeoutError
		if errors.As(err, &te) {
			return res, &WatchdogError{After: te.After, Tail: qemu.TailLines(res.Console, 20)}
		}
		return res, err
	}
	vm.Kill() // QEMU must have let go of the image before we read it
	after, err := firmware.Inspect(disk)
	if err != nil {
		return res, fmt.Errorf("reading the report back: %w", err)
	}
	if len(after.Reports) > 0 && after.Reports[0].Report != nil {
		res.Report = after.Reports[0].Report
		res.NewReport = after.Reports[0].Boot > before
	}
	if opt.PoweroffAfterReport && !res.NewReport {
		why := "the boot did not write one"
		if r, ok := ramReason(res.Console); ok {
			why = "the firmware kept it in RAM only: " + r
			if r == "" {
				why = "the firmware kept it in RAM only (the console gave no reason)"
			}
		}
		return res, fmt.Errorf("%w: %s", ErrNoReport, why)
	}
	return res, nil
}

// standInConfig is the emulator configuration for a stand-in image: the
// plan's QEMU machine booting the kernel, device tree and initramfs beside
// the image, with the image (or its copy) as the machine's SD card and
// nics, the ports' cards, as its USB network cards.
func standInConfig(pl *plan.Plan, side firmware.StandInFiles, disk string, nics []qemu.NIC, opt RunOptions) (qemu.Config, error) {
	s := qemu.RaspiStandIn
	if pl.StandIn.Machine != s.Machine {
		return qemu.Config{}, fmt.Errorf("the image's plan names the stand-in machine %s; this ocfw runs %s", pl.StandIn.Machine, s.Machine)
	}
	if err := s.CheckDisk(disk); err != nil {
		return qemu.Config{}, err
	}
	c, err := s.PlugNICs(s.Config(side.Kernel, side.DTB, side.Initramfs, pl.StandIn.Cmdline, disk), nics)
	if err != nil {
		return c, err
	}
	if opt.MemoryMB != 0 && opt.MemoryMB != c.MemoryMB {
		return qemu.Config{}, fmt.Errorf("--memory %d: QEMU's %s has %d MiB, no other size", opt.MemoryMB, s.Machine, c.MemoryMB)
	}
	if opt.Log != nil {
		if !opt.StandInSaid {
			opt.Log("%s: booting on the stand-in %s; what it does not prove about the board:", pl.Board, pl.StandIn.Name)
			for _, l := range pl.StandIn.Limits {
				opt.Log("  - %s", l)
			}
		}
		opt.Log("%s", c)
	}
	return c, nil
}

// StandInArgs are the emulator options that create the devices of the
// plan's engines that exist only in QEMU (the virtio-crypto card), once
// per engine, and a note for each; none for a plan without them.
func StandInArgs(pl *plan.Plan) (args []string, notes []string) {
	seen := map[string]bool{}
	for _, pe := range pl.Engines {
		e, ok := catalog.LookupEngine(pe.ID)
		if !ok || !e.Emulated() || seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		args = append(args, e.QEMU...)
		notes = append(notes, fmt.Sprintf("engine %s: QEMU device attached (%s)", e.ID, strings.Join(e.QEMU, " ")))
	}
	return args, notes
}

// ramReason finds the firmware's last "report kept in RAM only: <why>"
// line on the console and returns <why>.
func ramReason(console string) (why string, found bool) {
	i := strings.LastIndex(console, plan.MarkReportRAM)
	if i < 0 {
		return "", false
	}
	why = console[i+len(plan.MarkReportRAM):]
	if j := strings.IndexAny(why, "\r\n"); j >= 0 {
		why = why[:j]
	}
	return strings.TrimSpace(why), true
}

// copyForBoot copies image to keep, or to a new temporary file when keep
// is "", and returns the copy's path and how to clean up after the run
// (remove a temporary copy; a kept one stays).
func copyForBoot(image, keep string) (string, func(), error) {
	src, err := os.Open(image)
	if err != nil {
		return "", nil, err
	}
	defer src.Close()
	var dst *os.File
	if keep == "" {
		dst, err = os.CreateTemp("", "ocfw-run-*.img")
	} else {
		if fi, serr := os.Stat(keep); serr == nil {
			if si, _ := src.Stat(); si != nil && os.SameFile(fi, si) {
				return "", nil, fmt.Errorf("--keep-copy %s is the image itself: name another file, or boot the image in place with --persist", keep)
			}
		}
		dst, err = os.OpenFile(keep, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	}
	if err != nil {
		return "", nil, fmt.Errorf("a copy of the image to boot: %w", err)
	}
	name := dst.Name()
	if err := copySparse(dst, src); err != nil {
		dst.Close()
		os.Remove(name)
		return "", nil, fmt.Errorf("copying %s to %s to boot it: %w", image, name, err)
	}
	if err := dst.Close(); err != nil {
		os.Remove(name)
		return "", nil, err
	}
	if keep != "" {
		return name, func() {}, nil
	}
	return name, func() { os.Remove(name) }, nil
}

func latestBoot(info *firmware.Info) int {
	if len(info.Reports) == 0 {
		return 0
	}
	return info.Reports[0].Boot
}

func forward(vm *qemu.VM, in io.Reader) {
	buf := make([]byte, 256)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if vm.Send(string(buf[:n])) != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hasModule says whether the plan loads the module.
// x86Config is the PC an x86 image boots on. The watchdog an upgrade's
// trial pets, when the image carries its driver: a hung trial then
// resets. A reset (the watchdog's, the guest's reboot, an upgrade's)
// boots the card again in the same run, as the board's own reset does;
// only a power-off ends it.
func x86Config(pl *plan.Plan, mem int, disk string, nics []qemu.NIC, devices []string) qemu.Config {
	return qemu.Config{Arch: "i386", MemoryMB: mem, Disk: disk, NICs: nics, Args: devices, Watchdog: hasModule(pl, catalog.QEMUWatchdog), Reboot: true}
}

func hasModule(pl *plan.Plan, name string) bool {
	for _, m := range pl.Modules {
		if m.Name == name {
			return true
		}
	}
	return false
}
