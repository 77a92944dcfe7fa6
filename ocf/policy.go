package ocf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/ocfw/ocfw/internal/atomicfile"
)

// DefaultTimeout bounds one engine request when the policy sets none.
const DefaultTimeout = 2 * time.Second

// Verify says which engine results the dispatcher recomputes in software
// and compares before handing them out. An engine that returns a wrong
// result while reporting success cannot be caught any other way; the cost
// is that a verified request is computed twice, so an engine earns its
// speed only once it is trusted (for example after a self-test passed).
type Verify string

const (
	// VerifyUntrusted (the default) checks every result of an engine not
	// listed in Policy.Trusted.
	VerifyUntrusted Verify = "untrusted"
	// VerifyAll checks every engine result, trusted or not.
	VerifyAll Verify = "all"
	// VerifyOff checks nothing: a corrupting engine's output reaches the
	// caller unless the engine reports an error.
	VerifyOff Verify = "off"
)

// Policy tells a Dispatcher which engines it may use and when. The zero
// value permits every engine for every request size, with the default
// timeout and verification of untrusted engines. It is saved as JSON, e.g.
//
//	{
//	  "timeout": "2s",
//	  "verify": "untrusted",
//	  "trusted": ["cbc-aes-geode"],
//	  "deny": ["cbc-aes-hifn0"],
//	  "failed": {"cbc-des-hifn0": "timed out after 2s"},
//	  "ciphers": {
//	    "aes-128-cbc": {"min_hw_bytes": 256, "driver": "cbc-aes-geode"},
//	    "hmac-sha1": {"software_only": true}
//	  }
//	}
type Policy struct {
	// Timeout bounds each engine request (a batch of n requests gets n
	// times as long). Zero means DefaultTimeout; negative means no
	// timeout, and engine requests then run on the caller's goroutine.
	Timeout Duration `json:"timeout,omitempty"`
	// Verify is empty or one of the Verify constants; empty means
	// VerifyUntrusted.
	Verify Verify `json:"verify,omitempty"`
	// Trusted names engines whose results are accepted unchecked under
	// VerifyUntrusted.
	Trusted []string `json:"trusted,omitempty"`
	// Allow, when not empty, names the only engines that may be used.
	Allow []string `json:"allow,omitempty"`
	// Deny names engines that must not be used.
	Deny []string `json:"deny,omitempty"`
	// Failed maps engines found broken to the reason; they are not used.
	Failed map[string]string `json:"failed,omitempty"`
	// Ciphers holds per-cipher rules keyed by cipher name; a cipher not
	// listed uses the zero CipherPolicy (any engine, any size).
	Ciphers map[string]CipherPolicy `json:"ciphers,omitempty"`
}

// CipherPolicy is the rule for one cipher.
type CipherPolicy struct {
	// MinHardware is the smallest request (bytes of Src) sent to an
	// engine; smaller requests run in software, where the per-request
	// cost of reaching the engine would outweigh its speed.
	MinHardware int `json:"min_hw_bytes,omitempty"`
	// SoftwareOnly keeps the cipher off every engine.
	SoftwareOnly bool `json:"software_only,omitempty"`
	// Driver, when set, is tried before the other engines.
	Driver string `json:"driver,omitempty"`
}

// Duration is a time.Duration written in JSON as "2s"; "none" (or any
// negative value) is no timeout.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	if d < 0 {
		return json.Marshal("none")
	}
	return json.Marshal(time.Duration(d).String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"2s\" or \"none\", got %s", b)
	}
	if s == "none" {
		*d = -1
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: want a Go duration like \"2s\" or \"150ms\", or \"none\"", s)
	}
	*d = Duration(v)
	return nil
}

// Validate reports the first problem with p: unknown ciphers or verify
// modes, negative sizes, an engine both allowed and denied.
func (p *Policy) Validate() error {
	switch p.Verify {
	case "", VerifyUntrusted, VerifyAll, VerifyOff:
	default:
		return fmt.Errorf("policy: verify %q: want %q, %q or %q", p.Verify, VerifyUntrusted, VerifyAll, VerifyOff)
	}
	for _, name := range sortedKeys(p.Ciphers) {
		if _, err := LookupCipher(name); err != nil {
			return fmt.Errorf("policy: ciphers: %w", err)
		}
		if cp := p.Ciphers[name]; cp.MinHardware < 0 {
			return fmt.Errorf("policy: ciphers.%s.min_hw_bytes is %d; want 0 or more", name, cp.MinHardware)
		}
	}
	for _, name := range p.Deny {
		if slices.Contains(p.Allow, name) {
			return fmt.Errorf("policy: engine %q is in both allow and deny", name)
		}
	}
	return nil
}

func (p *Policy) timeout() time.Duration {
	if p.Timeout == 0 {
		return DefaultTimeout
	}
	return time.Duration(p.Timeout)
}

// permits reports whether the policy lets engine name run at all.
func (p *Policy) permits(name string) bool {
	if len(p.Allow) > 0 && !slices.Contains(p.Allow, name) {
		return false
	}
	if _, failed := p.Failed[name]; failed {
		return false
	}
	return !slices.Contains(p.Deny, name)
}

// verifies reports whether results of engine name are checked.
func (p *Policy) verifies(name string) bool {
	switch p.Verify {
	case VerifyAll:
		return true
	case VerifyOff:
		return false
	}
	return !slices.Contains(p.Trusted, name)
}

// Clone returns a deep copy of p.
func (p Policy) Clone() Policy {
	p.Trusted = slices.Clone(p.Trusted)
	p.Allow = slices.Clone(p.Allow)
	p.Deny = slices.Clone(p.Deny)
	if p.Failed != nil {
		f := make(map[string]string, len(p.Failed))
		for k, v := range p.Failed {
			f[k] = v
		}
		p.Failed = f
	}
	if p.Ciphers != nil {
		c := make(map[string]CipherPolicy, len(p.Ciphers))
		for k, v := range p.Ciphers {
			c[k] = v
		}
		p.Ciphers = c
	}
	return p
}

// ReadPolicy decodes and validates a JSON policy; unknown fields are
// errors so that a typo does not silently change nothing.
func ReadPolicy(r io.Reader) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	if dec.More() {
		return Policy{}, fmt.Errorf("policy: trailing data after the JSON object")
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// WriteJSON writes p as indented JSON (map keys sorted, so the same policy
// gives the same bytes).
func (p Policy) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// LoadPolicyFile reads a policy from a JSON file.
func LoadPolicyFile(path string) (Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return Policy{}, err
	}
	defer f.Close()
	p, err := ReadPolicy(f)
	if err != nil {
		return Policy{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// SavePolicyFile writes p to path atomically (package atomicfile), so a
// crash never leaves half a policy behind.
func SavePolicyFile(path string, p Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := p.WriteJSON(&buf); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, buf.Bytes(), 0o644)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
