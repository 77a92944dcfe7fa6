package boards

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// goodBoard is a valid user board profile the bad-input cases mutate.
const goodBoard = `kind: board
name: myalix
description: my ALIX
cpu:
  model: AMD Geode LX800
  mhz: 500
  arch: i586
  endian: little
  features: [fpu, tsc, cx8, mmx, cmov]
ram_mb: 256
storage:
  kind: cf
  card_mb: 128
console:
  device: ttyS0
  baud: 38400
boot: bios-cf
slots:
  - form: minipci
    count: 1
engine: geode-aes
kernel:
  source: debian
  package: linux-image-686
  arch: i386
  image: bzImage
image:
  size_mb: 120
  boot_mb: 32
  data_label: OCFWDATA
  compression: xz
`

func TestEmbeddedCatalog(t *testing.T) {
	cat, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range cat.Boards() {
		got = append(got, b.Name)
	}
	for _, c := range cat.Cards() {
		got = append(got, c.Name)
	}
	want := "alix2d13 avila-gw2348 net5501 nslu2 hifn7956 safenet1141 testaes virtio-crypto vpn1401 vpn1411"
	if strings.Join(got, " ") != want {
		t.Errorf("catalog = %q, want %q", strings.Join(got, " "), want)
	}
	b, err := cat.Board("alix2d3")
	if err != nil || b.Name != "alix2d13" {
		t.Errorf("alias alix2d3 = %v, %v; want alix2d13", b, err)
	}
	slots := map[string]string{"alix2d13": "minipci:1", "net5501": "pci:1 minipci:1", "avila-gw2348": "minipci:4", "nslu2": ""}
	for name, want := range slots {
		b, _ := cat.Board(name)
		var s []string
		for _, sl := range b.Slots {
			s = append(s, sl.Form+":"+strconv.Itoa(sl.Count))
		}
		if strings.Join(s, " ") != want {
			t.Errorf("%s slots = %q, want %q", name, strings.Join(s, " "), want)
		}
	}
}

// replace returns goodBoard with one line replaced (old must exist).
func replace(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(goodBoard, old) {
		t.Fatalf("test bug: %q not in goodBoard", old)
	}
	return strings.Replace(goodBoard, old, new, 1)
}

