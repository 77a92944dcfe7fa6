// Package report joins what the firmware learns at boot — self-test
// results, the speed table, the hardware/software policy derived from
// them, and the environment they were measured in — into one document,
// as text for the console and JSON for the card.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
)

// Version of the JSON layout: 2 added engine_choice (what the boot did
// to the kernel's engine choice), 3 esp (ESP throughput per engine, the
// engine choice's basis), 4 tunnels (the tunnels' state once they
// settled). Read takes every version from MinVersion on: a field a
// version added is absent from older reports.
const Version = 4

// MinVersion is the oldest layout Read accepts.
const MinVersion = 1

// Environment is where the report was made.
type Environment struct {
	Kernel    string `json:"kernel"`
	CPU       string `json:"cpu"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"go_version"`
	Board     string `json:"board,omitempty"`
	// Machine is the firmware's (DMI) vendor and product when it has
	// them: "QEMU Standard PC (i440FX + PIIX, 1996)" under QEMU, so a
	// report from an emulator says so.
	Machine string   `json:"machine,omitempty"`
	Engines []Engine `json:"engines"`
}

// Emulated reports whether the report was made under QEMU.
func (e Environment) Emulated() bool { return strings.Contains(e.Machine, "QEMU") }

// Engine is one engine as found on the system.
type Engine struct {
	ID       string `json:"id,omitempty"` // catalog id, when known
	Driver   string `json:"driver"`
	Module   string `json:"module,omitempty"`
	Priority int    `json:"priority,omitempty"`
	Present  bool   `json:"present"`
}

