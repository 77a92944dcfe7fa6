package boot

import (
	"fmt"

	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/plan"
)

// KernelChoice changes the kernel crypto API's choice of engine: package
// kcrypto on the board; tests on a fake root give their own.
type KernelChoice interface {
	DemoteHardware(engines []kcrypto.HWEngine, ciphers []string) (*kcrypto.Outcome, error)
	Promote(in kcrypto.Input) (*kcrypto.Outcome, error)
}

type kernelChoice struct{}

// engineStep is what a step of the engine choice hands back.
type engineStep struct {
	choice *report.EngineChoice
	notes  []string
}

func (kernelChoice) DemoteHardware(e []kcrypto.HWEngine, c []string) (*kcrypto.Outcome, error) {
	return kcrypto.DemoteHardware(e, c)
}

func (kernelChoice) Promote(in kcrypto.Input) (*kcrypto.Outcome, error) { return kcrypto.Promote(in) }

// kernelChoice is cfg.Engines, or the running kernel's on the board. A
// test on a fake root without one leaves the host's kernel alone.
func (c *Config) kernelChoice() KernelChoice {
	if c.Engines != nil {
		return c.Engines
	}
	if c.Root == "" || c.Root == "/" {
		return kernelChoice{}
	}
	return nil
}

// trafficCiphers are the ciphers the kernel's own users will carry:
// Config.TrafficCiphers, else every cipher of the plan. The kernel
// chooses by name (aes-128/192/256-cbc all ask for cbc(aes)), so the
// fewer, the more often one engine can be the choice for a name.
func (c *Config) trafficCiphers(pl *plan.Plan) []string {
	if c.TrafficCiphers != nil {
		return c.TrafficCiphers
	}
	var out []string
	for _, pc := range pl.Ciphers {
		out = append(out, pc.Cipher)
	}
	return out
}

// demoteHardware puts every hardware engine of the plan below the
// kernel's software before any interface carries traffic: an engine is
// used by the kernel only once the self-test has proved it. Failures are
// notes; the boot goes on.
func demoteHardware(cfg *Config, pl *plan.Plan, ec *report.EngineChoice) (notes []string) {
	kc := cfg.kernelChoice()
	if kc == nil {
		return nil
	}
	engines := kcrypto.PlanEngines(pl)
	if len(engines) == 0 {
		cfg.printf("ocfw: engines: no hardware engine in the plan reached through the kernel crypto API: its choice is left alone")
		return nil
	}
	o, err := kc.DemoteHardware(engines, ec.Ciphers)
	ec.Demote = o
	if o != nil {
		printOutcome(cfg, o)
	}
	if err != nil {
		cfg.printf("ocfw: engines: demoting hardware failed: %v", err)
		return []string{"engine choice: demoting the hardware engines before the network failed: " + err.Error() +
			"; the kernel chooses by its drivers' own priorities"}
	}
	if o.Failed() {
		notes = append(notes, "engine choice: after demoting the hardware engines: "+choiceErrors(o))
	}
	return notes
}

// promoteEngines puts the engines the self-test passed in the order the
// policy and the measurements chose for the traffic's packets (ESP's at
// MTU size when the report has ESP rows, else the speed table's); failed
// and slower engines stay below software.
func promoteEngines(cfg *Config, pl *plan.Plan, r *report.Report, ec *report.EngineChoice) (notes []string) {
	kc := cfg.kernelChoice()
	if kc == nil || ec.Demote == nil {
		return nil
	}
	if len(r.SelfTest) == 0 {
		cfg.printf("ocfw: engines: no self-test results: every hardware engine stays below software")
		return []string{"engine choice: no self-test results, so no engine was promoted: hardware stays below software"}
	}
	policy, speeds := espChoiceInput(r)
	o, err := kc.Promote(kcrypto.Input{
		Engines: kcrypto.PlanEngines(pl),
		Policy:  policy,
		Speeds:  speeds,
		Ciphers: ec.Ciphers,
		Size:    ec.Size,
	})
	ec.Promote = o
	if o != nil {
		printOutcome(cfg, o)
	}
	if err != nil {
		cfg.printf("ocfw: engines: promoting failed: %v", err)
		return []string{"engine choice: promoting the engines that passed failed: " + err.Error()}
	}
	if o.Failed() {
		notes = append(notes, "engine choice: after promoting: "+choiceErrors(o))
	}
	return notes
}

// printOutcome says on the console what was demoted or promoted, and what
// the kernel resolves now.
func printOutcome(cfg *Config, o *kcrypto.Outcome) {
	for _, c := range o.Changes {
		switch {
		case c.Flush:
		case c.To < c.From:
			cfg.printf("ocfw: engines: demoted %s (%s) %d -> %d: %s", c.Driver, c.Name, c.From, c.To, c.Reason)
		default:
			cfg.printf("ocfw: engines: promoted %s (%s) %d -> %d: %s", c.Driver, c.Name, c.From, c.To, c.Reason)
		}
	}
	for _, c := range o.Kept {
		cfg.printf("ocfw: engines: %s (%s) stays demoted at %d: %s", c.Driver, c.Name, c.To, c.Reason)
	}
	for _, n := range o.Notes {
		cfg.printf("ocfw: engines: %s", n)
	}
	seen := map[string]bool{}
	for _, c := range o.Ciphers {
		if seen[c.Kernel] {
			continue
		}
		seen[c.Kernel] = true
		kind := "software"
		if c.Hardware {
			kind = "hardware"
		}
		switch {
		case c.Error != "":
			cfg.printf("ocfw: engines: %s: %s", c.Kernel, c.Error)
		default:
			cfg.printf("ocfw: engines: %s resolves to %s (%s, priority %d)", c.Kernel, c.Driver, kind, c.Priority)
		}
	}
}

func choiceErrors(o *kcrypto.Outcome) string {
	s := ""
	for _, c := range o.Ciphers {
		if c.Error != "" {
			if s != "" {
				s += "; "
			}
			s += fmt.Sprintf("%s: %s", c.Cipher, c.Error)
		}
	}
	return s
}
