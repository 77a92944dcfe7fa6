package kernel

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ocfw/ocfw/plan"
)

// Want is the value a Need asks of its config options.
type Want int

const (
	WantYM    Want = iota // built in or a module
	WantY                 // built in: nothing would load it as a module
	WantUnset             // not set
)

// Need is one thing a plan asks of its kernel's config. It is met when
// every option of at least one alternative in AnyOf has the wanted value:
// IXP4xx kernels with a device tree and old ones with board files meet
// the same need with different options.
type Need struct {
	Group    string
	AnyOf    [][]string
	Want     Want
	Why      string
	Optional bool // a kernel without it is not refused; the firmware does without
}

// Need groups, in the order Needs lists them.
const (
	GroupBoard     = "board and CPU"
	GroupBoot      = "boot and console"
	GroupInitramfs = "initramfs"
	GroupUserland  = "Go userland and router"
	GroupMicrocode = "NPE microcode"
	GroupModules   = "planned modules"
	GroupStorage   = "data partition for reports"
)

// Met says whether cfg (ReadConfig's map) satisfies n.
func (n Need) Met(cfg map[string]string) bool {
	for _, alt := range n.AnyOf {
		ok := true
		for _, o := range alt {
			if !n.Want.met(cfg[o]) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (w Want) met(v string) bool {
	switch w {
	case WantY:
		return v == "y"
	case WantUnset:
		return v == "" || v == "n"
	}
	return v == "y" || v == "m"
}

// Options renders n's alternatives: "CONFIG_A=y", "CONFIG_A=y or m",
// "CONFIG_A not set", alternatives joined by ", or ".
func (n Need) Options() string {
	var alts []string
	for _, alt := range n.AnyOf {
		var s []string
		for _, o := range alt {
			switch n.Want {
			case WantY:
				s = append(s, o+"=y")
			case WantUnset:
				s = append(s, o+" not set")
			default:
				s = append(s, o+"=y or m")
			}
		}
		alts = append(alts, strings.Join(s, " and "))
	}
	return strings.Join(alts, ", or ")
}

// IXP4xx reports whether p is for a real IXP4xx board (started by
// RedBoot), not its QEMU stand-in: only then does the kernel need the
// board-level options.
func IXP4xx(p *plan.Plan) bool {
	return p.Boot == plan.BootRedBoot && p.StandIn == nil && p.Go.GOARCH == "arm"
}

// BoardDTB is the device tree a device-tree kernel for p's board carries
// appended to its zImage (the profile's kernel.dtb), "" when the profile
// names none.
func BoardDTB(p *plan.Plan) string { return p.Kernel.DTB }

// Kernel versions the IXP4xx boards' kernels are judged by.
const (
	// MinKernel is the oldest kernel Go's linux/arm port runs on.
	MinKernel = "3.2"
	// LEBroken is the first mainline release whose IXP4xx is big-endian
	// only; LESeries the release the series restoring little-endian
	// IXP4xx was queued for. Kernels from LEBroken up to LESeries need
	// that series applied by hand.
	LEBroken = "5.19"
	LESeries = "7.3"
	// FirmwareDirect is the first kernel that reads firmware files from
	// /lib/firmware itself; older ones ask a user-space helper the
	// firmware does not have.
	FirmwareDirect = "3.7"
)

// Microcode is one NPE microcode file the kernel's ixp4xx-npe driver
// loads from /lib/firmware, and what in the plan uses it.
type Microcode struct {
	File  string // "NPE-B"
	Users []string
}

// NPEMicrocode lists the NPE microcode p's ports and engine need, by
// file: each ixp4xx_eth port runs on the NPE its platform names, and the
// ixp4xx crypto driver on NPE-C.
func NPEMicrocode(p *plan.Plan) []Microcode {
	users := map[string][]string{}
	for _, port := range p.Ports {
		if port.Driver == "ixp4xx_eth" && strings.HasPrefix(strings.ToLower(port.Platform), "npe-") {
			f := "NPE-" + strings.ToUpper(strings.TrimPrefix(strings.ToLower(port.Platform), "npe-"))
			users[f] = append(users[f], fmt.Sprintf("Ethernet port %s (%s, ixp4xx_eth)", port.Name, port.Interface))
		}
	}
	for _, e := range p.Engines {
		if e.Module == "ixp4xx_crypto" && e.Absent == "" {
			users["NPE-C"] = append(users["NPE-C"], "the "+e.ID+" crypto engine (ixp4xx_crypto)")
		}
	}
	var out []Microcode
	for f, u := range users {
		out = append(out, Microcode{File: f, Users: u})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// Needs is every config option p asks of its kernel, grouped, each with
// why: the one list kernel check judges a config by and kernel config
// writes as a fragment, so the two cannot disagree. For Debian's kernels
// and the QEMU stand-in it is the initramfs and the planned modules; a
// real IXP4xx board adds its CPU, boot, console, userland and microcode
// needs.
func Needs(p *plan.Plan) []Need {
	var needs []Need
	one := func(group, opt string, w Want, why string) {
		needs = append(needs, Need{Group: group, AnyOf: [][]string{{opt}}, Want: w, Why: why})
	}
	ixp := IXP4xx(p)
	if ixp {
		one(GroupBoard, "CONFIG_ARCH_IXP4XX", WantY, "the IXP4xx SoC")
		one(GroupBoard, "CONFIG_CPU_BIG_ENDIAN", WantUnset, "little-endian: Go has no big-endian ARM port "+
			"(mainline IXP4xx is big-endian only from "+LEBroken+" until the little-endian series, queued for "+LESeries+")")
		one(GroupBoard, "CONFIG_AEABI", WantY, "Go's linux/arm binaries use the EABI system call convention")
		b := p.Kernel
		dt := []string{"CONFIG_ARM_APPENDED_DTB", "CONFIG_ARM_ATAG_DTB_COMPAT"}
		why := "RedBoot passes no device tree: a device-tree kernel (5.x and later) needs the board's .dtb appended to the zImage, " +
			"and keeps RedBoot's ATAG command line and initrd"
		if b.DTB != "" {
			why = "RedBoot passes no device tree: a device-tree kernel (5.x and later) needs " + b.DTB + " appended to the zImage " +
				"and keeps RedBoot's ATAG command line and initrd; an old board-file kernel (3.2 to 5.18) has the board built in instead"
		}
		alts := [][]string{dt}
		if b.BoardFile != "" {
			alts = append(alts, []string{b.BoardFile})
		}
		needs = append(needs, Need{Group: GroupBoot, AnyOf: alts, Want: WantY, Why: why})
		one(GroupBoot, "CONFIG_SERIAL_8250", WantY, "the console on "+p.Console.Device)
		one(GroupBoot, "CONFIG_SERIAL_8250_CONSOLE", WantY, "kernel messages and the shell on "+p.Console.Device)
		con := [][]string{{"CONFIG_SERIAL_OF_PLATFORM"}}
		if b.BoardFile != "" {
			con = append(con, []string{b.BoardFile})
		}
		needs = append(needs, Need{Group: GroupBoot, AnyOf: con, Want: WantY,
			Why: "the UART found from the device tree (a board-file kernel declares it itself)"})
	}
	one(GroupInitramfs, "CONFIG_BLK_DEV_INITRD", WantY, "the initramfs")
	one(GroupInitramfs, "CONFIG_DEVTMPFS", WantY, "device nodes for the boot sequence")
	switch p.Image.Compression {
	case "xz":
		one(GroupInitramfs, "CONFIG_RD_XZ", WantY, "the xz-compressed initramfs")
	case "gzip":
		one(GroupInitramfs, "CONFIG_RD_GZIP", WantY, "the gzip-compressed initramfs")
	}
	if ixp {
		one(GroupUserland, "CONFIG_FUTEX", WantY, "the Go runtime's locks")
		one(GroupUserland, "CONFIG_EPOLL", WantY, "the Go runtime's network poller")
		one(GroupUserland, "CONFIG_INET", WantY, "the router's IPv4 (and the SSH server)")
		one(GroupUserland, "CONFIG_PACKET", WantY, "the DHCP client's raw packet sockets on the WAN")
		if mc := NPEMicrocode(p); len(mc) > 0 {
			var files []string
			for _, m := range mc {
				files = append(files, m.File)
			}
			list := strings.Join(files, " and ")
			one(GroupMicrocode, "CONFIG_IXP4XX_QMGR", WantYM, "the queue manager the NPEs talk through")
			one(GroupMicrocode, "CONFIG_IXP4XX_NPE", WantYM, "the NPEs, which load the microcode "+list)
			one(GroupMicrocode, "CONFIG_FW_LOADER", WantYM, "request_firmware() for "+list+" from /lib/firmware")
		}
		if len(p.Cards) > 0 {
			one(GroupBoard, "CONFIG_PCI", WantY, "the cards in the mini-PCI slots")
			alts := [][]string{{"CONFIG_PCI_IXP4XX"}}
			if m := p.Kernel.BoardFile; m != "" {
				alts = append(alts, []string{m})
			}
			needs = append(needs, Need{Group: GroupBoard, AnyOf: alts, Want: WantY,
				Why: "the IXP4xx PCI host (a board-file kernel has it with the board)"})
		}
	}
	needs = append(needs, moduleNeeds(p)...)
	if ixp {
		needs = append(needs, Need{Group: GroupBoot, AnyOf: [][]string{{"CONFIG_KERNEL_XZ"}}, Want: WantY, Optional: true,
			Why: kernelRoomWhy(p)})
		needs = append(needs, storageNeeds(p)...)
	}
	sort.SliceStable(needs, func(i, j int) bool { return groupRank(needs[i].Group) < groupRank(needs[j].Group) })
	return needs
}

var groupOrder = []string{GroupBoard, GroupBoot, GroupInitramfs, GroupUserland, GroupMicrocode, GroupModules, GroupStorage}

func groupRank(g string) int {
	for i, x := range groupOrder {
		if x == g {
			return i
		}
	}
	return len(groupOrder)
}

// moduleNeeds are the options of the planned modules ocfw knows; modules
// sharing an option share one need. Out-of-tree modules are no kernel's
// option; optional ones are optional needs.
func moduleNeeds(p *plan.Plan) []Need {
	var out []Need
	at := map[string]int{}
	for _, m := range p.Modules {
		sym, ok := configSymbols[m.Name]
		if !ok || m.OutOfTree {
			continue
		}
		why := "module " + m.Name + " (" + m.For + ")"
		if i, ok := at[sym]; ok {
			out[i].Why += "; " + why
			out[i].Optional = out[i].Optional && m.Optional
			continue
		}
		at[sym] = len(out)
		out = append(out, Need{Group: GroupModules, AnyOf: [][]string{{sym}}, Want: WantYM, Why: why, Optional: m.Optional})
	}
	return append(out, devCryptoNeeds(p)...)
}

// devCryptoNeeds are what cryptodev-linux's module (/dev/crypto) needs
// of the kernel it is loaded into: module loading, and the crypto API
// types it hands requests to. Optional: without them the board has no
// /dev/crypto, and its boot report says so.
// ("cryptodev" is catalog.DevCryptoModule; kernel reads only the plan.)
func devCryptoNeeds(p *plan.Plan) []Need {
	planned := false
	for _, m := range p.Modules {
		planned = planned || (m.Name == "cryptodev" && !IXP4xx(p) && p.Go.GOARCH == "386")
	}
	if !planned {
		return nil
	}
	why := "cryptodev.ko (/dev/crypto, cryptodev-linux 1.14), which ocfw build compiles for Debian's kernel from its headers (make, gcc-12); " +
		"for another kernel, build it from the same source against that kernel's headers"
	var out []Need
	for _, sym := range []string{"CONFIG_MODULES", "CONFIG_CRYPTO_SKCIPHER", "CONFIG_CRYPTO_HASH", "CONFIG_CRYPTO_AEAD"} {
		w := WantYM
		if sym == "CONFIG_MODULES" {
			w = WantY
		}
		out = append(out, Need{Group: GroupModules, AnyOf: [][]string{{sym}}, Want: w, Why: why, Optional: true})
	}
	return out
}

// storageNeeds are the options of the storage the boot sequence writes
// reports to on an IXP4xx board: the Avila's CF socket, else USB sticks on
// the NSLU2's PCI USB controllers. Optional: without them the report goes
// to the console only.
func storageNeeds(p *plan.Plan) []Need {
	var opts [][2]string
	if p.Storage.CF {
		opts = [][2]string{{"CONFIG_PATA_IXP4XX_CF", "the CompactFlash socket"}}
	} else {
		opts = [][2]string{{"CONFIG_PCI", "the USB controllers sit on PCI"}, {"CONFIG_USB_EHCI_PCI", "USB 2.0"},
			{"CONFIG_USB_OHCI_HCD_PCI", "USB 1.1"}, {"CONFIG_USB_STORAGE", "USB sticks"}}
	}
	opts = append(opts, [2]string{"CONFIG_BLK_DEV_SD", "the disk the data partition is on"})
	var out []Need
	for _, o := range opts {
		w := WantYM
		if o[0] == "CONFIG_PCI" {
			w = WantY
		}
		out = append(out, Need{Group: GroupStorage, AnyOf: [][]string{{o[0]}}, Want: w, Why: o[1], Optional: true})
	}
	return out
}

func kernelRoomWhy(p *plan.Plan) string {
	for _, f := range p.Image.Flash {
		if f.Name == "Kernel" {
			why := fmt.Sprintf("a small zImage: with its device tree it must fit the %d KiB Kernel flash partition", f.Size/1024)
			if !p.Storage.CF {
				why += " (less a 16-byte header)" // the NSLU2's, as firmware writes it
			}
			return why
		}
	}
	return "a small zImage for the Kernel flash partition"
}

// kernelVersion is the major and minor number at the start of a kernel
// release ("6.1.0-57-686" → 6, 1); ok is false when there is none.
func kernelVersion(v string) (major, minor int, ok bool) {
	a, rest, found := strings.Cut(v, ".")
	if !found {
		return 0, 0, false
	}
	b := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		b = rest[:i]
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return x, y, true
}

// versionBefore says whether release v is older than "X.Y"; false when v
// has no version.
func versionBefore(v, than string) bool {
	x, y, ok := kernelVersion(v)
	if !ok {
		return false
	}
	tx, ty, _ := kernelVersion(than)
	return x < tx || x == tx && y < ty
}

// Fragment is p's needs as a kernel config fragment for
// scripts/kconfig/merge_config.sh: a header naming the board and why,
// then each need's first alternative with its reason; options wanted
// built in or as a module are written =m when a module (the zImage stays
// small and ocfw loads it), else =y. Optional needs are included, marked.
func Fragment(p *plan.Plan, header []string) string {
	var b strings.Builder
	for _, h := range header {
		if h == "" {
			b.WriteString("#\n")
		} else {
			b.WriteString("# " + h + "\n")
		}
	}
	seen := map[string]bool{}
	group := ""
	for _, n := range Needs(p) {
		if n.Group != group {
			group = n.Group
			fmt.Fprintf(&b, "\n# --- %s\n", group)
		}
		why := n.Why
		if n.Optional {
			why = "optional: " + why
		}
		fmt.Fprintf(&b, "# %s\n", why)
		if len(n.AnyOf) > 1 {
			var others []string
			for _, alt := range n.AnyOf[1:] {
				others = append(others, strings.Join(alt, " and "))
			}
			fmt.Fprintf(&b, "# (or, instead: %s)\n", strings.Join(others, ", or "))
		}
		for _, o := range n.AnyOf[0] {
			if seen[o] {
				fmt.Fprintf(&b, "# %s: above\n", o)
				continue
			}
			seen[o] = true
			switch {
			case n.Want == WantUnset:
				fmt.Fprintf(&b, "# %s is not set\n", o)
			case n.Want == WantYM && (n.Group == GroupModules || n.Group == GroupStorage):
				fmt.Fprintf(&b, "%s=m\n", o)
			default:
				fmt.Fprintf(&b, "%s=y\n", o)
			}
		}
	}
	return b.String()
}

// needProblem says what cfg has instead of what n wants.
func needProblem(n Need, cfg map[string]string) string {
	if n.Want == WantUnset {
		var set []string
		for _, o := range n.AnyOf[0] {
			set = append(set, o+"="+cfg[o])
		}
		return strings.Join(set, " and ") + ", want " + n.Options()
	}
	var have []string
	for _, alt := range n.AnyOf {
		for _, o := range alt {
			switch v := cfg[o]; {
			case n.Want.met(v):
			case v == "":
				have = append(have, o+" is not set")
			default:
				have = append(have, o+"="+v)
			}
		}
	}
	return strings.Join(have, ", ") + "; want " + n.Options()
}

// versionProblems judges k's release, when known, against what Go and
// the plan need: Linux 3.2 for Go; on an IXP4xx board before 3.7, the NPE
// microcode built into the kernel, since nothing in the firmware answers
// an old kernel's firmware requests.
func (k *Kernel) versionProblems(p *plan.Plan, cfg map[string]string) []string {
	if _, _, ok := kernelVersion(k.Version); !ok {
		return nil
	}
	var problems []string
	if versionBefore(k.Version, MinKernel) {
		problems = append(problems, fmt.Sprintf("kernel %s is older than %s, the oldest Linux Go's userland runs on", k.Version, MinKernel))
	}
	if IXP4xx(p) && versionBefore(k.Version, FirmwareDirect) && cfg != nil {
		var missing []string
		for _, m := range NPEMicrocode(p) {
			if !contains(strings.Fields(cfg["CONFIG_EXTRA_FIRMWARE"]), m.File) {
				missing = append(missing, m.File)
			}
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("kernel %s is older than %s, which asks a user-space helper for firmware the Go userland does not have: "+
				"build %s into it (CONFIG_EXTRA_FIRMWARE=\"%s\", has %q)", k.Version, FirmwareDirect, strings.Join(missing, " and "),
				strings.Join(missing, " "), cfg["CONFIG_EXTRA_FIRMWARE"]))
		}
	}
	return problems
}
