package ocf

import "sort"

// DefaultMargin is how much faster than software an engine must be at a
// size before the policy sends requests of that size to it: below that,
// the noise of one boot's measurement could flip the choice.
const DefaultMargin = 0.15

// Margin is m, or DefaultMargin when m is 0 or less: what every "0 means
// the default margin" option resolves to.
func Margin(m float64) float64 {
	if m <= 0 {
		return DefaultMargin
	}
	return m
}

// Beats is the one rule for "faster than software by margin": hw's
// throughput is at least 1+margin times sw's (any unit, the same for
// both). The policy, the kernel's engine choice and the ESP run's choice
// all judge with it.
func Beats(hw, sw, margin float64) bool { return hw >= sw*(1+margin) }

// Verdict is one engine's self-test outcome for one cipher, as
// DerivePolicy reads it (package ocf/selftest produces them).
type Verdict struct {
	Engine string
	Cipher string
	// Passed and Failed are both false for an engine that is absent.
	Passed bool
	Failed bool
	Reason string // why it failed
}

// Measurement is one engine's measured throughput for one cipher, per
// request size (package ocf/speed produces them).
type Measurement struct {
	Engine   string
	Cipher   string
	Hardware bool
	// Sizes ascend; KBps[i] is the throughput at Sizes[i].
	Sizes []int
	KBps  []float64
}

func (m *Measurement) at(size int) float64 {
	for i, s := range m.Sizes {
		if s == size {
			return m.KBps[i]
		}
	}
	return 0
}

// DerivePolicy is the product's central decision: it turns self-test
// verdicts and measurements into a dispatcher policy. Engines that failed
// are excluded, with the first reason; engines that passed are trusted;
// and for each cipher the hardware engine that beats the reference engine
// (software) by margin from the smallest request size on — at every
// larger measured size too — is preferred from that size, ties going to
// the faster at the largest size. A cipher no engine beats stays in
// software.
func DerivePolicy(verdicts []Verdict, speeds []Measurement, reference string, margin float64) Policy {
	p := Policy{Ciphers: map[string]CipherPolicy{}}
	failed := map[string]string{}
	passed := map[string]bool{}
	ciphers := map[string]bool{}
	for _, v := range verdicts {
		ciphers[v.Cipher] = true
		switch {
		case v.Failed:
			reason := v.Cipher + ": self-test failed"
			if v.Reason != "" {
				reason = v.Cipher + ": " + v.Reason
			}
			if _, seen := failed[v.Engine]; !seen {
				failed[v.Engine] = reason
			}
		case v.Passed:
			passed[v.Engine] = true
		}
	}
	if len(failed) > 0 {
		p.Failed = failed
	}
	for e := range passed {
		if _, bad := failed[e]; !bad && e != reference {
			p.Trusted = append(p.Trusted, e)
		}
	}
	sort.Strings(p.Trusted)

	ref := map[string]*Measurement{}
	for i := range speeds {
		m := &speeds[i]
		ciphers[m.Cipher] = true
		if m.Engine == reference {
			ref[m.Cipher] = m
		}
	}
	for cipher := range ciphers {
		best, bestMin, bestTop := "", 0, 0.0
		sw := ref[cipher]
		for i := range speeds {
			m := &speeds[i]
			if m.Cipher != cipher || !m.Hardware || sw == nil || len(m.Sizes) == 0 {
				continue
			}
			if _, bad := failed[m.Engine]; bad {
				continue
			}
			min, ok := threshold(m, sw, margin)
			if !ok {
				continue
			}
			top := m.KBps[len(m.KBps)-1]
			if best == "" || min < bestMin || (min == bestMin && top > bestTop) {
				best, bestMin, bestTop = m.Engine, min, top
			}
		}
		if best == "" {
			p.Ciphers[cipher] = CipherPolicy{SoftwareOnly: true}
		} else {
			p.Ciphers[cipher] = CipherPolicy{MinHardware: bestMin, Driver: best}
		}
	}
	return p
}

// DeriveOnSoftware is DerivePolicy with the one measurement that is not
// hardware as the reference, for measurements that name software by its
// kernel driver (the ESP run's) rather than as package soft's engine.
func DeriveOnSoftware(verdicts []Verdict, speeds []Measurement, margin float64) Policy {
	ref := ""
	for _, m := range speeds {
		if !m.Hardware {
			ref = m.Engine
		}
	}
	return DerivePolicy(verdicts, speeds, ref, margin)
}

// threshold is the smallest measured size from which hw beats sw by
// margin at that size and every larger one.
func threshold(hw, sw *Measurement, margin float64) (int, bool) {
	min, ok := 0, false
	for i := len(hw.Sizes) - 1; i >= 0; i-- {
		r := sw.at(hw.Sizes[i])
		if r <= 0 || !Beats(hw.KBps[i], r, margin) {
			break
		}
		min, ok = hw.Sizes[i], true
	}
	return min, ok
}
