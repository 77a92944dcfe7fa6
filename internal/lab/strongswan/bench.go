package strongswan

// What bench/run's IKE section (bench/ike.go) and TestBenchIKE share.

// EnvBench turns TestBenchIKE on with this many trials per side: it is
// bench/run's IKE section, not part of the suite.
const EnvBench = "OCFW_IKE_BENCH"

// BenchMarker starts the line with TestBenchIKE's JSON result.
const BenchMarker = "ocfw-ike-bench: "

// BenchResult is TestBenchIKE's result.
type BenchResult struct {
	Suite, ESP string
	// Setup times in seconds, one per trial: from the command that makes
	// the initiator start (ocfw: the agent's ike; charon: swanctl
	// --initiate, whose start as a process counts) to a TCP echo through
	// the tunnel from the initiator's inner address, timed on the host.
	OCFWSetup, CharonSetup []float64
	// SwanctlStart is `swanctl --stats` timed the same way: what starting
	// swanctl adds to charon's figures.
	SwanctlStart []float64
	// ESP throughput in MB/s (TCP payload the receiver counted over the
	// time to its count), one per round: the IKEv2-keyed tunnel (charon
	// sending to ocfw) and a manually keyed one (router/ipsec's Seqs at
	// both ends), the same cipher and integrity algorithm; four rounds
	// per trial. IKEMBps[i] and ManualNoESNMBps[i] ran back to back
	// (their order alternating): a pair.
	IKEMBps, ManualMBps []float64
	// ManualNoESNMBps is the manual tunnel without extended sequence
	// numbers, as charon's CHILD SA (esp_proposals without esn) runs.
	ManualNoESNMBps []float64
	StreamSeconds   float64
	// IKEState and ManualNoESNState are `ip -d xfrm state` in the two
	// senders' namespaces (charon's east2, the manual md), keys blanked:
	// how each kernel holds the SAs being compared.
	IKEState, ManualNoESNState string
}
