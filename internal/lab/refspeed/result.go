package refspeed

import (
	"encoding/json"
	"fmt"
	"strings"
)

// EnvBench, set to the number of rounds, makes internal/lab/testengine's
// TestBenchDevCrypto boot the benchmark (bench/run -only devcrypto);
// EnvSeconds sets the seconds per cell of openssl speed and ocf speed
// (default 3, openssl speed's own; tests/speed's are its own 5).
const (
	EnvBench   = "OCFW_DEVCRYPTO_BENCH"
	EnvSeconds = "OCFW_DEVCRYPTO_SECONDS"
)

// Marker starts the guest's result line: JSON of a Result.
const Marker = "devcrypto-bench-result: "

// The paths a Row measures.
const (
	PathAFALG     = "afalg"     // AF_ALG: openssl -engine afalg vs ocf's afalg driver
	PathDevCrypto = "devcrypto" // /dev/crypto: tests/speed vs ocf's cryptodev driver
	PathUser      = "user"      // user software: openssl's own code vs ocf's Go (no kernel)
)

// Row is one cipher through one path and kernel driver: the reference
// tool's and ocf speed's MB/s by size, the best of the rounds.
type Row struct {
	Path   string `json:"path"`
	Cipher string `json:"cipher"`
	// Engine is the kernel driver both sides used ("" on PathUser).
	Engine string `json:"engine"`
	// Reference says what the reference figure is.
	Reference string          `json:"reference"`
	Ref       map[int]float64 `json:"ref_mbps"`
	OCF       map[int]float64 `json:"ocf_mbps"`
	// Note is why the two are not the same work, when they are not.
	Note string `json:"note,omitempty"`
}

// Result is the guest benchmark's report.
type Result struct {
	Kernel  string  `json:"kernel"`
	OpenSSL string  `json:"openssl"`
	Rounds  int     `json:"rounds"`
	Seconds float64 `json:"seconds"`
	Rows    []Row   `json:"rows"`
	// EngineCheck is the proof that openssl's figures went through the
	// kernel driver: its 16-byte figure with the test engine delaying
	// every request, against the figure without.
	EngineCheck string `json:"engine_check"`
}

// Add merges a round's figures into the row of the same path, cipher
// and engine (the best figure per size counts), or appends it.
func (r *Result) Add(row Row) {
	for i := range r.Rows {
		x := &r.Rows[i]
		if x.Path == row.Path && x.Cipher == row.Cipher && x.Engine == row.Engine {
			for s, v := range row.Ref {
				x.Ref[s] = max(x.Ref[s], v)
			}
			for s, v := range row.OCF {
				x.OCF[s] = max(x.OCF[s], v)
			}
			return
		}
	}
	r.Rows = append(r.Rows, row)
}

// Line is the result as the guest prints it.
func (r *Result) Line() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	return Marker + string(b), nil
}

// ParseResult finds the result line in a test's output.
func ParseResult(out string) (*Result, error) {
	for _, line := range strings.Split(out, "\n") {
		_, j, ok := strings.Cut(line, Marker)
		if !ok {
			continue
		}
		res := &Result{}
		if err := json.Unmarshal([]byte(strings.TrimSpace(j)), res); err != nil {
			return nil, fmt.Errorf("the devcrypto bench's result: %v", err)
		}
		if len(res.Rows) == 0 {
			return nil, fmt.Errorf("the devcrypto bench's result has no rows: %s", tail(j, 300))
		}
		for _, row := range res.Rows {
			if len(row.Ref) == 0 || len(row.OCF) == 0 {
				return nil, fmt.Errorf("the devcrypto bench's row %s %s %s lacks a side", row.Path, row.Engine, row.Cipher)
			}
		}
		return res, nil
	}
	return nil, fmt.Errorf("no %q line in the test's output: %s", strings.TrimSpace(Marker), tail(out, 600))
}
