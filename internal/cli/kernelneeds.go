package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/ocfw/ocfw/kernel"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/plan"
)

// debianSources are the kernel sources Debian's packages reachable from
// here hold (linux-source-6.1, linux-source-6.12): both older than the
// little-endian IXP4xx series, which is why ocfw has no kernel build.
const debianSources = "6.1 and 6.12"

// fragmentHeader is the comment at the top of a board's config
// fragment: what it is, how it was made and how to use it.
func fragmentHeader(p *plan.Plan) []string {
	name := p.Board
	args := "--board " + p.Board
	for _, c := range p.Cards {
		args += " --card " + c.Name
		name += " + " + c.Name
	}
	h := []string{
		"Kernel config fragment for " + name + " (" + p.Description + ")",
		"written by `ocfw kernel config " + args + "`; ocfw kernel check judges a kernel by the same list.",
		"",
	}
	if kernel.IXP4xx(p) {
		h = append(h,
			"What the ocfw firmware (a Go userland, GOARCH=arm GOARM="+p.Go.GOARM+") needs of a LITTLE-ENDIAN IXP4xx kernel:",
			"Linux "+kernel.LESeries+" or later (the series restoring little-endian IXP4xx), or an old",
			"little-endian kernel from "+kernel.MinKernel+" to 5.18 (with the board-file alternative below).",
			"Merge it onto the IXP4xx defconfig and cross-build (Debian: crossbuild-essential-armel):",
			"  make ARCH=arm CROSS_COMPILE=arm-linux-gnueabi- ixp4xx_defconfig",
			"  ARCH=arm scripts/kconfig/merge_config.sh .config "+p.Board+".config",
			"  make ARCH=arm CROSS_COMPILE=arm-linux-gnueabi- zImage modules dtbs",
		)
		if dtb := kernel.BoardDTB(p); dtb != "" {
			h = append(h, "  cat arch/arm/boot/zImage arch/arm/boot/dts/intel/ixp/"+dtb+" > zImage-dtb")
		}
		h = append(h, "Options wanted as modules are =m: the zImage stays small and ocfw loads them.")
	} else {
		h = append(h, "What the ocfw firmware needs of "+p.Board+"'s kernel: merge it onto the kernel's config.")
	}
	return h
}