func TestParseBadInput(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // substrings of the one error message, in order
	}{
		{"unknown field", replace(t, "slots:\n", "slot:\n"),
			[]string{"my.yaml:18:1:", `unknown field "slot"`, `did you mean "slots"?`, "valid fields:"}},
		{"misspelled nested field", replace(t, "  baud: 38400", "  baut: 38400"),
			[]string{"my.yaml:16:3:", `unknown field "baut" in "console"`, `did you mean "baud"?`}},
		{"wrong type int", replace(t, "ram_mb: 256", "ram_mb: lots"),
			[]string{"my.yaml:10:9:", `field "ram_mb": want an integer, got "lots"`}},
		{"wrong type list", replace(t, "slots:\n  - form: minipci\n    count: 1", "slots: minipci"),
			[]string{"my.yaml:18:8:", `field "slots": want a list, got "minipci"`}},
		{"wrong type mapping", replace(t, "console:\n  device: ttyS0\n  baud: 38400", "console: ttyS0"),
			[]string{"my.yaml:14:10:", `field "console": want a mapping of fields`}},
		{"unknown engine", replace(t, "engine: geode-aes", "engine: geode_aes"),
			[]string{"my.yaml:21:9:", `engine "geode_aes"`, `did you mean "geode-aes"?`}},
		{"unknown watchdog", replace(t, "engine: geode-aes", "engine: geode-aes\nwatchdog: geode-wdt"),
			[]string{"my.yaml:22:11:", `watchdog "geode-wdt"`, `"geodewdt", "i6300esb"`}},
		{"unknown form factor", replace(t, "form: minipci", "form: mini-pcie"),
			[]string{"my.yaml:19:11:", `slots[0].form "mini-pcie"`, `"pci", "minipci"`}},
		{"unknown boot", replace(t, "boot: bios-cf", "boot: uboot"),
			[]string{"my.yaml:17:7:", `boot "uboot": want one of "bios-cf", "redboot"`}},
		{"bad baud", replace(t, "baud: 38400", "baud: 38401"),
			[]string{"my.yaml:16:9:", "console.baud 38401: want one of 9600, 19200, 38400, 57600, 115200"}},
		{"big-endian arm", replace(t, "  arch: i586\n  endian: little", "  arch: armv5te\n  endian: big"),
			[]string{"my.yaml:8:11:", "big-endian ARM: Go has no big-endian ARM port", "little-endian kernel"}},
		{"cpu without cmov for Debian's 686 kernel", replace(t, "features: [fpu, tsc, cx8, mmx, cmov]", "features: [fpu, tsc, cx8, mmx]"),
			[]string{"my.yaml:9:13:", "kernel.package linux-image-686 needs a CPU with cmov", "not present on the CPU: cmov", "kernel.source: user"}},
		{"cpu without pae for the pae kernel", replace(t, "package: linux-image-686", "package: linux-image-686-pae"),
			[]string{"my.yaml:9:13:", "kernel.package linux-image-686-pae needs a CPU with pae"}},
		{"unknown cpu feature", replace(t, "cx8, mmx, cmov]", "cx8, mmx, cmovv]"),
			[]string{"my.yaml:9:34:", `cpu.features: "cmovv" is not a feature ocfw knows for i586`, `did you mean "cmov"?`}},
		{"arm feature on x86", replace(t, "cx8, mmx, cmov]", "cx8, mmx, cmov, armv5te]"),
			[]string{"my.yaml:9:40:", `"armv5te" is not a feature ocfw knows for i586`}},
		{"cpu features missing", replace(t, "  features: [fpu, tsc, cx8, mmx, cmov]\n", ""),
			[]string{"my.yaml:5:3:", `missing field "cpu.features"`, "[fpu, tsc, cx8, mmx, cmov] for a Geode LX"}},
		{"kernel dtb not a device tree file", replace(t, "  image: bzImage\n", "  image: bzImage\n  dtb: boot/nslu2.img\n"),
			[]string{"my.yaml:27:8:", `kernel.dtb "boot/nslu2.img": want a device tree file name`}},
		{"kernel board file not a config option", replace(t, "  image: bzImage\n", "  image: bzImage\n  board_file: MACH_NSLU2\n"),
			[]string{"my.yaml:27:15:", `kernel.board_file "MACH_NSLU2": want a kernel config option such as "CONFIG_MACH_NSLU2"`}},
		{"empty file", "", []string{"my.yaml: empty file"}},
		{"only whitespace", "  \n\n", []string{"my.yaml: empty file"}},
		{"only comments", "# nothing here\n", []string{"my.yaml: empty file (only comments)"}},
		{"missing kind", "name: x\n", []string{"my.yaml:1:1:", `missing field "kind"`}},
		{"wrong kind", "kind: bord\nname: x\n", []string{"my.yaml:1:7:", `kind "bord"`, `did you mean "board"?`}},
		{"two documents", goodBoard + "---\nkind: card\n", []string{"my.yaml:", "second YAML document", "one profile per file"}},
		{"syntax error", "kind: board\nname: [x\n", []string{"my.yaml:", "YAML syntax"}},
		{"not a mapping", "- a\n- b\n", []string{"my.yaml:1:1:", "want a mapping of fields"}},
		{"card with unknown engine", "kind: card\nname: c\ndescription: d\nform: pci\npci: \"13a3:0020\"\nengine: hifn\n",
			[]string{"my.yaml:6:9:", `engine "hifn"`}},
		{"card pci id not of engine", "kind: card\nname: c\ndescription: d\nform: pci\npci: \"13a3:0005\"\nengine: hifn-795x\n",
			[]string{"my.yaml:5:6:", "pci 13a3:0005 is not a chip the hifn-795x engine drives", "13a3:0020 (Hifn 7955)"}},
		{"card bad pci syntax", "kind: card\nname: c\ndescription: d\nform: pci\npci: 13a30020\nengine: hifn-795x\n",
			[]string{"my.yaml:5:6:", `want the card's vendor:device id`}},
		{"stand-in engine on a real card", "kind: card\nname: c\ndescription: d\nform: pci\npci: \"1af4:1054\"\nengine: virtio-crypto\n",
			[]string{"my.yaml:6:9:", "engine virtio-crypto exists only in QEMU runs", "form: qemu"}},
		{"real engine on a qemu card", "kind: card\nname: c\ndescription: d\nform: qemu\npci: \"13a3:0020\"\nengine: hifn-795x\n",
			[]string{"my.yaml:6:9:", "engine hifn-795x is real hardware"}},
		{"qemu card pci id not of engine", "kind: card\nname: c\ndescription: d\nform: qemu\npci: \"1af4:1000\"\nengine: virtio-crypto\n",
			[]string{"my.yaml:5:6:", "pci 1af4:1000 is not a chip the virtio-crypto engine drives", "1af4:1054"}},
		{"test engine with a pci id", "kind: card\nname: c\ndescription: d\nform: qemu\npci: \"1af4:1054\"\nengine: testaes\n",
			[]string{"my.yaml:5:6:", "engine testaes has no device"}},
		{"stand-in as a board's engine", replace(t, "engine: geode-aes", "engine: virtio-crypto"),
			[]string{"my.yaml:21:9:", `engine "virtio-crypto"`, `"geode-aes"`}},
		{"alias anchor", replace(t, "ram_mb: 256", "ram_mb: &r 256\nmhz2: *r"),
			[]string{"my.yaml:11:1:", `unknown field "mhz2"`}},
		{"image larger than card", replace(t, "size_mb: 120", "size_mb: 200"),
			[]string{"my.yaml:28:12:", "image.size_mb 200", "128 MB card"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("my.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.yaml)
			}
			var l ErrorList
			if !errors.As(err, &l) {
				t.Fatalf("error %T %v is not an ErrorList", err, err)
			}
			msg := err.Error()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q\nlacks %q (after position %d)", msg, w, at)
				}
				at += i + len(w)
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	p, err := Parse("my.yaml", []byte(goodBoard))
	if err != nil {
		t.Fatal(err)
	}
	if p.Board == nil || p.Board.Name != "myalix" || p.Board.Console.Baud != 38400 || p.Board.Slots[0].Count != 1 {
		t.Errorf("parsed %+v", p.Board)
	}
}

// A CPU without cmov is fine with a kernel the user builds for it.
// A typo of a feature the kernel needs is one error, not two.
func TestParseFeatureTypoOneError(t *testing.T) {
	_, err := Parse("my.yaml", []byte(replace(t, "cx8, mmx, cmov]", "cx8, mmx, cmovv]")))
	var l ErrorList
	if !errors.As(err, &l) || len(l) != 1 {
		t.Fatalf("want 1 error, got %v", err)
	}
}

func TestParseNoCMOVUserKernel(t *testing.T) {
	y := strings.Replace(goodBoard, "features: [fpu, tsc, cx8, mmx, cmov]", "features: [fpu, tsc, cx8, mmx]", 1)
	y = strings.Replace(y, "  source: debian\n  package: linux-image-686\n  arch: i386\n", "  source: user\n", 1)
	p, err := Parse("my.yaml", []byte(y))
	if err != nil || strings.Join(p.Board.CPU.Features, " ") != "fpu tsc cx8 mmx" {
		t.Fatalf("%v %+v", err, p.Board)
	}
}

func TestParseReportsAllErrors(t *testing.T) {
	y := strings.Replace(strings.Replace(goodBoard, "ram_mb: 256", "ram_mb: x", 1), "slots:", "slotz:", 1)
	_, err := Parse("my.yaml", []byte(y))
	var l ErrorList
	if !errors.As(err, &l) || len(l) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
}

func TestDuplicateNames(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	write(t, a, goodBoard)
	write(t, b, strings.Replace(goodBoard, "description: my ALIX", "description: again", 1))
	_, err := LoadFiles([]string{a, b})
	if err == nil || !strings.Contains(err.Error(), b+`:2:7: duplicate profile name "myalix": already defined at `+a+":2:7") {
		t.Fatalf("err = %v", err)
	}
	// An alias clashing with another board's name is a duplicate too.
	write(t, b, strings.Replace(strings.Replace(goodBoard, "name: myalix", "name: other\naliases: [myalix]", 1), "description: my ALIX", "description: x", 1))
	_, err = LoadFiles([]string{a, b})
	if err == nil || !strings.Contains(err.Error(), `duplicate profile name "myalix"`) {
		t.Fatalf("alias clash: err = %v", err)
	}
	// The same within a --profiles directory.
	c, _ := Embedded()
	if err := c.Overlay(dir); err == nil || !strings.Contains(err.Error(), "duplicate profile name") {
		t.Fatalf("overlay with duplicates: err = %v", err)
	}
}

func TestOverlayOverridesAndAdds(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "alix.yaml"), strings.Replace(strings.Replace(goodBoard, "name: myalix", "name: alix2d13", 1), "baud: 38400", "baud: 115200", 1))
	write(t, filepath.Join(dir, "sub", "mine.yml"), goodBoard)
	write(t, filepath.Join(dir, "README.txt"), "not a profile")
	c, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Overlay(dir); err != nil {
		t.Fatal(err)
	}
	b, err := c.Board("alix2d13")
	if err != nil || b.Console.Baud != 115200 || b.File() != filepath.Join(dir, "alix.yaml") {
		t.Errorf("override: %+v %v", b, err)
	}
	// The replaced board's aliases went with it.
	if _, err := c.Board("alix2d3"); err == nil {
		t.Error("alias of the replaced board still resolves")
	}
	if _, err := c.Board("myalix"); err != nil {
		t.Errorf("added board: %v", err)
	}
	var pe *ProfilesError
	if err := c.Overlay(filepath.Join(dir, "missing")); !errors.As(err, &pe) || pe.Dir != filepath.Join(dir, "missing") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: %v", err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// FuzzParse feeds the profile loader arbitrary bytes: it must never panic,
