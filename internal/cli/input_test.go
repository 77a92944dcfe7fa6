package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ocfwWithin runs the CLI in-process and fails the test if it has not
// returned within d: bad input must never hang a command.
func ocfwWithin(t *testing.T, d time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	type result struct {
		out, errs string
		code      int
	}
	done := make(chan result, 1)
	go func() {
		out, errs, code := ocfw(t, args...)
		done <- result{out, errs, code}
	}()
	select {
	case r := <-done:
		return r.out, r.errs, r.code
	case <-time.After(d):
		t.Fatalf("ocfw %s: still running after %v", strings.Join(args, " "), d)
	}
	return "", "", 0
}

func TestBadInputDoesNotHang(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "a.yaml")
	must(t, syscall.Mkfifo(fifo, 0o644))
	// Whatever happens, do not leave a reader blocked on the FIFO.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			f.Close()
		}
	})
	huge := filepath.Join(dir, "huge.yaml")
	f, err := os.Create(huge)
	must(t, err)
	must(t, f.Truncate(1<<30)) // sparse; validate must not read it
	f.Close()
	long := filepath.Join(dir, "long.yaml")
	must(t, os.WriteFile(long, []byte("kind: card\nname: "+strings.Repeat("n", 200<<10)+"\n"), 0o644))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "/dev/zero"}, "/dev/zero: not a regular file but a character device"},
		{[]string{"validate", fifo}, fifo + ": not a regular file but a named pipe (FIFO)"},
		{[]string{"inspect", fifo}, fifo + ": not a regular file but a named pipe (FIFO)"},
		{[]string{"inspect", "/dev/zero"}, "/dev/zero: not a regular file"},
		{[]string{"--profiles", dir, "boards"}, fifo + ": not a regular file"},
		{[]string{"validate", huge}, huge + ": the file is 1 GiB (1073741824 bytes), over the limit of 256 KiB for a profile"},
		{[]string{"validate", long}, `name "` + strings.Repeat("n", 60) + `..." (204800 bytes): want lower-case letters`},
		{[]string{"plan", "--board", strings.Repeat("b", 1<<20)}, `unknown board "` + strings.Repeat("b", 60) + `..." (1048576 bytes)`},
	} {
		out, errs, code := ocfwWithin(t, 20*time.Second, tc.args...)
		name := strings.Join(tc.args, " ")
		if len(name) > 100 {
			name = name[:100]
		}
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("ocfw %s: exit %d, stderr %.500q\nwant %q", name, code, errs, tc.want)
		}
		if len(errs) > 4096 {
			t.Errorf("ocfw %s: %d bytes on stderr: a value was echoed in full", name, len(errs))
		}
		if out != "" {
			t.Errorf("ocfw %s: printed %q on stdout despite failing", name, out)
		}
	}
}

// A user profile whose alias is a built-in board's alias is refused at
// its line and column instead of silently answering for alix2d3.
func TestProfilesAliasShadowing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.yaml")
	b, err := os.ReadFile("../../boards/profiles/net5501.yaml")
	must(t, err)
	y := strings.Replace(string(b), "name: net5501\n", "name: mine\naliases: [alix2d3]\n", 1)
	must(t, os.WriteFile(file, []byte(y), 0o644))
	_, errs, code := ocfw(t, "--profiles", dir, "board", "show", "alix2d3")
	want := file + `:` // FILE:LINE:COL
	if code == 0 || !strings.Contains(errs, want) || !strings.Contains(errs, `alias "alix2d3" is an alias of the built-in board alix2d13`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	// Replacing alix2d13 by name may keep the alias.
	y = strings.Replace(string(b), "name: net5501\n", "name: alix2d13\naliases: [alix2d3]\n", 1)
	must(t, os.WriteFile(file, []byte(y), 0o644))
	out, errs, code := ocfw(t, "--profiles", dir, "board", "show", "alix2d3")
	if code != 0 || !strings.Contains(out, "file:          "+file) {
		t.Errorf("replacement by name: exit %d\n%s%s", code, out, errs)
	}
}

// Four different mistakes in one profile come out in one run, each at
// FILE:LINE:COL, and nothing else: the typo "ram" is not also reported
// as a missing ram_mb, the bad baud not also as an impossible one.
func TestValidateReportsEveryMistake(t *testing.T) {
	b, err := os.ReadFile("../../boards/profiles/alix2d13.yaml")
	must(t, err)
	y := string(b)
	for _, r := range [][2]string{
		{"ram_mb: 256", "ram: 256"},      // unknown field
		{"baud: 38400", "baud: fast"},    // wrong type
		{"boot: bios-cf", "boot: uboot"}, // impossible value
		{"description: PC Engines ALIX 2d13/2d3, AMD Geode LX800, 3 LAN, CF boot\n", ""}, // missing field
	} {
		if !strings.Contains(y, r[0]) {
			t.Fatalf("test bug: %q not in the profile", r[0])
		}
		y = strings.Replace(y, r[0], r[1], 1)
	}
	file := filepath.Join(t.TempDir(), "four.yaml")
	must(t, os.WriteFile(file, []byte(y), 0o644))
	_, errs, code := ocfw(t, "validate", file)
	want := []string{
		file + `:2:1: missing field "description"`, // where the mapping begins,
		file + `:12:1: unknown field "ram" in board profile (did you mean "ram_mb"?)`,
		file + `:18:9: field "console.baud": want an integer, got "fast"`,
		file + `:19:7: boot "uboot": want one of "bios-cf", "redboot"`,
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if code == 0 || len(lines) != len(want)+1 || !strings.Contains(lines[len(lines)-1], "4 problem(s)") {
		t.Fatalf("exit %d, want the 4 mistakes and a count:\n%s", code, errs)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d:\n%s\nwant a line beginning\n%s", i+1, lines[i], w)
		}
	}
}

// A Soekris net4801 (Geode GX1, no cmov) with Debian's 686 kernel would
// not boot: validate refuses it and says what would work.
func TestValidateRefusesKernelTheCPUCannotRun(t *testing.T) {
	b, err := os.ReadFile("../../boards/profiles/net5501.yaml")
	must(t, err)
	y := string(b)
	for _, r := range [][2]string{
		{"name: net5501", "name: net4801"},
		{"model: AMD Geode LX", "model: National Semiconductor Geode GX1"},
		{"features: [fpu, tsc, cx8, mmx, mmxext, cmov, 3dnow, 3dnowext]", "features: [fpu, tsc, cx8, mmx]"},
	} {
		if !strings.Contains(y, r[0]) {
			t.Fatalf("test bug: %q not in the profile", r[0])
		}
		y = strings.Replace(y, r[0], r[1], 1)
	}
	file := filepath.Join(t.TempDir(), "net4801.yaml")
	must(t, os.WriteFile(file, []byte(y), 0o644))
	_, errs, code := ocfw(t, "validate", file)
	if code == 0 || !strings.Contains(errs, file+":12:13: kernel.package linux-image-686 needs a CPU with cmov") || !strings.Contains(errs, "kernel.source: user") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