func newKernelConfigCmd(g *globalFlags) *cobra.Command {
	var board string
	var cards []string
	cmd := &cobra.Command{
		Use:   "config --board BOARD [--card CARD]...",
		Short: "Print the kernel config fragment a board's plan needs (for merge_config.sh)",
		Long: `config prints, as a kernel config fragment for scripts/kconfig/merge_config.sh, every
config option the plan asks of the board's kernel, each with why: the same list
'ocfw kernel check' judges a kernel's config by. For the IXP4xx boards that is the
little-endian CPU, the EABI, the device tree appended for RedBoot (or an old
kernel's board file, named in a comment), the serial console, what the Go runtime
and the router use, the NPEs and their microcode loader, the planned modules (=m)
and, marked optional, the storage for reports. The output is deterministic; the
copies for nslu2 and avila-gw2348 ship in boards/kernel/.`,
		Example: `  ocfw kernel config --board nslu2 > nslu2.config
  ocfw kernel config --board avila-gw2348 --card vpn1411 > avila.config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := g.resolve(boards.Request{Board: board, Cards: cards})
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), kernel.Fragment(p, fragmentHeader(p)))
			return err
		},
	}
	cmd.Flags().StringVar(&board, "board", "", "board name or alias (required)")
	cmd.Flags().StringArrayVar(&cards, "card", nil, "a card in the board's slots (repeat)")
	return cmd
}

// writeNeeds tells what p's kernel needs when there is none to check:
// version, config options by group with why, NPE microcode and how the
// board's boot loader must start it.
func writeNeeds(w io.Writer, p *plan.Plan) {
	args := "--board " + p.Board
	for _, c := range p.Cards {
		args += " --card " + c.Name
	}
	fmt.Fprintf(w, "What a kernel for %s needs (nothing was checked: no kernel given).\n\n", p.Board)
	if kernel.IXP4xx(p) {
		fmt.Fprintf(w, "Version and byte order\n")
		fmt.Fprintf(w, "  little-endian: Go has no big-endian ARM port. Mainline IXP4xx is big-endian only from %s;\n", kernel.LEBroken)
		fmt.Fprintf(w, "  the series restoring little-endian IXP4xx was queued for %s. So: Linux %s or later (or a\n", kernel.LESeries, kernel.LESeries)
		fmt.Fprintf(w, "  kernel with that series applied), or an old little-endian kernel %s to 5.18 (Debian 7 shipped\n", kernel.MinKernel)
		fmt.Fprintf(w, "  linux-image-3.2.0-4-ixp4xx); never older than %s, the oldest Linux Go runs on. Before %s the\n", kernel.MinKernel, kernel.FirmwareDirect)
		fmt.Fprintf(w, "  kernel cannot read firmware files itself: build the microcode in (CONFIG_EXTRA_FIRMWARE).\n")
		fmt.Fprintf(w, "  Debian's kernel sources reachable here (%s) are too old for the series: ocfw has no kernel build.\n\n", debianSources)
	}
	fmt.Fprintf(w, "Config options (`ocfw kernel config %s` writes them as a fragment)\n", args)
	group := ""
	for _, n := range kernel.Needs(p) {
		if n.Group != group {
			group = n.Group
			fmt.Fprintf(w, "  %s\n", group)
		}
		opt := ""
		if n.Optional {
			opt = "optional: "
		}
		fmt.Fprintf(w, "    %s\n      %s%s\n", n.Options(), opt, n.Why)
	}
	if mc := kernel.NPEMicrocode(p); len(mc) > 0 {
		var flags []string
		fmt.Fprintf(w, "\nNPE microcode (Intel's IXP400 software; not in Debian or ocfw), read by the kernel from /lib/firmware\n")
		for _, m := range mc {
			fmt.Fprintf(w, "  %-6s for %s\n", m.File, strings.Join(m.Users, "; "))
			flags = append(flags, "--firmware-file "+m.File)
		}
		fmt.Fprintf(w, "  ocfw build %s puts them in the initramfs's /lib/firmware; without one, what uses it is absent.\n", strings.Join(flags, " "))
	}
	if kernel.IXP4xx(p) {
		fmt.Fprintf(w, "\nStarting it\n")
		for _, l := range startText(p) {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	fmt.Fprintf(w, "\nCheck a kernel: ocfw kernel check %s --kernel zImage:lib/modules/VERSION:config\n", args)
}

// startText is how the board's boot loader must start the kernel.
func startText(p *plan.Plan) []string {
	dtb := kernel.BoardDTB(p)
	if dtb == "" {
		dtb = "the board's .dtb"
	}
	l := []string{
		"RedBoot passes ATAGs (command line, initrd) and no device tree: a device-tree kernel needs " + dtb,
		"appended to its zImage (cat zImage " + dtb + " > zImage-dtb), built with CONFIG_ARM_APPENDED_DTB and",
		"CONFIG_ARM_ATAG_DTB_COMPAT so RedBoot's command line and initrd are kept.",
		"RedBoot runs the XScale big-endian: a little-endian kernel must clear the CPU's big-endian bit",
		"(CP15 control register, bit 7) before anything else. Debian started its little-endian NSLU2",
		"kernels through the APEX loader for this; ocfw adds no such switch, so boot through APEX or give",
		"a zImage that starts with one.",
	}
	if p.Storage.CF {
		return append(l, "ocfw build writes the kernel, the initramfs and BASE.redboot.txt: the RedBoot commands that",
			"store them in flash (fis create) and boot them (fis load, exec -r ... -c \"CMDLINE\").")
	}
	return append(l, "ocfw build writes the whole flash: RedBoot loads the Kernel and Ramdisk partitions (payloads",
		"byte-swapped in 32-bit words, as Debian's little-endian NSLU2 images were) and jumps to the kernel.",
		"Write only the Kernel and Ramdisk partitions; keep your RedBoot and SysConf.")
}
