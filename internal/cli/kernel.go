package cli

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/ocfw/ocfw/kernel"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/progress"
	"github.com/ocfw/ocfw/plan"
)

// kernelFlagHelp is the --kernel flag's text for build and kernel check:
// the forms kernel.Load accepts.
const kernelFlagHelp = "the kernel: a linux-image .deb; a directory with vmlinuz, bzImage or zImage (or boot/vmlinuz-VERSION), " +
	"lib/modules/VERSION and optionally config, .config or config.gz; IMAGE:MODULESDIR[:CONFIG]; or IMAGE::CONFIG for a kernel " +
	"whose CONFIG has every planned module =y (an IMAGE alone is refused: nothing shows the modules are built in). " +
	"Default: the board's Debian package from the cache"

func newKernelCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kernel",
		Short: "Fetch and check the kernel a board's firmware boots, or say what it needs",
	}
	cmd.AddCommand(newKernelFetchCmd(g), newKernelCheckCmd(g), newKernelConfigCmd(g))
	return cmd
}

func newKernelFetchCmd(g *globalFlags) *cobra.Command {
	var board, cache string
	var refresh, standIn bool
	cmd := &cobra.Command{
		Use:   "fetch --board BOARD",
		Short: "Download the board's Debian kernel package into the cache (no root needed)",
		Long: `fetch downloads the Debian kernel package a board's profile names (linux-image-686,
i386, for the Geode boards; with --stand-in, the IXP4xx boards' QEMU stand-in's
linux-image-rpi, armel) with apt-get download, using a private package list
for the package's architecture, into the cache (--cache, else $OCFW_CACHE, else
$XDG_CACHE_HOME/ocfw or ~/.cache/ocfw). A package already cached is reused
without network access; --refresh updates the lists and downloads again.`,
		Example: `  ocfw kernel fetch --board alix2d13
  ocfw kernel fetch --board nslu2 --stand-in   # linux-image-rpi (armel) for QEMU's raspi1ap`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := kernelBoard(g, board)
			if err != nil {
				return err
			}
			kpkg := b.Kernel
			if standIn {
				pl, err := g.resolve(boards.Request{Board: b.Name, StandIn: true})
				if err != nil {
					return err
				}
				kpkg = pl.Kernel
			}
			if kpkg.Source != "debian" || kpkg.Package == "" {
				msg := fmt.Sprintf("board %s has no Debian kernel package to fetch: build ocfw images for it with --kernel", b.Name)
				if b.Kernel.Note != "" {
					msg += " (" + strings.TrimSpace(b.Kernel.Note) + ")"
				}
				return fmt.Errorf("%s", msg)
			}
			deb, err := fetchKernel(cmd, cache, refresh, kpkg.Package, kpkg.Arch)
			if err != nil {
				return err
			}
			what := b.Name
			if standIn {
				what += "'s QEMU stand-in"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s (%s) for %s: %s\n", kpkg.Package, kpkg.Arch, what, deb)
			return nil
		},
	}
	cmd.Flags().StringVar(&board, "board", "", "board name or alias (required)")
	cmd.Flags().BoolVar(&standIn, "stand-in", false, "IXP4xx boards: the kernel of QEMU's ARM stand-in (Debian armel's linux-image-rpi), not the board's")
	cmd.Flags().StringVar(&cache, "cache", "", "cache directory (default $OCFW_CACHE, else ~/.cache/ocfw)")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "update the package lists and download again")
	return cmd
}

