// Package esp holds the result of an ESP throughput run (measured on
// the board by router/ipsec/espspeed) and what the crypto framework makes
// of it: the table the report prints, the measurements the engine policy
// is derived from, and the row ocfw's policy chooses. It lives under ocf
// so the report and the policy read ESP results without importing the
// router.
package esp

// Software is the Row.Engine of the kernel's own software
// implementation, always measured as the reference.
const Software = "software"

// Row is one engine at one packet size.
type Row struct {
	Engine   string `json:"engine"` // the engine's id: a catalog engine id, or Software
	Driver   string `json:"driver"` // the kernel's choice for the cipher's name during the step
	Hardware bool   `json:"hardware"`
	// SADriver is the AEAD the SAs held, as /proc/crypto names it, e.g.
	// "authencesn(hmac(sha1-generic),ocfw_testaes_cbc)".
	SADriver string `json:"sa_driver,omitempty"`
	Size     int    `json:"size"` // UDP payload bytes
	// MBps is UDP payload received per second of the window, in
	// millions of bytes.
	MBps float64 `json:"mbytes_per_sec"`
	// CPU is the share of all CPUs busy over the window (1.0: all of
	// them), from /proc/stat: sender, ESP both ways and receiver.
	CPU     float64 `json:"cpu"`
	Sent    int64   `json:"sent"`     // datagrams written in the window
	Packets int64   `json:"received"` // datagrams received in the window
	Millis  int64   `json:"ms"`       // the window
	Err     string  `json:"error,omitempty"`
}

// Result is one run.
type Result struct {
	Cipher string `json:"cipher"`
	Auth   string `json:"auth"`
	Kernel string `json:"kernel_name"` // the cipher's generic name, e.g. "cbc(aes)"
	// Default is the driver the kernel resolved the name to before the
	// run (its choice by registered priority, or the boot's); Restored
	// what it resolves after. They are equal unless Notes say why not.
	Default  string   `json:"default_driver"`
	Restored string   `json:"restored_driver,omitempty"`
	Rows     []Row    `json:"rows"`
	Notes    []string `json:"notes,omitempty"`
	Seconds  float64  `json:"seconds"`
}

// Row returns the row of engine id at size.
func (r *Result) Row(id string, size int) (Row, bool) {
	for _, x := range r.Rows {
		if x.Engine == id && x.Size == size {
			return x, true
		}
	}
	return Row{}, false
}
