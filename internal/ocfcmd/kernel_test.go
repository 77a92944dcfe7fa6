package ocfcmd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/selftest"
	"github.com/ocfw/ocfw/ocf/speed"
	"github.com/ocfw/ocfw/plan"
)

// guestModules: the AF_ALG interfaces and the software algorithms Debian's
// linux-image-686 builds as modules (the rest are built in; missing ones
// are skipped by the harness).
var guestModules = []string{
	"af_alg", "algif_skcipher", "algif_hash", "des_generic", "ecb",
	"cbc", "aes_generic", "hmac", "md5", "sha1_generic", "sha256_generic", "crypto_null",
}

// TestKernelSelftest boots a real i386 kernel in QEMU and runs there what
// `ocf speed` runs on a board without cards: the self-test of every
// catalog cipher on the kernel's implementations (over AF_ALG) and on Go
// software, the speed table, and the policy.
func TestKernelSelftest(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("inside the guest: this test only starts it")
	}
	res := kerneltest.Run(t, kerneltest.Options{Modules: guestModules, Run: "^TestGuestSpeed$", Timeout: 5 * time.Minute})
	if res != nil {
		t.Logf("guest: build %v, boot to tests %v, total %v", res.Build, res.BootToTests, res.Total)
	}
}

// TestGuestSpeed runs only inside the kerneltest guest.
func TestGuestSpeed(t *testing.T) {
	if !kerneltest.InGuest() {
		t.Skip("runs inside the QEMU guest started by TestKernelSelftest")
	}
	start := time.Now()
	cmd := NewSpeedCmd(func() (*plan.Plan, error) { return nil, nil })
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"--json", "--seconds", "0.05"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("ocf speed: %v\n%s", err, errb.String())
	}
	t.Logf("self-test + speed + policy took %v under emulation", time.Since(start))
	var r report.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	t.Log("\n" + text.String())

	// Every catalog cipher passes on kernel software (present, bound by
	// the driver name /proc/crypto gives) and on Go software.
	passed := map[string]int{}
	for _, st := range r.SelfTest {
		if st.Status != selftest.Pass {
			t.Errorf("%s on %s: %s %v %s", st.Cipher, st.Engine, st.Status, st.Failure, st.Reason)
			continue
		}
		passed[st.Cipher]++
		if st.Engine != "go" && (st.Engine == "kernel" || !strings.ContainsAny(st.Engine, "-(")) {
			t.Errorf("%s: kernel engine named %q, want its driver name", st.Cipher, st.Engine)
		}
	}
	for _, c := range catalog.CipherNames() {
		if passed[c] != 2 {
			t.Errorf("%s: %d engines passed, want 2 (kernel and Go)", c, passed[c])
		}
	}
	// A speed row with every size for every engine that passed.
	if len(r.Speed) != 2*len(catalog.CipherNames()) {
		t.Errorf("%d speed rows", len(r.Speed))
	}
	for _, row := range r.Speed {
		if row.Err != "" || len(row.Cells) != len(speed.Sizes) {
			t.Errorf("%s %s: %d cells, err %q", row.Cipher, row.Engine, len(row.Cells), row.Err)
		}
	}
	if len(r.Policy.Ciphers) != len(catalog.CipherNames()) {
		t.Errorf("policy covers %d ciphers", len(r.Policy.Ciphers))
	}
	if r.Env.Kernel == "" {
		t.Error("environment lacks the kernel version")
	}
	_ = report.Version
}
