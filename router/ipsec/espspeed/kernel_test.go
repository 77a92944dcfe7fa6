package espspeed

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/testengine"
	"github.com/ocfw/ocfw/ocf/esp"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/router/ipsec"
)

// guestModules: XFRM and ESP, veth, the crypto user API and AF_ALG (the
// engine choice and its check), aes_ti (the better software AES), and
// virtio-crypto; the test module is loaded after them.
func guestModules() []string {
	m := append([]string(nil), ipsec.Modules...)
	m = append(m, "veth", "crypto_user", "af_alg", "algif_skcipher", "aes_ti")
	return append(m, testengine.VirtioCryptoModules...)
}

// TestKernelInTheLoop boots Debian's i386 686 kernel with QEMU's
// virtio-crypto device and the ocfw_testaes module, and runs the
// TestGuest* tests inside: ESP through each engine in turn.
func TestKernelInTheLoop(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("inside the guest: this test only starts it")
	}
	if testing.Short() {
		t.Skip("builds the test module and boots the kernel in QEMU; skipped with -short")
	}
	if err := qemu.Installed("i386"); err != nil {
		labtest.SkipOrFail(t, "ESP measurement not booted: %v", err)
	}
	mod, err := testengine.Build(context.Background(), testengine.Options{Log: t.Logf})
	if errors.Is(err, testengine.ErrNoKernel) || errors.Is(err, testengine.ErrNoTools) {
		labtest.SkipOrFail(t, "test module not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	vc, _ := catalog.LookupEngine(catalog.VirtioCrypto)
	env := map[string]string{}
	for _, k := range []string{EnvBench, EnvBenchDelay} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	kerneltest.Run(t, kerneltest.Options{
		Modules:     guestModules(),
		ModuleFiles: []string{mod.Path},
		QEMUArgs:    vc.QEMU,
		Run:         "^TestGuest",
		Env:         env,
		Timeout:     4 * time.Minute,
	})
}

var (
	virtioEngine = Engine{ID: catalog.VirtioCrypto, Driver: catalog.VirtioCryptoAESDriver, Hardware: true}
	testEngine   = Engine{ID: catalog.TestAES, Driver: testengine.Driver, Hardware: true}
)

// waitVirtio waits for the virtio-crypto device's driver to register.
func waitVirtio(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		algs, err := kcrypto.List("")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := kcrypto.Find(algs, catalog.VirtioCryptoAESDriver); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("virtio_crypto_aes_cbc never appeared in /proc/crypto")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func priorities(t *testing.T) map[string]int {
	t.Helper()
	algs, err := kcrypto.List("")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, a := range algs {
		if a.Name == "cbc(aes)" && !a.Internal {
			m[a.Driver] = a.Priority
		}
	}
	return m
}

func setDelay(t *testing.T, us int) {
	t.Helper()
	if err := testengine.SetParam(testengine.ParamDelay, us); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testengine.SetParam(testengine.ParamDelay, 0) })
}

// TestGuestMeasure: rows for software, virtio-crypto and the test engine
// (with a large delay) at three sizes; every one received data through
// SAs that held a transform built on the engine chosen; the slow test
// engine is measurably slower than software at 1400 bytes; the run kept
// its budget and left the kernel's choice as it found it.
func TestGuestMeasure(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("runs inside the QEMU guest started by TestKernelInTheLoop")
	}
	waitVirtio(t)
	setDelay(t, 2000) // 2 ms per request: a card with a slow setup
	before := priorities(t)
	const budget = 10 * time.Second
	start := time.Now()
	res, err := Measure(context.Background(), Config{Engines: []Engine{virtioEngine, testEngine}, Budget: budget})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	esp.WriteTable(&b, res)
	t.Logf("Measure took %v (budget %v):\n%s", took.Round(time.Millisecond), budget, b.String())
	if took > budget+budget/4 {
		t.Errorf("the run took %v, budget %v", took, budget)
	}
	if len(res.Rows) != 9 {
		t.Fatalf("%d rows, want 9 (3 engines x 3 sizes)", len(res.Rows))
	}
	wantDriver := map[string]string{esp.Software: "cbc(aes-fixed-time)", virtioEngine.ID: virtioEngine.Driver, testEngine.ID: testEngine.Driver}
	for _, r := range res.Rows {
		if r.Err != "" || r.Packets <= 0 || r.MBps <= 0 || r.Sent < r.Packets {
			t.Errorf("%s at %d: %+v", r.Engine, r.Size, r)
		}
		if r.Driver != wantDriver[r.Engine] || !strings.HasPrefix(r.SADriver, "authencesn(hmac(sha1-") || !strings.HasSuffix(r.SADriver, ","+r.Driver+")") {
			t.Errorf("%s: driver %s, SAs held %q; want %s under the SAs' authencesn", r.Engine, r.Driver, r.SADriver, wantDriver[r.Engine])
		}
		// A fraction of the whole machine. The software cipher keeps the
		// CPU busy; the test engine sleeps 2 ms a request, and /proc/stat
		// counts in ticks, so its 64-byte row may read 0 (seen in CI).
		if r.CPU < 0 || r.CPU > 1 || (r.Engine == esp.Software && r.CPU == 0) {
			t.Errorf("%s at %d: CPU %v", r.Engine, r.Size, r.CPU)
		}
	}
	soft, _ := res.Row(esp.Software, 1400)
	slow, _ := res.Row(testEngine.ID, 1400)
	if slow.MBps >= soft.MBps*0.8 {
		t.Errorf("at 1400 bytes the test engine with a 2 ms delay does %.3f MB/s, software %.3f: want it clearly slower", slow.MBps, soft.MBps)
	}
	// The kernel's choice before and after: the test engine (priority
	// 300), as registered; every priority back.
	if res.Default != testEngine.Driver || res.Restored != res.Default || len(res.Notes) > 0 {
		t.Errorf("default %q, restored %q, notes %v; want %s both times, no notes", res.Default, res.Restored, res.Notes, testEngine.Driver)
	}
	after := priorities(t)
	for drv, p := range before {
		if after[drv] != p {
			t.Errorf("%s at priority %d after the run, %d before", drv, after[drv], p)
		}
	}
	if r, err := kcrypto.Resolve("cbc(aes)", "skcipher"); err != nil || r.Driver != testEngine.Driver {
		t.Errorf("after the run cbc(aes) resolves to %+v, %v", r, err)
	}
	// The policy input: ESP decides the kernel's engine at MTU size.
	choice, err := esp.Choose(res, kcrypto.MTU, 0)
	if err != nil || choice.Engine == testEngine.ID {
		t.Errorf("ocfw's choice at MTU size: %+v, %v; the slow test engine must not be it", choice, err)
	}
	t.Logf("ocfw's choice at %d bytes: %s (%s)", kcrypto.MTU, choice.Engine, choice.Driver)
}

