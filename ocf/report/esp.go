package report

import (
	"fmt"
	"io"

	"github.com/ocfw/ocfw/ocf/esp"
)

// ESP is the boot's ESP throughput run (router/ipsec/espspeed): each
// engine that passed the self-test, software included, made the kernel's
// choice in turn and measured through a real ESP tunnel between two
// namespaces. It is what the kernel's engine choice is made on when it
// has rows.
type ESP struct {
	*esp.Result
	// Basis says what the kernel's engine choice was made on: BasisESP
	// or BasisSpeed, with why when not on ESP.
	Basis string `json:"basis"`
	Why   string `json:"why,omitempty"`
}

// What the kernel's engine choice was made on.
const (
	BasisESP   = "esp"   // the ESP rows at kcrypto.MTU
	BasisSpeed = "speed" // the AF_ALG speed table (no usable ESP rows)
)

// WriteESP prints the "ESP throughput" section: the table and what the
// engine choice was based on.
func WriteESP(w io.Writer, e *ESP) error {
	if e.Result != nil && len(e.Rows) > 0 {
		if err := esp.WriteTable(w, e.Result); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(w, "ESP throughput: not measured")
	}
	switch e.Basis {
	case BasisESP:
		fmt.Fprintln(w, "engine choice basis: the ESP rows above, at the traffic's packet size")
	default:
		fmt.Fprintf(w, "engine choice basis: the speed table (AF_ALG), not ESP")
		if e.Why != "" {
			fmt.Fprintf(w, ": %s", e.Why)
		}
		fmt.Fprintln(w)
	}
	return nil
}
