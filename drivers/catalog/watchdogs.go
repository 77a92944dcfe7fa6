package catalog

// Watchdog is a hardware watchdog driver a board profile may name: loaded,
// it gives the board /dev/watchdog, which a new system's one-time boot
// (ocfw upgrade's trial) keeps petting, so that a hang in the trial ends
// in a reset into the old system.
type Watchdog struct {
	// Module is the driver (as modprobe names it).
	Module string `json:"module"`
	// LoadFirst are the drivers that create its device, loaded by name so
	// that the kernel command line's options reach them (the Geode's
	// MFGPT is a function of the CS5535/CS5536 companion chip).
	LoadFirst []string `json:"load_first,omitempty"`
	// Timer is the hardware, for people.
	Timer string `json:"timer"`
	// MaxTimeout is the longest timeout the driver accepts.
	MaxTimeoutSeconds int `json:"max_timeout_seconds"`
}

// watchdogs are the boards' watchdogs and QEMU's.
var watchdogs = []Watchdog{
	{Module: "geodewdt", LoadFirst: []string{"cs5535_mfd", "cs5535_mfgpt"}, Timer: "a CS5535/CS5536 MFGPT timer (the ALIX and net5501 companion chip)", MaxTimeoutSeconds: 131},
	{Module: "i6300esb", Timer: "QEMU's Intel 6300ESB (-device i6300esb)", MaxTimeoutSeconds: 2046},
}

// QEMUWatchdog is the watchdog module x86 images carry for QEMU (ocfw
// run and the VM tests attach -device i6300esb).
const QEMUWatchdog = "i6300esb"

// LookupWatchdog finds a watchdog driver by module name.
func LookupWatchdog(module string) (*Watchdog, bool) {
	m := normalModule(module)
	for i := range watchdogs {
		if watchdogs[i].Module == m {
			return &watchdogs[i], true
		}
	}
	return nil, false
}

// WatchdogModules lists the watchdog modules the catalog knows.
func WatchdogModules() []string {
	var out []string
	for _, w := range watchdogs {
		out = append(out, w.Module)
	}
	return out
}
