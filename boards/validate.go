package boards

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/plan"
)

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)
	pciRE  = regexp.MustCompile(`^([0-9a-fA-F]{4}):([0-9a-fA-F]{4})$`)
	bauds  = []int{9600, 19200, 38400, 57600, 115200}
	ttyRE  = regexp.MustCompile(`^tty(S|AMA)[0-9]$`)
	// configOption is a kernel config option, as a profile names one.
	configOption = regexp.MustCompile(`^CONFIG_[A-Z0-9_]+$`)
	labelRE      = regexp.MustCompile(`^[A-Z0-9_]{1,11}$`)
)

// checker collects semantic errors located through the decoder's positions.
type checker struct {
	src  source
	errs ErrorList
	skip map[string]bool // paths (and everything below them) already reported
}

func (c *checker) skipped(path string) bool {
	for p := path; ; {
		if c.skip[p] {
			return true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

func (c *checker) errorf(path string, format string, args ...any) {
	if c.skipped(path) {
		return
	}
	p, ok := c.src.pos[path]
	for !ok && path != "" {
		// A missing field: point at its parent.
		if i := strings.LastIndexAny(path, ".["); i >= 0 {
			path = path[:i]
		} else {
			path = ""
		}
		p, ok = c.src.pos[path]
	}
	c.errs = append(c.errs, &Error{File: c.src.file, Line: p.line, Col: p.col, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) oneOf(path, got string, valid []string) {
	for _, v := range valid {
		if got == v {
			return
		}
	}
	if got == "" {
		c.errorf(path, "missing field %q: want one of %s", path, quoteList(valid))
		return
	}
	c.errorf(path, "%s %s: want one of %s%s", path, quote(got), quoteList(valid), suggest(got, valid))
}

func (c *checker) required(path, got, what string) {
	if strings.TrimSpace(got) == "" {
		c.errorf(path, "missing field %q: %s", path, what)
	}
}

func (c *checker) name(got string) {
	if got == "" {
		c.errorf("name", `missing field "name": want a short lower-case name such as "alix2d13"`)
		return
	}
	if !nameRE.MatchString(got) {
		c.errorf("name", "name %s: want lower-case letters, digits and dashes, at most 40 characters", quote(got))
	}
}

// hardwareEngineIDs lists the catalog's hardware engines: the real ones,
// or with standIn the stand-ins that exist only in QEMU runs.
func hardwareEngineIDs(standIn bool) []string {
	var ids []string
	for _, e := range catalog.Engines() {
		if e.Hardware && e.StandIn() == standIn {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// validate checks the decoded board; skip names paths already reported.
func (b *Board) validate(skip map[string]bool) ErrorList {
	c := &checker{src: b.src, skip: skip}
	c.name(b.Name)
	for i, a := range b.Aliases {
		if !nameRE.MatchString(a) {
			c.errorf(fmt.Sprintf("aliases[%d]", i), "alias %s: want lower-case letters, digits and dashes, at most 40 characters", quote(a))
		}
	}
	c.required("description", b.Description, "a one-line description of the board")
	c.required("cpu.model", b.CPU.Model, `the processor, e.g. "AMD Geode LX800"`)
	c.oneOf("cpu.arch", b.CPU.Arch, []string{ArchI586, ArchARMv5TE})
	c.oneOf("cpu.endian", b.CPU.Endian, []string{"little", "big"})
	if b.CPU.Endian == "big" && strings.HasPrefix(b.CPU.Arch, "arm") {
		c.errorf("cpu.endian", "big-endian ARM: Go has no big-endian ARM port, so the firmware's Go userland cannot run on it; "+
			"run the board with a little-endian kernel (mainline IXP4xx or OpenWrt's little-endian build, CONFIG_CPU_LITTLE_ENDIAN) and set endian: little")
	}
	if b.CPU.Endian == "big" && b.CPU.Arch == ArchI586 {
		c.errorf("cpu.endian", "x86 is little-endian: set endian: little")
	}
	b.validateFeatures(c)
	if b.RAMMB < 16 {
		c.errorf("ram_mb", "ram_mb %d: want the board's RAM in MiB, at least 16 (the firmware runs from RAM)", b.RAMMB)
	}
	if !ttyRE.MatchString(b.Console.Device) {
		c.errorf("console.device", "console.device %s: want a serial device such as \"ttyS0\"", quote(b.Console.Device))
	}
	if !containsInt(bauds, b.Console.Baud) {
		c.errorf("console.baud", "console.baud %d: want one of %s", b.Console.Baud, intList(bauds))
	}
	c.oneOf("boot", b.Boot, []string{plan.BootBIOSCF, plan.BootRedBoot})
	c.oneOf("storage.kind", b.Storage.Kind, []string{"cf", "flash"})
	switch b.Boot {
	case plan.BootBIOSCF:
		if b.CPU.Arch != "" && b.CPU.Arch != ArchI586 {
			c.errorf("boot", "boot bios-cf needs an x86 board (cpu.arch i586), not %s", quote(b.CPU.Arch))
		}
		if b.Storage.Kind != "cf" {
			c.errorf("storage.kind", "boot bios-cf boots a CompactFlash card: set storage.kind: cf")
		}
		if b.Storage.CardMB < 16 {
			c.errorf("storage.card_mb", "storage.card_mb %d: want the CF card size in MB the image is made for by default, at least 16", b.Storage.CardMB)
		}
		if b.Image.SizeMB < 16 || (b.Storage.CardMB > 0 && b.Image.SizeMB*1024*1024 > b.Storage.CardMB*1000*1000) {
			c.errorf("image.size_mb", "image.size_mb %d: want at least 16 and no more than the %d MB card (%d MiB)", b.Image.SizeMB, b.Storage.CardMB, b.Storage.CardMB*1000*1000/(1024*1024))
		}
		// FAT16 needs roughly 8 MiB or more, and SYSLINUX refuses FAT32 with few clusters.
		if b.Image.BootMB < 16 || b.Image.BootMB > b.Image.SizeMB-8 {
			c.errorf("image.boot_mb", "image.boot_mb %d: want a FAT16 boot partition of 16 MiB or more that leaves at least 8 MiB of the %d MiB image for data", b.Image.BootMB, b.Image.SizeMB)
		}
		if b.Image.DataLabel != "" && !labelRE.MatchString(b.Image.DataLabel) {
			c.errorf("image.data_label", "image.data_label %s: want a FAT volume label, 1-11 of A-Z, 0-9, _ (or leave it out for %s)", quote(b.Image.DataLabel), plan.DataLabel)
		}
		if len(b.Image.Flash) > 0 {
			c.errorf("image.flash", "image.flash is for redboot boards; a bios-cf board has no flash layout")
		}
	case plan.BootRedBoot:
		if b.CPU.Arch != "" && b.CPU.Arch != ArchARMv5TE {
			c.errorf("boot", "boot redboot is for the ARM IXP4xx boards (cpu.arch armv5te), not %s", quote(b.CPU.Arch))
		}
		if b.Storage.Kind != "flash" {
			c.errorf("storage.kind", "boot redboot loads from on-board flash: set storage.kind: flash")
		}
		if b.Storage.FlashMB < 4 {
			c.errorf("storage.flash_mb", "storage.flash_mb %d: want the flash size in MiB (e.g. 8 or 16)", b.Storage.FlashMB)
		}
		b.validateFlash(c)
		if b.Storage.CF && b.Image.DataLabel != "" && !labelRE.MatchString(b.Image.DataLabel) {
			c.errorf("image.data_label", "image.data_label %s: a board with a CF slot keeps reports on a FAT partition: want a label of 1-11 of A-Z, 0-9, _ (or leave it out for %s)", quote(b.Image.DataLabel), plan.DataLabel)
		}
	}
	c.oneOf("image.compression", b.Image.Compression, []string{"xz", "gzip", "none"})
	forms := map[string]bool{}
	for i, s := range b.Slots {
		p := fmt.Sprintf("slots[%d]", i)
		c.oneOf(p+".form", s.Form, []string{FormPCI, FormMiniPCI})
		if forms[s.Form] {
			c.errorf(p+".form", "slot form %s listed twice: give one entry with its count", quote(s.Form))
		}
		forms[s.Form] = true
		if s.Count < 1 || s.Count > 8 {
			c.errorf(p+".count", "slots[%d].count %d: want 1 to 8", i, s.Count)
		}
	}
	if b.Engine != "" {
		c.oneOf("engine", b.Engine, hardwareEngineIDs(false))
	}
	if b.Watchdog != "" {
		c.oneOf("watchdog", b.Watchdog, catalog.WatchdogModules())
	}
	c.oneOf("kernel.source", b.Kernel.Source, []string{plan.KernelDebian, plan.KernelUser})
	if b.Kernel.Source == plan.KernelDebian {
		c.required("kernel.package", b.Kernel.Package, `the Debian kernel package, e.g. "linux-image-686"`)
		c.required("kernel.arch", b.Kernel.Arch, `the package's Debian architecture, e.g. "i386"`)
	}
	if d := b.Kernel.DTB; d != "" && (!strings.HasSuffix(d, ".dtb") || strings.ContainsAny(d, "/ ")) {
		c.errorf("kernel.dtb", "kernel.dtb %s: want a device tree file name such as \"intel-ixp42x-linksys-nslu2.dtb\"", quote(d))
	}
	if f := b.Kernel.BoardFile; f != "" && !configOption.MatchString(f) {
		c.errorf("kernel.board_file", "kernel.board_file %s: want a kernel config option such as \"CONFIG_MACH_NSLU2\"", quote(f))
	}
	wantImage := map[string]string{ArchI586: "bzImage", ArchARMv5TE: "zImage"}[b.CPU.Arch]
	if wantImage != "" && b.Kernel.Image != wantImage {
		c.errorf("kernel.image", "kernel.image %s: a %s board boots a %s", quote(b.Kernel.Image), b.CPU.Arch, wantImage)
	}
	b.validatePorts(c)
	return c.errs
}

// validateFeatures checks cpu.features against the architecture and the
// kernel: a Debian kernel that needs a feature the CPU lacks would stop
// at boot, so the profile is refused with what would work.
func (b *Board) validateFeatures(c *checker) {
	known := map[string][]string{ArchI586: FeaturesX86, ArchARMv5TE: FeaturesARM}[b.CPU.Arch]
	if known == nil {
		return // cpu.arch is reported
	}
	if len(b.CPU.Features) == 0 {
		example := map[string]string{ArchI586: "[fpu, tsc, cx8, mmx, cmov] for a Geode LX, [fpu, tsc, cx8, mmx] for a Geode GX1", ArchARMv5TE: "[armv5te] for an XScale"}[b.CPU.Arch]
		c.errorf("cpu.features", "missing field \"cpu.features\": list the CPU's features as /proc/cpuinfo names them, e.g. %s; known for %s: %s",
			example, b.CPU.Arch, strings.Join(known, ", "))
		return
	}
	has := map[string]bool{}
	meant := map[string]bool{} // what unknown names were probably typos of
	for i, f := range b.CPU.Features {
		path := fmt.Sprintf("cpu.features[%d]", i)
		switch {
		case has[f]:
			c.errorf(path, "cpu.features: %s listed twice", quote(f))
		case !slices.Contains(known, f):
			c.errorf(path, "cpu.features: %s is not a feature ocfw knows for %s; known: %s%s", quote(f), b.CPU.Arch, strings.Join(known, ", "), suggest(f, known))
			meant[catalog.Nearest(f, known)] = true
		}
		has[f] = true
	}
	if b.Kernel.Source != plan.KernelDebian {
		return
	}
	var missing []string
	for _, f := range kernelNeeds[b.Kernel.Package] {
		if !has[f] && !meant[f] { // a typo of it is reported already
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		c.errorf("cpu.features", "kernel.package %s needs a CPU with %s, which cpu.features does not list: that kernel stops at boot "+
			"(\"requires the following features not present on the CPU: %s\"); set kernel.source: user and build a kernel for this CPU "+
			"(e.g. CONFIG_MGEODEGX1 or CONFIG_M586TSC), or, if the CPU does have %s, add it to cpu.features",
			b.Kernel.Package, strings.Join(missing, " and "), strings.Join(missing, " "), strings.Join(missing, " and "))
	}
}

func (b *Board) validateFlash(c *checker) {
	if len(b.Image.Flash) == 0 {
		c.errorf("image.flash", "missing field \"image.flash\": a redboot board lists its FIS flash partitions (name, offset, size)")
		return
	}
	size := b.Storage.FlashMB << 20
	end := 0
	names := map[string]bool{}
	for i, p := range b.Image.Flash {
		path := fmt.Sprintf("image.flash[%d]", i)
		if p.Name == "" {
			c.errorf(path+".name", "flash partition %d has no name", i)
		}
		if names[p.Name] {
			c.errorf(path+".name", "flash partition %s listed twice", quote(p.Name))
		}
		names[p.Name] = true
		if p.Size <= 0 {
			c.errorf(path+".size", "flash partition %s: size must be positive", quote(p.Name))
		}
		if p.Offset < end {
			c.errorf(path+".offset", "flash partition %s at 0x%x overlaps the previous one (ends at 0x%x); list partitions in flash order", quote(p.Name), p.Offset, end)
		}
		if p.Offset+p.Size > size {
			c.errorf(path+".size", "flash partition %s (0x%x+0x%x) runs past the end of the %d MiB flash", quote(p.Name), p.Offset, p.Size, b.Storage.FlashMB)
		}
		end = p.Offset + p.Size
	}
	for _, need := range []string{"RedBoot", "Kernel", "Ramdisk", "FIS directory"} {
		if !names[need] {
			c.errorf("image.flash", "image.flash has no %q partition (want RedBoot, Kernel, Ramdisk and FIS directory at least)", need)
		}
	}
}

func (k *Card) validate(skip map[string]bool) ErrorList {
	c := &checker{src: k.src, skip: skip}
	c.name(k.Name)
	c.required("description", k.Description, "a one-line description of the card")
	c.oneOf("form", k.Form, []string{FormPCI, FormMiniPCI, FormQEMU})
	standIn := k.Form == FormQEMU
	if e, ok := catalog.LookupEngine(k.Engine); ok && e.Hardware && e.StandIn() != standIn {
		if standIn {
			c.errorf("engine", "engine %s is real hardware: a card with it has form pci or minipci, not %s", k.Engine, FormQEMU)
		} else {
			c.errorf("engine", "engine %s exists only in QEMU runs: a card with it has form: %s", k.Engine, FormQEMU)
		}
	} else {
		c.oneOf("engine", k.Engine, hardwareEngineIDs(standIn))
	}
	if e, ok := catalog.LookupEngine(k.Engine); ok && standIn && len(e.Match.PCI) == 0 {
		if k.PCI != "" {
			c.errorf("pci", "pci %s: engine %s has no device, so its card has no pci id", k.PCI, k.Engine)
		}
		return c.errs
	}
	m := pciRE.FindStringSubmatch(k.PCI)
	if m == nil {
		c.errorf("pci", "pci %s: want the card's vendor:device id in hex as lspci -n prints it, e.g. \"13a3:0020\"", quote(k.PCI))
		return c.errs
	}
	if e, ok := catalog.LookupEngine(k.Engine); ok {
		v, _ := strconv.ParseUint(m[1], 16, 16)
		d, _ := strconv.ParseUint(m[2], 16, 16)
		var known []string
		for _, id := range e.Match.PCI {
			if uint64(id.Vendor) == v && uint64(id.Device) == d {
				return c.errs
			}
			known = append(known, fmt.Sprintf("%04x:%04x (%s)", id.Vendor, id.Device, id.Chip))
		}
		c.errorf("pci", "pci %s is not a chip the %s engine drives; it drives %s", k.PCI, k.Engine, strings.Join(known, ", "))
	}
	return c.errs
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func intList(s []int) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ", ")
}

var (
	portNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)
	ifnameRE   = regexp.MustCompile(`^[a-z][a-z0-9]{0,14}$`)
)

// validatePorts checks the Ethernet ports: unique names and interfaces, a
// NIC driver the catalog knows with a PCI id it drives (or a platform),
// a role, and one WAN port by default when there is more than one port.
func (b *Board) validatePorts(c *checker) {
	names, ifs := map[string]bool{}, map[string]bool{}
	wans := 0
	for i, p := range b.Ports {
		at := fmt.Sprintf("ports[%d]", i)
		if !portNameRE.MatchString(p.Name) {
			c.errorf(at+".name", "port name %q: want lower-case letters, digits and dashes, starting with a letter (wan, lan1)", p.Name)
		} else if names[p.Name] {
			c.errorf(at+".name", "port name %q given twice", p.Name)
		}
		names[p.Name] = true
		if !ifnameRE.MatchString(p.Interface) {
			c.errorf(at+".interface", "interface %q: want the kernel's interface name, e.g. eth0", p.Interface)
		} else if ifs[p.Interface] {
			c.errorf(at+".interface", "interface %q belongs to another port", p.Interface)
		}
		ifs[p.Interface] = true
		nic, ok := catalog.LookupNIC(p.Driver)
		if !ok {
			c.errorf(at+".driver", "driver %q: not a NIC driver ocfw knows; known: %s", p.Driver, strings.Join(catalog.NICModules(), ", "))
		} else if nic.Bus == catalog.BusPCI {
			if !pciRE.MatchString(p.PCI) {
				c.errorf(at+".pci", "pci %q: a %s port needs its vendor:device as lspci -n prints it, e.g. 1106:3053", p.PCI, nic.Module)
			} else if !nicDrives(nic, p.PCI) {
				c.errorf(at+".pci", "pci %s: %s does not drive that chip", p.PCI, nic.Module)
			}
		} else if p.Platform == "" {
			c.errorf(at+".platform", "a %s port needs the platform device it is (e.g. npe-b)", nic.Module)
		}
		c.oneOf(at+".role", p.Role, []string{plan.RoleWAN, plan.RoleLAN, plan.RoleUnused})
		if p.Role == plan.RoleWAN {
			wans++
		}
	}
	if len(b.Ports) > 0 && wans != 1 {
		c.errorf("ports", "want exactly one port with role wan (the default WAN port), have %d", wans)
	}
}

func nicDrives(n *catalog.NIC, pci string) bool {
	for _, id := range n.PCI {
		if fmt.Sprintf("%04x:%04x", id.Vendor, id.Device) == strings.ToLower(pci) {
			return true
		}
	}
	return false
}