// and an accepted profile must have a name. The seed corpus (run by plain
// go test) is every embedded profile plus broken variants.
func FuzzParse(f *testing.F) {
	entries, err := embedded.ReadDir("profiles")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		data, err := embedded.ReadFile("profiles/" + e.Name())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	for _, s := range []string{"", "---", "kind: board", "kind: card\nname: [", "a: &x [*x]", "kind: board\nslots: [{form: pci, count: 99999999999999999999}]", "\x00\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err == nil && p.Name() == "" {
			t.Fatalf("accepted a profile without a name: %q", data)
		}
	})
}

// A user board may not take a built-in board's name or alias as an
// alias (or as its name, when that is a built-in alias): it would hide
// the built-in board. Replacing the built-in by name is fine.
func TestOverlayShadowing(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       string // "" = accepted
	}{
		{"alias of a built-in alias", strings.Replace(goodBoard, "name: myalix\n", "name: myalix\naliases: [mine, alix2d3]\n", 1),
			`mine.yaml:3:17: alias "alix2d3" is an alias of the built-in board alix2d13 (boards/profiles/alix2d13.yaml): it would hide it`},
		{"alias of a built-in name", strings.Replace(goodBoard, "name: myalix\n", "name: myalix\naliases: [net5501]\n", 1),
			`mine.yaml:3:11: alias "net5501" is the name of the built-in board net5501`},
		{"name of a built-in alias", strings.Replace(goodBoard, "name: myalix\n", "name: gw2348-4\n", 1),
			`mine.yaml:2:7: name "gw2348-4" is an alias of the built-in board avila-gw2348`},
		{"replacing the built-in keeps its alias", strings.Replace(goodBoard, "name: myalix\n", "name: alix2d13\naliases: [alix2d3]\n", 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "mine.yaml"), tc.yaml)
			c, err := Embedded()
			if err != nil {
				t.Fatal(err)
			}
			err = c.Overlay(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b, err := c.Board("alix2d3"); err != nil || b.File() != filepath.Join(dir, "mine.yaml") {
					t.Errorf("alix2d3 = %v, %v; want the user's replacement", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, tc.want)) {
				t.Fatalf("err = %v\nwant %s", err, filepath.Join(dir, tc.want))
			}
			// Nothing of a refused overlay is used.
			if b, _ := c.Board("alix2d3"); b == nil || b.Name != "alix2d13" {
				t.Errorf("after the refused overlay alix2d3 = %v", b)
			}
		})
	}
}

