package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ocfw runs the CLI in-process.
func ocfw(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestBoardsJSON(t *testing.T) {
	out, errs, code := ocfw(t, "boards", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var list boardsJSON
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Version != 1 {
		t.Errorf("version %d, want 1", list.Version)
	}
	kinds := map[string]string{}
	for _, l := range list.Boards {
		if l.Description == "" {
			t.Errorf("%s has no description", l.Name)
		}
		kinds[l.Name] = l.Kind
	}
	for _, l := range list.Cards {
		// Only the test engine, a module, has no PCI id.
		if l.Description == "" || (l.PCI == "" && l.Name != "testaes") {
			t.Errorf("%s has no description or PCI id", l.Name)
		}
		kinds[l.Name] = l.Kind
	}
	for _, n := range []string{"alix2d13", "net5501", "nslu2", "avila-gw2348"} {
		if kinds[n] != "board" {
			t.Errorf("%s: kind %q", n, kinds[n])
		}
	}
	for _, n := range []string{"vpn1401", "vpn1411", "hifn7956", "safenet1141"} {
		if kinds[n] != "card" {
			t.Errorf("%s: kind %q", n, kinds[n])
		}
	}
	text, _, _ := ocfw(t, "boards")
	if !strings.Contains(text, "alix2d13") || !strings.Contains(text, "(also: alix2d3)") || !strings.Contains(text, "CARD") {
		t.Errorf("text listing:\n%s", text)
	}
}

// What ocfw plan must get right, run as a user would: engine order per
// cipher (Geode, then a Hifn card, then the kernel's generic code, then
// Go), byte-identical output for the same inputs, a card refused for a
// board without its slot, and the OCF /dev/crypto note for SafeNet.
func TestPlanAcceptance(t *testing.T) {
	out, errs, code := ocfw(t, "plan", "--board", "alix2d13", "--card", "vpn1411", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var plan struct {
		Ciphers []struct {
			Cipher  string
			Engines []struct {
				Driver   string
				Hardware bool
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	order := map[string][]string{}
	for _, c := range plan.Ciphers {
		for _, e := range c.Engines {
			order[c.Cipher] = append(order[c.Cipher], e.Driver)
		}
	}
	if got := strings.Join(order["aes-128-cbc"], " "); got != "cbc-aes-geode cbc-aes-hifn0 cbc(aes-generic) go" {
		t.Errorf("aes-128-cbc served by %q", got)
	}
	if got := order["aes-256-cbc"]; len(got) == 0 || got[0] != "cbc-aes-hifn0" || got[len(got)-1] != "go" {
		t.Errorf("aes-256-cbc served by %q", got)
	}
	again, _, _ := ocfw(t, "plan", "--board", "alix2d13", "--card", "vpn1411", "--json")
	if again != out {
		t.Error("same inputs gave different plan bytes")
	}

	_, errs, code = ocfw(t, "plan", "--board", "nslu2", "--card", "vpn1401")
	if code == 0 || !strings.Contains(errs, "--card vpn1401") || !strings.Contains(errs, "slot") {
		t.Errorf("nslu2+vpn1401: exit %d, stderr %q", code, errs)
	}

	out, errs, code = ocfw(t, "plan", "--board", "net5501", "--card", "safenet1141")
	if code != 0 {
		t.Fatalf("net5501+safenet1141: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "OCF") || !strings.Contains(out, "/dev/crypto") {
		t.Errorf("plan does not say SafeNet needs an OCF /dev/crypto kernel:\n%s", out)
	}
}

func TestBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plan"}, "--board is required"},
		{[]string{"plan", "--board", "alix"}, `--board alix: unknown board "alix"`},
		{[]string{"plan", "--board", "alix2d13", "--card", "vpn"}, `--card vpn: unknown card`},
		{[]string{"plan", "--board", "alix2d13", "--cipher", "aes"}, `--cipher aes: unknown cipher "aes"`},
		{[]string{"plan", "--board", "alix2d13", "--require-hw", "aes-256-cbc"}, "--require-hw aes-256-cbc: no selected engine"},
		{[]string{"plan", "--bord", "alix2d13"}, "unknown flag: --bord"},
		{[]string{"board", "show", "alix3"}, `unknown board "alix3"`},
		{[]string{"validate"}, "validate needs one or more profile or site config files, got nothing; for example: ocfw validate myboard.yaml site.yaml"},
		{[]string{"board", "show"}, "board show needs one board or card name (see 'ocfw boards'), got nothing; for example: ocfw board show alix2d13"},
		{[]string{"board", "show", "a", "b"}, "board show needs one board or card name (see 'ocfw boards'), got 2 arguments"},
		{[]string{"flash"}, "flash needs the image and the target card (find the card with lsblk"},
		{[]string{"flash", "alix.img"}, "got 1 argument; for example: ocfw flash alix.img /dev/sdc"},
		{[]string{"inspect"}, "inspect needs one image file, got nothing; for example: ocfw inspect alix.img"},
		{[]string{"boards", "--profiles", "/nonexistent"}, "--profiles /nonexistent"},
	}
	for _, tc := range cases {
		out, errs, code := ocfw(t, tc.args...)
		if code == 0 {
			t.Errorf("%v: exit 0, stdout %q", tc.args, out)
		}
		if !strings.Contains(errs, tc.want) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, errs, tc.want)
		}
		if out != "" {
			t.Errorf("%v: printed %q on stdout despite failing", tc.args, out)
		}
	}
}

func TestBoardShow(t *testing.T) {
	out, _, code := ocfw(t, "board", "show", "alix2d3")
	if code != 0 || !strings.Contains(out, "board:         alix2d13") || !strings.Contains(out, "GO386=softfloat") || !strings.Contains(out, "cbc-aes-geode") {
		t.Errorf("board show alix2d3 (alias):\n%s", out)
	}
	if !strings.Contains(out, "cpu features:  fpu tsc cx8 mmx mmxext cmov 3dnow 3dnowext\n") {
		t.Errorf("board show alix2d3 lacks the CPU features:\n%s", out)
	}
	if !strings.Contains(out, "kernel:        debian: Debian package linux-image-686 (i386), bzImage\n") {
		t.Errorf("board show alix2d3 lacks the kernel source and package:\n%s", out)
	}
	out, _, code = ocfw(t, "board", "show", "nslu2")
	if code != 0 || !strings.Contains(out, "kernel:        user: zImage you supply\n") {
		t.Errorf("board show nslu2 lacks the kernel source:\n%s", out)
	}
	out, _, code = ocfw(t, "board", "show", "vpn1411", "--json")
	var v struct {
		Kind string
		Card struct{ Form string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Kind != "card" || v.Card.Form != "minipci" {
		t.Errorf("board show vpn1411 --json: %s", out)
	}
}

func TestValidateAndProfiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mycard.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	must(t, os.WriteFile(good, []byte("kind: card\nname: mycard\ndescription: a 7956 card\nform: minipci\npci: \"13a3:001d\"\nengine: hifn-795x\n"), 0o644))
	must(t, os.WriteFile(bad, []byte("kind: card\nname: bad\ndescription: x\nfrom: pci\n"), 0o644))

	out, errs, code := ocfw(t, "validate", good)
	if code != 0 || !strings.Contains(out, good+": ok (card mycard)") {
		t.Errorf("validate good: exit %d %q %q", code, out, errs)
	}
	_, errs, code = ocfw(t, "validate", good, bad)
	if code == 0 || !strings.Contains(errs, bad+`:4:1: unknown field "from"`) || !strings.Contains(errs, `did you mean "form"?`) {
		t.Errorf("validate bad: exit %d %q", code, errs)
	}
	// A user's card from --profiles is usable in a plan.
	must(t, os.Remove(bad))
	out, errs, code = ocfw(t, "--profiles", dir, "plan", "--board", "alix2d13", "--card", "mycard", "--cipher", "aes-128-cbc")
	if code != 0 || !strings.Contains(out, "mycard in minipci0") {
		t.Errorf("plan with --profiles card: exit %d %q %q", code, out, errs)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWatchdogDefault(t *testing.T) {
	const def = 10 * time.Minute
	for _, tc := range []struct {
		timeout          time.Duration
		set, interactive bool
		want             time.Duration
	}{
		{def, false, false, def},                       // scripted: the default watchdog
		{def, false, true, -1},                         // a person at the terminal: none
		{3 * time.Minute, true, true, 3 * time.Minute}, // given: kept
		{0, true, false, -1},                           // --timeout 0: none
	} {
		if got := watchdog(tc.timeout, tc.set, tc.interactive); got != tc.want {
			t.Errorf("watchdog(%v, set %v, interactive %v) = %v, want %v", tc.timeout, tc.set, tc.interactive, got, tc.want)
		}
	}
}
