package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ocfw/ocfw/site"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/build"
	"github.com/ocfw/ocfw/internal/progress"
	"github.com/ocfw/ocfw/ocf/fault"
	"github.com/ocfw/ocfw/plan"
)

type buildFlags struct {
	planRequest
	kernel    string
	initramfs string
	output    string
	size      string
	cardMB    int
	budget    string
	espBudget string
	inject    []string // --test-inject as given
	engines   []string // its faulty engines (ocf/fault)
	testBreak string   // its break of the whole system (plan.TestBreaks)
	site      string
	siteCfg   *site.Site
	fwFiles   []string
	json      bool
	noCache   bool
	force     bool // replace an existing -o file that is not an earlier build

	// allowPlaceholder builds a site whose only SSH key is the examples'.
	allowPlaceholder bool
}

func newBuildCmd(g *globalFlags) *cobra.Command {
	f := &buildFlags{}
	cmd := &cobra.Command{
		Use:   "build --board BOARD [--card CARD]... [--kernel K] [-o FILE]",
		Short: "Build the firmware image for a board and its cards",
		Long: `build resolves the plan, builds the initramfs (kernel modules and the Go userland)
and lays out the image for the board's boot method:

  bios-cf (alix2d13, net5501): a CompactFlash image — MBR, FAT16 boot partition with
    the kernel, initramfs and SYSLINUX (the BIOS relays it to the serial console), and a FAT data
    partition where the firmware keeps its reports. dd or 'ocfw flash' it to the card.
  redboot, nslu2: the whole 8 MiB flash in the RedBoot/FIS layout (RedBoot itself
    left erased). avila-gw2348: kernel and initramfs files, the RedBoot commands that
    store them in flash, and a CF image with the data partition.
  --stand-in (nslu2, avila-gw2348): not for the board but for QEMU's ARM stand-in
    (raspi1ap with Debian armel's linux-image-rpi, 'ocfw kernel fetch --board nslu2
    --stand-in'): the board's plan and GOARM=5 userland with the rpi kernel's modules,
    an SD card image (default 32 MiB, a power of 2) holding only the data partition,
    and BASE.zImage, BASE.dtb, BASE.initrd beside it, for 'ocfw run'.

The image is written under a temporary name and renamed, with FILE.manifest.json
(board, plan, sha256 of every input, block map) and a sha256sums file beside it.
An earlier build's image (its manifest beside it) is replaced, as a rebuild
should; any other existing file only with --force; a device (a card: use 'ocfw
flash'), FIFO or directory never.
The same inputs and SOURCE_DATE_EPOCH give a byte-identical image. Host tools:
mkfs.fat (dosfstools), mtools, syslinux and syslinux-common.`,
		Example: `  ocfw build --board alix2d13 --card vpn1411 -o alix.img
  ocfw build --board net5501 --size 240 --card-mb 256 -o net5501.img
  ocfw build --board nslu2 --kernel zImage:lib/modules/6.1.0 -o nslu2.bin
  ocfw build --board nslu2 --stand-in -o nslu2-qemu.img && ocfw run --poweroff-after-report nslu2-qemu.img`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pl, err := f.resolve(g)
			if err != nil {
				return err
			}
			if err := f.splitInject(cmd); err != nil {
				return err
			}
			if len(f.inject) > 0 && f.initramfs != "" {
				return fmt.Errorf("--test-inject goes into the initramfs ocfw builds: it cannot change a given --initramfs")
			}
			if err := f.loadSite(g, pl); err != nil {
				return err
			}
			return runBuild(cmd, pl, f)
		},
	}
	fl := cmd.Flags()
	f.register(cmd, true)
	fl.StringVar(&f.kernel, "kernel", "", kernelFlagHelp)
	fl.StringVar(&f.initramfs, "initramfs", "", "use this compressed initramfs instead of building one (the kernel still comes from --kernel)")
	fl.StringVarP(&f.output, "output", "o", "", "image file (default out/ocfw-BOARD.img; out/ocfw-BOARD-stand-in.img with --stand-in)")
	fl.BoolVar(&f.force, "force", false, forceImageHelp)
	fl.StringVar(&f.size, "size", "", "image size in MiB, e.g. 120 or 240M or 1G (default: the board's, which fits its card)")
	fl.IntVar(&f.cardMB, "card-mb", 0, "the card's size in MB as sold (default: the board's, e.g. 128)")
	fl.StringVar(&f.budget, "speed-budget", "", "time the firmware's boot-time speed run may take, e.g. 20s (default: the firmware's)")
	fl.StringVar(&f.espBudget, "esp-budget", "", "time the firmware's boot-time ESP throughput run may take, e.g. 8s; 0s skips it (default: the firmware's)")
	fl.StringArrayVar(&f.fwFiles, "firmware-file", nil, "a file for the initramfs's /lib/firmware (repeat): the IXP4xx boards' NPE-B and NPE-C microcode, which ocfw cannot ship")
	fl.StringVar(&f.site, "site", "", "the router's site config (YAML, kind: site): ports, addresses, DHCP, firewall, SSH keys (ocfw validate checks it)")
	registerPlaceholderFlag(cmd, f)
	fl.StringArrayVar(&f.inject, "test-inject", nil, "TEST IMAGES ONLY: the firmware adds a faulty engine, corrupt:SIZE, fail:SIZE or hang:SIZE, to prove its self-test catches it; or breaks itself, "+strings.Join(plan.TestBreaks, ", ")+", to prove an upgrade to it is rolled back (docs/upgrade.md)")
	fl.BoolVar(&f.json, "json", false, "print the manifest as JSON")
	fl.BoolVar(&f.noCache, "no-cache", false, noCacheHelp)
	return cmd
}

