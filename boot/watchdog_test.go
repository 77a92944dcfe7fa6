package boot

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The trial's watchdog: petted at each tick, stopped by the magic 'V' on
// Disarm; once its limit passes it is petted no more and Disarm says the
// reset is coming.
func TestWatchdogPetting(t *testing.T) {
	for _, tc := range []struct {
		name       string
		expire     bool
		want       string
		disarmFail bool
	}{
		{"disarmed", false, "\x00\x00\x00V", false},
		{"limit passed", true, "\x00\x00\x00", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := filepath.Join(t.TempDir(), "watchdog")
			f, err := os.Create(dev)
			if err != nil {
				t.Fatal(err)
			}
			w := &Watchdog{f: f, stop: make(chan struct{}), done: make(chan struct{})}
			tick := make(chan time.Time)
			expired := make(chan time.Time, 1)
			go w.run(tick, expired)
			tick <- time.Time{} // each send returns once run took it
			tick <- time.Time{}
			if tc.expire {
				expired <- time.Time{}
				<-w.done
			}
			err = w.Disarm()
			if (err != nil) != tc.disarmFail {
				t.Errorf("Disarm: %v", err)
			}
			got, _ := os.ReadFile(dev)
			if string(got) != tc.want {
				t.Errorf("written %q, want %q", got, tc.want)
			}
		})
	}
}

// ArmWatchdog on something that takes no watchdog ioctls (a plain file)
// still pets it, at the driver's own timeout; no device, no watchdog.
func TestArmWatchdog(t *testing.T) {
	if _, err := ArmWatchdog(filepath.Join(t.TempDir(), "none"), WatchdogTimeout, WatchdogPet, TrialLimit); err == nil {
		t.Error("a watchdog without a device")
	}
	dev := filepath.Join(t.TempDir(), "watchdog")
	if err := os.WriteFile(dev, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := ArmWatchdog(dev, WatchdogTimeout, time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if w.Timeout != 0 {
		t.Errorf("timeout %v from a plain file", w.Timeout)
	}
	if err := w.Disarm(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dev); string(got) != "\x00V" {
		t.Errorf("written %q, want a pet at the open and the magic close", got)
	}
}
