package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Files the host writes into the initramfs, at these paths on the board.
const (
	// File is the firmware's plan, as Plan.JSON writes it.
	File = "/etc/ocfw/plan.json"
	// OptionsFile holds the boot Options.
	OptionsFile = "/etc/ocfw/boot.json"
	// StorageModulesFile lists the storage modules (disk controllers and
	// disks) loaded before looking for the data partition; one name a
	// line.
	StorageModulesFile = "/etc/ocfw/storage-modules"
)

// Where the board keeps what it writes.
const (
	RunDir    = "/run/ocfw" // RAM copy of the latest report and policy
	DataMount = "/data"     // where the data partition is mounted
	// DataLabel is the data partition's FAT label unless the board
	// profile names another.
	DataLabel = "OCFWDATA"
	// BootLabel is the FAT label of a CF image's boot partition.
	BootLabel = "OCFWBOOT"
	// ReportDir is the reports' folder on the data partition, from its
	// root (no leading slash).
	ReportDir = "ocfw"
	// PolicyFile is the RAM copy of the policy the last boot derived.
	PolicyFile = RunDir + "/policy.json"
)

// Console markers: the board prints them, runners and tests wait for
// these exact prefixes.
const (
	MarkReportWritten = "ocfw: report written: "
	MarkReportRAM     = "ocfw: report kept in RAM only: "
	MarkSelfTest      = "ocfw: self-test: "
	MarkDone          = "ocfw: boot sequence done; shell on console"
	// MarkDaemonDied begins the line ocf boot prints when the daemon
	// ended before the boot sequence was done (its status follows). What
	// the daemon itself last said is on the lines before it.
	MarkDaemonDied = "ocfw: BUG: the firmware's daemon ended before the boot sequence was done"
)

// Options are the boot options the build writes as OptionsFile.
type Options struct {
	// SpeedBudget bounds the speed table, a Go duration ("20s"); "" means
	// the board's default, "0s" skips the speed table.
	SpeedBudget string `json:"speed_budget,omitempty"`
	// ESPBudget bounds the ESP throughput run (each engine that passed
	// through a real ESP tunnel), a Go duration; "" means the board's
	// default, "0s" skips it (the engine choice is then made on the
	// speed table).
	ESPBudget string `json:"esp_budget,omitempty"`
	// Inject adds a faulty test engine (test images only), e.g.
	// "corrupt:4096": see package ocf/fault.
	Inject []string `json:"inject,omitempty"`
	// TestWriteTime (test images only) stretches each write to the data
	// partition to about this long, a Go duration, so a test can cut the
	// power inside one.
	TestWriteTime string `json:"test_write_time,omitempty"`
	// TestBreak (test images only) breaks the system on purpose, so a
	// test can prove an upgrade to it is rolled back: one of TestBreaks.
	TestBreak string `json:"test_break,omitempty"`
}

// The test breaks (Options.TestBreak; ocfw build --test-inject).
const (
	// TestBreakInitExit: the initramfs's /init exits at once (it is
	// u-root's sync), so the kernel panics ("Attempted to kill init").
	TestBreakInitExit = "init-exit"
	// TestBreakHang: once the plan's modules are loaded (and a trial's
	// watchdog armed), the kernel is crashed with its panic reset turned
	// off: it stops for good, and only a hardware watchdog resets it.
	TestBreakHang = "kernel-hang"
	// TestBreakNoWAN: the router leaves the WAN port down, so the WAN
	// never gets an address.
	TestBreakNoWAN = "no-wan"
)

// TestBreaks are the valid TestBreak values.
var TestBreaks = []string{TestBreakInitExit, TestBreakHang, TestBreakNoWAN}

// TestWriteTimeOrZero is TestWriteTime parsed; 0 when unset or invalid.
func (o Options) TestWriteTimeOrZero() time.Duration {
	d, err := optionDuration("test_write_time", o.TestWriteTime, 0, "2s")
	if err != nil {
		return 0
	}
	return d
}

// SpeedBudgetOr is SpeedBudget parsed, def when unset; on an error
// (which names the field and what is valid) it is def too.
func (o Options) SpeedBudgetOr(def time.Duration) (time.Duration, error) {
	return optionDuration("speed_budget", o.SpeedBudget, def, "20s")
}

// ESPBudgetOr is ESPBudget parsed, def when unset; on an error it is def
// too.
func (o Options) ESPBudgetOr(def time.Duration) (time.Duration, error) {
	return optionDuration("esp_budget", o.ESPBudget, def, "8s")
}

// CheckDurations reports the first of the options' durations that does
// not parse: the host checks before it writes boot.json what the board
// will read with the same parser.
func (o Options) CheckDurations() error {
	if _, err := o.SpeedBudgetOr(0); err != nil {
		return err
	}
	if _, err := o.ESPBudgetOr(0); err != nil {
		return err
	}
	if _, err := optionDuration("test_write_time", o.TestWriteTime, 0, "2s"); err != nil {
		return err
	}
	if o.TestBreak != "" && !slices.Contains(TestBreaks, o.TestBreak) {
		return fmt.Errorf("boot options: test_break %q: want one of %s", o.TestBreak, strings.Join(TestBreaks, ", "))
	}
	return nil
}

// optionDuration is the one parser of boot.json's durations: a Go
// duration of zero or more, def when unset.
func optionDuration(field, s string, def time.Duration, example string) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return def, fmt.Errorf("boot options: %s %q: want a duration such as %s", field, s, example)
	}
	return d, nil
}

// MaxFileSize bounds every contract file read here: a plan is a few KiB,
// so anything bigger is not one, and reading stops there.
const MaxFileSize = 1 << 20

// Read reads a plan written by Plan.JSON.
func Read(name string) (*Plan, error) {
	data, err := readBounded(name)
	if err != nil {
		return nil, err
	}
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: not a plan written by ocfw: %w", name, err)
	}
	switch {
	case p.Version == 0:
		p.Version = 1 // written before plans had a version
	case p.Version > Version:
		return nil, fmt.Errorf("%s: plan version %d is newer than this ocfw reads (up to %d): use the ocfw that wrote it", name, p.Version, Version)
	}
	return &p, nil
}

// ReadOptions reads the boot options; a missing file means the defaults.
// Unknown fields are an error: a typo must not silently mean a default.
func ReadOptions(name string) (Options, error) {
	var o Options
	data, err := readBounded(name)
	if errors.Is(err, fs.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return o, err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return Options{}, fmt.Errorf("%s: %w", name, err)
	}
	return o, nil
}

// readBounded reads a regular file of at most MaxFileSize bytes. It opens
// without blocking, so a FIFO in its place is refused, not waited on.
func readBounded(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes: not an ocfw file", name, MaxFileSize)
	}
	return data, nil
}