// splitInject sorts --test-inject's values into faulty engines and the
// one break of the whole system.
func (f *buildFlags) splitInject(cmd *cobra.Command) error {
	for _, spec := range f.inject {
		if slices.Contains(plan.TestBreaks, spec) {
			if f.testBreak != "" && f.testBreak != spec {
				return fmt.Errorf("--test-inject %s and %s: an image breaks in one way at a time", f.testBreak, spec)
			}
			f.testBreak = spec
			continue
		}
		if _, err := fault.Parse(cmd.Context(), spec); err != nil {
			return fmt.Errorf("--test-inject: %w (or one of %s)", err, strings.Join(plan.TestBreaks, ", "))
		}
		f.engines = append(f.engines, spec)
	}
	return nil
}

const forceImageHelp = "replace an existing -o file that is not an earlier ocfw build (an earlier build, with its manifest beside it, is replaced without it; a device, FIFO or directory never)"

const noCacheHelp = "build the Go userland even when the userland cache (CACHE/userland) holds it, and leave the cache alone"

// parseSizeMiB reads 120, 120M, 120MiB or 1G as MiB.
func parseSizeMiB(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := 1
	for _, suf := range []struct {
		s string
		m int
	}{{"GIB", 1024}, {"MIB", 1}, {"G", 1024}, {"M", 1}} {
		if strings.HasSuffix(u, suf.s) {
			u, mult = strings.TrimSuffix(u, suf.s), suf.m
			break
		}
	}
	n, err := strconv.Atoi(u)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--size %q: want a positive size in MiB, e.g. 120, 240M or 1G", s)
	}
	return n * mult, nil
}

func sourceDateEpoch() (int64, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", v)
	}
	return n, nil
}

func runBuild(cmd *cobra.Command, pl *plan.Plan, f *buildFlags) error {
	size, err := parseSizeMiB(f.size)
	if err != nil {
		return err
	}
	sde, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	out := f.output
	if out == "" {
		out = defaultImage(pl)
	}
	if out, err = checkImageOut(out, f.force); err != nil {
		return err
	}
	log := func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "ocfw: "+format+"\n", args...) }
	res, err := build.Build(cmd.Context(), pl, build.Options{Output: out, Kernel: f.kernel, Initramfs: f.initramfs,
		Boot: plan.Options{SpeedBudget: f.budget, ESPBudget: f.espBudget, Inject: f.engines, TestBreak: f.testBreak}, Site: f.siteCfg, FirmwareFiles: f.fwFiles, SizeMiB: size, CardMB: f.cardMB,
		SourceDateEpoch: sde, Log: log, NoCache: f.noCache, Progress: progress.Terminal(cmd.ErrOrStderr())})
	if err != nil {
		return err
	}
	m, out := res.Manifest, res.Output
	if f.json {
		js, err := m.JSON()
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(js)
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintln(w, res)
	for _, o := range m.Outputs {
		fmt.Fprintf(w, "%s  %s (%d bytes)\n", o.SHA256, filepath.Join(filepath.Dir(out), o.Name), o.Size)
	}
	fmt.Fprintf(w, "manifest: %s\nsums:     %s\n", firmware.ManifestPath(out), firmware.SumsPath(out))
	return nil
}

// loadSite reads and checks --site for the plan's board.
func (f *buildFlags) loadSite(g *globalFlags, pl *plan.Plan) error {
	if f.site == "" {
		return nil
	}
	if f.initramfs != "" {
		return fmt.Errorf("--site goes into the initramfs ocfw builds: it cannot change a given --initramfs")
	}
	data, err := readProfileFile(f.site)
	if err != nil {
		return fmt.Errorf("--site: %w", err)
	}
	cat, err := g.catalog()
	if err != nil {
		return err
	}
	s, b, err := cat.ParseSite(f.site, data)
	if err != nil {
		return fmt.Errorf("--site %s:\n%w", f.site, err)
	}
	if b.Name != pl.Board {
		return fmt.Errorf("--site %s is for board %s, but --board is %s: build for %s, or give a site for %s", f.site, b.Name, pl.Board, b.Name, pl.Board)
	}
	if err := checkPlaceholderKey(f.site, s, f.allowPlaceholder); err != nil {
		return err
	}
	f.siteCfg = s
	return nil
}
