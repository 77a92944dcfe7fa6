package ocf

import (
	"fmt"
	"io"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// DriverStats is a snapshot of one driver's counters in a Dispatcher.
type DriverStats struct {
	Driver   string `json:"driver"`
	Hardware bool   `json:"hardware"`
	// Requests and Bytes count requests the driver was given (Bytes is
	// the sum of len(Src)).
	Requests uint64 `json:"requests"`
	Bytes    uint64 `json:"bytes"`
	// Errors counts requests that came back with an error: for an engine,
	// errors that were then redone in software; for the fallback, errors
	// the caller got (mostly bad requests).
	Errors uint64 `json:"errors"`
	// Fallbacks counts engine requests redone in software (after an
	// error, a timeout or a mismatch).
	Fallbacks uint64 `json:"fallbacks"`
	// Timeouts counts engine batches that did not finish in time.
	Timeouts uint64 `json:"timeouts"`
	// Verified counts engine results recomputed in software, Mismatches
	// those that differed.
	Verified   uint64 `json:"verified"`
	Mismatches uint64 `json:"mismatches"`
	// Time is the wall time spent in the driver, measured only when the
	// dispatcher's timing is on (like FreeBSD's kern.crypto_timing,
	// because reading the clock costs as much as a small request).
	Time time.Duration `json:"time_ns"`
	// Failed is why the dispatcher stopped using the driver, if it did.
	Failed string `json:"failed,omitempty"`
}

// Stats is a snapshot of every driver in a Dispatcher, engines first and
// the software fallback last. The fallback's counts may lag by up to 63
// error-free requests per open session (see counters).
type Stats []DriverStats

// counters are one driver's live statistics. Sessions add their counts at
// the end of each Do call that used an engine or had an error, so one batch
// costs a few atomic adds however many requests it holds; batches that ran
// wholly and successfully in software are published every 64 requests and
// when the session closes.
type counters struct {
	requests, bytes, errors, fallbacks, timeouts atomic.Uint64
	verified, mismatches, nanos                  atomic.Uint64
}

// tally is a session's uncommitted counts for one driver.
type tally struct {
	requests, bytes, errors, fallbacks, timeouts, verified, mismatches, nanos uint64
}

func (c *counters) add(t *tally) {
	if t.requests != 0 {
		c.requests.Add(t.requests)
		c.bytes.Add(t.bytes)
	}
	if t.errors|t.fallbacks|t.timeouts|t.verified|t.mismatches|t.nanos != 0 {
		c.errors.Add(t.errors)
		c.fallbacks.Add(t.fallbacks)
		c.timeouts.Add(t.timeouts)
		c.verified.Add(t.verified)
		c.mismatches.Add(t.mismatches)
		c.nanos.Add(t.nanos)
	}
	*t = tally{}
}

func (c *counters) snapshot(name string, hw bool) DriverStats {
	return DriverStats{
		Driver:     name,
		Hardware:   hw,
		Requests:   c.requests.Load(),
		Bytes:      c.bytes.Load(),
		Errors:     c.errors.Load(),
		Fallbacks:  c.fallbacks.Load(),
		Timeouts:   c.timeouts.Load(),
		Verified:   c.verified.Load(),
		Mismatches: c.mismatches.Load(),
		Time:       time.Duration(c.nanos.Load()),
	}
}

// Write prints s as an aligned table in the spirit of FreeBSD's
// cryptostats: one line per driver, counters in columns, failed drivers
// flagged with the reason.
func (s Stats) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "driver\thw\trequests\tbytes\terrors\tfallbacks\ttimeouts\tverified\tmismatches\ttime\tus/req\t")
	for _, d := range s {
		hw := "no"
		if d.Hardware {
			hw = "yes"
		}
		tm, per := "-", "-"
		if d.Time > 0 {
			tm = d.Time.Round(time.Microsecond).String()
			if d.Requests > 0 {
				per = fmt.Sprintf("%.2f", float64(d.Time)/float64(time.Microsecond)/float64(d.Requests))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n",
			d.Driver, hw, d.Requests, d.Bytes, d.Errors, d.Fallbacks, d.Timeouts, d.Verified, d.Mismatches, tm, per)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range s {
		if d.Failed != "" {
			if _, err := fmt.Fprintf(w, "%s: failed: %s\n", d.Driver, d.Failed); err != nil {
				return err
			}
		}
	}
	return nil
}
