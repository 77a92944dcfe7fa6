package boot

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/plan"
)

func TestModuleParams(t *testing.T) {
	tests := []struct {
		cmdline string
		want    map[string]string
	}{
		{"console=ttyS0,38400n8 quiet", map[string]string{}},
		{"console=ttyS0 ocfw_testaes.delay_us=2000 ocfw_testaes.corrupt_min=1024\n",
			map[string]string{"ocfw_testaes": "delay_us=2000 corrupt_min=1024"}},
		{"hifn-795x.hifn_pll_ref=ext x.y", map[string]string{"hifn_795x": "hifn_pll_ref=ext"}},
		{`m.s="a b" .p=1 m.=2 a/b.c=3`, map[string]string{"m": `s="a b"`}},
	}
	for _, tc := range tests {
		if got := ModuleParams(tc.cmdline); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ModuleParams(%q) = %v, want %v", tc.cmdline, got, tc.want)
		}
	}
}

// fakeChoice stands for the kernel's engine choice and records when it
// was asked, against the console so far.
type fakeChoice struct {
	mu       sync.Mutex
	con      *syncBuffer
	demoted  string // console when DemoteHardware was called
	promoted string
	in       kcrypto.Input
	engines  []kcrypto.HWEngine
	ciphers  []string
	fail     error
}

func (f *fakeChoice) DemoteHardware(e []kcrypto.HWEngine, c []string) (*kcrypto.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.demoted, f.engines, f.ciphers = f.con.String(), e, c
	o := &kcrypto.Outcome{Phase: "demote-hardware",
		Changes: []kcrypto.Change{{Driver: "ocfw_testaes_cbc", Name: "cbc(aes)", From: 300, To: 1, Reason: "not yet proven"}},
		Ciphers: []kcrypto.Choice{{Cipher: "aes-128-cbc", Kernel: "cbc(aes)", Driver: "cbc(aes-fixed-time)", Priority: 101}}}
	return o, f.fail
}

func (f *fakeChoice) Promote(in kcrypto.Input) (*kcrypto.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promoted, f.in = f.con.String(), in
	return &kcrypto.Outcome{Phase: "promote",
		Kept:    []kcrypto.Change{{Driver: "ocfw_testaes_cbc", Name: "cbc(aes)", From: 1, To: 1, Reason: "failed its self-test"}},
		Ciphers: []kcrypto.Choice{{Cipher: "aes-128-cbc", Kernel: "cbc(aes)", Driver: "cbc(aes-fixed-time)", Priority: 101, Why: "software"}}}, nil
}

