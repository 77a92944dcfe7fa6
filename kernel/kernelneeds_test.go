package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/plan"
)

func resolveReq(t *testing.T, req boards.Request) *plan.Plan {
	t.Helper()
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Resolve(req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// findNeed is the need that names opt in any alternative.
func findNeed(needs []Need, opt string) (Need, bool) {
	for _, n := range needs {
		for _, alt := range n.AnyOf {
			if contains(alt, opt) {
				return n, true
			}
		}
	}
	return Need{}, false
}

// The board-level IXP4xx needs come only with a real IXP4xx plan: not
// with the Geode boards' Debian kernel, nor the QEMU stand-in's.
func TestNeeds(t *testing.T) {
	ixpOnly := []string{"CONFIG_ARCH_IXP4XX", "CONFIG_CPU_BIG_ENDIAN", "CONFIG_AEABI", "CONFIG_IXP4XX_NPE", "CONFIG_IXP4XX_QMGR",
		"CONFIG_ARM_APPENDED_DTB", "CONFIG_SERIAL_8250_CONSOLE", "CONFIG_FUTEX", "CONFIG_PACKET"}
	for _, tc := range []struct {
		name    string
		req     boards.Request
		ixp     bool
		machine string // the board-file alternative to the appended DTB
		want    []string
		absent  []string
	}{
		{"nslu2", boards.Request{Board: "nslu2"}, true, "CONFIG_MACH_NSLU2",
			[]string{"CONFIG_CRYPTO_DEV_IXP4XX", "CONFIG_IXP4XX_ETH", "CONFIG_RD_XZ", "CONFIG_USB_STORAGE"}, []string{"CONFIG_PATA_IXP4XX_CF", "CONFIG_CRYPTO_DEV_GEODE", "CONFIG_CRYPTO_AEAD"}},
		{"avila with a card", boards.Request{Board: "gw2348-4", Cards: []string{"vpn1411"}}, true, "CONFIG_MACH_AVILA",
			[]string{"CONFIG_CRYPTO_DEV_HIFN_795X", "CONFIG_PCI", "CONFIG_PCI_IXP4XX", "CONFIG_PATA_IXP4XX_CF"}, []string{"CONFIG_USB_STORAGE"}},
		{"alix2d13", boards.Request{Board: "alix2d13"}, false, "",
			[]string{"CONFIG_CRYPTO_DEV_GEODE", "CONFIG_VIA_RHINE", "CONFIG_BLK_DEV_INITRD", "CONFIG_CRYPTO_AEAD"}, []string{"CONFIG_CRYPTO_DEV_IXP4XX", "CONFIG_KERNEL_XZ"}},
		{"nslu2 stand-in", boards.Request{Board: "nslu2", StandIn: true}, false, "",
			[]string{"CONFIG_CRYPTO_USER_API_SKCIPHER"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := resolveReq(t, tc.req)
			needs := Needs(p)
			if IXP4xx(p) != tc.ixp {
				t.Fatalf("IXP4xx = %v, want %v", IXP4xx(p), tc.ixp)
			}
			want, absent := tc.want, tc.absent
			if tc.ixp {
				want = append(want, ixpOnly...)
			} else {
				absent = append(absent, ixpOnly...)
			}
			for _, o := range want {
				if _, ok := findNeed(needs, o); !ok {
					t.Errorf("no need names %s", o)
				}
			}
			for _, o := range absent {
				if n, ok := findNeed(needs, o); ok {
					t.Errorf("need %+v should not be there", n)
				}
			}
			if !tc.ixp {
				return
			}
			if n, _ := findNeed(needs, "CONFIG_CPU_BIG_ENDIAN"); n.Want != WantUnset || n.Optional {
				t.Errorf("big-endian need %+v, want it required unset", n)
			}
			n, _ := findNeed(needs, "CONFIG_ARM_APPENDED_DTB")
			if len(n.AnyOf) != 2 || !contains(n.AnyOf[1], tc.machine) || !strings.Contains(n.Why, ".dtb") {
				t.Errorf("device-tree need %+v, want the appended DTB or %s", n, tc.machine)
			}
			for _, o := range []string{"CONFIG_USB_STORAGE", "CONFIG_PATA_IXP4XX_CF", "CONFIG_KERNEL_XZ"} {
				if n, ok := findNeed(needs, o); ok && !n.Optional {
					t.Errorf("%s is required, want optional", o)
				}
			}
		})
	}
}

func TestNeedMet(t *testing.T) {
	either := Need{AnyOf: [][]string{{"CONFIG_A", "CONFIG_B"}, {"CONFIG_C"}}, Want: WantY}
	for _, tc := range []struct {
		n    Need
		cfg  map[string]string
		want bool
	}{
		{either, map[string]string{"CONFIG_A": "y", "CONFIG_B": "y"}, true},
		{either, map[string]string{"CONFIG_A": "y", "CONFIG_B": "m"}, false},
		{either, map[string]string{"CONFIG_A": "y", "CONFIG_C": "y"}, true},
		{either, map[string]string{"CONFIG_A": "y"}, false},
		{Need{AnyOf: [][]string{{"CONFIG_X"}}, Want: WantYM}, map[string]string{"CONFIG_X": "m"}, true},
		{Need{AnyOf: [][]string{{"CONFIG_X"}}, Want: WantYM}, map[string]string{"CONFIG_X": "n"}, false},
		{Need{AnyOf: [][]string{{"CONFIG_X"}}, Want: WantUnset}, map[string]string{}, true},
		{Need{AnyOf: [][]string{{"CONFIG_X"}}, Want: WantUnset}, map[string]string{"CONFIG_X": "y"}, false},
	} {
		if got := tc.n.Met(tc.cfg); got != tc.want {
			t.Errorf("%s with %v: met %v, want %v", tc.n.Options(), tc.cfg, got, tc.want)
		}
	}
}

func TestNPEMicrocode(t *testing.T) {
	for _, tc := range []struct {
		board string
		want  map[string][]string // file → substrings of its users
	}{
		{"nslu2", map[string][]string{"NPE-B": {"port wan (eth0"}, "NPE-C": {"ixp4xx crypto engine"}}},
		{"avila-gw2348", map[string][]string{"NPE-B": {"port wan (eth0"}, "NPE-C": {"port lan (eth1", "ixp4xx crypto engine"}}},
		{"alix2d13", map[string][]string{}},
	} {
		mc := NPEMicrocode(resolvePlan(t, tc.board))
		if len(mc) != len(tc.want) {
			t.Errorf("%s: microcode %+v, want %d files", tc.board, mc, len(tc.want))
		}
		for _, m := range mc {
			users := strings.Join(m.Users, "; ")
			for _, w := range tc.want[m.File] {
				if !strings.Contains(users, w) {
					t.Errorf("%s: %s used by %q, want %q", tc.board, m.File, users, w)
				}
			}
			if len(m.Users) != len(tc.want[m.File]) {
				t.Errorf("%s: %s used by %q, want %d users", tc.board, m.File, users, len(tc.want[m.File]))
			}
		}
	}
}

// A config written from the fragment meets every need, optional ones
// too, and a kernel with it loads; taking options away or turning the
// CPU big-endian gives problems naming them, all at once.
func TestIXP4xxConfigCheck(t *testing.T) {
	for _, board := range []string{"nslu2", "avila-gw2348"} {
		p := resolvePlan(t, board)
		frag := Fragment(p, []string{"header"})
		d := t.TempDir()
		cfgFile := write(t, filepath.Join(d, "fragment"), []byte(frag))
		cfg, err := ReadConfig(cfgFile)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range Needs(p) {
			if !n.Met(cfg) {
				t.Errorf("%s: the fragment does not meet %s (%s)", board, n.Options(), n.Why)
			}
		}
		if !strings.HasPrefix(frag, "# header\n") || !strings.Contains(frag, "# CONFIG_CPU_BIG_ENDIAN is not set\n") {
			t.Errorf("%s: fragment lacks its header or the endianness line:\n%s", board, frag)
		}
		// Deterministic: a second plan resolved anew gives the same bytes.
		if again := Fragment(resolvePlan(t, board), []string{"header"}); again != frag {
			t.Errorf("%s: fragment not deterministic", board)
		}
	}

	nslu2 := resolvePlan(t, "nslu2")
	base := Fragment(nslu2, nil)
	edit := func(drop []string, add string) string {
		var out []string
		for _, l := range strings.Split(base, "\n") {
			keep := true
			for _, o := range drop {
				if strings.HasPrefix(l, o+"=") {
					keep = false
				}
			}
			if keep {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n") + add
	}
	for _, tc := range []struct {
		name    string
		version string
		config  string
		want    []string // substrings of the error; none: loads
	}{
		{"the fragment", "7.3.0", base, nil},
		{"without the NPE driver", "7.3.0", edit([]string{"CONFIG_IXP4XX_NPE"}, ""), []string{"CONFIG_IXP4XX_NPE is not set"}},
		{"big-endian", "7.3.0", base + "CONFIG_CPU_BIG_ENDIAN=y\n", []string{"CONFIG_CPU_BIG_ENDIAN=y, want CONFIG_CPU_BIG_ENDIAN not set"}},
		{"several at once", "7.3.0", edit([]string{"CONFIG_AEABI", "CONFIG_IXP4XX_QMGR"}, "CONFIG_CPU_BIG_ENDIAN=y\n"),
			[]string{"3 problems", "CONFIG_AEABI is not set", "CONFIG_IXP4XX_QMGR is not set", "CONFIG_CPU_BIG_ENDIAN=y"}},
		{"old board-file kernel", "5.4.0", edit([]string{"CONFIG_ARM_APPENDED_DTB", "CONFIG_SERIAL_OF_PLATFORM"}, "CONFIG_MACH_NSLU2=y\n"), nil},
		{"neither DTB nor board file", "7.3.0", edit([]string{"CONFIG_ARM_APPENDED_DTB"}, ""),
			[]string{"CONFIG_ARM_APPENDED_DTB is not set", "CONFIG_MACH_NSLU2 is not set"}},
		{"optional ones may go", "7.3.0", edit([]string{"CONFIG_USB_STORAGE", "CONFIG_KERNEL_XZ"}, ""), nil},
		{"before 3.7 without built-in microcode", "3.2.0-4-ixp4xx", base, []string{"older than 3.7", "NPE-B and NPE-C", `CONFIG_EXTRA_FIRMWARE="NPE-B NPE-C"`}},
		{"before 3.7 with built-in microcode", "3.2.0-4-ixp4xx", base + "CONFIG_EXTRA_FIRMWARE=\"NPE-B NPE-C\"\n", nil},
		{"older than Go runs on", "2.6.32", base + "CONFIG_EXTRA_FIRMWARE=\"NPE-B NPE-C\"\n", []string{"older than 3.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			img := write(t, filepath.Join(d, "zImage"), zImage(binary.LittleEndian))
			mods := modulesTree(t, d, tc.version, allModules(nslu2), nil)
			cfg := write(t, filepath.Join(d, "config"), []byte(tc.config))
			_, err := Load(context.Background(), nslu2, img+":"+mods+":"+cfg, t.TempDir())
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ke *Error
			if !errors.As(err, &ke) {
				t.Fatalf("err = %v, want a *Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestKernelVersion(t *testing.T) {
	for _, tc := range []struct {
		v            string
		major, minor int
		ok           bool
	}{
		{"6.1.0-57-686", 6, 1, true},
		{"3.2.0-4-ixp4xx", 3, 2, true},
		{"7.3", 7, 3, true},
		{"5.19-rc1", 5, 19, true},
		{"", 0, 0, false},
		{"vmlinuz", 0, 0, false},
	} {
		x, y, ok := kernelVersion(tc.v)
		if x != tc.major || y != tc.minor || ok != tc.ok {
			t.Errorf("kernelVersion(%q) = %d, %d, %v; want %d, %d, %v", tc.v, x, y, ok, tc.major, tc.minor, tc.ok)
		}
	}
	if !versionBefore("3.2.0-4-ixp4xx", "3.7") || versionBefore("3.10.0", "3.7") || versionBefore("", "3.2") {
		t.Error("versionBefore compares wrongly")
	}
}

// The advice is the IXP4xx boards' alone, and says what differs between
// a board that boots from flash and one with a CF card.
func TestAdvice(t *testing.T) {
	for _, tc := range []struct {
		board       string
		ixp         bool
		start, none string
	}{
		{"alix2d13", false, "", ""},
		{"nslu2", true, "Write only the Kernel and Ramdisk partitions", "BASE.redboot.txt"},
		{"avila-gw2348", true, "BASE.redboot.txt", "Write only the Kernel and Ramdisk partitions"},
	} {
		p := resolvePlan(t, tc.board)
		build := strings.Join(BuildAdvice(p), "\n")
		if got := strings.Contains(build, "LITTLE-ENDIAN IXP4xx"); got != tc.ixp {
			t.Errorf("%s: BuildAdvice IXP4xx = %v, want %v:\n%s", tc.board, got, tc.ixp, build)
		}
		if got := len(VersionAdvice(p)) > 0; got != tc.ixp {
			t.Errorf("%s: VersionAdvice given = %v, want %v", tc.board, got, tc.ixp)
		}
		start := strings.Join(StartAdvice(p), "\n")
		if !tc.ixp {
			if start != "" {
				t.Errorf("%s: StartAdvice = %q, want none", tc.board, start)
			}
			continue
		}
		if !strings.Contains(start, tc.start) || strings.Contains(start, tc.none) {
			t.Errorf("%s: StartAdvice lacks %q or has %q:\n%s", tc.board, tc.start, tc.none, start)
		}
	}
}