// Bad input must neither hang nor fill memory, and is refused with the
// file's name and what is wrong.
func TestProfileFileRefusals(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yaml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(1 << 30) // sparse: no disk used, and none of it may be read
	f.Close()
	for _, tc := range []struct{ file, want string }{
		{fifo, fifo + ": not a regular file but a named pipe (FIFO)"},
		{"/dev/zero", "/dev/zero: not a regular file but a character device"},
		{huge, huge + ": the file is 1 GiB (1073741824 bytes), over the limit of 256 KiB for a profile"},
	} {
		var err error
		within(t, 10*time.Second, func() { _, err = LoadFiles([]string{tc.file}) })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.file, err, tc.want)
		}
	}
	// A 200 KiB value is cut in messages.
	long := strings.Repeat("x", 200<<10)
	_, err = Parse("my.yaml", []byte(strings.Replace(goodBoard, "name: myalix", "name: "+long, 1)))
	if err == nil || len(err.Error()) > 1000 || !strings.Contains(err.Error(), `..." (204800 bytes)`) {
		t.Errorf("long name: %d-byte message: %.300s", len(err.Error()), err)
	}
}

// The same in a --profiles directory: a FIFO or a directory named like a
// profile is an error naming it.
func TestOverlayRefusesNonFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ok.yaml"), goodBoard)
	if err := syscall.Mkfifo(filepath.Join(dir, "a.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "sub.yaml", "README"), "a directory named like a profile")
	c, _ := Embedded()
	var err error
	within(t, 10*time.Second, func() { err = c.Overlay(dir) })
	for _, want := range []string{
		filepath.Join(dir, "a.yaml") + ": not a regular file but a named pipe (FIFO)",
		filepath.Join(dir, "sub.yaml") + ": a directory named like a profile file",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("overlay: %v\nwant %q", err, want)
		}
	}
}

// within fails the test if f has not returned after d.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %v: blocked on input", d)
	}
}