// The sequence demotes the plan's hardware after the modules load and
// before the self-test (and the network), promotes after the policy with
// its measurements, and keeps both in the report; a failing demotion is
// a note, and the boot goes on (a partial demotion is still followed by
// the promotion that sets the proven engines right).
func TestEngineChoiceAtBoot(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Resolve(boards.Request{Board: "alix2d13", Cards: []string{"virtio-crypto", "testaes"}, Ciphers: []string{"aes-128-cbc", "aes-256-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		fail    error
		traffic []string
	}{
		{"demoted and promoted", nil, nil},
		{"traffic ciphers given", nil, []string{"aes-128-cbc"}},
		{"no crypto user API", kcrypto.ErrNoCryptoUser, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeRoot(t, p, `{"speed_budget": "1s"}`)
			write(t, filepath.Join(root, "proc/cmdline"), []byte("console=ttyS0 ocfw_testaes.delay_us=500\n"))
			con := &syncBuffer{}
			fc := &fakeChoice{con: con, fail: tc.fail}
			loader := &fakeLoader{}
			out := Run(context.Background(), Config{Root: root, Console: con, DataWait: 1, Loader: loader, Engines: fc, TrafficCiphers: tc.traffic})
			c := con.String()
			if loader.params["ocfw_testaes"] != "delay_us=500" || !strings.Contains(c, "ocfw_testaes     loaded with delay_us=500 (kernel command line)") {
				t.Errorf("module parameters from the command line: %v\n%s", loader.params, c)
			}
			if !strings.Contains(fc.demoted, "module ocfw_testaes") || strings.Contains(fc.demoted, "self-testing") {
				t.Errorf("demoted at the wrong time; console then:\n%s", fc.demoted)
			}
			var ids []string
			for _, e := range fc.engines {
				ids = append(ids, e.ID)
			}
			if strings.Join(ids, " ") != "geode-aes virtio-crypto testaes" {
				t.Errorf("demoted engines %v", ids)
			}
			want := tc.traffic
			if want == nil {
				want = []string{"aes-128-cbc", "aes-256-cbc"}
			}
			if !reflect.DeepEqual(fc.ciphers, want) {
				t.Errorf("demoted for ciphers %v, want %v", fc.ciphers, want)
			}
			if !strings.Contains(c, "ocfw: engines: demoted ocfw_testaes_cbc (cbc(aes)) 300 -> 1: not yet proven") {
				t.Errorf("console does not say what was demoted:\n%s", c)
			}
			ec := out.Report.EngineChoice
			if ec == nil || ec.Demote == nil {
				t.Fatalf("report has no engine choice: %+v", ec)
			}
			var text bytes.Buffer
			if err := out.Report.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			notes := strings.Join(out.Report.Notes, "\n")
			if tc.fail != nil {
				if !strings.Contains(notes, "engine choice: demoting the hardware engines before the network failed") || !errors.Is(tc.fail, kcrypto.ErrNoCryptoUser) {
					t.Errorf("notes %q", notes)
				}
				if !strings.Contains(c, plan.MarkDone) {
					t.Error("the boot did not finish")
				}
				return
			}
			if !strings.Contains(fc.promoted, "ocfw: self-testing") || strings.Contains(fc.promoted, plan.MarkReportWritten) {
				t.Errorf("promoted at the wrong time; console then:\n%s", fc.promoted)
			}
			if fc.in.Size != kcrypto.MTU || !reflect.DeepEqual(fc.in.Ciphers, want) || len(fc.in.Speeds) == 0 || len(fc.in.Policy.Ciphers) == 0 {
				t.Errorf("promote input: size %d, ciphers %v, %d speeds, policy %+v", fc.in.Size, fc.in.Ciphers, len(fc.in.Speeds), fc.in.Policy)
			}
			if ec.Promote == nil || !strings.Contains(text.String(), "after the self-test: ocfw_testaes_cbc stays at 1: failed its self-test") ||
				!strings.Contains(c, "ocfw: engines: ocfw_testaes_cbc (cbc(aes)) stays demoted at 1: failed its self-test") {
				t.Errorf("the promotion is not in the report and on the console:\n%s", text.String())
			}
		})
	}
}

// hangingChoice never returns from a demotion: a wedged netlink socket.
type hangingChoice struct{ fakeChoice }

func (*hangingChoice) DemoteHardware([]kcrypto.HWEngine, []string) (*kcrypto.Outcome, error) {
	select {}
}

// A demotion that hangs is left behind: the boot ends, says so, and
// promotes nothing.
func TestEngineChoiceHangs(t *testing.T) {
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Resolve(boards.Request{Board: "alix2d13", Cards: []string{"virtio-crypto"}, Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	root := fakeRoot(t, p, `{"speed_budget": "0s"}`)
	con := &syncBuffer{}
	out := Run(context.Background(), Config{Root: root, Console: con, DataWait: 1, StepTimeout: 2e9, Loader: &fakeLoader{}, Engines: &hangingChoice{}})
	if !strings.Contains(con.String(), plan.MarkDone) || out.Report.EngineChoice != nil {
		t.Errorf("boot with a hanging demotion: engine choice %+v\n%s", out.Report.EngineChoice, con.String())
	}
	if notes := strings.Join(out.Report.Notes, "\n"); !strings.Contains(notes, "engine choice: demoting the hardware engines did not finish") {
		t.Errorf("notes %q", notes)
	}
}