func newKernelCheckCmd(g *globalFlags) *cobra.Command {
	var board, cache, kernelSpec string
	var cards []string
	cmd := &cobra.Command{
		Use:   "check --board BOARD [--card CARD]... [--kernel SPEC]",
		Short: "Check a kernel against a board's plan: architecture, endianness, config, modules",
		Long: `check loads the kernel a build would use and lists every problem at once: an image
for the wrong architecture (x86 bzImage against ARM zImage), a big-endian ARM kernel
(the Go userland needs little-endian), config options the plan needs (AF_ALG
skcipher and hash, the engine drivers, the initramfs compression), planned modules
that are neither a .ko nor built in, a kernel older than Go's minimum (3.2). For a
real IXP4xx board it also checks the little-endian CPU, the EABI, the appended
device tree (or the board file of an old kernel), the serial console, the NPEs and
what the Go runtime and the router use: the list 'ocfw kernel config' writes.

For a board without a Debian kernel (nslu2, avila-gw2348) and no --kernel, it
prints what the kernel needs — version and byte order, config options with why,
the NPE microcode and what uses it, how RedBoot must start it — and exits non-zero:
nothing was checked.

--kernel is one of:
  a Debian linux-image .deb;
  a directory with vmlinuz, bzImage or zImage (or boot/vmlinuz-VERSION),
    lib/modules/VERSION, and optionally config, .config or config.gz;
  IMAGE:MODULESDIR or IMAGE:MODULESDIR:CONFIG, a kernel image file and its
    modules (lib/modules/VERSION itself, or a directory holding it);
  IMAGE::CONFIG, a kernel with every module the plan loads built in: CONFIG
    must show each of their options =y.
A kernel image alone is refused: nothing then shows that the plan's modules are
built in. Without --kernel, the board's Debian package from the cache (fetched if
missing).`,
		Example: `  ocfw kernel check --board alix2d13
  ocfw kernel check --board nslu2            # what its kernel needs
  ocfw kernel check --board nslu2 --kernel zImage-ixp4xx:modules/lib/modules/6.6.0:config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := g.resolve(boards.Request{Board: board, Cards: cards})
			if err != nil {
				return err
			}
			if kernelSpec == "" && (p.Kernel.Source != plan.KernelDebian || p.Kernel.Package == "") {
				writeNeeds(cmd.OutOrStdout(), p)
				return fmt.Errorf("nothing was checked: board %s has no Debian kernel package, so give its kernel with --kernel "+
					"(IMAGE:MODULESDIR[:CONFIG], a directory or a .deb); above is what it must have", p.Board)
			}
			k, err := kernel.Load(cmd.Context(), p, kernelSpec, cache)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "kernel %s (%s) for %s: ok\n", orNone(k.Version), k.Arch, p.Board)
			fmt.Fprintf(w, "  source   %s\n  image    %s\n  sha256   %s (of the source)\n  modules  %s\n  config   %s\n", k.Source, k.Image, k.SHA256, orNone(k.ModulesDir), orNone(k.Config))
			if len(k.Builtin) > 0 {
				fmt.Fprintf(w, "  built in %s\n", strings.Join(k.Builtin, " "))
			}
			if len(k.Absent) > 0 {
				fmt.Fprintf(w, "  absent   %s (out of tree or optional: engines reported absent, or done without)\n", strings.Join(k.Absent, " "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&board, "board", "", "board name or alias (required)")
	cmd.Flags().StringArrayVar(&cards, "card", nil, "a card in the board's slots (repeat)")
	cmd.Flags().StringVar(&kernelSpec, "kernel", "", kernelFlagHelp)
	cmd.Flags().StringVar(&cache, "cache", "", "cache directory (default $OCFW_CACHE, else ~/.cache/ocfw)")
	return cmd
}

func kernelBoard(g *globalFlags, name string) (*boards.Board, error) {
	if name == "" {
		return nil, errNoBoard
	}
	cat, err := g.catalog()
	if err != nil {
		return nil, err
	}
	return cat.Board(name)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// fetchKernel fetches a kernel package as kernel fetch and try do: a line
// on stderr per step (apt-get update, apt-get download), and on a
// terminal a line every progress.Every with the megabytes fetched so far.
func fetchKernel(cmd *cobra.Command, cache string, refresh bool, pkg, arch string) (string, error) {
	w := cmd.ErrOrStderr()
	f := &debian.Fetcher{CacheDir: cache, Refresh: refresh, Log: func(format string, args ...any) {
		fmt.Fprintf(w, "ocfw: "+format+"\n", args...)
	}}
	dir := cache
	if dir == "" {
		dir, _ = debian.DefaultCacheDir()
	}
	before := treeSize(dir)
	stop := progress.StartStatus(progress.Terminal(w), "fetching "+pkg, func() string {
		if n := treeSize(dir) - before; n > 0 {
			return fmt.Sprintf("%.1f MB so far", float64(n)/1e6)
		}
		return ""
	})
	defer stop()
	return f.FetchKernel(cmd.Context(), pkg, arch)
}

// treeSize is the bytes of the regular files under dir (0 when there is
// none): what a fetch has written so far, package lists and partial
// downloads included.
func treeSize(dir string) int64 {
	var n int64
	if dir == "" {
		return 0
	}
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