// Report is one boot's (or one host run's) findings.
type Report struct {
	Version  int               `json:"version"`
	Boot     int               `json:"boot,omitempty"` // boot counter on the card
	Env      Environment       `json:"environment"`
	SelfTest []selftest.Result `json:"selftest"`
	Speed    []speed.Row       `json:"speed"`
	// DevCryptoSpeed is the speed through /dev/crypto (cryptodev.ko),
	// one row per cipher for the kernel driver that answered, named
	// "/dev/crypto:DRIVER" like its self-test row. Apart from Speed so
	// no policy is derived from it: /dev/crypto is a path to an engine,
	// not one ocf's dispatcher can pick. Nil without /dev/crypto.
	DevCryptoSpeed []speed.Row `json:"devcrypto_speed,omitempty"`
	Policy         ocf.Policy  `json:"policy"`
	// EngineChoice is what the boot did to the kernel crypto API's
	// choice of engine (version 2; nil from a host run or an older
	// report).
	EngineChoice *EngineChoice `json:"engine_choice,omitempty"`
	// ESP is the boot's ESP throughput per engine and what the engine
	// choice was based on (version 3; nil from a host run, an older
	// report, or a boot that did not get to it).
	ESP *ESP `json:"esp,omitempty"`
	// Tunnels is the tunnels' state once the IKEv2 tunnels settled
	// (version 4; nil in the report as first written, from a site
	// without IKEv2 tunnels, or from an older report).
	Tunnels *Tunnels `json:"tunnels,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// Failed reports whether any present engine failed its self-test.
func (r *Report) Failed() bool {
	for _, t := range r.SelfTest {
		if t.Status == selftest.Fail {
			return true
		}
	}
	return false
}

// Tally is how many self-test results passed, failed and were absent
// (anything neither passed nor failed counts as absent).
type Tally struct {
	Passed, Failed, Absent int
}

// String is the tally as every summary line says it.
func (t Tally) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d absent", t.Passed, t.Failed, t.Absent)
}

// TallyOf counts results.
func TallyOf(results []selftest.Result) Tally {
	var t Tally
	for _, r := range results {
		switch r.Status {
		case selftest.Pass:
			t.Passed++
		case selftest.Fail:
			t.Failed++
		default:
			t.Absent++
		}
	}
	return t
}

// Tally counts the report's self-test results.
func (r *Report) Tally() Tally { return TallyOf(r.SelfTest) }

// HostEnvironment describes the machine this process runs on.
func HostEnvironment() Environment {
	env := Environment{GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		env.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				env.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	var dmi []string
	for _, f := range []string{"sys_vendor", "product_name"} {
		if b, err := os.ReadFile("/sys/class/dmi/id/" + f); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			dmi = append(dmi, strings.TrimSpace(string(b)))
		}
	}
	env.Machine = strings.Join(dmi, " ")
	return env
}

// DefaultMargin is ocf.DefaultMargin.
const DefaultMargin = ocf.DefaultMargin

// DerivePolicy derives the policy (ocf.DerivePolicy) from self-test
// results and speed rows, Go software being the reference. Rows that
// ended in an error count only up to the last size measured.
func DerivePolicy(tests []selftest.Result, rows []speed.Row, margin float64) ocf.Policy {
	return Derive(tests, rows, nil, margin).Dispatcher
}

// Measurements are the speed rows as the policy reads them (and
// kcrypto.Promote, to rank engines beyond the policy's choice). A row
// that ended in an error proves nothing about the sizes it skipped: it
// has no measurements, so the engine is not chosen on it.
func Measurements(rows []speed.Row) []ocf.Measurement {
	var ms []ocf.Measurement
	for _, r := range rows {
		if r.Err != "" {
			r.Cells = nil
		}
		m := ocf.Measurement{Engine: r.Engine, Cipher: r.Cipher, Hardware: r.Hardware}
		for _, c := range r.Cells {
			m.Sizes = append(m.Sizes, c.Size)
			m.KBps = append(m.KBps, c.KBps)
		}
		ms = append(ms, m)
	}
	return ms
}

// JSON renders the report, indented, with a trailing newline.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Read parses a report written by JSON, refusing other documents.
func Read(rd io.Reader) (*Report, error) {
	dec := json.NewDecoder(rd)
	var r Report
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("not an ocfw report: %w", err)
	}
	if r.Version < MinVersion || r.Version > Version {
		return nil, fmt.Errorf("report version %d: this ocfw reads versions %d to %d", r.Version, MinVersion, Version)
	}
	return &r, nil
}

// WriteText prints the report as the console shows it: environment,
// self-test summary, speed table, policy.
func (r *Report) WriteText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ocfw crypto report")
	if r.Env.Board != "" {
		fmt.Fprintf(&b, ", %s", r.Env.Board)
	}
	if r.Boot > 0 {
		fmt.Fprintf(&b, ", boot %d", r.Boot)
	}
	if r.Env.Machine != "" {
		fmt.Fprintf(&b, ", on %s", r.Env.Machine)
	}
	fmt.Fprintf(&b, "\nkernel %s, %s, %s (%s)\n", orDash(r.Env.Kernel), orDash(r.Env.CPU), r.Env.GOARCH, r.Env.GoVersion)
	for _, e := range r.Env.Engines {
		state := "present"
		if !e.Present {
			state = "absent"
		}
		fmt.Fprintf(&b, "engine %-20s %-8s module %s\n", e.Driver, state, orDash(e.Module))
	}
	b.WriteString("\nself-test:\n")
	WriteSelfTest(&b, r.SelfTest)
	if len(r.Speed) > 0 {
		b.WriteString("\n")
		if err := speed.WriteTable(&b, r.Speed); err != nil {
			return err
		}
	}
	if len(r.DevCryptoSpeed) > 0 {
		b.WriteString("\nspeed through /dev/crypto (the kernel's driver on top per cipher; AF_ALG's columns are above):\n")
		if err := speed.WriteTable(&b, r.DevCryptoSpeed); err != nil {
			return err
		}
	}
	b.WriteString("\npolicy:\n")
	WritePolicy(&b, r.Policy)
	if r.ESP != nil {
		b.WriteString("\n")
		if err := WriteESP(&b, r.ESP); err != nil {
			return err
		}
	}
	if r.EngineChoice != nil {
		b.WriteString("\n")
		WriteEngineChoice(&b, r.EngineChoice)
	}
	if r.Tunnels != nil {
		b.WriteString("\n")
		WriteTunnels(&b, r.Tunnels)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteSelfTest prints one line per result and a summary line.
func WriteSelfTest(w io.Writer, results []selftest.Result) {
	for _, t := range results {
		line := fmt.Sprintf("  %-6s %-12s %-22s", strings.ToUpper(string(t.Status)), t.Cipher, t.Engine)
		switch t.Status {
		case selftest.Pass:
			line += fmt.Sprintf(" %d known answers, %d cross-checks, %d ms", t.KATs, t.CrossChecks, t.Millis)
		case selftest.Fail:
			if t.Failure != nil {
				line += " " + t.Failure.String()
			}
		case selftest.Absent:
			line += " " + t.Reason
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintf(w, "self-test: %s\n", TallyOf(results))
}

// WritePolicy prints a policy as `ocf policy` shows it.
func WritePolicy(w io.Writer, p ocf.Policy) {
	names := make([]string, 0, len(p.Ciphers))
	for c := range p.Ciphers {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		cp := p.Ciphers[c]
		switch {
		case cp.SoftwareOnly:
			fmt.Fprintf(w, "  %-12s software at every size\n", c)
		case cp.Driver != "":
			fmt.Fprintf(w, "  %-12s %s from %d bytes, software below\n", c, cp.Driver, cp.MinHardware)
		default:
			fmt.Fprintf(w, "  %-12s any engine from %d bytes\n", c, cp.MinHardware)
		}
	}
	failed := make([]string, 0, len(p.Failed))
	for e := range p.Failed {
		failed = append(failed, e)
	}
	sort.Strings(failed)
	for _, e := range failed {
		fmt.Fprintf(w, "  excluded %s: %s\n", e, p.Failed[e])
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
