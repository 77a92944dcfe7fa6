package espspeed

// bench/run's ESP section boots this package's kernel test with
// EnvBench set: TestGuestBench then runs Measure that many times over
// software, virtio-crypto and the test engine, with the test engine's
// delay_us at EnvBenchDelay, and prints each Result as JSON after
// BenchMarker on one line for the host to read.
const (
	EnvBench      = "OCFW_ESP_BENCH_TRIALS"
	EnvBenchDelay = "OCFW_ESP_BENCH_DELAY_US"
	BenchMarker   = "ESPBENCH "
)
