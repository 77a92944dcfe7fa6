package kernel

import (
	"fmt"

	"github.com/ocfw/ocfw/plan"
)

// Advice for a person getting a kernel for a board: the facts as lines
// of text, for the CLI to print (it adds the commands and flags).

// debianSources are the kernel sources Debian's packages reachable from
// here hold (linux-source-6.1, linux-source-6.12): both older than the
// little-endian IXP4xx series, which is why ocfw has no kernel build.
const debianSources = "6.1 and 6.12"

// BuildAdvice is what the firmware needs of p's kernel and, for an
// IXP4xx board, how to build one with a config fragment: the middle of
// a fragment's header.
func BuildAdvice(p *plan.Plan) []string {
	if !IXP4xx(p) {
		return []string{"What the ocfw firmware needs of " + p.Board + "'s kernel: merge it onto the kernel's config."}
	}
	h := []string{
		"What the ocfw firmware (a Go userland, GOARCH=arm GOARM=" + p.Go.GOARM + ") needs of a LITTLE-ENDIAN IXP4xx kernel:",
		"Linux " + LESeries + " or later (the series restoring little-endian IXP4xx), or an old",
		"little-endian kernel from " + MinKernel + " to 5.18 (with the board-file alternative below).",
		"Merge it onto the IXP4xx defconfig and cross-build (Debian: crossbuild-essential-armel):",
		"  make ARCH=arm CROSS_COMPILE=arm-linux-gnueabi- ixp4xx_defconfig",
		"  ARCH=arm scripts/kconfig/merge_config.sh .config " + p.Board + ".config",
		"  make ARCH=arm CROSS_COMPILE=arm-linux-gnueabi- zImage modules dtbs",
	}
	if dtb := BoardDTB(p); dtb != "" {
		h = append(h, "  cat arch/arm/boot/zImage arch/arm/boot/dts/intel/ixp/"+dtb+" > zImage-dtb")
	}
	return append(h, "Options wanted as modules are =m: the zImage stays small and ocfw loads them.")
}

// VersionAdvice is which kernel versions and byte order p's board
// needs, and why; nil for a board whose kernel ocfw takes from Debian
// as it is.
func VersionAdvice(p *plan.Plan) []string {
	if !IXP4xx(p) {
		return nil
	}
	return []string{
		fmt.Sprintf("little-endian: Go has no big-endian ARM port. Mainline IXP4xx is big-endian only from %s;", LEBroken),
		fmt.Sprintf("the series restoring little-endian IXP4xx was queued for %s. So: Linux %s or later (or a", LESeries, LESeries),
		fmt.Sprintf("kernel with that series applied), or an old little-endian kernel %s to 5.18 (Debian 7 shipped", MinKernel),
		fmt.Sprintf("linux-image-3.2.0-4-ixp4xx); never older than %s, the oldest Linux Go runs on. Before %s the", MinKernel, FirmwareDirect),
		"kernel cannot read firmware files itself: build the microcode in (CONFIG_EXTRA_FIRMWARE).",
		fmt.Sprintf("Debian's kernel sources reachable here (%s) are too old for the series: ocfw has no kernel build.", debianSources),
	}
}

// StartAdvice is how the board's boot loader must start p's kernel; nil
// for a board whose boot loader needs nothing special.
func StartAdvice(p *plan.Plan) []string {
	if !IXP4xx(p) {
		return nil
	}
	dtb := BoardDTB(p)
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
