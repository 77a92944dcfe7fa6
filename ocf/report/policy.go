package report

import (
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/soft"
	"github.com/ocfw/ocfw/ocf/speed"
)

// Policies are what one boot's self-test and measurements decide, derived
// together by Derive so that the dispatcher and the kernel's engine
// choice read the verdicts alike.
type Policies struct {
	// Dispatcher is the policy of ocf's dispatcher (the report's Policy):
	// from the speed table, Go software being the reference.
	Dispatcher ocf.Policy
	// Kernel and KernelSpeeds are what kcrypto.Promotions ranks the
	// kernel's engines on. With ESP measurements, their cipher's choice
	// and measurements both come from ESP (kcrypto puts the policy's
	// choice first whatever the speeds say, so they must agree), the other
	// ciphers' from the speed table; without, they are the speed table's.
	Kernel       ocf.Policy
	KernelSpeeds []ocf.Measurement
}

// Verdicts are self-test results as ocf.DerivePolicy reads them.
func Verdicts(tests []selftest.Result) []ocf.Verdict {
	var vs []ocf.Verdict
	for _, t := range tests {
		v := ocf.Verdict{Engine: t.Engine, Cipher: t.Cipher, Passed: t.Status == selftest.Pass, Failed: t.Status == selftest.Fail}
		if t.Failure != nil {
			v.Reason = t.Failure.String()
		}
		vs = append(vs, v)
	}
	return vs
}

// Derive is the one derivation of policy from a boot's self-test results,
// speed rows and, when the kernel's choice is made on ESP, the ESP run's
// measurements at the traffic's packet size (one cipher, software among
// them, as esp.Measurements gives them; nil otherwise). margin 0
// means DefaultMargin.
func Derive(tests []selftest.Result, rows []speed.Row, esp []ocf.Measurement, margin float64) Policies {
	margin = ocf.Margin(margin)
	verdicts := Verdicts(tests)
	speeds := Measurements(rows)
	p := ocf.DerivePolicy(verdicts, speeds, soft.Name, margin)
	out := Policies{Dispatcher: p, Kernel: p, KernelSpeeds: speeds}
	if len(esp) == 0 {
		return out
	}
	cipher := esp[0].Cipher
	// Only this cipher's verdicts: an engine that failed another cipher
	// is still judged on its ESP rows for this one.
	var vs []ocf.Verdict
	for _, v := range verdicts {
		if v.Cipher == cipher {
			vs = append(vs, v)
		}
	}
	ep := ocf.DeriveOnSoftware(vs, esp, margin)
	out.Kernel = p.Clone()
	if out.Kernel.Ciphers == nil {
		out.Kernel.Ciphers = map[string]ocf.CipherPolicy{}
	}
	if cp, ok := ep.Ciphers[cipher]; ok {
		out.Kernel.Ciphers[cipher] = cp
	} else {
		delete(out.Kernel.Ciphers, cipher)
	}
	out.KernelSpeeds = nil
	for _, m := range speeds {
		if m.Cipher != cipher {
			out.KernelSpeeds = append(out.KernelSpeeds, m)
		}
	}
	out.KernelSpeeds = append(out.KernelSpeeds, esp...)
	return out
}