// TestGuestStall: an engine that takes a second per request costs its
// share of the budget, no more; the run ends in time. It starts where
// the boot sequence leaves the kernel before the self-test (hardware
// demoted below software), and the kernel's choice is back there after.
func TestGuestStall(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("runs inside the QEMU guest started by TestKernelInTheLoop")
	}
	waitVirtio(t)
	hw := []kcrypto.HWEngine{
		{ID: virtioEngine.ID, Module: "virtio_crypto", Drivers: map[string]string{"aes-128-cbc": virtioEngine.Driver}},
		{ID: testEngine.ID, Module: testengine.Module, Drivers: map[string]string{"aes-128-cbc": testEngine.Driver}},
	}
	if o, err := kcrypto.DemoteHardware(hw, []string{"aes-128-cbc"}); err != nil || o.Failed() {
		t.Fatalf("demoting the stand-ins: %+v, %v", o, err)
	}
	t.Cleanup(func() {
		kcrypto.SetPriority(virtioEngine.Driver, 150)
		kcrypto.SetPriority(testEngine.Driver, testengine.Priority)
	})
	before := priorities(t)
	setDelay(t, 1000000)
	const budget = 3 * time.Second
	start := time.Now()
	res, err := Measure(context.Background(), Config{Engines: []Engine{testEngine}, Budget: budget, Sizes: []int{1400}})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	esp.WriteTable(&b, res)
	t.Logf("Measure with a stalling engine took %v (budget %v):\n%s", took.Round(time.Millisecond), budget, b.String())
	if took > budget+budget/2+time.Second {
		t.Errorf("the run took %v, budget %v", took, budget)
	}
	soft, _ := res.Row(esp.Software, 1400)
	slow, ok := res.Row(testEngine.ID, 1400)
	if soft.Err != "" || soft.Packets == 0 {
		t.Errorf("software: %+v", soft)
	}
	if !ok || slow.Err == "" && slow.MBps >= soft.MBps/10 {
		t.Errorf("the stalling engine: %+v, want an error or next to nothing", slow)
	}
	if res.Default != "cbc(aes-fixed-time)" || res.Restored != res.Default || len(res.Notes) > 0 {
		t.Errorf("default %q, restored %q, notes %v; want cbc(aes-fixed-time) both times, no notes", res.Default, res.Restored, res.Notes)
	}
	after := priorities(t)
	for drv, p := range before {
		if after[drv] != p {
			t.Errorf("%s at priority %d after the run, %d before", drv, after[drv], p)
		}
	}
}

// TestGuestBench is bench/run's ESP section (only when EnvBench is set):
// Measure, repeated, with the test engine at the given delay; each
// result on one line for the host to read.
func TestGuestBench(t *testing.T) {
	if !kerneltest.InGuest() || os.Getenv(EnvBench) == "" {
		t.Skip("bench/run's ESP section: runs in the guest when " + EnvBench + " is set")
	}
	trials, err := strconv.Atoi(os.Getenv(EnvBench))
	if err != nil || trials < 1 {
		t.Fatalf("%s=%q: want a number of trials", EnvBench, os.Getenv(EnvBench))
	}
	delay, err := strconv.Atoi(os.Getenv(EnvBenchDelay))
	if err != nil {
		t.Fatalf("%s=%q: want microseconds", EnvBenchDelay, os.Getenv(EnvBenchDelay))
	}
	waitVirtio(t)
	setDelay(t, delay)
	for i := 0; i < trials; i++ {
		res, err := Measure(context.Background(), Config{Engines: []Engine{virtioEngine, testEngine}})
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(res)
		t.Logf("%s%s", BenchMarker, j)
	}
}
