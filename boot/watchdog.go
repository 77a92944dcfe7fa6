package boot

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The trial's watchdog. A new system's one-time boot (an upgrade's
// trial) opens the hardware watchdog, /dev/watchdog, as soon as the plan's
// modules are loaded (geodewdt on the Geode boards, i6300esb under QEMU:
// plan.Module.IfDevice), and the daemon pets it until the trial ends:
// committed, it closes it with the magic 'V', which stops it; failed, it
// resets the board itself and the watchdog only backs that reset up. So a
// hang anywhere in the trial — a kernel that stops, a step that never
// returns — resets the board, and the loader boots the old system.
//
// Normal operation is not watched: the drivers start the timer only when
// /dev/watchdog is opened, and an old, proven system never opens it (a
// watchdog petted by a process that can hang on its own would reset a
// working router for a bug in the petting).
const (
	// WatchdogTimeout is the hardware timeout the trial sets: a hung
	// system resets within it. Within what both drivers take (geodewdt
	// up to 131 s) and well above a pet's lateness on a loaded machine.
	WatchdogTimeout = 60 * time.Second
	// WatchdogPet is how often the trial pets it.
	WatchdogPet = 10 * time.Second
	// TrialLimit bounds the whole trial: the petting stops this long
	// after the watchdog was opened, committed or not, so a trial stuck
	// with its petting goroutine alive still resets. A trial takes the
	// boot sequence (under a minute on the board, a few under QEMU
	// TCG) plus at most 4 minutes of checks.
	TrialLimit = 15 * time.Minute
)

// WatchdogDevice is the hardware watchdog's device.
const WatchdogDevice = "/dev/watchdog"

// Watchdog is an opened hardware watchdog, petted until Disarm or its
// limit.
type Watchdog struct {
	f       *os.File
	Timeout time.Duration // what the driver took (0: unknown, its default)
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	// disarmed is set by run before done closes: the magic close was
	// written.
	disarmed bool
}

// ArmWatchdog opens dev, sets its timeout, and pets it every pet until
// limit has passed or Disarm is called. The driver starts the timer at
// the open.
func ArmWatchdog(dev string, timeout, pet, limit time.Duration) (*Watchdog, error) {
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	w := &Watchdog{f: f, stop: make(chan struct{}), done: make(chan struct{})}
	secs := int(timeout / time.Second)
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.WDIOC_SETTIMEOUT, secs); err == nil {
		if got, err := unix.IoctlGetInt(int(f.Fd()), unix.WDIOC_GETTIMEOUT); err == nil {
			w.Timeout = time.Duration(got) * time.Second
		}
	}
	tick := time.NewTicker(pet)
	expired := time.NewTimer(limit)
	go func() {
		defer tick.Stop()
		defer expired.Stop()
		w.run(tick.C, expired.C)
	}()
	return w, nil
}

// run pets at each tick until stop (then the magic close) or expired
// (then nothing more: the timer runs out and the board resets).
func (w *Watchdog) run(tick, expired <-chan time.Time) {
	defer close(w.done)
	w.f.Write([]byte{0})
	for {
		select {
		case <-w.stop:
			// 'V' then close: the driver stops the timer.
			w.f.Write([]byte("V"))
			w.f.Close()
			w.disarmed = true
			return
		case <-expired:
			return // the file stays open, unpetted
		case <-tick:
			w.f.Write([]byte{0})
		}
	}
}

// Disarm stops the petting and the watchdog (the magic close). After the
// limit it is too late: the reset is coming, and Disarm says so.
func (w *Watchdog) Disarm() error {
	if w == nil {
		return nil
	}
	w.once.Do(func() { close(w.stop) })
	<-w.done
	if !w.disarmed {
		return fmt.Errorf("the trial's limit (%v) passed before it ended: the watchdog resets the board", TrialLimit)
	}
	return nil
}

// String says what was armed, for the console.
func (w *Watchdog) String() string {
	if w.Timeout == 0 {
		return fmt.Sprintf("watchdog armed (the driver's timeout), petted every %v for at most %v", WatchdogPet, TrialLimit)
	}
	return fmt.Sprintf("watchdog armed (%v), petted every %v for at most %v", w.Timeout, WatchdogPet, TrialLimit)
}
